"""Memory of a fleet: the supervisor's own RSS, and what each agent's processes cost.

Run from the repository root:  .venv/bin/python bench/fleet_rss.py  (or `make bench`)

Starts a Switchboard with fake claude agents, spawns AGENTS agents, waits until each finished its
first turn (idle), then prints:

* the supervisor's RSS (this process): after importing everything (baseline), after the
  Switchboard started, and with the fleet idle; the ratio fleet/baseline and the cost per agent;
* per agent: the launcher's RSS (runner.process.launcher_pid) and the fake CLI's RSS
  (runner.process.cli_pid), with USS (memory only that process holds) alongside;
* a reference: a bare `python3 -S -E -c 'import time; time.sleep(5)'` on the interpreter the
  launcher runs on, and the ratio launcher/bare;
* a second reference: one agent on the REAL bundled claude CLI (against the mock Anthropic API),
  idle after its first turn, because the fake CLI is much smaller than the real one.

Then it shuts the Switchboard down and checks that no agent process is left (by pid and by the
agent tag in /proc/<pid>/environ). Exits 1 if one is.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402

from bench._common import quiet_logging, result, scratch_dir, smoke, wait_until  # noqa: E402
from bot.app import Switchboard  # noqa: E402
from supervisor.process.tree import tagged_pids  # noqa: E402
from tests.conftest import make_settings  # noqa: E402
from tests.fakes.mock_anthropic import MockAnthropic  # noqa: E402

AGENTS = 3 if smoke() else 20
TIMEOUT_S = 90.0
POLL_S = 0.05  # wait_until's polling interval
MB = 1024 * 1024


def rss(pid: int) -> int:
    return psutil.Process(pid).memory_info().rss


def uss(pid: int) -> int | None:
    try:
        return psutil.Process(pid).memory_full_info().uss
    except (psutil.AccessDenied, psutil.NoSuchProcess, AttributeError):
        return None


def mb(n: float | None) -> str:
    return "    n/a" if n is None else f"{n / MB:7.1f}"


def stats_line(label: str, values: list[int], uss_values: list[int | None]) -> str:
    u = [v for v in uss_values if v is not None]
    line = (f"  {label:<24} RSS median {mb(statistics.median(values))} MB   "
            f"min {mb(min(values))}   max {mb(max(values))}   total {mb(sum(values))} MB")
    if u:
        line += f"   | USS median {mb(statistics.median(u))} MB"
    return line


def bare_python_rss() -> tuple[int, int | None]:
    """RSS of `python3 -S -E -c 'import time; time.sleep(5)'` on the launcher's interpreter."""
    proc = subprocess.Popen([sys.executable, "-S", "-E", "-c", "import time; time.sleep(5)"])
    try:
        time.sleep(1.0)  # let it finish starting up
        return rss(proc.pid), uss(proc.pid)
    finally:
        proc.kill()
        proc.wait()


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def real_cli_reference(home: Path) -> None:
    """RSS of one idle agent on the real bundled CLI, talking to the mock Anthropic API."""
    with MockAnthropic() as mock:
        settings = make_settings(home, mock)
        async with Switchboard(settings) as app:
            assert app.pool is not None
            r = await app.pool.spawn("real", "hello")
            await wait_until(lambda: r.state in ("idle", "failed"), TIMEOUT_S, "the real CLI agent",
                             interval=POLL_S)
            if r.state != "idle" or r.process is None or not r.process.cli_pid:
                print(f"  real claude CLI: agent did not become idle: {r.last_error}")
                return
            await asyncio.sleep(1.0)
            cli = r.process.cli_pid
            tree = [psutil.Process(cli), *psutil.Process(cli).children(recursive=True)]
            print(f"  reference: real claude CLI, idle   RSS {mb(rss(cli))} MB"
                  + (f"   | USS {mb(u)} MB" if (u := uss(cli)) is not None else "")
                  + (f"   (+{len(tree) - 1} child process(es), "
                     f"{mb(sum(rss(p.pid) for p in tree[1:]))} MB)" if len(tree) > 1 else ""))


