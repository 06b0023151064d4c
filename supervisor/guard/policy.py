"""Tool-time policy: whether an agent's tool call runs, waits for the operator, or is refused."""

from __future__ import annotations

import dataclasses
import json
import logging
import os.path
import re
import tomllib
from collections.abc import Callable, Mapping
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, NamedTuple

from supervisor.guard.learned import Learned, find, learnable
from supervisor.guard.learned import parse as parse_learned
from supervisor.guard.policy_rules import (
    _GUARD,
    _OWN,
    _PATH_KEYS,
    _RANK,
    DEFAULT_POLICY,
    EDIT_TOOLS,
    PATH_TOOLS,
    READ_TOOLS,
    Action,
    Decision,
    PolicyError,
    Rule,
    _Loader,
    _Section,
    _strongest,
)
from supervisor.guard.protected import (
    READERS,
    ProtectedPaths,
    literal_root,
    may_match,
    mentions_hazard,
    named_paths,
    write_hazard,
)
from supervisor.guard.shell import (
    Kind,
    Segment,
    ShellParseError,
    Stage,
    analyse,
    arg_forms,
    canonical,
    downstream,
    git_config_writes,
    match_anywhere,
    normpath,
)

logger = logging.getLogger(__name__)

def _input_path(inp: Mapping[str, Any]) -> str | None:
    for key in _PATH_KEYS:
        value = inp.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _path_candidates(path: str, cwd: str) -> tuple[str, ...]:
    """The path as written (normalised) and, when a symlink leads elsewhere, where it leads."""
    lexical = normpath(path, cwd)
    try:
        real = os.path.realpath(lexical)
    except (OSError, ValueError):
        return (lexical,)
    return (lexical,) if real == lexical else (lexical, real)


def _tool_paths(tool: str, inp: Mapping[str, Any], cwd: str) -> tuple[str, ...] | None:
    """The paths a file tool touches (a search: where it starts); None when it cannot tell."""
    path = _input_path(inp)
    if tool not in ("Grep", "Glob"):
        return _path_candidates(path, cwd) if path else ()
    root = path or cwd
    if not root or not (root.startswith(("/", "~")) or cwd.startswith("/")):
        return None
    found = list(_path_candidates(root, cwd))
    narrow = inp.get("glob" if tool == "Grep" else "pattern")
    if isinstance(narrow, str) and narrow:  # Glob("/home/u/.ssh/*"), Grep(glob=".ssh/*")
        found += _path_candidates(literal_root(normpath(narrow, found[0])), cwd)
    return tuple(dict.fromkeys(found))


class PolicyParts(NamedTuple):
    source: str
    base: _Section
    agents: tuple[tuple[str, _Section], ...]
    standing: _Section | None
    learned: tuple[Learned, ...]


