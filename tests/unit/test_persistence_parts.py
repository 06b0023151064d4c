"""The pieces of persistence that need no bucket: leases on a directory remote (fencing
tokens, expiry, a second holder refused), the policy's view of the shared context, backoff."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from supervisor.guard.protected import ProtectedPaths
from supervisor.persistence.leases import Leases
from supervisor.persistence.remote import DirRemote
from supervisor.persistence.snapshots import MAX_BACKOFF_S, _backoff_s


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _leases(root: Path, holder: str, clock: Clock) -> Leases:
    return Leases(DirRemote(root), holder, ttl_s=60, settle_s=0, now=clock)


def test_a_lease_is_one_holders_until_it_expires_and_tokens_only_grow(tmp_path: Path) -> None:
    clock = Clock()
    a, b = _leases(tmp_path, "a", clock), _leases(tmp_path, "b", clock)
    taken, refused = a.acquire(["x", "y"])
    assert [t.token for t in taken] == [1, 1] and not refused
    taken, refused = b.acquire(["x"])
    assert not taken and refused[0].holder == "a" and "driven by another supervisor (a)" in \
        str(refused[0])
    clock.t += 30
    assert a.renew() == []  # renewed: now good until t+90
    clock.t += 50
    assert b.acquire(["x"])[0] == []  # still a's
    clock.t += 41  # a stopped renewing (it died): expired
    taken, _ = b.acquire(["x"])
    assert taken[0].token == 2 and taken[0].holder == "b"
    assert a.renew() == ["x"] and "x" not in a.held  # a finds it lost, and stops driving it
    b.release()
    taken, _ = a.acquire(["x"])  # given back: taken at once, with a higher token still
    assert taken[0].token == 3


def test_two_takes_of_one_lease_by_one_supervisor_at_once_both_get_it(tmp_path: Path) -> None:
    """Regression: the take at start and an agent's first start (or a renewal) ran at once;
    each read back the other's nonce and the agent was refused as "driven by another
    supervisor", naming this one. The settle delays are made to overlap if they can."""
    overlap = threading.Barrier(2)

    def settle(_s: float) -> None:
        try:
            overlap.wait(timeout=0.2)  # both takes in their settle delay together, if allowed
        except threading.BrokenBarrierError:
            pass

    a = Leases(DirRemote(tmp_path), "a", ttl_s=60, settle_s=0.01, now=Clock(), sleep=settle)
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda _: a.acquire(["x"]), range(2)))
    assert [refused for _, refused in results] == [[], []]
    assert [[t.token for t in taken] for taken, _ in results] == [[1], [1]]


def test_the_shared_context_is_the_agents_but_a_link_in_it_to_ours_is_not(
        tmp_path: Path) -> None:
    home = tmp_path / "sb"
    (home / "context").mkdir(parents=True)
    (home / "switchboard.db").write_text("")
    os.symlink(home / "switchboard.db", home / "context" / "db.md")
    paths = ProtectedPaths(home=home)
    assert not paths.owns((str(home / "context" / "notes.md"),), None)
    assert paths.owns((str(home / "switchboard.db"),), None)
    link = str(home / "context" / "db.md")
    assert paths.owns((link, os.path.realpath(link)), None)
    assert paths.owns((str(home / "contexts" / "x"),), None)  # a sibling is still ours


def test_backoff_grows_to_the_interval() -> None:
    delays = [_backoff_s(n, 60.0) for n in range(1, 9)]
    assert delays[:5] == [2.0, 4.0, 8.0, 16.0, 32.0] and delays[-1] == 60.0
    assert _backoff_s(20, 10_000.0) == MAX_BACKOFF_S