async def main() -> int:
    quiet_logging()  # SIGTERM exits at shutdown
    started = time.monotonic()
    me = psutil.Process()
    base_rss = me.memory_info().rss  # everything imported, nothing started
    pids: list[tuple[str, int | None, int | None]] = []
    with scratch_dir("sbb") as home:
        settings = make_settings(home, fake=True)
        async with Switchboard(settings) as app:
            assert app.pool is not None
            before_rss = me.memory_info().rss  # started, no agent yet
            t0 = time.monotonic()
            runners = [await app.pool.spawn(f"agent{i:02d}", f"hello {i}") for i in range(AGENTS)]
            await wait_until(lambda: all(r.state == "idle" for r in runners)
                             or any(r.state == "failed" for r in runners),
                             TIMEOUT_S, f"{AGENTS} agents to finish their first turn",
                             interval=POLL_S)
            failed = [r for r in runners if r.state != "idle"]
            if failed:
                print(f"agents failed: {[(r.name, r.last_error) for r in failed]}")
                return 1
            ready_s = time.monotonic() - t0
            await asyncio.sleep(0.5)  # let the event loop settle before measuring
            after_rss = me.memory_info().rss

            launcher_rss: list[int] = []
            launcher_uss: list[int | None] = []
            cli_rss: list[int] = []
            cli_uss: list[int | None] = []
            sandboxed = False
            for r in runners:
                proc = r.process
                assert proc is not None and proc.launcher_pid and proc.cli_pid, r.name
                pids.append((r.name, proc.launcher_pid, proc.cli_pid))
                # Sandboxed, the launcher is bwrap plus the namespace's init (our launcher
                # again): both are Switchboard's overhead per agent.
                ours = [p for p in (proc.launcher_pid, proc.init_pid) if p]
                sandboxed = sandboxed or proc.sandboxed
                launcher_rss.append(sum(rss(p) for p in ours))
                launcher_uss.append(sum(uss(p) or 0 for p in ours))
                cli_rss.append(rss(proc.cli_pid))
                cli_uss.append(uss(proc.cli_pid))

            print(f"fleet memory: {AGENTS} fake-claude agents, all idle after {ready_s:.1f}s; "
                  f"python {sys.version.split()[0]}")
            print("\n== supervisor (this process) ==")
            print(f"  baseline, after imports            {mb(base_rss)} MB")
            print(f"  Switchboard started, no agents     {mb(before_rss)} MB")
            print(f"  {AGENTS} agents idle                     {mb(after_rss)} MB")
            print(f"  ratio fleet/baseline               {after_rss / base_rss:7.2f}x")
            print(f"  supervisor cost per agent          "
                  f"{mb((after_rss - before_rss) / AGENTS)} MB")

            print("\n== per agent ==")
            print(stats_line("bwrap + init (python -S -E)" if sandboxed
                             else "launcher (python -S -E)", launcher_rss, launcher_uss))
            print(stats_line("fake claude CLI", cli_rss, cli_uss))
            bare, bare_uss = bare_python_rss()
            print(f"  reference: bare python3 -S -E      RSS {mb(bare)} MB"
                  + (f"   | USS {mb(bare_uss)} MB" if bare_uss is not None else ""))
            print(f"  ratio launcher/bare python (RSS median) "
                  f"{statistics.median(launcher_rss) / bare:5.2f}x")
            total = after_rss + sum(launcher_rss) + sum(cli_rss)
            print(f"  whole fleet (supervisor + launchers + CLIs) RSS {mb(total)} MB "
                  "(RSS double-counts shared pages)")
            result(f"supervisor RSS per agent ({AGENTS} idle)",
                   (after_rss - before_rss) / AGENTS / MB, "MB")
            result("bwrap + init RSS per agent (median), vs bare python -S -E",
                   statistics.median(launcher_rss) / MB, "MB", baseline=bare / MB,
                   ratio=statistics.median(launcher_rss) / bare)
            closing = time.monotonic()
        # The Switchboard has shut down: nothing of any agent may be left.
        shutdown_s = time.monotonic() - closing
        left = [(name, pid) for name, lp, cp in pids for pid in (lp, cp) if pid and alive(pid)]
        tagged = [p for p in tagged_pids(f"{settings.instance_id}/") if alive(p)]
        zombies = [c.pid for c in me.children() if c.status() == psutil.STATUS_ZOMBIE]
        print("\n== shutdown ==")
        print(f"  shut down in {shutdown_s:.1f}s; recorded agent processes still alive: "
              f"{len(left)}; tagged processes: {len(tagged)}; unreaped children: {len(zombies)}")
        if left or tagged:
            print(f"  LEFT BEHIND: {left} {tagged}")
            return 1
        print("  ok: no agent process remains")
        result(f"shutdown with {AGENTS} idle agents", shutdown_s * 1000, "ms")
        print("\n== reference ==")
        await real_cli_reference(home / "real")
    print(f"\ndone in {time.monotonic() - started:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
