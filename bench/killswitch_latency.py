"""Kill-switch and shutdown latency: until every agent process is gone, against plain signals.

Run from the repository root:  .venv/bin/python bench/killswitch_latency.py
(or `make bench ONLY=killswitch_latency`; BENCH_SMOKE=1 for one tiny fleet)

For each fleet size N in (10, 100, 300), REPEATS times, a fresh Switchboard with fake claude agents
(tests/fakes/fake_claude.py). Every agent is spawned with the prompt `BG`, so it leaves a
background grandchild `sh -c 'sleep 1000'` in a session of its own (as the real Bash tool's
background commands do): four processes per agent (launcher, CLI, sh, sleep) in two process
groups (the launcher's session with the CLI, and the grandchild's).

* kill switch: once all N agents are idle, every process tagged with the instance prefix
  (the same /proc/<pid>/environ check as tests/conftest.py processes_with_tag) is recorded, then
  `await app.pool.killswitch.trigger("bench", "bench", "")` is called. Latency = from that call to
  the moment none of the recorded pids is alive (gone, or a zombie). Reported alongside: the
  synchronous part `fire_now` (persist the halt flag + the sweep), the sweep alone, when
  `trigger()` returned (every process gone and the flag stored: issue 32 moved the bookkeeping
  after it), and when that bookkeeping (states, revocation, audit, notice) was done
  (`killswitch.settled()`). The switch is then turned off (`killswitch.deactivate`), without a
  restart.
* baseline (direct): the same fleet is spawned again in the same Switchboard; every process is
  recorded with its process group and session, then SIGKILL is sent straight to every distinct
  process group (os.killpg) and to every pid (os.kill), with no freezing and no /proc scan.
  Latency = from the first signal to the moment none of the recorded pids is alive.

* shutdown: a second Switchboard spawns N idle agents, the baseline first: their runners are told
  the end is theirs (as the kill switch does), every process is recorded and SIGTERM goes straight
  to every distinct process group; latency = first signal -> none alive. Then N more idle agents,
  and the Switchboard is shut down (`__aexit__`: drain, then the pool's close): latency = the call
  -> it returned, and -> none of their pids alive.
* loop lag: a probe task on the event loop sleeps 5 ms at a time; the worst overshoot while
  trigger() and its bookkeeping run (until `settled()`), and while the shutdown runs, is how
  long the loop was blocked.

All are timed by the same watcher: a separate small Python process that gets the pid list before
the clock starts and polls /proc/<pid>/stat every POLL_S (only the pids still alive), so that
polling neither holds this process's GIL nor slows the sweep's thread. Its end time is taken on the
same CLOCK_MONOTONIC as the start time here. Resolution: about POLL_S.

Prints a table of medians over the repetitions (with the range of both latencies) and the ratio
kill switch / direct, and checks after every round, after every shutdown, and once more at the
very end, that no tagged process remains (exit 1 otherwise). About 100 s on 2 CPUs.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402

import supervisor.guard.killswitch as killswitch_module  # noqa: E402
from bench._common import result, smoke  # noqa: E402
from bot.app import Switchboard  # noqa: E402
from supervisor import heap  # noqa: E402
from supervisor.config import Settings  # noqa: E402
from supervisor.process.tree import tagged_pids  # noqa: E402
from tests.conftest import make_settings, processes_with_tag  # noqa: E402

SUITE = {"timeout_s": 600}  # four fleets of 300 agents to spawn on 2 cores
SIZES = (3,) if smoke() else tuple(int(x) for x in os.environ.get("BENCH_SIZES", "10,100,300")
                                   .split(","))
REPEATS = int(os.environ.get("BENCH_REPEATS", "1"))
GOAL_RATIO = 2.0
TRIGGER_GOAL_RATIO = 1.2  # issue 32: trigger() returns close to a direct killpg
LAG_GOAL_MS = 50.0  # issue 32: the loop blocked at most this long by the switch or a shutdown
LAG_GOAL_FROM = 300
AGENT_NICE = Settings.model_fields["agent_nice"].default
GOAL_FROM = 100  # fleet size from which the 2x goal applies (issue 11, item 3)
SHUTDOWN_GOAL_FROM = 300  # issue 11, item 3: "shutdown with 300 idle agents"
POLL_S = 0.002
READY_TIMEOUT_S = 150.0
KILL_TIMEOUT_S = 60.0

# The watcher: reads the pids, says "ready", waits for "go", then polls until every pid is gone or
# a zombie and prints the CLOCK_MONOTONIC time of that scan's end and how many scans it took.
WATCHER = r"""
import sys, time
poll, limit = float(sys.argv[1]), float(sys.argv[2])
left = set(int(p) for p in sys.stdin.readline().split())
print("ready", flush=True)
sys.stdin.readline()
start = time.monotonic()
def dead(pid):
    try:
        with open("/proc/%d/stat" % pid, "rb") as fh:
            stat = fh.read()
    except OSError:
        return True
    return stat[stat.rfind(b")") + 2:stat.rfind(b")") + 3] in (b"Z", b"X", b"x")