class Policy:
    """Decides tool calls from the call alone (tool, input, cwd), never from prompts. Some
    checks are built in, so that no policy file can drop them: Switchboard's own files (see
    ProtectedPaths) are never read or written; writing a file whose change alters what agents
    run (.claude/, CLAUDE.md, .mcp.json, .git/, shell start-up files...) is always asked."""

    __slots__ = ("source", "protected", "_base", "_agents", "_standing", "learned")

    def __init__(self, base: _Section, agents: tuple[tuple[str, _Section], ...],
                 source: str, protected: ProtectedPaths | None = None,
                 standing: _Section | None = None,
                 learned: tuple[Learned, ...] = ()) -> None:
        self.source = source
        self.protected = ProtectedPaths.default() if protected is None else protected
        self._base = base
        self._agents = agents
        self._standing = standing
        self.learned = learned  # rules learned from answers (supervisor/guard/learned.py)

    def with_protected(self, protected: ProtectedPaths) -> Policy:
        """The same rules, protecting these Switchboard files."""
        return Policy(self._base, self._agents, self.source, protected, self._standing,
                      self.learned)

    def parts(self) -> PolicyParts:
        """What this policy decides by, for another policy to take (`adopt`)."""
        return PolicyParts(self.source, self._base, self._agents, self._standing, self.learned)

    def adopt(self, other: Policy) -> None:
        """Take `other`'s rules in place (a policy file edited while running: every gate holds
        this object). The protected paths stay this policy's."""
        self.source, self._base, self._agents, self._standing, self.learned = other.parts()

    def learnable(self, agent: str, tool_name: str, tool_input: dict[str, Any], cwd: str,
                  decision: Decision, irreversible: bool = False) -> bool:
        """Whether only the policy's default or [tools] table asks about this call: with
        those allowing, the call would be allowed. An ask rule, a deny and every built-in
        check (a command may hold several, each asking) keep it from being learned."""
        if not learnable(decision, irreversible):
            return False
        lenient = Policy(_lenient(self._base), tuple((n, _lenient(a)) for n, a in self._agents),
                         self.source, self.protected, self._standing)
        return lenient.decide(agent, tool_name, tool_input, cwd).action == Action.ALLOW

    def learned_rule(self, agent: str, tool_name: str, tool_input: dict[str, Any], cwd: str,
                     decision: Decision, irreversible: bool = False) -> Learned | None:
        """The learned rule that turns this decision into an allow, if there is one: only for
        an ask no rule made, and only the exact call (see supervisor/guard/learned.py)."""
        if not self.learned:
            return None
        rule = find(self.learned, agent, tool_name, self.session_key(tool_name, tool_input))
        if rule is None or not self.learnable(agent, tool_name, tool_input, cwd, decision,
                                              irreversible):
            return None
        return rule

    @classmethod
    def load(cls, path: Path | None, *, protected: ProtectedPaths | None = None) -> Policy:
        """Reads a policy file; None reads the built-in default. protected: Switchboard's own
        files (default: the data directory ~/.switchboard only)."""
        path = DEFAULT_POLICY if path is None else Path(path)
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise PolicyError(f"{path}: cannot read: {exc.strerror or exc}") from exc
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise PolicyError(f"{path}: not valid TOML: {exc}") from exc
        return cls.from_dict(data, str(path), protected=protected)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "<dict>", *,
                  protected: ProtectedPaths | None = None) -> Policy:
        loader = _Loader(source)
        base = loader.section(data, "", top=True)
        agents = data.get("agents", {})
        if not isinstance(agents, dict):
            loader.fail("agents", "must be a table of [agents.NAME] tables")
        standing = data.get("standing")
        return cls(base, tuple((name, loader.section(a, f"agents.{name}", top=False))
                               for name, a in agents.items()), source, protected,
                   loader.standing(standing) if standing is not None else _default_standing(),
                   parse_learned(data.get("learned"), source))

    def irreversible(self, tool_name: str, tool_input: dict[str, Any], cwd: str) -> Decision | None:
        """For a standing agent: the [standing] irreversible rule this call matches (ask or
        deny), or None. Bash is read by the same shell analysis as every rule, so a push
        inside bash -c, eval, $( ), a variable or a wrapper matches too; a command whose
        program cannot be told counts as irreversible (it could be a push)."""
        if self._standing is None or not self._standing.rules:
            return None
        overlay = Policy(self._standing, (), self.source, self.protected)
        d = overlay.decide("", tool_name, tool_input, cwd)
        if d.action is not Action.ALLOW and (d.rule.startswith("standing.")
                                             or d.rule in _UNREADABLE):
            return Decision(d.action, f"irreversible for a standing agent: {d.reason}", d.rule)
        command = tool_input.get("command") if isinstance(tool_input, Mapping) else None
        if tool_name == "Bash" and isinstance(command, str):
            return self._in_inline_code(command, cwd)
        return None

    def _in_inline_code(self, command: str, cwd: str) -> Decision | None:
        """python -c "os.system('git push')" runs a push the shell never sees: the words
        given to an interpreter (its inline code) are searched for an irreversible command's
        words, in order, close together (a crude reading that errs towards asking)."""
        assert self._standing is not None
        for seg in analyse(command, cwd).segments:
            if seg.kind not in (Kind.RUN, Kind.LAYER) or not any(
                    fnmatchcase(seg.program, p) for p in _INTERPRETERS):
                continue
            tokens = [t.rsplit("/", 1)[-1] for t in _TOKEN.findall(" ".join(seg.args))]
            for rule in self._standing.rules:
                for text, stages in rule.commands:
                    if len(stages) == 1 and _near(stages[0], tokens):
                        return Decision(rule.action, f"irreversible for a standing agent: "
                                        f"{rule.reason} (in the inline code of {seg.program})",
                                        f"{rule.key}: {text}")
        return None

    def _sections(self, agent: str) -> list[_Section]:
        """The agent's own table first, then tables whose name is a glob matching it, then ours."""
        exact = [s for name, s in self._agents if name == agent]
        globbed = [s for name, s in self._agents if name != agent and fnmatchcase(agent, name)]
        return [*exact, *globbed, self._base]

    def permission_mode(self, agent: str, default: str) -> str:
        for section in self._sections(agent):
            if section.permission_mode is not None:
                return section.permission_mode
        return default

    def decide(self, agent: str, tool_name: str, tool_input: dict[str, Any], cwd: str) -> Decision:
        """Never raises: anything unexpected asks the operator."""
        try:
            sections = self._sections(agent if isinstance(agent, str) else "")
            tool = tool_name if isinstance(tool_name, str) else ""
            inp = tool_input if isinstance(tool_input, Mapping) else {}
            cwd = cwd if isinstance(cwd, str) else ""
            if tool == "Bash":
                decision = self._bash(sections, inp.get("command"), cwd)
            else:
                decision = self._tool(sections, tool, inp, cwd)
        except Exception:
            logger.exception("policy failed on a %r call; asking", tool_name)
            return Decision(Action.ASK, "the policy could not decide (internal error)",
                            "internal error")
        logger.debug("policy: %s %s -> %s (%s)", agent, tool_name, decision.action, decision.rule)
        return decision

    def _hit(self, sections: list[_Section], tool: str,
             test: Callable[[Rule], str | None]) -> Decision | None:
        """The strongest matching rule of the first section that has any: agents override us."""
        for section in sections:
            hits = [(r, what) for r in section.rules if r.applies_to(tool) and (what := test(r))]
            if hits:
                rule, what = max(hits, key=lambda h: _RANK[h[0].action])
                return Decision(rule.action, rule.reason, f"{rule.key}: {what}")
        return None

    def _fallback(self, sections: list[_Section], tool: str) -> Decision:
        for section in sections:
            for exact in (True, False):
                for key, action in section.tools:
                    if (key == tool) if exact else fnmatchcase(tool, key):
                        return Decision(action, f"{tool}: {action} for this tool",
                                        f"{section.prefix}tools.{key}")
        for section in sections:
            if section.default is not None:
                return Decision(section.default, f"{tool or 'this tool'}: no rule decides it",
                                f"{section.prefix}default")
        return Decision(Action.ASK, "no rule decides it", "default")

    def _path_hit(self, sections: list[_Section], tool: str,
                  paths: tuple[str, ...]) -> Decision | None:
        """The strongest rule for `tool` that names one of `paths`, or None."""
        return self._hit(sections, tool, lambda r: r.match_call(paths))

    def _call(self, sections: list[_Section], tool: str, paths: tuple[str, ...]) -> Decision:
        hit = self._path_hit(sections, tool, paths)
        return hit or self._fallback(sections, tool)

    def _tool(self, sections: list[_Section], tool: str, inp: Mapping[str, Any],
              cwd: str) -> Decision:
        paths = _tool_paths(tool, inp, cwd)
        if paths is None:
            return Decision(Action.ASK, f"{tool}: cannot tell where it searches", _GUARD)
        found = [self._call(sections, tool, paths)]
        if tool in READ_TOOLS | EDIT_TOOLS:
            found += self._guard_path(paths, cwd, "writes" if tool in EDIT_TOOLS else "reads")
        if tool == "Grep" and paths:
            found += self._guard_search(sections, paths[0])
        return _strongest(found)

    def _guard_path(self, paths: tuple[str, ...], cwd: str, verb: str) -> list[Decision]:
        """Built in: Switchboard's files are refused; writes that change what agents run ask."""
        if self.protected.owns(paths, cwd):
            return [Decision(Action.DENY, f"{verb} {paths[0]}: {_OWN}", _GUARD)]
        why = next((w for p in paths if (w := write_hazard(p))), None) if verb == "writes" else None
        return [] if why is None else [Decision(Action.ASK, f"writes {paths[0]}: {why}", _GUARD)]

    def _guard_search(self, sections: list[_Section], root: str) -> list[Decision]:
        """A search from a directory holding refused files reads them too: Grep of ~ or /."""
        if self.protected.holds(root):
            return [Decision(Action.ASK, f"searches {root}, which holds Switchboard's own files",
                             _GUARD)]
        for rule in (r for s in sections for r in s.rules):
            if rule.action is Action.ALLOW or not rule.applies_to("Grep"):
                continue
            inside = next((p for p in rule.paths if literal_root(p).startswith(
                root.rstrip("/") + "/")), None)
            if inside is not None:
                return [Decision(Action.ASK, f"searches {root}, which holds {inside}: "
                                 f"{rule.reason}", f"{rule.key}: {inside}")]
        return []

    def _guard_words(self, sections: list[_Section], seg: Segment, cwd: str,
                     seen: dict[tuple[str, str | None, bool], list[Decision]]) -> list[Decision]:
        """Built in, for one command of a Bash line: any word naming Switchboard's files is
        refused, one naming a file a Read rule refuses is refused the same; a command that
        may write (anything but cat, ls, grep...) asks when a word names a file whose change
        alters what agents run, or when it runs in such a directory."""
        writer = seg.program not in READERS
        found = []
        if writer and seg.cwd and (why := write_hazard(seg.cwd)):
            found.append(Decision(Action.ASK, f"runs in {seg.cwd}: {why}", _GUARD))
        if seg.program == "git" and git_config_writes(seg.args):
            found.append(Decision(Action.ASK, "git config writes git's configuration, which "
                                  "names programs git runs", _GUARD))
        if _searches(seg):  # grep -r pw ~ reads ~/.ssh as a Grep of ~ would
            for arg in seg.args:
                if not arg.startswith("-") and (arg.startswith(("/", "~")) or seg.cwd):
                    found += self._guard_search(sections, normpath(arg, seg.cwd))
        for arg in seg.args:
            key = (arg, seg.cwd, writer)
            if key not in seen:
                seen[key] = self._guard_word(sections, arg, seg.cwd, cwd, writer)
            found += seen[key]
        return [_about(d, seg) for d in found]

    def _guard_glob(self, sections: list[_Section], pattern: str, cwd: str) -> list[Decision]:
        """A glob may match a refused file that does not exist yet, or one we did not find."""
        mine = self.protected.workspace(cwd)
        if not (mine and literal_root(pattern).startswith(mine.rstrip("/") + "/")) and any(
                may_match(pattern, t) for t in self.protected.targets()):
            return [Decision(Action.ASK, f"{pattern} may name Switchboard's own files", _GUARD)]
        for rule in (r for s in sections for r in s.rules):
            if rule.action is Action.ALLOW or not rule.applies_to("Read"):
                continue
            target = next((p for p in rule.paths if may_match(pattern, p)), None)
            if target is not None:
                return [Decision(Action.ASK, f"{pattern} may name {target}: {rule.reason}",
                                 f"{rule.key}: {target}")]
        return []

    def _guard_word(self, sections: list[_Section], word: str, seg_cwd: str | None, cwd: str,
                    writer: bool) -> list[Decision]:
        maybe: list[Decision] = []
        for path, pattern in named_paths(word, seg_cwd):
            if pattern:  # after the files it matches now: a refusal of one of those wins
                maybe = maybe or self._guard_glob(sections, path, cwd)
                continue
            if self.protected.owns((path,), cwd):
                return [Decision(Action.DENY, f"names {path}: {_OWN}", _GUARD)]
            hit = self._path_hit(sections, "Read", (path,))
            if hit is not None and hit.action is not Action.ALLOW:
                return [Decision(hit.action, f"names {path}: {hit.reason}", hit.rule)]
        if maybe:
            return maybe
        if writer and (named := mentions_hazard(word, seg_cwd)) is not None:
            return [Decision(Action.ASK, f"may write {named[0]}: {named[1]}", _GUARD)]
        return []

    def _bash(self, sections: list[_Section], command: Any, cwd: str) -> Decision:
        if not isinstance(command, str):
            return Decision(Action.ASK, "the command is not text", "unparseable command")
        analysis = analyse(command, cwd)
        found = []
        if analysis.error:
            reason = f"unparseable command: {analysis.error}"
            found.append(Decision(Action.ASK, reason, "unparseable command"))
        seen: dict[tuple[str, str | None, bool], list[Decision]] = {}
        for seg in analysis.segments:
            found.extend(self._segment(sections, seg, cwd))
            if seg.kind in (Kind.RUN, Kind.LAYER):
                found.extend(self._guard_words(sections, seg, cwd, seen))
        found.extend(self._pipelines(sections, analysis.segments))
        if not found:
            return Decision(Action.ASK, "the command runs nothing we can check", "empty command")
        return _strongest(found)

    def _segment(self, sections: list[_Section], seg: Segment, cwd: str) -> list[Decision]:
        if seg.kind is Kind.UNKNOWN:
            return [Decision(Action.ASK, seg.problems[0], "cannot tell what runs")]
        if seg.kind is Kind.WRITE:
            found = [Decision(Action.ASK, p, "redirection") for p in seg.problems]
            for path in seg.writes:
                paths = _path_candidates(path, cwd)
                d = self._call(sections, "Write", paths)
                found.append(Decision(d.action, f"writes {path}: {d.reason}", d.rule))
                found += self._guard_path(paths, cwd, "writes")
            for path in seg.reads:
                paths = _path_candidates(path, cwd)
                hit = self._path_hit(sections, "Read", paths)
                if hit is not None and hit.action is not Action.ALLOW:
                    found.append(Decision(hit.action, f"reads {path}: {hit.reason}", hit.rule))
                found += self._guard_path(paths, cwd, "reads")
            return found
        forms = arg_forms(seg.args)
        hit = self._hit(sections, "Bash", lambda r: r.match_segment(seg, forms))
        if seg.kind is Kind.LAYER:  # wrappers only answer to rules that deny or ask
            return [] if hit is None or hit.action is Action.ALLOW else [_about(hit, seg)]
        decision = hit or self._fallback(sections, "Bash")
        if decision.action is Action.ALLOW and seg.problems:
            reason = f"{seg.problems[0]} (in: {seg.text})"
            return [Decision(Action.ASK, reason, "checks before allowing")]
        return [_about(decision, seg)]

    def _pipelines(self, sections: list[_Section], segments: tuple[Segment, ...]) -> list[Decision]:
        """Rules like 'curl | sh': output of a command matching the left reaches the right."""
        rules = [r for s in sections for r in s.rules
                 if r.applies_to("Bash") and any(len(c) > 1 for _, c in r.commands)]
        if not rules:
            return []
        nodes = [s for s in segments if s.kind in (Kind.RUN, Kind.LAYER)]
        forms = [arg_forms(s.args) for s in nodes]
        reach = downstream(nodes)
        found = []
        for rule in rules:
            for text, stages in ((t, c) for t, c in rule.commands if len(c) > 1):
                current = {n for n, node in enumerate(nodes)
                           if match_anywhere(stages[0], node, forms[n])}
                for stage in stages[1:]:
                    current = {m for n in current for m in reach(n)
                               if match_anywhere(stage, nodes[m], forms[m])}
                if current:
                    decision = Decision(rule.action, rule.reason, f"{rule.key}: {text}")
                    found.append(_about(decision, nodes[min(current)]))
        return found

    def session_key(self, tool_name: str, tool_input: dict[str, Any]) -> str:
        """Equal keys for calls that do the same: same normalised command, same file."""
        inp = tool_input if isinstance(tool_input, Mapping) else {}
        command = inp.get("command")
        if tool_name == "Bash" and isinstance(command, str):
            try:
                return "Bash:" + canonical(command)
            except ShellParseError:
                return "Bash:" + command
        path = _input_path(inp)
        if tool_name in PATH_TOOLS and path:
            return f"{'edit' if tool_name in EDIT_TOOLS else tool_name}:{normpath(path)}"
        return f"{tool_name}:{_json(inp)}"


