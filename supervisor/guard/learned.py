"""Rules learned from the operator's answers: after the same call of the same agent was allowed
`OFFER_AFTER` times, its next request offers "Always allow"; taking it writes a `[[learned]]`
table to the policy file, with who added it, and from then on that exact call of that agent
runs without asking.

What a learned rule can do is narrow by construction:
- it matches one call exactly: the policy's session key (a Bash command in its canonical form,
  one file for the path tools, the whole input for any other tool), never a pattern;
- it only turns an "ask" into "allow", and only an ask that no rule decided (the policy's
  default or its [tools] table): a deny rule (the blocklist), an ask rule, a built-in check
  (Switchboard's own files, files that change what agents run) and a standing agent's
  irreversible step still decide, whatever was learned;
- it is offered only for such calls, so nothing a rule denies or asks about is ever offered.

The file is edited as text: a learned table is appended with a comment line above it, and
removed by its id with that comment; everything else in the file stays byte for byte. Each
edit is checked by loading the result before it replaces the file (atomically)."""

from __future__ import annotations

import json
import os
import re
import tempfile
import threading
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from supervisor.guard.policy_rules import DEFAULT_POLICY, Action, Decision, PolicyError

OFFER_AFTER = 3  # identical approvals before a rule is offered
ALWAYS = "Always allow"  # the option a permission request carries when a rule is offered
LEARNED_KEYS = ("id", "agent", "tool", "call", "by", "via", "at", "approvals")
# The decisions a learned rule may turn into "allow": no rule matched, the section's default
# or its [tools] entry decided.
_FALLBACK = re.compile(r"^(agents\.[^.\s]+\.)?(default|tools\..+)$")
_HEADER = re.compile(r"^\s*\[")  # any table header: the end of a learned table's lines
_LEARNED_HEADER = re.compile(r"^\s*\[\[\s*learned\s*\]\]\s*(#.*)?$")
_ID_LINE = re.compile(r"^\s*id\s*=\s*(\d+)\s*(#.*)?$")
_lock = threading.Lock()  # one edit of a policy file at a time in this process


@dataclass(frozen=True, slots=True)
class Learned:
    """One learned rule as the policy file holds it."""

    id: int
    agent: str
    tool: str
    call: str  # the policy's session key of the call: "Bash:<canonical command>", "edit:/p"...
    by: str
    via: str
    at: str
    approvals: int

    def words(self) -> str:
        return rule_words(self.agent, self.tool, self.call)


def learnable(decision: Decision, irreversible: bool = False) -> bool:
    """Whether a learned rule could settle a call the policy decided so: an ask that no rule
    made (never a deny, an ask rule or a built-in check)."""
    return (decision.action == Action.ASK and not irreversible
            and _FALLBACK.match(decision.rule) is not None)


def rule_words(agent: str, tool: str, call: str) -> str:
    """The rule in words, for the card that offers it and for /policy rules."""
    kind, _, what = call.partition(":")
    if kind == "Bash":
        return f"allow {agent} to run exactly `{what}`"
    if kind == "edit":
        return f"allow {agent} to change {what} ({tool}, that file only)"
    if tool in ("Read", "NotebookRead") and kind == tool:
        return f"allow {agent} to read {what}"
    return f"allow {agent} to call {tool} with exactly {what}"


def approvals_in_a_row(key: str, decided: Sequence[tuple[str, str]]) -> int:
    """How many times in a row, newest first, the operator allowed the call with `key`:
    `decided` is (key, decision) of the agent's answered requests, newest first. A denial of
    the same call ends the count; other calls do not."""
    count = 0
    for other, decision in decided:
        if other != key:
            continue
        if decision not in ("allow", "allow_session"):
            break
        count += 1
    return count


def toml_string(value: str) -> str:
    """A TOML basic string: JSON's escapes are TOML's, except that TOML wants DEL escaped and
    has no surrogate escapes (so nothing is escaped as \\u outside the controls)."""
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")


def _block(rule: Learned) -> str:
    comment = (f"# Learned rule {rule.id}: added by {rule.by} via {rule.via} at {rule.at} after "
               f"{rule.approvals} approvals. Remove it with /policy remove {rule.id}.")
    lines = [comment.replace("\n", " "), "[[learned]]"]
    for key in LEARNED_KEYS:
        value = getattr(rule, key)
        lines.append(f"{key} = {value}" if isinstance(value, int) else
                     f"{key} = {toml_string(str(value))}")
    return "\n".join(lines) + "\n"


