"""Managed project memory under load (issue 28, acceptance 3): five agents checkpointing at once,
a thousand managed writes; the curated region stays byte-identical, no reader ever sees a torn
file, the slice given to agents never exceeds its budget, and every trimmed line is found by
/memory search (the archive)."""

from __future__ import annotations

import re
import tempfile
import threading
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from supervisor.repos.memory import SENTINEL, Memory, ProjectMemory, join, slice_of, split

AGENTS = 5
WRITES = 1000
LINE = re.compile(r"^- \d{4}-\d\d-\d\d \d\d:\d\d agent\d: .*$")

curated_bytes = st.one_of(
    st.binary(max_size=400),
    st.text(max_size=300).map(str.encode),
    # the operator quoting the sentinel, or a file that ends without a newline
    st.builds(lambda a, b: a + b"\n" + SENTINEL + b"\n" + b, st.binary(max_size=50),
              st.binary(max_size=50)),
)
entry_text = st.text(min_size=1, max_size=120).filter(lambda t: t.strip())


@settings(max_examples=200, deadline=None)
@given(curated_bytes, st.lists(st.text(max_size=80).map(lambda t: " ".join(t.split())),
                               max_size=20))
def test_the_curated_region_round_trips_byte_for_byte(curated: bytes, lines: list[str]) -> None:
    lines = [f"- x {line}" for line in lines]
    got_curated, managed = split(join(curated, lines))
    assert got_curated == curated
    assert managed.decode().splitlines() == lines


@settings(max_examples=300, deadline=None)
@given(curated_bytes, st.lists(st.text(max_size=200), max_size=30),
       st.integers(min_value=1, max_value=2000))
def test_the_slice_never_exceeds_its_budget(curated: bytes, managed: list[str],
                                           budget: int) -> None:
    text = slice_of(Memory("repo:tool", curated, tuple(managed)), budget)
    assert len(text.encode()) <= budget


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(curated=curated_bytes, texts=st.lists(entry_text, min_size=5, max_size=5),
       managed_bytes=st.integers(min_value=300, max_value=4000),
       slice_bytes=st.integers(min_value=64, max_value=2048))
def test_five_agents_a_thousand_writes(curated: bytes, texts: list[str], managed_bytes: int,
                                       slice_bytes: int) -> None:
    with tempfile.TemporaryDirectory(prefix="mem") as tmp:
        memory = ProjectMemory(Path(tmp), managed_bytes, slice_bytes)
        project = "repo:tool"
        memory.edit(project, curated)
        path = Path(tmp) / next(p.name for p in Path(tmp).iterdir()) / "MEMORY.md"
        stop = threading.Event()
        problems: list[str] = []
        reads = [0]

        def reader() -> None:
            while not stop.is_set():
                data = path.read_bytes()
                got, managed = split(data)
                reads[0] += 1
                if got != curated:
                    problems.append(f"curated changed: {got[:60]!r}")
                if managed and not managed.endswith(b"\n"):
                    problems.append(f"torn: {managed[-60:]!r}")
                for line in managed.decode().splitlines():
                    if not LINE.match(line):
                        problems.append(f"bad line {line[:80]!r}")
                if len(memory.slice(project).encode()) > slice_bytes:
                    problems.append("slice over budget")

        trimmed: list[list[str]] = [[] for _ in range(AGENTS)]

        def agent(n: int) -> None:
            for i in range(WRITES // AGENTS):
                trimmed[n] += memory.checkpoint(project, f"agent{n}", f"{texts[n]} [{n}:{i}]")

        watch = threading.Thread(target=reader)
        watch.start()
        workers = [threading.Thread(target=agent, args=(n,)) for n in range(AGENTS)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        stop.set()
        watch.join()

        assert problems == []
        assert reads[0] > 0
        final = memory.read(project)
        assert final.curated == curated
        assert sum(len(m.encode()) + 1 for m in final.managed) <= managed_bytes
        gone = [line for t in trimmed for line in t]
        # Nothing lost: every write is either still managed or archived, exactly once.
        assert len(gone) + len(final.managed) == WRITES
        assert gone, "the budget is small enough that lines were trimmed"
        for line in (gone[0], gone[-1]):
            marker = line.rsplit(" ", 1)[-1]  # "[n:i]": unique to one write
            assert line in memory.search(project, marker)
        assert len(memory.slice(project).encode()) <= slice_bytes
