"""The bench suite: runs every bench, prints one table, writes bench/RESULTS.md.

Run from the repository root:  make bench  (or .venv/bin/python bench/_suite.py [--smoke] [NAME...])

A bench is any bench/*.py whose name does not start with "_": the suite finds them, so a new bench
needs no registration. Each prints its figures as `BENCH-RESULT {json}` lines (bench/_common.py
`result`); everything else it prints goes to bench/logs/<name>.log. A bench may declare, as a
literal at module level, `SUITE = {"smoke": False}` (not part of the smoke run), `"opt_in": True`
(runs only when named, e.g. the Docker image bench), `"timeout_s": 400` or `"smoke_timeout_s"`
(a check that runs at full size in the smoke run too).

Exit status: 1 when a figure with a goal missed it, when a bench failed or printed no figure, or
when a bench ran out of time. `--smoke` (make bench-smoke, in .ci/run) sets BENCH_SMOKE=1: the
benches run at small sizes and only their running and printing a row is checked, not their timing;
it writes no RESULTS.md. A run of a few benches writes RESULTS.md saying which.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
PREFIX = "BENCH-RESULT "
DEFAULT_TIMEOUT_S = 300.0
SMOKE_TIMEOUT_S = 120.0
COLUMNS = ("bench", "figure", "goal", "measured", "baseline", "ratio", "pass")


def discover(names: list[str]) -> list[tuple[str, Path, dict[str, Any]]]:
    found = []
    for path in sorted(BENCH.glob("*.py")):
        if path.name.startswith("_"):
            continue
        meta = suite_meta(path)
        name = path.stem
        if names and name not in names:
            continue
        if not names and meta.get("opt_in"):
            continue
        found.append((name, path, meta))
    missing = set(names) - {n for n, _, _ in found}
    if missing:
        raise SystemExit(f"no such bench: {', '.join(sorted(missing))} (see bench/*.py)")
    return found


def suite_meta(path: Path) -> dict[str, Any]:
    """The bench's `SUITE = {...}` literal, if it has one (read, not imported)."""
    for node in ast.parse(path.read_text()).body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "SUITE"):
            value = ast.literal_eval(node.value)
            return value if isinstance(value, dict) else {}
    return {}


def run_one(name: str, path: Path, timeout_s: float, smoke: bool) -> tuple[list[dict], str, float]:
    """(rows, problem or "", seconds). Output other than result rows goes to bench/logs/."""
    logs = BENCH / "logs"
    logs.mkdir(exist_ok=True)
    env = {**os.environ, "BENCH_SMOKE": "1" if smoke else "0", "PYTHONUNBUFFERED": "1"}
    started = time.monotonic()
    rows: list[dict] = []
    problem = ""
    with open(logs / f"{name}.log", "w") as log:
        proc = subprocess.Popen([sys.executable, str(path)], cwd=ROOT, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=log)
        assert proc.stdout is not None
        deadline = started + timeout_s
        try:
            for line in _lines(proc, deadline):
                log.write(line)
                if line.startswith(PREFIX):
                    row = json.loads(line[len(PREFIX):])
                    rows.append(row)
                    print(f"   {' | '.join(_cells(name, row, smoke))}", flush=True)
        except TimeoutError:
            proc.kill()
            problem = f"ran out of time ({timeout_s:.0f} s)"
        rc = proc.wait()
    if not problem and rc != 0:
        problem = f"exited {rc} (see bench/logs/{name}.log)"
    if not problem and not rows:
        problem = "printed no BENCH-RESULT row"
    return rows, problem, time.monotonic() - started


def _lines(proc: subprocess.Popen, deadline: float):
    import selectors

    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        if not sel.select(timeout=min(left, 1.0)):
            continue
        line = proc.stdout.readline()
        if not line:
            return
        yield line


def _num(value: Any, unit: str = "") -> str:
    if value is None:
        return "-"
    text = f"{value:,.3g}" if abs(value) < 100 else f"{value:,.0f}"
    return f"{text} {unit}".strip()


def _verdict(row: dict, smoke: bool) -> str:
    if smoke:
        return "ran"
    return {True: "PASS", False: "FAIL", None: "-"}[row.get("pass")]