# Decisions of a command we cannot read: for a standing agent, it could be an irreversible step.
_UNREADABLE = frozenset({"cannot tell what runs", "unparseable command", "empty command",
                         "internal error"})
_DEFAULT_STANDING: list[_Section] = []
_INTERPRETERS = ("python*", "pypy*", "node", "nodejs", "deno", "bun", "perl*", "ruby*", "php*",
                 "lua*", "Rscript", "osascript", "tclsh", "*awk")
_TOKEN = re.compile(r"[^\s'\"`();,\[\]{}+]+")
_NEAR = 6  # the further words of a pattern must follow the program within this many words


def _lenient(section: _Section) -> _Section:
    """The section with its default and [tools] asks turned into allows (rules unchanged)."""
    default = section.default if section.default != Action.ASK else Action.ALLOW
    tools = tuple((k, Action.ALLOW if a == Action.ASK else a) for k, a in section.tools)
    return dataclasses.replace(section, default=default, tools=tools)


def _near(stage: Stage, tokens: list[str]) -> bool:
    progs, rest = stage[0], stage[1:]
    for i, tok in enumerate(tokens):
        if not any(fnmatchcase(tok, p) for p in progs):
            continue
        window = tokens[i + 1:i + 1 + _NEAR]
        if all(any(fnmatchcase(t, alt) for t in window for alt in word) for word in rest):
            return True
    return False


