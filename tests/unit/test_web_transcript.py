"""An agent's transcript as the web console draws it (bot/web/transcript.py): a shell call with
its output, an edit as a small diff, a read collapsed, a result attached to its call by id."""

from __future__ import annotations

from bot.web.transcript import DIFF_LINES, draw, small_diff
from supervisor.api import LogEntry


def entry(kind: str, data: dict, summary: str = "") -> LogEntry:
    return LogEntry(kind, summary, 1.0, 7, data)


def test_each_tool_call_is_drawn_by_its_kind_with_its_result():
    drawn = draw([
        entry("assistant", {"content": [
            {"text": "Let me look."},
            {"id": "t1", "name": "Bash", "input": {"command": "ls -la"}},
            {"id": "t2", "name": "Edit", "input": {"file_path": "/w/a.py", "old_string": "x = 1",
                                                   "new_string": "x = 2"}},
            {"id": "t3", "name": "Read", "input": {"file_path": "/w/b.py"}}]}),
        entry("user", {"content": [
            {"tool_use_id": "t1", "content": "total 0\n<b>bold</b>", "is_error": False},
            {"tool_use_id": "t3", "content": [{"type": "text", "text": "print(1)"}]},
            {"tool_use_id": "t9", "content": "an orphan", "is_error": True}]}),
        entry("result", {"subtype": "success", "result": "done"}, "[success] done"),
    ])
    assert [(e.kind, e.title) for e in drawn] == [
        ("text", ""), ("shell", "Bash"), ("edit", "Edit"), ("read", "Read"),
        ("result", "result"), ("end", "success")]
    shell, edit, read, orphan = drawn[1], drawn[2], drawn[3], drawn[4]
    assert (shell.body, shell.output, shell.error) == ("ls -la", "total 0\n<b>bold</b>", False)
    assert edit.path == "/w/a.py" and ("-", "x = 1") in edit.diff and ("+", "x = 2") in edit.diff
    assert (read.body, read.output) == ("/w/b.py", "print(1)")
    assert orphan.output == "an orphan" and orphan.error


def test_a_long_edit_is_cut_with_a_note():
    diff = small_diff("", "\n".join(f"line {i}" for i in range(500)))
    assert len(diff) == DIFF_LINES + 1
    assert diff[-1][0] == "@" and "cut" in diff[-1][1]
