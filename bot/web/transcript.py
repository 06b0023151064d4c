"""An agent's recorded events drawn as a transcript: what it said, and each tool call by kind (a
shell command with its output, an edit as a small diff, a read collapsed), with turn ends. Pure:
log entries in, plain values out; the template escapes every string."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from supervisor.api import LogEntry

OUTPUT_CHARS = 4000  # of a command's output on the page (the whole is in /logs and the store)
DIFF_LINES = 60
SHELL = ("Bash", "BashOutput")
EDITS = ("Edit", "MultiEdit", "Write", "NotebookEdit")
READS = ("Read", "Glob", "Grep", "LS", "WebFetch", "WebSearch")


@dataclass(slots=True)
class Entry:
    """One thing in the transcript. kind: text, shell, edit, read, tool, result, end, note."""

    kind: str
    title: str
    at: float
    turn_id: int | None
    body: str = ""
    output: str = ""
    error: bool = False
    diff: list[tuple[str, str]] = field(default_factory=list)  # (+|-| , line)
    path: str = ""


def _blocks(data: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
    content = data.get("content")
    return [b for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(c.get("text", "")) for c in content if isinstance(c, Mapping))
    return "" if content is None else str(content)


def small_diff(old: str, new: str) -> list[tuple[str, str]]:
    """The edit as changed lines (at most DIFF_LINES), each marked + or -."""
    lines: list[tuple[str, str]] = []
    for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=1):
        if line.startswith(("---", "+++")):
            continue
        mark = line[:1] if line[:1] in "+-@" else " "
        lines.append((mark, line[1:] if mark != "@" else line))
        if len(lines) >= DIFF_LINES:
            lines.append(("@", "… (cut: the whole edit is in the agent's log)"))
            break
    return lines


def tool_entry(block: Mapping[str, Any], at: float, turn_id: int | None) -> Entry:
    name = str(block.get("name", "tool"))
    raw = block.get("input")
    args: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    path = str(args.get("file_path") or args.get("notebook_path") or args.get("path") or "")
    if name in SHELL:
        return Entry("shell", name, at, turn_id, body=str(args.get("command", "")))
    if name in EDITS:
        if name == "Write":
            diff = small_diff("", str(args.get("content", "")))
        elif name == "MultiEdit":
            diff = [d for e in args.get("edits", []) if isinstance(e, Mapping)
                    for d in small_diff(str(e.get("old_string", "")),
                                        str(e.get("new_string", "")))][:DIFF_LINES]
        else:
            diff = small_diff(str(args.get("old_string", "")), str(args.get("new_string", "")))
        return Entry("edit", name, at, turn_id, diff=diff, path=path)
    if name in READS:
        what = path or str(args.get("pattern") or args.get("url") or args.get("query") or "")
        return Entry("read", name, at, turn_id, body=what)
    return Entry("tool", name, at, turn_id,
                 body=", ".join(f"{k}={v!s:.200}" for k, v in args.items()))


def draw(entries: Iterable[LogEntry]) -> list[Entry]:
    """The transcript, oldest first; a tool's result is attached to its call."""
    out: list[Entry] = []
    calls: dict[str, Entry] = {}
    for e in entries:
        blocks = _blocks(e.data)
        if e.kind == "assistant":
            for b in blocks:
                if "name" in b and "input" in b:
                    entry = tool_entry(b, e.at, e.turn_id)
                    calls[str(b.get("id", ""))] = entry
                    out.append(entry)
                elif b.get("text"):
                    out.append(Entry("text", "", e.at, e.turn_id, body=str(b["text"])))
            if not blocks and e.summary:
                out.append(Entry("text", "", e.at, e.turn_id, body=e.summary))
        elif e.kind == "user":
            for b in blocks:
                if "tool_use_id" not in b:
                    continue
                text = _text_of(b.get("content"))
                call = calls.get(str(b["tool_use_id"]))
                target = call or Entry("result", "result", e.at, e.turn_id)
                target.output = text[:OUTPUT_CHARS] + ("…" if len(text) > OUTPUT_CHARS else "")
                target.error = bool(b.get("is_error"))
                if call is None:
                    out.append(target)
        elif e.kind == "result":
            out.append(Entry("end", str(e.data.get("subtype", "")), e.at, e.turn_id,
                             body=str(e.data.get("result") or e.summary)))
        elif e.summary and e.kind not in ("system", "stream_event"):
            out.append(Entry("note", e.kind, e.at, e.turn_id, body=e.summary))
    return out


__all__ = ["Entry", "draw", "small_diff", "tool_entry"]