def _cells(name: str, row: dict, smoke: bool = False) -> list[str]:
    ratio = row.get("ratio")
    return [name, row["figure"], row.get("goal") or "-", _num(row["measured"], row["unit"]),
            _num(row.get("baseline"), row["unit"]),
            "-" if ratio is None else f"{ratio:.2f}x", _verdict(row, smoke)]


def table(cells: list[list[str]]) -> str:
    widths = [max(len(c[i]) for c in [list(COLUMNS), *cells]) for i in range(len(COLUMNS))]
    lines = [" | ".join(h.ljust(w) for h, w in zip(COLUMNS, widths, strict=True)),
             "-+-".join("-" * w for w in widths)]
    lines += [" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(lines)


def machine() -> str:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"{os.cpu_count()} cores, {model or platform.processor() or 'unknown CPU'}, "
            f"Linux {platform.release()}, Python {platform.python_version()}; "
            f"load average at the end {load}")


def write_results(cells: list[list[str]], problems: list[str], took_s: float,
                  partial: list[str] | None) -> Path:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    what = (f"`make bench ONLY=\"{' '.join(partial)}\"` (these benches only)" if partial
            else "`make bench`")
    md = ["# Bench results", "", f"Written by {what} on {now}, in {took_s:.0f} s.", "",
          f"Machine: {machine()}.", "",
          "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    md += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in cells]
    if problems:
        md += ["", "Problems:", ""] + [f"- {p}" for p in problems]
    md += ["", "Each figure's command and meaning: docs/benchmarks.md.", ""]
    path = BENCH / "RESULTS.md"
    path.write_text("\n".join(md))
    return path


def from_logs(benches: list[tuple[str, Path, dict[str, Any]]]) -> int:
    cells: list[list[str]] = []
    for name, _, _ in benches:
        log = BENCH / "logs" / f"{name}.log"
        if log.exists():
            cells += [_cells(name, json.loads(line[len(PREFIX):]))
                      for line in log.read_text().splitlines() if line.startswith(PREFIX)]
    print(table(cells))
    path = write_results(cells, [], 0.0, None)
    text = path.read_text().replace("Written by `make bench`", "Written by "
                                    "`bench/_suite.py --from-logs`").replace(
        ", in 0 s.", " (from bench/logs/: each bench's latest run).")
    path.write_text(text)
    print(f"written: {path.relative_to(ROOT)}")
    return 1 if any(c[-1] == "FAIL" for c in cells) else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true", help="small sizes, no timing verdicts")
    parser.add_argument("names", nargs="*", help="benches to run (default: all)")
    parser.add_argument("--from-logs", action="store_true",
                        help="run nothing: the table and RESULTS.md from bench/logs/ as left by "
                             "earlier runs (each bench's latest)")
    args = parser.parse_args()
    benches = discover(args.names)
    if args.from_logs:
        return from_logs(benches)
    started = time.monotonic()
    cells: list[list[str]] = []
    problems: list[str] = []
    failed = False
    for name, path, meta in benches:
        if args.smoke and meta.get("smoke") is False:
            print(f"== {name}: not in the smoke run", flush=True)
            continue
        timeout = float(meta.get("smoke_timeout_s", SMOKE_TIMEOUT_S)) if args.smoke else \
            float(meta.get("timeout_s", DEFAULT_TIMEOUT_S))
        print(f"== {name}", flush=True)
        rows, problem, took = run_one(name, path, timeout, args.smoke)
        print(f"   {name} took {took:.1f} s", flush=True)
        cells += [_cells(name, row, args.smoke) for row in rows]
        if problem:
            problems.append(f"{name}: {problem}")
            cells.append([name, "(bench failed)", "-", "-", "-", "-", "FAIL"])
            failed = True
        if not args.smoke and any(row.get("pass") is False for row in rows):
            failed = True
    took_s = time.monotonic() - started
    print()
    print(table(cells))
    for p in problems:
        print(f"problem: {p}")
    print(f"\n{len(benches)} bench(es) in {took_s:.0f} s on {machine()}")
    if not args.smoke:
        partial = [n for n, _, _ in benches] if args.names else None
        path = write_results(cells, problems, took_s, partial)
        print(f"written: {path.relative_to(ROOT)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