def _default_standing() -> _Section:
    """The built-in [standing] table: a policy file without one keeps the default list."""
    if not _DEFAULT_STANDING:
        data = tomllib.loads(DEFAULT_POLICY.read_text(encoding="utf-8"))
        _DEFAULT_STANDING.append(_Loader(str(DEFAULT_POLICY)).standing(data.get("standing", {})))
    return _DEFAULT_STANDING[0]


def _searches(seg: Segment) -> bool:
    """A program reading every file under the directories it is given (searches, copies,
    archives): given ~ it reads ~/.ssh."""
    if seg.program in ("rg", "ag", "ack", "tar", "zip", "7z", "rsync", "scp"):
        return True
    forms = set(arg_forms(seg.args))
    if seg.program == "cp":
        return bool(forms & {"-r", "-R", "-a", "--recursive", "--archive"})
    return seg.program in ("grep", "egrep", "fgrep") and bool(forms & {
        "-r", "-R", "--recursive", "--dereference-recursive", "--directories=recurse"})


def _about(decision: Decision, seg: Segment) -> Decision:
    return Decision(decision.action, f"{decision.reason} (in: {seg.text})", decision.rule)


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


# Kept importable from here: describing a call moved to its own module.
from supervisor.guard.describe import describe_call  # noqa: E402, F401

__all__ = ["Action", "Decision", "Policy", "PolicyError", "Rule", "describe_call"]
