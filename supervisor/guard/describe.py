"""What a tool call will do, described whole for the operator who approves it: nothing is cut.

Front ends decide how much of it fits on their screen; this module never shortens anything,
because the operator must be able to see every character of what they allow.
"""

from __future__ import annotations

import difflib
import json
import os.path
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_PATH_KEYS = ("file_path", "notebook_path", "path")
TOOL_SUMMARY_CHARS = 300
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
# Input keys each tool's description shows in its own way; any other key is listed as JSON,
# so a flag like `dangerouslyDisableSandbox` cannot slip past the operator.
_SHOWN = {
    "Bash": {"command", "description", "run_in_background"},
    "Write": {"file_path", "content"},
    "Edit": {"file_path", "old_string", "new_string", "replace_all"},
    "MultiEdit": {"file_path", "edits"},
    "NotebookEdit": {"notebook_path", "new_source", "cell_id", "cell_type", "edit_mode"},
}


@dataclass(frozen=True, slots=True)
class CallText:
    """One tool call for people. `text` is complete: the whole command, the whole new file,
    the whole diff, or the whole input."""

    summary: str  # one line saying what kind of call it is ("Write /w/a.py (10 bytes, 2 lines)")
    text: str
    filename: str  # what `text` is called when sent as a file: command.sh, edit-a.py.diff

    def __str__(self) -> str:
        return "\n".join(p for p in (self.summary, self.text) if p)


def _json(value: Any, indent: int | None = None) -> str:
    try:
        return json.dumps(value, sort_keys=True, indent=indent, ensure_ascii=False, default=str,
                          separators=None if indent else (",", ":"))
    except (TypeError, ValueError):  # keys that do not sort, a value that contains itself
        return repr(value)


def _path(inp: Mapping[str, Any]) -> str:
    for key in _PATH_KEYS:
        value = inp.get(key)
        if isinstance(value, str) and value:
            return value
    return "?"


def _name(prefix: str, name: str, suffix: str) -> str:
    """A file name safe for any chat, with odd characters of `name` replaced."""
    base = _UNSAFE_NAME.sub("_", name)[:60].strip("._") or "file"
    return f"{prefix}-{base}{suffix}"


def _base(path: str) -> str:
    return os.path.basename(path.rstrip("/"))


def _extras(tool: str, inp: Mapping[str, Any]) -> str:
    rest = {str(k): v for k, v in inp.items() if k not in _SHOWN.get(tool, set())}
    return f"; also {_json(rest)}" if rest else ""


def _lines(value: Any) -> list[str]:
    # split("\n"), not splitlines(): a trailing newline or a \r is a change the diff must show.
    return str(value if value is not None else "").split("\n")


def _diff(path: str, old: Any, new: Any, label: str = "") -> str:
    """A unified diff of old_string → new_string. The hunk numbers count lines of the
    fragments, not of the file, which the headers say."""
    before, after = _lines(old), _lines(new)
    if before == after:
        return f"(no change{label}: old_string and new_string are the same)"
    return "\n".join(difflib.unified_diff(before, after, f"{path} (old_string{label})",
                                          f"{path} (new_string{label})", lineterm=""))


def _size(text: str) -> str:
    size = len(text.encode("utf-8", "replace"))
    return f"{size:,} bytes, {len(text.splitlines()):,} lines"


def describe(tool_name: str, tool_input: Any) -> CallText:
    """What the call will do, whole. Never raises, whatever the input holds."""
    inp = tool_input if isinstance(tool_input, Mapping) else {}
    tool = tool_name if isinstance(tool_name, str) else ""
    path = _path(inp)
    extras = _extras(tool, inp)
    if tool == "Bash" and isinstance(inp.get("command"), str):
        where = " (in the background)" if inp.get("run_in_background") else ""
        summary = f"{where.strip()}{extras}".lstrip("; ")
        return CallText(summary, inp["command"], "command.sh")
    if tool == "Write":
        content = str(inp.get("content", ""))
        return CallText(f"Write {path} ({_size(content)}){extras}", content,
                        _name("write", _base(path), ".txt"))
    if tool == "Edit":
        every = " (every occurrence)" if inp.get("replace_all") else ""
        return CallText(f"Edit {path}{every}{extras}",
                        _diff(path, inp.get("old_string"), inp.get("new_string")),
                        _name("edit", _base(path), ".diff"))
    if tool == "MultiEdit" and isinstance(inp.get("edits"), list):
        edits = inp["edits"]
        parts = []
        for i, e in enumerate(edits, start=1):
            if not isinstance(e, Mapping):
                parts.append(f"# edit {i}: not an edit: {_json(e)}")
                continue
            every = " (every occurrence)" if e.get("replace_all") else ""
            parts.append(_diff(path, e.get("old_string"), e.get("new_string"),
                               f", edit {i}{every}"))
        return CallText(f"MultiEdit {path} ({len(edits)} edits){extras}", "\n".join(parts),
                        _name("edit", _base(path), ".diff"))
    if tool == "NotebookEdit":
        mode = inp.get("edit_mode", "replace")
        kind = f", {inp['cell_type']}" if inp.get("cell_type") else ""
        head = f"NotebookEdit {path} cell {inp.get('cell_id', '?')} ({mode}{kind}){extras}"
        return CallText(head, str(inp.get("new_source", "")),
                        _name("notebook", _base(path), ".txt"))
    label = tool or "(no tool name)"
    return CallText(label, _json(dict(inp), indent=2) if inp else "{}",
                    _name("input", label, ".json"))


def describe_call(tool_name: str, tool_input: Any) -> str:
    """The whole description as one text: the summary line, then everything the call does."""
    return str(describe(tool_name, tool_input))


def summarize_tool(name: str, tool_input: dict[str, Any]) -> str:
    """A call in one short line, for logs and listings: the tool and its command, path,
    pattern or URL (never the whole call: that is `describe`'s)."""
    for key in ("command", "file_path", "path", "pattern", "url", "query", "description"):
        if key in tool_input:
            return f"{name}: {str(tool_input[key])[:TOOL_SUMMARY_CHARS]}"
    return name