def parse(raw: Any, source: str) -> tuple[Learned, ...]:
    """The [[learned]] tables of a policy file, each checked; PolicyError names the problem."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise PolicyError(f"{source}: learned: must be an array of tables ([[learned]])")
    rules = []
    seen: set[int] = set()
    for i, entry in enumerate(raw):
        key = f"learned[{i}]"
        if not isinstance(entry, dict):
            raise PolicyError(f"{source}: {key}: must be a table")
        for k in entry:
            if k not in LEARNED_KEYS:
                raise PolicyError(f"{source}: {key}.{k}: unknown key (expected "
                                  f"{', '.join(LEARNED_KEYS)})")
        for k in ("id", "agent", "tool", "call"):
            if k not in entry:
                raise PolicyError(f"{source}: {key}.{k}: missing")
        if not isinstance(entry["id"], int) or entry["id"] < 1 or entry["id"] in seen:
            raise PolicyError(f"{source}: {key}.id: must be a positive whole number, each "
                              "learned rule its own")
        seen.add(entry["id"])
        for k in ("agent", "tool", "call", "by", "via", "at"):
            if not isinstance(entry.get(k, ""), str) or (k in ("agent", "tool", "call")
                                                         and not entry[k]):
                raise PolicyError(f"{source}: {key}.{k}: must be a non-empty string")
        approvals = entry.get("approvals", 0)
        if not isinstance(approvals, int):
            raise PolicyError(f"{source}: {key}.approvals: must be a whole number")
        rules.append(Learned(entry["id"], entry["agent"], entry["tool"], entry["call"],
                             entry.get("by", ""), entry.get("via", ""), entry.get("at", ""),
                             approvals))
    return tuple(rules)


def find(rules: Sequence[Learned], agent: str, tool: str, key: str) -> Learned | None:
    return next((r for r in rules if r.agent == agent and r.tool == tool and r.call == key),
                None)


# -- editing the file ------------------------------------------------------------------------


def _read(path: Path) -> str:
    """The policy file's text; a file not written yet starts as the built-in default."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return DEFAULT_POLICY.read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyError(f"{path}: cannot read: {exc.strerror or exc}") from exc


def _replace(path: Path, text: str, check: Any) -> None:
    """Check the new text loads, then put it in place atomically (same mode as before)."""
    try:
        check(tomllib.loads(text))
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(f"{path}: the edit would not be valid TOML ({exc}); nothing was "
                          "changed") from exc
    try:
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o600
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, mode)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise PolicyError(f"{path}: cannot write it ({exc.strerror or exc}): the rule was not "
                          "added; make the file writable by the supervisor, or add the table "
                          "by hand") from exc


def add(path: Path, *, agent: str, tool: str, call: str, by: str, via: str, at: str,
        approvals: int) -> Learned:
    """Append a learned rule (or return the one already there for the same call)."""
    with _lock:
        text = _read(path)
        try:
            existing = parse(tomllib.loads(text).get("learned"), str(path))
        except tomllib.TOMLDecodeError as exc:
            raise PolicyError(f"{path}: not valid TOML: {exc}") from exc
        same = find(existing, agent, tool, call)
        if same is not None:
            return same
        rule = Learned(max((r.id for r in existing), default=0) + 1, agent, tool, call, by, via,
                       at, approvals)
        sep = "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n")
                                                              else "\n\n")
        new = f"{text}{sep}{_block(rule)}"

        def check(data: Mapping[str, Any]) -> None:
            if find(parse(data.get("learned"), str(path)), agent, tool, call) != rule:
                raise PolicyError(f"{path}: the learned rule did not read back as written; "
                                  "nothing was changed")

        _replace(path, new, check)
        return rule


def remove(path: Path, rule_id: int) -> Learned:
    """Take learned rule `rule_id` out of the file: its table and the comment above it."""
    with _lock:
        text = _read(path)
        try:
            before = parse(tomllib.loads(text).get("learned"), str(path))
        except tomllib.TOMLDecodeError as exc:
            raise PolicyError(f"{path}: not valid TOML: {exc}") from exc
        gone = next((r for r in before if r.id == rule_id), None)
        if gone is None:
            ids = ", ".join(str(r.id) for r in before) or "none"
            raise PolicyError(f"there is no learned rule {rule_id} (learned rules: {ids}; "
                              "/policy rules lists them)")
        lines = text.splitlines(keepends=True)
        start = end = None
        for i, line in enumerate(lines):
            if not _LEARNED_HEADER.match(line):
                continue
            j = i + 1
            while j < len(lines) and not _HEADER.match(lines[j]):
                j += 1
            if any((m := _ID_LINE.match(ln)) and int(m.group(1)) == rule_id
                   for ln in lines[i + 1:j]):
                start, end = i, j
                break
        if start is None or end is None:
            raise PolicyError(f"{path}: learned rule {rule_id} is not written as its own "
                              "[[learned]] table with an `id = ` line; remove it by hand")
        # The table's own lines: not the blank lines and comments before the next table.
        while end > start + 1 and (not lines[end - 1].strip()
                                   or lines[end - 1].lstrip().startswith("#")):
            end -= 1
        while start > 0 and lines[start - 1].startswith(f"# Learned rule {rule_id}:"):
            start -= 1
        if (start > 0 and not lines[start - 1].strip() and end < len(lines)
                and not lines[end].strip()):
            end += 1  # one blank line between what was before and after it, not two
        new = "".join(lines[:start] + lines[end:])

        def check(data: Mapping[str, Any]) -> None:
            after = parse(data.get("learned"), str(path))
            if [r for r in before if r.id != rule_id] != list(after):
                raise PolicyError(f"{path}: removing learned rule {rule_id} would change more "
                                  "than that rule; nothing was changed: remove it by hand")

        _replace(path, new, check)
        return gone
