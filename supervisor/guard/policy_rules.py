"""The policy's words and its loading: actions, decisions, rules, sections, and the loader that
reads a policy file (or dict) into them with a clear error for every mistake. The deciding is
supervisor/guard/policy.py's."""

from __future__ import annotations

import logging
import os.path
import re
from dataclasses import dataclass
from enum import StrEnum
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, NoReturn

from supervisor.config import PERMISSION_MODES
from supervisor.errors import ConfigError
from supervisor.guard.shell import (
    Segment,
    Stage,
    match_anywhere,
    match_prefix,
)

logger = logging.getLogger("supervisor.guard.policy")

DEFAULT_POLICY = Path(__file__).with_name("default_policy.toml")
EDIT_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})
PATH_TOOLS = EDIT_TOOLS | {"Read", "NotebookRead"}
READ_TOOLS = frozenset({"Read", "NotebookRead", "Grep", "Glob", "LS"})
_OWN = ("Switchboard's own files (its database, log, settings, policy, credentials and other "
        "agents' workspaces) are not for agents")
_GUARD = "protected paths"  # the rule name of built-in checks: no policy file can drop them
_PATH_KEYS = ("file_path", "notebook_path", "path")
_PIPE = re.compile(r"\s+\|\s+")
_VAR = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")  # $HOME in a pattern means the word ${HOME}
_RULE_KEYS = ("tool", "command", "path", "action", "reason", "match")


class Action(StrEnum):
    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


_RANK = {Action.ALLOW: 0, Action.ASK: 1, Action.DENY: 2}
_REASONS = {Action.ALLOW: "allowed by policy", Action.ASK: "needs approval",
            Action.DENY: "refused by policy"}


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    reason: str
    rule: str  # the rule that decided, for people: "rules[3]: git push --force", "default"...


class PolicyError(ConfigError):
    """A policy that cannot be used: the message names the file, the key and what is wrong."""


@dataclass(frozen=True, slots=True)
class Rule:
    key: str  # where it is written: "rules[3]", "agents.x.rules[0]"
    tools: tuple[str, ...]
    commands: tuple[tuple[str, tuple[Stage, ...]], ...]  # text, and one stage or a pipeline
    paths: tuple[str, ...]
    action: Action
    reason: str
    prefix: bool  # command words must match in order from the program on

    def applies_to(self, tool: str) -> bool:
        return any(fnmatchcase(tool, t) for t in self.tools)

    def match_call(self, candidates: tuple[str, ...]) -> str | None:
        """For calls other than Bash: what matched (for the rule's name), or None."""
        if self.commands:
            return None
        if not self.paths:
            return "|".join(self.tools)
        return next((p for p in self.paths for c in candidates
                     if fnmatchcase(c, p) or (p.endswith("/**") and c == p[:-3])), None)

    def match_segment(self, seg: Segment, forms: tuple[str, ...]) -> str | None:
        """For one command of a Bash call: the pattern that matched, or None."""
        if self.paths:
            return None
        if not self.commands:
            return "|".join(self.tools)
        for text, stages in self.commands:
            if len(stages) == 1 and (match_prefix(stages[0], seg) if self.prefix
                                     else match_anywhere(stages[0], seg, forms)):
                return text
        return None


@dataclass(frozen=True, slots=True)
class _Section:
    """The shared settings, or one [agents.NAME] table."""

    prefix: str  # "" or "agents.NAME."
    default: Action | None
    tools: tuple[tuple[str, Action], ...]
    rules: tuple[Rule, ...]
    permission_mode: str | None


def _strongest(found: list[Decision]) -> Decision:
    return max(found, key=lambda d: _RANK[d.action])  # max keeps the first of equals


# -- loading ---------------------------------------------------------------------------------


