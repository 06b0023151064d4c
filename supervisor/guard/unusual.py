"""What is unusual in a call the operator is asked about, said in one line above the call: the
things a long command hides in its middle. Read by the same shell analysis as the policy, so a
command inside an expansion, a wrapper or a variable is seen the way bash would run it.

- commands run inside an expansion (`$( )`, backticks, `<( )`), a wrapper (`bash -c`, `eval`,
  `sudo`, `xargs`...) or a variable the reader cannot resolve;
- a write outside the agent's working directory (a redirection, or a Write/Edit of such a
  file), leaving out the sandbox's own /tmp and /dev/null;
- a push or a publish (git push, npm publish, docker push...).

Nothing here decides anything: it only points, so that the operator approves what they saw."""

from __future__ import annotations

import os.path
import re
from collections.abc import Mapping
from typing import Any

from supervisor.guard.shell import Kind, Segment, analyse

_SUBST = re.compile(r"\$\(|`|<\(|>\(")
_HARMLESS_WRITES = ("/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty")
_EDIT_TOOLS = ("Write", "Edit", "MultiEdit", "NotebookEdit")
# (program, first argument) pairs that send work out of the machine.
_PUSHES = {("git", "push"), ("npm", "publish"), ("yarn", "publish"), ("pnpm", "publish"),
           ("docker", "push"), ("podman", "push"), ("cargo", "publish"), ("twine", "upload"),
           ("gem", "push"), ("helm", "push"), ("gh", "release")}
_HIDING_LAYERS = frozenset({"bash", "sh", "zsh", "dash", "ksh", "eval", "xargs", "sudo", "doas",
                            "su", "ssh", "source", "."})
_MAX_NAMED = 4  # programs or paths named per finding; the rest counted


def unusual(tool: str, tool_input: Mapping[str, Any], cwd: str) -> str:
    """One line saying what is unusual in this call, or "" when nothing is."""
    findings: list[str] = []
    if tool == "Bash" and isinstance(tool_input.get("command"), str):
        findings = _bash(tool_input["command"], cwd)
    elif tool in _EDIT_TOOLS:
        path = next((tool_input[k] for k in ("file_path", "notebook_path")
                     if isinstance(tool_input.get(k), str)), None)
        if path and _outside(os.path.normpath(os.path.join(cwd or "/", path)), cwd):
            findings.append(f"writes outside its working directory ({path})")
    return f"⚠ Unusual: {'; '.join(findings)}." if findings else ""


def _named(items: list[str]) -> str:
    unique = list(dict.fromkeys(items))
    shown = ", ".join(unique[:_MAX_NAMED])
    return shown + (f" and {len(unique) - _MAX_NAMED} more" if len(unique) > _MAX_NAMED else "")


def _outside(path: str, cwd: str) -> bool:
    if not cwd or path in _HARMLESS_WRITES or path == "/tmp" or path.startswith("/tmp/"):
        return False
    root = cwd.rstrip("/") or "/"
    return not (path == root or path.startswith(root + "/") or root == "/")


def _bash(command: str, cwd: str) -> list[str]:
    segments = analyse(command, cwd).segments
    findings = []
    hidden = _hidden(command, segments)
    if hidden:
        findings.append(f"runs commands inside an expansion or a wrapper ({_named(hidden)})")
    unknown = [s.text for s in segments if s.kind == Kind.UNKNOWN]
    if unknown:
        findings.append(f"runs something that cannot be read before it runs "
                        f"({_named(unknown)})")
    writes = [p for s in segments if s.kind == Kind.WRITE for p in s.writes
              if _outside(p, cwd)]
    if writes:
        findings.append(f"writes outside its working directory ({_named(writes)})")
    pushes = [s.text for s in segments if s.kind == Kind.RUN and s.args
              and (s.program, s.args[0]) in _PUSHES]
    if pushes:
        findings.append(f"pushes or publishes ({_named(pushes)})")
    return findings


def _hidden(command: str, segments: tuple[Segment, ...]) -> list[str]:
    """Programs that run from inside an expansion or behind a wrapper, not as the line's own
    visible commands."""
    out: list[str] = []
    after_layer = False
    inner_texts = [a for s in segments for a in s.args if _SUBST.search(a)]
    inner_texts += [" ".join(s.args) for s in segments
                    if s.kind == Kind.LAYER and s.program in _HIDING_LAYERS]
    for seg in segments:
        if seg.kind == Kind.LAYER:
            # Wrappers that run a command given as text or input; not the ones that only
            # set its environment or time (env, nice, timeout), which read as what they run.
            after_layer = after_layer or seg.program in _HIDING_LAYERS
            continue
        if seg.kind != Kind.RUN or not seg.program:
            continue
        inside = any(seg.text and seg.text in inner for inner in inner_texts)
        if inside or after_layer:
            out.append(seg.program)
        # find -exec rm {} +: the next command runs once per file find picks.
        after_layer = seg.program == "find" and any(
            a in ("-exec", "-execdir", "-ok", "-okdir") for a in seg.args)
    if not out and _SUBST.search(command):  # an expansion the analysis flattened
        out = [s.program for s in segments if s.kind == Kind.RUN and s.program
               and any(s.program in inner for inner in inner_texts)]
    return out
