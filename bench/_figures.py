"""A bench's own table (figure | goal | measured | baseline | ratio | pass), for the benches that
gather their figures first; `table` also prints each figure as the suite's `BENCH-RESULT` row
(bench/_common.py `result`), so bench/_suite.py collects them like every other bench's."""

from __future__ import annotations

from dataclasses import dataclass

from bench._common import result


@dataclass(frozen=True, slots=True)
class Figure:
    name: str
    goal: str  # in words, e.g. ">= 0.30x" or "< 20 ms"
    measured: float
    baseline: float | None
    unit: str
    ok: bool | None  # None: for information, no goal of its own

    @property
    def ratio(self) -> float | None:
        if self.baseline is None or self.baseline == 0:
            return None
        return self.measured / self.baseline


def table(figures: list[Figure]) -> str:
    """The table's text; each figure is printed as a BENCH-RESULT row on the way."""
    for f in figures:
        result(f.name, f.measured, f.unit, goal="" if f.ok is None else f.goal,
               baseline=f.baseline, ratio=f.ratio, passed=f.ok)
    head = ("figure", "goal", "measured", "baseline", "ratio", "pass")
    rows = [head] + [(
        f.name, f.goal, f"{f.measured:,.{_digits(f.measured)}f} {f.unit}",
        "-" if f.baseline is None else f"{f.baseline:,.{_digits(f.baseline)}f} {f.unit}",
        "-" if f.ratio is None else f"{f.ratio:.2f}x",
        "-" if f.ok is None else "yes" if f.ok else "NO")
        for f in figures]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = [" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def _digits(value: float) -> int:
    return 0 if abs(value) >= 1000 else 1 if abs(value) >= 10 else 2