class _Loader:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, key: str, problem: str) -> NoReturn:
        raise PolicyError(f"{self.source}: {key}: {problem}")

    def action(self, value: Any, key: str) -> Action:
        if value not in tuple(Action):
            self.fail(key, f"must be one of allow, ask, deny (got {value!r})")
        return Action(value)

    def strings(self, value: Any, key: str) -> tuple[str, ...]:
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not items:
            self.fail(key, "must be a string or a non-empty list of strings")
        if not all(isinstance(v, str) and v.strip() for v in items):
            self.fail(key, "must hold non-empty strings")
        return tuple(v.strip() for v in items)

    def section(self, data: Any, key: str, top: bool) -> _Section:
        where = f"{key}." if key else ""
        if not isinstance(data, dict):
            self.fail(key or "<top>", "must be a table")
        allowed = {"default", "tools", "rules", "agents", "standing", "learned"} if top else {
            "default", "tools", "rules", "permission_mode"}
        for k in data:
            if k not in allowed:
                self.fail(f"{where}{k}", f"unknown key (expected {', '.join(sorted(allowed))})")
        mode = data.get("permission_mode")
        if mode is not None and mode not in PERMISSION_MODES:
            self.fail(f"{where}permission_mode", f"must be one of {', '.join(PERMISSION_MODES)}")
        default = data.get("default", "ask" if top else None)
        tools = data.get("tools", {})
        if not isinstance(tools, dict):
            self.fail(f"{where}tools", "must be a table of tool = action")
        rules = data.get("rules", [])
        if not isinstance(rules, list):
            self.fail(f"{where}rules", "must be an array of tables ([[rules]])")
        return _Section(
            where,
            None if default is None else self.action(default, f"{where}default"),
            tuple((k, self.action(v, f"{where}tools.{k}")) for k, v in tools.items()),
            tuple(self.rule(r, f"{where}rules[{i}]") for i, r in enumerate(rules)),
            mode,
        )

    def rule(self, raw: Any, key: str) -> Rule:
        if not isinstance(raw, dict):
            self.fail(key, "must be a table")
        for k in raw:
            if k not in _RULE_KEYS:
                self.fail(f"{key}.{k}", f"unknown key (expected {', '.join(_RULE_KEYS)})")
        for k in ("tool", "action"):
            if k not in raw:
                self.fail(f"{key}.{k}", "missing")
        tools = tuple(alt for t in self.strings(raw["tool"], f"{key}.tool") for alt in t.split("|"))
        if "" in tools:
            self.fail(f"{key}.tool", "has an empty alternative")
        action = self.action(raw["action"], f"{key}.action")
        texts = self.strings(raw["command"], f"{key}.command") if "command" in raw else ()
        paths = self.strings(raw["path"], f"{key}.path") if "path" in raw else ()
        if texts and paths:
            self.fail(key, "give command or path, not both")
        if texts and not any(fnmatchcase("Bash", t) for t in tools):
            self.fail(f"{key}.command", "only Bash calls have commands; tool does not match Bash")
        match = raw.get("match", "prefix" if action is Action.ALLOW else "anywhere")
        if match not in ("prefix", "anywhere"):
            self.fail(f"{key}.match", f"must be prefix or anywhere (got {match!r})")
        commands = tuple(self.command(t, f"{key}.command") for t in texts)
        if any(len(c) > 1 for c in commands) and (action is Action.ALLOW or match == "prefix"):
            self.fail(f"{key}.command", "a pipeline pattern (a | b) can only deny or ask, anywhere")
        reason = raw.get("reason", _REASONS[action])
        if not isinstance(reason, str):
            self.fail(f"{key}.reason", "must be a string")
        patterns = tuple(self.path(p, f"{key}.path") for p in paths)
        return Rule(key, tools, tuple(zip(texts, commands, strict=True)), patterns, action, reason,
                    match == "prefix")

    def standing(self, data: Any) -> _Section:
        """[standing]: `irreversible`, rules (action ask unless given as deny) that every
        standing agent's call is checked against as well; no default, no tools."""
        if not isinstance(data, dict):
            self.fail("standing", "must be a table")
        for k in data:
            if k != "irreversible":
                self.fail(f"standing.{k}", "unknown key (expected irreversible)")
        raw = data.get("irreversible", [])
        if not isinstance(raw, list):
            self.fail("standing.irreversible", "must be an array of tables "
                      "([[standing.irreversible]])")
        rules = []
        for i, r in enumerate(raw):
            key = f"standing.irreversible[{i}]"
            if not isinstance(r, dict):
                self.fail(key, "must be a table")
            r = {"action": "ask", "reason": "an irreversible step", **r}
            if r["action"] == "allow":
                self.fail(f"{key}.action", "must be ask or deny: these rules only hold calls back")
            rules.append(self.rule(r, key))
        return _Section("standing.", Action.ALLOW, (), tuple(rules), None)

    def command(self, text: str, key: str) -> tuple[Stage, ...]:
        stages = []
        for stage in _PIPE.split(text):
            words = []
            for word in stage.split():
                alts = tuple(_VAR.sub(r"${\1}", a) for a in word.split("|"))
                if "" in alts:
                    self.fail(key, f"empty alternative in {word!r} (write pipelines as 'a | b')")
                words.append(alts)
            if not words:
                self.fail(key, f"empty pattern in {text!r}")
            stages.append(tuple(words))
        return tuple(stages)

    def path(self, pattern: str, key: str) -> str:
        pattern = os.path.expanduser(pattern) if pattern.startswith("~") else pattern
        if not pattern.startswith(("/", "*")):
            self.fail(key, f"must be an absolute path glob, or start with ~ or * (got {pattern!r})")
        return pattern


# -- deciding ----------------------------------------------------------------------------------
