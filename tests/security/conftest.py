"""Hostile agents: the real CLI, a permissive policy, and helpers to see what the agent saw
(every tool result the CLI sent back to the model) and every process it left on the host."""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from bot.app import Switchboard
from supervisor.agents.runner import AgentRunner
from supervisor.config import Settings
from tests.conftest import run, wait_for

# Generous: twenty real CLIs starting at once on two cores take a while.
SPAWN_WAIT_S = 120.0


@pytest.fixture
def hostile_settings(permissive_settings: Settings) -> Settings:
    """Every tool call allowed by policy (the wall must hold when the policy is wrong), and
    rate limits out of the way of a fleet of twenty."""
    return permissive_settings.with_(commands_per_minute=10_000, spawns_per_minute=10_000,
                                     messages_per_minute=10_000)


@pytest.fixture
async def hostile_app(hostile_settings: Settings) -> AsyncIterator[Switchboard]:
    async with Switchboard(hostile_settings) as app:
        yield app


# -- what the agent saw ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolCall:
    command: str  # the Bash command (or the tool's input as JSON)
    result: str  # the tool_result text the CLI sent back to the model
    is_error: bool


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return "" if content is None else json.dumps(content)


def tool_calls(mock: Any) -> list[ToolCall]:
    """Every tool call of every recorded request, once each, in order (each request repeats
    the conversation so far)."""
    inputs: dict[str, str] = {}
    seen: dict[str, ToolCall] = {}
    for body in list(mock.requests):
        for msg in body.get("messages") or []:
            content = msg.get("content")
            if not isinstance(content, list):
                continue
            for block in content:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "tool_use":
                    inp = block.get("input") or {}
                    inputs[block.get("id", "")] = str(inp.get("command") or json.dumps(inp))
                elif block.get("type") == "tool_result":
                    tid = block.get("tool_use_id", "")
                    if tid not in seen:
                        seen[tid] = ToolCall(inputs.get(tid, "?"), _text(block.get("content")),
                                             bool(block.get("is_error")))
    return list(seen.values())


def bash_script(script: str) -> str:
    """A prompt that makes the agent write `script` to its /tmp and run it with sh (base64, so
    the /spawn line stays one line and no quoting survives to confuse anyone)."""
    blob = base64.b64encode(script.encode()).decode()
    return f"BASH: echo {blob} | base64 -d > /tmp/s.sh && sh /tmp/s.sh"


# -- every process the agent has, seen from the host ------------------------------------------


def _stat(pid: int) -> tuple[str, int, int, str] | None:
    """(state, ppid, start time in ticks, comm) of `pid`, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    comm = raw[raw.find(b"(") + 1:raw.rfind(b")")].decode(errors="replace")
    fields = raw[raw.rfind(b")") + 2:].split()
    return fields[0].decode(), int(fields[1]), int(fields[19]), comm


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def pid_ns(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


@dataclass(frozen=True, slots=True)
class Proc:
    """One process, identified by pid and start time, so a reused pid is not mistaken for it."""

    pid: int
    start: int
    name: str
    cmdline: str

    def state(self) -> str | None:
        """Its state letter now, or None when it is gone (or the pid belongs to another)."""
        st = _stat(self.pid)
        if st is None or st[2] != self.start:
            return None
        return st[0]

    def __str__(self) -> str:
        return f"{self.pid}:{self.name}[{self.state()}] {self.cmdline[:80]}"


class HostTable:
    """One scan of the host's process table, shared by every agent looked at in one round: a
    fleet of twenty looked at one agent at a time scanned /proc (and read every process's pid
    namespace) twenty times a round, which cost the suite more CPU than some agents did."""

    __slots__ = ("_ns", "children", "table")

    def __init__(self) -> None:
        self.table: dict[int, tuple[str, int, int, str]] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                st = _stat(int(entry))
                if st is not None:
                    self.table[int(entry)] = st
        self.children: dict[int, list[int]] = {}
        for pid, (_state, ppid, _start, _comm) in self.table.items():
            self.children.setdefault(ppid, []).append(pid)
        self._ns: dict[int, str | None] = {}

    def ns(self, pid: int) -> str | None:
        """`pid`'s pid namespace, read once per scan."""
        if pid not in self._ns:
            self._ns[pid] = pid_ns(pid)
        return self._ns[pid]

    def alive(self, proc: Proc) -> bool:
        """`proc` was alive at the scan (the same pid and start time, not a zombie)."""
        st = self.table.get(proc.pid)
        return st is not None and st[2] == proc.start and st[0] not in "ZX"


