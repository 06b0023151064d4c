"""Conformance of AuditStore: who did what, newest first, truncated and redacted."""

from __future__ import annotations

import pytest

from store import Store
from store.audit import record_sync
from store.protocols import AuditStore
from tests.store.conftest import T0, FakeNow


@pytest.fixture
def audit(store: Store) -> AuditStore:
    return store.audit


async def _record(audit: AuditStore, action: str, *, args: str = "", result: str = "",
                  ok: bool = True) -> int:
    return await audit.record(platform="telegram", user_id="42", user_name="ann",
                              action=action, args=args, ok=ok, result=result)


async def test_record_returns_increasing_ids_and_stamps_the_time(audit: AuditStore,
                                                                 clock: FakeNow) -> None:
    first = await _record(audit, "spawn", args="alpha", result="spawned")
    clock.advance(2)
    second = await _record(audit, "kill", ok=False, result="no such agent")
    assert second > first > 0
    newer, older = await audit.recent()
    assert (newer.id, newer.at, newer.action, newer.ok, newer.result) == (
        second, T0 + 2, "kill", 0, "no such agent")
    assert (older.id, older.at, older.action, older.args, older.ok) == (
        first, T0, "spawn", "alpha", 1)


async def test_audit_truncates_and_lists_newest_first(audit: AuditStore) -> None:
    for i in range(3):
        await audit.record(platform="telegram", user_id="42", user_name="ann",
                           action=f"a{i}", args="x" * 5000, ok=i % 2 == 0,
                           result="y" * 5000)
    rows = await audit.recent(2)
    assert [r.action for r in rows] == ["a2", "a1"]
    assert (rows[0].ok, rows[1].ok) == (1, 0)
    assert len(rows[0].args) == 2000 and len(rows[0].result) == 2000
    assert (rows[0].platform, rows[0].user_id, rows[0].user_name) == ("telegram", "42", "ann")


async def test_secrets_are_redacted_before_they_are_written(audit: AuditStore) -> None:
    await _record(audit, "config", args="token=hunter2", result="set hunter2 and hunter2")
    [row] = await audit.recent()
    assert (row.args, row.result) == ("token=[redacted]", "set [redacted] and [redacted]")


async def test_redaction_comes_before_the_cut(audit: AuditStore) -> None:
    """A secret straddling the 2000th character is redacted whole, never cut in half."""
    await _record(audit, "config", args="x" * 1995 + "hunter2", result="")
    [row] = await audit.recent()
    assert "hunt" not in row.args and row.args == ("x" * 1995 + "[redacted]")[:2000]


async def test_recent_defaults_to_fifty_and_is_empty_at_first(audit: AuditStore) -> None:
    assert await audit.recent() == []
    for i in range(55):
        await _record(audit, f"a{i}")
    rows = await audit.recent()
    assert len(rows) == 50
    assert (rows[0].action, rows[-1].action) == ("a54", "a5")
    assert [r.action for r in await audit.recent(1)] == ["a54"]
    assert len(await audit.recent(500)) == 55


async def test_record_sync_writes_a_row_the_store_reads(store: Store, clock: FakeNow) -> None:
    """`switchboard kill` writes with a private connection, supervisor or not, to the SQLite
    file or the PostgreSQL database."""
    record_sync(store.db.writer_target, platform="cli", user_id="me@cli", action="killswitch",
                args="on hunter2", ok=True, result="halted",
                redact=lambda t: t.replace("hunter2", "***"), now=lambda: T0 + 9)
    [row] = await store.audit.recent()
    assert (row.platform, row.user_id, row.user_name, row.action, row.args, row.ok,
            row.result, row.at) == ("cli", "me@cli", "me@cli", "killswitch", "on ***", 1,
                                    "halted", T0 + 9)


async def test_find_narrows_to_an_operator_or_an_agent_named_in_the_arguments(
        audit: AuditStore, clock: FakeNow) -> None:
    await audit.record(platform="telegram", user_id="42", user_name="ann", action="spawn",
                       args="dev fix the tests", ok=True, result="spawned")
    clock.advance(10)
    await audit.record(platform="slack", user_id="U7", user_name="bob", action="kill",
                       args="dev", ok=True, result="killed")
    await audit.record(platform="slack", user_id="U7", user_name="bob", action="ask",
                       args="devops hello", ok=True, result="sent")
    await audit.record(platform="slack", user_id="U7", user_name="bob", action="ask",
                       args="a_b 100%", ok=True, result="sent")
    assert [r.action for r in await audit.find(who="dev")] == ["kill", "spawn"]
    assert [r.args for r in await audit.find(who="bob")] == ["a_b 100%", "devops hello", "dev"]
    assert [r.user_name for r in await audit.find(who="U7", limit=1)] == ["bob"]
    assert [r.action for r in await audit.find(since=T0 + 5)] == ["ask", "ask", "kill"]
    assert await audit.find(who="a%b") == [] and await audit.find(who="a_") == []
    assert [r.args for r in await audit.find(who="a_b")] == ["a_b 100%"]


async def test_search_needs_every_word_in_any_case_literally(audit: AuditStore) -> None:
    await _record(audit, "spawn", args="dev Fix the flaky TEST", result="spawned dev")
    await _record(audit, "ask", args="dev 50% done?", result="sent")
    await _record(audit, "deny", args="ab3k use_staging", result="denied")
    assert [r.action for r in await audit.search(["flaky", "test"])] == ["spawn"]
    assert [r.action for r in await audit.search(["dev"])] == ["ask", "spawn"]
    assert [r.action for r in await audit.search(["50%"])] == ["ask"]
    assert await audit.search(["5_%"]) == [] and await audit.search(["flaky", "nope"]) == []
    assert [r.action for r in await audit.search(["use_staging"])] == ["deny"]
    assert [r.action for r in await audit.search(["ann"])] == ["deny", "ask", "spawn"]
