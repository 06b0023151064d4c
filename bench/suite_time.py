"""The test suite's wall time against the suite of the day issue 10 was filed (commit 31daf0d).

Run from the repository root (needs the project's git history, a test install, bubblewrap):
    .venv/bin/python bench/suite_time.py [--full]

Issue 10's acceptance: "the suite is faster than today's on the same machine (today: 836 tests
in about 135 s)". Both are measured here, one after the other, on this machine:
* baseline: commit 31daf0d checked out into a temporary worktree with its own virtualenv, and its
  own `make test` (836 tests, one process).
* figure: the same twenty test modules as they are now (every test since added to them included;
  tests moved out of them to new modules not), run with the current `make test` command.
Goal: faster than the baseline. `--full` also times the whole current suite (`make test`), a
figure without a goal: it holds the capabilities added after issue 10 (the twenty-agent
containment fleets, the ten-thousand-message crash test, ...), which the baseline did not have.

The machine's speed varies several-fold through a day here (other work on the host): only the
ratio of two runs made minutes apart means anything, not a figure on its own.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import result, smoke  # noqa: E402

# Opt-in: it runs the whole suite twice (about ten minutes); `make bench ONLY=suite_time`.
SUITE = {"opt_in": True, "smoke": False, "timeout_s": 2400}

ROOT = Path(__file__).resolve().parents[1]
BASELINE_COMMIT = "31daf0d"
PASSED = re.compile(r"(\d+) passed")


def run_tests(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, int]:
    """Wall seconds and passed tests of one pytest run; a failing run is an error, not a time."""
    t0 = time.monotonic()
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    took = time.monotonic() - t0
    tail = out.stdout[-3000:] + out.stderr[-2000:]
    print(tail)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} in {cwd} failed (exit {out.returncode})")
    found = PASSED.findall(out.stdout)
    return took, int(found[-1]) if found else 0


def test_modules(tree: Path) -> list[str]:
    return sorted(str(p.relative_to(tree)) for p in (tree / "tests").rglob("test_*.py"))


def main() -> None:
    if smoke():
        raise SystemExit("suite_time runs whole test suites: it has no smoke size")
    full = "--full" in sys.argv[1:]
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["PYTHONDONTWRITEBYTECODE"] = ""
    with tempfile.TemporaryDirectory(prefix="sb-suite-") as tmp:
        old = Path(tmp) / "baseline"
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(old), BASELINE_COMMIT],
                       cwd=ROOT, check=True)
        try:
            print(f"installing {BASELINE_COMMIT}'s test environment", flush=True)
            subprocess.run(["make", "install"], cwd=old, env=env, check=True,
                           capture_output=True)
            modules = test_modules(old)
            base_s, base_n = run_tests(["make", "test"], old, env)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=ROOT)
    missing = [m for m in modules if not (ROOT / m).is_file()]
    if missing:
        raise SystemExit(f"modules of {BASELINE_COMMIT} gone from the tree: {missing}")
    now_s, now_n = run_tests(["make", "test", f"TEST_ARGS={' '.join(modules)}"], ROOT, env)
    result(f"wall time of {BASELINE_COMMIT}'s {len(modules)} test modules as they are now "
           f"({now_n} tests; baseline: its own suite, {base_n} tests)", now_s, "s",
           goal="< baseline", baseline=base_s, ratio=now_s / base_s, passed=now_s < base_s)
    if full:
        all_s, all_n = run_tests(["make", "test"], ROOT, env)
        result(f"wall time of the whole suite ({all_n} tests; baseline: {BASELINE_COMMIT}'s, "
               f"{base_n} tests)", all_s, "s", baseline=base_s, ratio=all_s / base_s,
               note="holds capabilities the baseline did not have")


if __name__ == "__main__":
    main()