def processes_of(launcher_pid: int, namespace: str | None,
                 launcher_start: int | None = None, host: HostTable | None = None
                 ) -> list[Proc]:
    """Every live process under the launcher (bwrap's outer process) on the host, plus every
    process whose pid namespace is the agent's: two independent views, united. With
    `launcher_start`, a pid reused by another process (pids wrap at 32768 here, and the other
    tests' agents start all the time) is not walked as the launcher. `host` is a scan to
    read (a new one without it)."""
    host = host or HostTable()
    table = host.table
    found: set[int] = set()
    ours = launcher_pid in table and launcher_start in (None, table[launcher_pid][2])
    stack = [launcher_pid] if ours else []
    while stack:
        pid = stack.pop()
        if pid not in found:
            found.add(pid)
            stack.extend(host.children.get(pid, ()))
    if namespace is not None:
        found.update(pid for pid in table if host.ns(pid) == namespace)
    out = []
    for pid in sorted(found):
        state, _ppid, start, comm = table[pid]
        if state not in "ZX":
            out.append(Proc(pid, start, comm, _cmdline(pid)))
    return out


@dataclass(slots=True)
class Watched:
    """An agent as seen from the host: its launcher, init, namespace, and every process it ever
    had while we looked (`seen` only grows)."""

    runner: AgentRunner
    launcher_pid: int
    launcher_start: int
    init_pid: int
    namespace: str
    ns_fd: int  # held open: a freed namespace's inode number is reused by the next sandbox
    seen: dict[tuple[int, int], Proc]

    @classmethod
    def of(cls, runner: AgentRunner) -> Watched:
        proc = runner.process
        assert proc is not None and proc.launcher_pid and proc.init_pid, runner.name
        ns = pid_ns(proc.init_pid)
        assert ns is not None and ns != pid_ns(os.getpid()), "the agent has no pid namespace"
        fd = os.open(f"/proc/{proc.init_pid}/ns/pid", os.O_RDONLY)
        assert pid_ns(proc.init_pid) == ns, "the init changed while we looked"
        st = _stat(proc.launcher_pid)
        assert st is not None, f"{runner.name}: the launcher is gone"
        return cls(runner, proc.launcher_pid, st[2], proc.init_pid, ns, fd, {})

    def release(self) -> None:
        os.close(self.ns_fd)

    def look(self, host: HostTable | None = None) -> list[Proc]:
        now = processes_of(self.launcher_pid, self.namespace, self.launcher_start, host)
        for p in now:
            self.seen[(p.pid, p.start)] = p
        return now

    def agent_side(self, host: HostTable | None = None) -> list[Proc]:
        """What the agent runs: everything but bwrap's outer process and the init (ours)."""
        return [p for p in self.look(host) if p.pid not in (self.launcher_pid, self.init_pid)]

    def survivors(self, host: HostTable | None = None) -> list[Proc]:
        """Everything it ever had that is alive at the scan `host` (a new one without it)."""
        host = host or HostTable()
        return [p for p in self.seen.values() if host.alive(p)] + [
            p for p in processes_of(self.launcher_pid, self.namespace, self.launcher_start, host)
            if (p.pid, p.start) not in self.seen]


def wait_dead(watched: list[Watched], bound_s: float) -> tuple[float, list[str]]:
    """Poll until nothing any agent ever had is alive, for at most `bound_s`; returns the time
    it took and what survived."""
    started = time.monotonic()
    while True:
        host = HostTable()  # one scan a round for the whole fleet
        left = [f"{w.runner.name}: {p}" for w in watched for p in w.survivors(host)]
        elapsed = time.monotonic() - started
        if not left or elapsed > bound_s:
            return elapsed, left
        time.sleep(0.02)


# -- escapers ---------------------------------------------------------------------------------