scans = 0
while True:
    scans += 1
    left = set(p for p in left if not dead(p))
    if not left:
        print("%.9f %d" % (time.monotonic(), scans), flush=True)
        break
    if time.monotonic() - start > limit:
        print("timeout %d %d" % (scans, len(left)), flush=True)
        break
    time.sleep(poll)
"""


class Watcher:
    def __init__(self, pids: list[int]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-S", "-E", "-c", WATCHER, str(POLL_S), str(KILL_TIMEOUT_S)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(" ".join(map(str, pids)) + "\n")
        self.proc.stdin.flush()
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError("the watcher did not start")

    def go(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    async def gone_at(self) -> tuple[float, int]:
        """CLOCK_MONOTONIC time at which no recorded pid was alive, and the scans it took."""
        assert self.proc.stdout
        line = (await asyncio.to_thread(self.proc.stdout.readline)).split()
        await asyncio.to_thread(self.proc.wait, 10)
        if not line or line[0] == "timeout":
            raise RuntimeError(f"processes still alive after {KILL_TIMEOUT_S:g}s: {line}")
        return float(line[0]), int(line[1])


@dataclass
class Row:
    n: int
    procs: int = 0
    groups: int = 0
    sessions: int = 0
    ks_ms: float = 0.0
    fire_ms: float = 0.0
    sweep_ms: float = 0.0
    trees_ms: float = 0.0  # fire_now's walk and SIGKILL of the known trees
    persist_ms: float = 0.0  # the halt flag's write, in its own thread beside them
    trigger_ms: float = 0.0
    book_ms: float = 0.0
    killed: int = 0
    direct_ms: float = 0.0
    direct_send_ms: float = 0.0
    direct_procs: int = 0
    ks_scans: int = 0
    names: str = ""
    direct_scans: int = 0
    ks_lag_ms: float = 0.0
    term_ms: float = 0.0
    shut_ms: float = 0.0
    shut_gone_ms: float = 0.0
    shut_lag_ms: float = 0.0
    direct_lag_ms: float = 0.0  # the loop's lateness while a direct kill's processes die
    term_lag_ms: float = 0.0  # the same for the direct SIGTERM


class LagProbe:
    """The event loop's worst lateness while it runs: how long the loop was blocked. A thread
    beside it samples the loop thread's stack whenever the loop is more than STALL_S late, so
    that a stall past the goal is printed with where the loop was (`stalls`)."""

    STALL_S = 0.02

    def __init__(self) -> None:
        self.worst = 0.0
        self._tick = time.monotonic()
        self._loop_thread = threading.get_ident()
        self.stalls: collections.Counter[str] = collections.Counter()
        self._sampling = True
        self._sampler = threading.Thread(target=self._sample, name="lag-sampler", daemon=True)
        self._sampler.start()
        self._task = asyncio.create_task(self._run(), name="lag-probe")

    async def _run(self) -> None:
        while True:
            t = self._tick = time.monotonic()
            await asyncio.sleep(0.005)
            self.worst = max(self.worst, time.monotonic() - t - 0.005)

    def _sample(self) -> None:
        while self._sampling:
            time.sleep(0.005)
            if time.monotonic() - self._tick > self.STALL_S + 0.005:
                frame = sys._current_frames().get(self._loop_thread)
                if frame is not None:
                    where = traceback.extract_stack(frame)[-4:]
                    self.stalls[" < ".join(f"{Path(f.filename).name}:{f.lineno} {f.name}"
                                           for f in reversed(where))] += 1

    async def stop(self) -> float:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        self._sampling = False
        self._sampler.join()
        if self.worst * 1000 > LAG_GOAL_MS:
            print(f"    loop blocked {self.worst * 1000:.0f} ms; where it was, sampled every "
                  f"5 ms while over {self.STALL_S * 1000:.0f} ms late:", flush=True)
            for where, n in self.stalls.most_common(5):
                print(f"      {n:3d}x {where}", flush=True)
        return self.worst * 1000


def live_tagged(prefix: str) -> list[int]:
    alive = []
    for pid in tagged_pids(prefix):
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            continue
    return alive


async def wait_until(pred: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g}s waiting for {what}")
        await asyncio.sleep(0.05)


async def spawn_fleet(app: Switchboard, n: int, prefix: str) -> list[int]:
    """Spawn n agents with `BG`; once each is idle with its sleeper, return every agent pid."""
    assert app.pool is not None
    runners = [await app.pool.spawn(f"{prefix}{i:03d}", "BG") for i in range(n)]
    await wait_until(lambda: all(r.state == "idle" for r in runners)
                     or any(r.state == "failed" for r in runners), READY_TIMEOUT_S,
                     f"{n} agents idle")
    failed = [(r.name, r.last_error) for r in runners if r.state != "idle"]
    if failed:
        raise RuntimeError(f"agents failed: {failed[:3]}")
    tag = f"{app.settings.instance_id}/"
    # The turn can end before the background sh has exec'd its sleep: wait for all n.
    deadline = time.monotonic() + 20
    while True:
        procs = processes_with_tag(tag)
        if len([p for p in procs if p.name() == "sleep"]) >= n:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"expected {n} background sleepers, found fewer")
        await asyncio.sleep(0.05)
    pids = {p.pid for p in procs}
    for r in runners:  # the tree too, in case something lost its tag
        if r.process and r.process.launcher_pid:
            root = psutil.Process(r.process.launcher_pid)
            pids.update(p.pid for p in [root, *root.children(recursive=True)])
    return sorted(pids)


def process_names(pids: list[int]) -> str:
    counts = Counter()
    for pid in pids:
        try:
            counts[psutil.Process(pid).name()] += 1
        except psutil.NoSuchProcess:
            counts["(gone)"] += 1
    return ", ".join(f"{count} {name}" for name, count in sorted(counts.items()))


def instrument(ks: Any, timings: dict[str, float]) -> Callable[[], None]:
    """Time KillSwitch.fire_now and what it calls (the known trees' kill, the sweep, the
    flag's write); returns an undo."""
    real_fire, real_persist = ks.fire_now, ks._persist
    real_sweep, real_trees = killswitch_module.sweep, killswitch_module.kill_trees

    def timed(name: str, fn: Callable[..., Any], once: bool = False) -> Callable[..., Any]:
        def run(*args: Any, **kw: Any) -> Any:
            t = time.monotonic()
            try:
                return fn(*args, **kw)
            finally:  # once: fire_now's sweep (the bookkeeping sweeps again afterwards)
                if not once or name not in timings:
                    timings[name] = time.monotonic() - t
        return run

    ks.fire_now = timed("fire", real_fire)
    ks._persist = timed("persist", real_persist)
    killswitch_module.sweep = timed("sweep", real_sweep, once=True)
    killswitch_module.kill_trees = timed("trees", real_trees)

    def undo() -> None:
        del ks.fire_now, ks._persist
        killswitch_module.sweep, killswitch_module.kill_trees = real_sweep, real_trees

    return undo


async def kill_switch_round(app: Switchboard, row: Row) -> None:
    assert app.pool is not None
    ks = app.pool.killswitch
    pids = await spawn_fleet(app, row.n, "k")
    row.procs = len(pids)
    row.names = process_names(pids)
    timings: dict[str, float] = {}
    undo = instrument(ks, timings)
    watcher = Watcher(pids)
    try:
        probe = LagProbe()
        t0 = time.monotonic()
        watcher.go()
        report = await ks.trigger("bench", "bench", "")
        returned = time.monotonic()
        # The bookkeeping goes on after trigger() returns: the probe watches it to its end.
        settled = await ks.settled()
        booked = time.monotonic()
        row.ks_lag_ms = await probe.stop()
        gone, row.ks_scans = await watcher.gone_at()
    finally:
        undo()
    row.ks_ms = (gone - t0) * 1000
    row.trigger_ms = (returned - t0) * 1000
    row.book_ms = (booked - t0) * 1000
    if settled is None or len(settled.agents) != row.n or settled.pending:
        raise RuntimeError(f"the kill switch's bookkeeping did not cover {row.n} agents")
    not_killed = [r.name for r in app.pool.fleet.everyone()
                  if r.name.startswith("k") and r.state != "killed"]
    if not_killed:
        raise RuntimeError(f"agents not recorded killed after the bookkeeping: "
                           f"{not_killed[:5]}")
    row.fire_ms = timings.get("fire", float("nan")) * 1000
    row.sweep_ms = timings.get("sweep", float("nan")) * 1000
    row.trees_ms = timings.get("trees", float("nan")) * 1000
    row.persist_ms = timings.get("persist", float("nan")) * 1000
    row.killed = len(report.pids)
    if len(report.agents) != row.n:
        raise RuntimeError(f"the kill switch reported {len(report.agents)} agents, not {row.n}")
    left = live_tagged(f"{app.settings.instance_id}/")
    if left:
        raise RuntimeError(f"tagged processes left after the kill switch: {left}")
    await ks.deactivate("bench", "bench")


async def direct_round(app: Switchboard, row: Row) -> None:
    pids = await spawn_fleet(app, row.n, "d")
    row.direct_procs = len(pids)
    me_pgid, me_sid = os.getpgrp(), os.getsid(0)
    groups, sessions = set(), set()
    for pid in pids:
        groups.add(os.getpgid(pid))
        sessions.add(os.getsid(pid))
    if me_pgid in groups or me_sid in sessions:
        raise RuntimeError("an agent process shares this process's group or session")
    row.groups, row.sessions = len(groups), len(sessions)
    watcher = Watcher(pids)
    probe = LagProbe()
    t0 = time.monotonic()
    watcher.go()
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    sent = time.monotonic()
    gone, row.direct_scans = await watcher.gone_at()
    row.direct_lag_ms = await probe.stop()
    row.direct_ms = (gone - t0) * 1000
    row.direct_send_ms = (sent - t0) * 1000
    left = live_tagged(f"{app.settings.instance_id}/")
    if left:
        raise RuntimeError(f"tagged processes left after the direct kill: {left}")


def bench_settings(home: Path) -> Any:
    # The product's default agent priority (tests run agents at the supervisor's).
    return make_settings(home, fake=True, agent_nice=AGENT_NICE).with_(
        max_agents=2 * max(SIZES), spawns_per_minute=10_000, messages_per_minute=10_000,
        commands_per_minute=10_000, memory_refuse_pct=100.0, memory_warn_pct=100.0,
        stall_s=3600.0, session_ttl_s=24 * 3600.0, crash_loop_max=10_000)


async def sigterm_round(app: Switchboard, row: Row) -> None:
    """The shutdown's baseline: SIGTERM straight to every process group of N idle agents."""
    assert app.pool is not None
    pids = await spawn_fleet(app, row.n, "b")
    for runner in app.pool.fleet.live():
        runner.halting()  # their CLIs' deaths are expected: no restart
    groups = {os.getpgid(pid) for pid in pids}
    watcher = Watcher(pids)
    probe = LagProbe()
    t0 = time.monotonic()
    watcher.go()
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    gone, _ = await watcher.gone_at()
    row.term_lag_ms = await probe.stop()
    row.term_ms = (gone - t0) * 1000


async def shutdown_round(home: Path, row: Row) -> None:
    settings = bench_settings(home)
    app = Switchboard(settings)
    await app.__aenter__()
    heap.settle()  # as `switchboard run` does once started (supervisor/heap.py)
    try:
        await sigterm_round(app, row)
        pids = await spawn_fleet(app, row.n, "s")
    except BaseException:
        await app.__aexit__(None, None, None)
        raise
    watcher = Watcher(pids)
    probe = LagProbe()
    t0 = time.monotonic()
    watcher.go()
    await app.__aexit__(None, None, None)
    row.shut_ms = (time.monotonic() - t0) * 1000
    row.shut_lag_ms = await probe.stop()
    gone, _ = await watcher.gone_at()
    row.shut_gone_ms = (gone - t0) * 1000
    left = live_tagged(f"{settings.instance_id}/")
    if left:
        raise RuntimeError(f"tagged processes left after shutdown (N={row.n}): {left}")


async def measure(n: int, rep: int, base: Path) -> Row:
    home = base / f"n{n}r{rep}"
    settings = bench_settings(home)
    row = Row(n)
    started = time.monotonic()
    async with Switchboard(settings) as app:
        heap.settle()
        await kill_switch_round(app, row)
        await direct_round(app, row)
    left = live_tagged(f"{settings.instance_id}/")
    if left:
        raise RuntimeError(f"tagged processes left after shutdown (N={n}): {left}")
    await shutdown_round(base / f"s{n}r{rep}", row)
    print(f"  N={n:<3} run {rep + 1}/{REPEATS}  {time.monotonic() - started:5.1f}s: kill switch "
          f"{row.ks_ms:7.1f} ms (trigger() {row.trigger_ms:.0f} ms [trees "
          f"{row.trees_ms:.0f}, sweep {row.sweep_ms:.0f}, flag {row.persist_ms:.0f} ms], books "
          f"{row.book_ms:.0f} ms, loop lag "
          f"{row.ks_lag_ms:.0f} ms), direct {row.direct_ms:6.1f} ms; shutdown "
          f"{row.shut_ms:.0f} ms (gone {row.shut_gone_ms:.0f} ms, loop lag "
          f"{row.shut_lag_ms:.0f} ms), SIGTERM {row.term_ms:.0f} ms; loop lag during the "
          f"direct kill {row.direct_lag_ms:.0f} ms, SIGTERM {row.term_lag_ms:.0f} ms"
          + (f"   [{row.names}]" if rep == 0 else ""), flush=True)
    return row


def report(by_n: dict[int, list[Row]]) -> None:
    """The suite's rows: each figure against its baseline, goal 2x (issue 11, item 3)."""
    for n, rows in by_n.items():
        direct, term = med(rows, "direct_ms"), med(rows, "term_ms")
        # The last field: the fleet size from which the figure is judged. At 10 agents fixed
        # costs dominate: reported, not judged. The goal for the shutdown names 300 idle
        # agents; at 100 it is reported beside it, not judged.
        figures = (("kill switch -> last process gone", "ks_ms", direct, "direct killpg",
                    GOAL_FROM),
                   ("kill switch -> trigger() returned", "trigger_ms", direct,
                    "direct killpg", GOAL_FROM),
                   ("kill switch -> bookkeeping done", "book_ms", direct, "direct killpg",
                    None),
                   ("shutdown -> returned", "shut_ms", term, "direct SIGTERM",
                    SHUTDOWN_GOAL_FROM),
                   ("shutdown -> last process gone", "shut_gone_ms", term, "direct SIGTERM",
                    SHUTDOWN_GOAL_FROM))
        for label, attr, baseline, what, judged_from in figures:
            measured = med(rows, attr)
            ratio = measured / baseline if baseline > 0 else float("inf")
            gated = judged_from is not None and n >= judged_from
            goal = TRIGGER_GOAL_RATIO if attr == "trigger_ms" else GOAL_RATIO
            result(f"{label}, {n} agents", measured, "ms",
                   goal=f"<= {goal:g}x {what}" if gated else "",
                   baseline=baseline, ratio=ratio, passed=ratio <= goal if gated else None)
        for label, attr, base in (("kill switch", "ks_lag_ms", "direct_lag_ms"),
                                  ("shutdown", "shut_lag_ms", "term_lag_ms")):
            lag, gated = med(rows, attr), n >= LAG_GOAL_FROM
            # Beside it, not the goal's: the loop's lateness while the same fleet dies of
            # signals sent straight from the bench (no Switchboard work at all): what the
            # machine's scheduler alone does to the loop while N agents exit.
            result(f"{label}: loop blocked, {n} agents", lag, "ms",
                   goal=f"<= {LAG_GOAL_MS:g} ms" if gated else "", baseline=med(rows, base),
                   passed=lag <= LAG_GOAL_MS if gated else None,
                   note="baseline: the loop's lateness during the direct kill")


def med(rows: list[Row], attr: str) -> float:
    return statistics.median(getattr(r, attr) for r in rows)


def span(rows: list[Row], attr: str) -> str:
    values = [getattr(r, attr) for r in rows]
    return f"{min(values):.0f}-{max(values):.0f}"


def print_table(by_n: dict[int, list[Row]]) -> None:
    print(f"\n== kill-switch latency: trigger() call -> no agent process alive "
          f"(median of {REPEATS}; range) ==")
    head = (f"{'N':>4} {'procs':>6} {'groups':>7} | {'kill switch':>11} {'range':>11} "
            f"{'fire_now':>9} {'trees':>9} {'sweep':>9} {'persist':>9} {'trigger()':>10} "
            f"{'books':>9} | {'direct':>8} "
            f"{'range':>9} "
            f"{'signals':>8} | {'ratio':>6}")
    print(head)
    print("-" * len(head))
    for n, rows in by_n.items():
        ks, direct = med(rows, "ks_ms"), med(rows, "direct_ms")
        ratio = statistics.median(r.ks_ms / r.direct_ms for r in rows)
        print(f"{n:>4} {rows[0].procs:>6} {rows[0].groups:>7} | {ks:>8.1f} ms "
              f"{span(rows, 'ks_ms'):>11} {med(rows, 'fire_ms'):>6.1f} ms "
              f"{med(rows, 'trees_ms'):>6.1f} ms {med(rows, 'sweep_ms'):>6.1f} ms "
              f"{med(rows, 'persist_ms'):>6.1f} ms {med(rows, 'trigger_ms'):>7.1f} ms "
              f"{med(rows, 'book_ms'):>6.0f} ms | "
              f"{direct:>5.1f} ms {span(rows, 'direct_ms'):>9} "
              f"{med(rows, 'direct_send_ms'):>5.1f} ms | {ratio:>5.1f}x")
    print("""
  procs        agent processes recorded before the kill (launcher, fake CLI, sh, sleep)
  groups       distinct process groups among them (the direct kill's os.killpg targets)
  kill switch  trigger() called -> the watcher sees none of those pids alive
  fire_now     the synchronous part (halt flag persisted + trees + sweep), in a thread
  trees        the known sandboxes' inits and bwraps SIGKILLed, each once its tree is counted
  sweep        supervisor.process.tree.sweep alone: freeze + SIGKILL by tag and descendants
  persist      the halt flag's write (a thread of its own, beside trees and sweep)
  trigger()    when trigger() returned: every process gone, the halt flag stored
  books        when its bookkeeping was done: states, revocation, audit, the notice
  direct       first os.killpg -> none alive; signals: time to send every killpg + kill
  ratio        kill switch / direct (median of the per-run ratios)""")


async def main() -> int:
    logging.basicConfig(level=logging.ERROR)
    logging.getLogger("claude_agent_sdk").setLevel(logging.CRITICAL)
    started = time.monotonic()
    base = Path(tempfile.mkdtemp(prefix="sbk", dir="/tmp"))  # short: unix socket paths
    print(f"kill-switch latency: fake claude agents, each with an escaped background `sleep`; "
          f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; watcher polls every "
          f"{POLL_S * 1000:g} ms")
    by_n: dict[int, list[Row]] = {}
    prefixes: list[str] = []
    try:
        for n in SIZES:
            for rep in range(REPEATS):
                prefixes += [f"{make_settings(base / f'{k}{n}r{rep}', fake=True).instance_id}/"
                             for k in "ns"]
                by_n.setdefault(n, []).append(await measure(n, rep, base))
            report({n: by_n[n]})  # each size's rows at once: a later size may run out of time
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print_table(by_n)
    left = [pid for prefix in prefixes for pid in live_tagged(prefix)]
    print(f"\nfinal check: {len(left)} tagged agent process(es) alive"
          + (f": {left}" if left else " (ok)"))
    print(f"done in {time.monotonic() - started:.1f}s")
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