# Every way out of a process group or a session an agent can try, each ticking a counter in the
# workspace so the test can tell a frozen process from a running one: a shell and a python fork
# chain (the pid changes all the time, each parent exits), setsid with a double fork, nohup,
# env -i (drops the agent tag), setsid -f env -i, a loop that ignores TERM, INT and HUP, and one
# in a nested user and pid namespace of its own (unshare -Urpf). They tick a few times a second,
# not faster: twenty agents' worth of forks at 20/s took a core from the suite, and a process
# that runs at all while frozen still ticks within the one-second pause check.
ESCAPERS = r"""W=$PWD
cat > /tmp/chain.sh <<'EOF'
echo c >> "$1/sh-chain.count"
sleep 0.5
sh /tmp/chain.sh "$1" </dev/null >/dev/null 2>&1 &
EOF
sh /tmp/chain.sh "$W" </dev/null >/dev/null 2>&1 &
python3 -c 'import os, sys, time
w = sys.argv[1]
while True:
    if os.fork():
        os._exit(0)
    with open(w + "/py-chain.count", "a") as f:
        f.write("p")
    time.sleep(0.25)
' "$W" </dev/null >/dev/null 2>&1 &
setsid sh -c 'sh -c "exec sleep 1001" & exit' </dev/null >/dev/null 2>&1 &
nohup sleep 1002 </dev/null >/dev/null 2>&1 &
env -i sleep 1003 </dev/null >/dev/null 2>&1 &
setsid -f env -i sh -c 'while :; do echo e >> "$0/envi.count"; sleep 0.5; done' "$W" \
    </dev/null >/dev/null 2>&1
sh -c 'trap "" TERM INT HUP; while :; do echo t >> "$0/term.count"; sleep 0.5; done' "$W" \
    </dev/null >/dev/null 2>&1 &
unshare -Urpf sh -c 'while :; do echo u >> "$0/userns.count"; sleep 0.5; done' "$W" \
    </dev/null >/dev/null 2>&1 &
sleep 0.5
echo escaped
"""
COUNTERS = ("sh-chain.count", "py-chain.count", "envi.count", "term.count", "userns.count")
SLEEPERS = ("sleep 1001", "sleep 1002", "sleep 1003")

# SIGKILL the launcher: every ancestor named like it (what took a subreaper launcher down before
# the sandbox: same user), then pid 1, the sandbox's init.
KILL_INIT = r"""p=$$
while :; do
    case "$(cat /proc/$p/comm)" in sb-*) kill -9 $p; echo "kill -9 launcher $p rc=$?";; esac
    [ "$p" -le 1 ] && break
    p=$(cut -d' ' -f4 /proc/$p/stat)
done
kill -9 1; echo "kill -9 1 rc=$?"
kill -TERM 1; echo "kill -TERM 1 rc=$?"
"""


def escaper_prompt(kill_init: bool = False) -> str:
    return bash_script((KILL_INIT if kill_init else "") + ESCAPERS)


def escapers_running(w: Watched, host: HostTable | None = None) -> bool:
    cmdlines = [p.cmdline for p in w.agent_side(host)]
    return all(any(s in c for c in cmdlines) for s in SLEEPERS) and all(
        (w.runner.cwd and os.path.exists(os.path.join(w.runner.cwd, c))) for c in COUNTERS)


def counters(runner: AgentRunner) -> dict[str, int]:
    out = {}
    for name in COUNTERS:
        try:
            out[name] = os.path.getsize(os.path.join(runner.cwd, name))
        except OSError:
            out[name] = -1
    return out


async def spawn_fleet(app: Switchboard, names: list[str], prompt: str | list[str],
                      cwd: str | None = None, until: tuple[str, ...] = ("idle",)
                      ) -> list[AgentRunner]:
    """Spawn every agent at once, wait until all finished their first turn (are in a state of
    `until`)."""
    prompts = prompt if isinstance(prompt, list) else [prompt] * len(names)
    where = f" --cwd {cwd}" if cwd else ""
    for name, p in zip(names, prompts, strict=True):
        reply = await run(app, f"/spawn {name}{where} {p}")
        assert reply.ok, reply.plain()
    runners = [await app.pool.fleet.get(n) for n in names]
    try:
        await wait_for(lambda: all(r.state in until for r in runners), SPAWN_WAIT_S,
                       f"{len(names)} agents to finish their first turn")
    except AssertionError as exc:
        states = ", ".join(f"{r.name}={r.state} ({r.last_error})" for r in runners)
        raise AssertionError(f"{exc}: {states}") from None
    return runners
