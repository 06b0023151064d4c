"""Conformance of EscalationStore: the outbox, its timers, deliveries per front end and session
allowances. A closing, a reminder and a timeout are claims: the first wins, once."""

from __future__ import annotations

from typing import Any

import pytest

from store import Store
from store.errors import Conflict
from store.escalations import EscalationRow, Notice
from store.protocols import EscalationStore
from tests.store.conftest import T0, FakeNow, MakeAgent


@pytest.fixture
async def escalations(store: Store, make_agent: MakeAgent) -> EscalationStore:
    await make_agent("a1", "alpha")
    await make_agent("b1", "bravo")
    return store.escalations


async def _open(esc: EscalationStore, esc_id: str, agent_id: str | None = "a1",
                **kw: Any) -> EscalationRow:
    return await esc.create(id=esc_id, agent_id=agent_id, kind="permission", title=esc_id,
                            body="b", **kw)


async def test_create_returns_the_row_with_its_defaults(escalations: EscalationStore) -> None:
    row = await _open(escalations, "e1")
    assert (row.id, row.agent_id, row.kind, row.title, row.body, row.status) == (
        "e1", "a1", "permission", "e1", "b", "open")
    assert (row.tool_name, row.tool_input, row.options, row.free_text, row.ref_id) == (
        None, None, (), False, None)
    assert (row.answer, row.answered_by, row.answered_via, row.answered_at) == (
        None, None, None, None)
    assert (row.detail, row.detail_name, row.remind_at, row.expires_at, row.reminded_at,
            row.timed_out_at, row.on_timeout, row.survives_restart) == (
        None, None, None, None, None, None, "deny", False)
    assert row.created_at == T0 and row.seq > 0
    assert await escalations.get("e1") == row


async def test_create_keeps_every_field(escalations: EscalationStore) -> None:
    command = "echo " + "x" * 100_000
    row = await escalations.create(
        id="e1", agent_id=None, kind="question", title="t", body="Why asked: x",
        tool_name="Bash", tool_input={"command": "ls", "n": 2}, options=("Yes", "No"),
        free_text=True, ref_id="r0", detail=command, detail_name="command.sh",
        remind_at=T0 + 60, expires_at=T0 + 120, on_timeout="pause", survives_restart=True,
        now=T0 - 5)
    assert (row.agent_id, row.kind, row.tool_name, row.tool_input, row.options) == (
        None, "question", "Bash", {"command": "ls", "n": 2}, ("Yes", "No"))
    assert (row.free_text, row.ref_id, row.detail, row.detail_name) == (
        True, "r0", command, "command.sh")
    assert (row.remind_at, row.expires_at, row.on_timeout, row.survives_restart) == (
        T0 + 60, T0 + 120, "pause", True)
    assert row.created_at == T0 - 5  # the caller's time wins over the store's clock


async def test_ids_are_unique(escalations: EscalationStore) -> None:
    assert not await escalations.id_taken("e1")
    await _open(escalations, "e1")
    assert await escalations.id_taken("e1")
    with pytest.raises(Conflict):
        await _open(escalations, "e1")
    assert await escalations.get("nope") is None


async def test_an_escalation_names_a_known_agent_or_none(escalations: EscalationStore) -> None:
    with pytest.raises(Conflict):
        await _open(escalations, "e1", agent_id="ghost")
    assert await escalations.get("e1") is None


async def test_the_first_close_wins_and_writes_its_notice(escalations: EscalationStore,
                                                          clock: FakeNow) -> None:
    await _open(escalations, "e1")
    at = clock.advance(10)
    assert await escalations.close("e1", status="allowed", answer={"choice": "Yes"},
                                   by="ann", via="telegram",
                                   notice=Notice(id="n1", agent_id="a1", title="allowed"))
    row = await escalations.get("e1")
    assert row is not None
    assert (row.status, row.answer, row.answered_by, row.answered_via, row.answered_at,
            row.timed_out_at) == ("allowed", {"choice": "Yes"}, "ann", "telegram", at, None)
    notice = await escalations.get("n1")
    assert notice is not None and (notice.kind, notice.status, notice.created_at) == (
        "notice", "info", at)
    assert not await escalations.close("e1", status="denied", answer={}, by="bob",
                                       via="slack", notice=Notice(id="n2", agent_id="a1",
                                                                  title="denied"))
    row = await escalations.get("e1")
    assert row is not None and row.answered_by == "ann"
    assert await escalations.get("n2") is None
    assert not await escalations.close("ghost", status="denied", answer={}, by="b", via="v")


async def test_a_close_by_timeout_stamps_it(escalations: EscalationStore) -> None:
    await _open(escalations, "e1", expires_at=T0 + 5)
    assert await escalations.close("e1", status="denied", answer={"timeout": True},
                                   by="switchboard", via="timer", now=T0 + 6, timed_out=True)
    row = await escalations.get("e1")
    assert row is not None and (row.answered_at, row.timed_out_at) == (T0 + 6, T0 + 6)
    assert row.timeout_due_at is None and row.reminder_due_at is None


async def test_due_rows_most_overdue_first_and_limited(escalations: EscalationStore) -> None:
    await _open(escalations, "later", remind_at=T0 + 30)
    await _open(escalations, "soon", expires_at=T0 + 10)
    await _open(escalations, "both", remind_at=T0 + 20, expires_at=T0 + 25)
    await _open(escalations, "never")
    await _open(escalations, "closed", expires_at=T0 + 1)
    await escalations.close("closed", status="denied", answer={}, by="x", via="y")
    assert await escalations.due(T0 + 5) == []
    assert [r.id for r in await escalations.due(T0 + 21)] == ["soon", "both"]
    assert [r.id for r in await escalations.due(T0 + 100)] == ["soon", "both", "later"]
    assert [r.id for r in await escalations.due(T0 + 100, limit=1)] == ["soon"]
    assert await escalations.next_due() == T0 + 10


async def test_next_due_is_none_without_timers(escalations: EscalationStore) -> None:
    assert await escalations.next_due() is None
    await _open(escalations, "e1")
    assert await escalations.next_due() is None


async def test_a_reminder_is_claimed_once_with_its_notice(escalations: EscalationStore) -> None:
    await _open(escalations, "e1", remind_at=T0 + 10, expires_at=T0 + 100)
    notice = Notice(id="rem1", agent_id="a1", title="still waiting", ref_id="e1")
    assert not await escalations.mark_reminded("e1", now=T0 + 9, notice=notice)  # not due
    assert await escalations.get("rem1") is None
    assert await escalations.mark_reminded("e1", now=T0 + 10, notice=notice)
    assert not await escalations.mark_reminded(
        "e1", now=T0 + 11, notice=Notice(id="rem2", agent_id="a1", title="again"))
    row = await escalations.get("e1")
    assert row is not None and row.reminded_at == T0 + 10 and row.reminder_due_at is None
    rem = await escalations.get("rem1")
    assert rem is not None and (rem.ref_id, rem.created_at) == ("e1", T0 + 10)
    assert await escalations.get("rem2") is None
    assert await escalations.next_due() == T0 + 100  # only the timeout is left


async def test_a_pause_timeout_is_claimed_once_and_leaves_the_row_open(
        escalations: EscalationStore) -> None:
    await _open(escalations, "e1", remind_at=T0 + 50, expires_at=T0 + 10, on_timeout="pause")
    assert not await escalations.mark_timed_out("e1", now=T0 + 9)
    assert await escalations.mark_timed_out("e1", now=T0 + 10)
    assert not await escalations.mark_timed_out("e1", now=T0 + 11)
    row = await escalations.get("e1")
    assert row is not None and (row.status, row.timed_out_at) == ("open", T0 + 10)
    assert await escalations.due(T0 + 1000) == []  # neither the timeout nor the moot reminder
    assert await escalations.next_due() is None
    assert not await escalations.mark_reminded(
        "e1", now=T0 + 60, notice=Notice(id="n", agent_id="a1", title="moot"))


async def test_open_rows_and_their_summary(escalations: EscalationStore,
                                           clock: FakeNow) -> None:
    assert await escalations.open_summary() == (0, None)
    await _open(escalations, "e1")
    clock.advance(5)
    await _open(escalations, "e2", agent_id="b1")
    await _open(escalations, "e3")
    await escalations.close("e1", status="allowed", answer={}, by="x", via="y")
    assert [r.id for r in await escalations.open_rows()] == ["e2", "e3"]
    assert [r.id for r in await escalations.open_rows("a1")] == ["e3"]
    assert await escalations.open_rows("nobody") == []
    assert await escalations.open_summary() == (2, T0 + 5)


async def test_after_reads_the_rows_written_since_a_seq(escalations: EscalationStore) -> None:
    assert await escalations.after(None) == []
    first = await _open(escalations, "e0")
    assert await escalations.after(None) == [first]  # where to start from: the last row
    for i in (1, 2, 3):
        await _open(escalations, f"e{i}")
    assert [r.id for r in await escalations.after(first.seq)] == ["e1", "e2", "e3"]
    assert [r.id for r in await escalations.after(first.seq, limit=2)] == ["e1", "e2"]
    [last] = await escalations.after(None)
    assert last.id == "e3" and await escalations.after(last.seq) == []


async def test_undelivered_pages_and_ack_moves_the_cursor(escalations: EscalationStore) -> None:
    for i in range(5):
        await _open(escalations, f"e{i}")
    rows = await escalations.undelivered("tg")
    seqs = [r.seq for r in rows]
    assert [r.id for r in rows] == [f"e{i}" for i in range(5)]
    assert [r.id for r in await escalations.undelivered("tg", limit=2)] == ["e0", "e1"]
    assert [r.id for r in await escalations.undelivered("tg", limit=2, after_seq=seqs[1])] == [
        "e2", "e3"]
    assert await escalations.cursor("tg") == 0
    await escalations.ack("e1", "tg")  # a gap before it: the cursor stays
    assert await escalations.cursor("tg") == 0
    await escalations.ack("e0", "tg")
    assert await escalations.cursor("tg") == seqs[1]
    await escalations.ack("e0", "tg")  # twice is harmless
    assert [r.id for r in await escalations.undelivered("tg")] == ["e2", "e3", "e4"]
    assert len(await escalations.undelivered("slack")) == 5  # per front end
    for i in (2, 3, 4):
        await escalations.ack(f"e{i}", "tg")
    assert await escalations.cursor("tg") == seqs[-1]
    assert await escalations.undelivered("tg") == []


async def test_a_new_front_end_starts_from_now_but_sees_open_rows(
        escalations: EscalationStore, clock: FakeNow) -> None:
    await _open(escalations, "old-closed")
    await escalations.close("old-closed", status="allowed", answer={}, by="x", via="y")
    await _open(escalations, "old-open")
    await _open(escalations, "old-closed-2")
    await escalations.close("old-closed-2", status="allowed", answer={}, by="x", via="y")
    clock.advance(10)
    await _open(escalations, "new")
    await escalations.mark_all_delivered("slack", before=T0 + 5)
    assert [r.id for r in await escalations.undelivered("slack")] == ["old-open", "new"]
    old_open = await escalations.get("old-open")
    assert old_open is not None and await escalations.cursor("slack") == old_open.seq - 1
    await escalations.mark_all_delivered("slack", before=T0 + 5)  # again: nothing changes
    assert [r.id for r in await escalations.undelivered("slack")] == ["old-open", "new"]


async def test_mark_all_delivered_on_an_empty_outbox(escalations: EscalationStore) -> None:
    await escalations.mark_all_delivered("tg", before=T0)
    assert await escalations.cursor("tg") == 0
    await _open(escalations, "e1")
    assert [r.id for r in await escalations.undelivered("tg")] == ["e1"]


async def test_session_allowances(escalations: EscalationStore) -> None:
    assert not await escalations.session_allowed("a1", "s1", "Bash:ls")
    await escalations.allow_for_session("a1", "s1", "Bash:ls", "Bash", "ann")
    assert await escalations.session_allowed("a1", "s1", "Bash:ls")
    assert not await escalations.session_allowed("a1", "s2", "Bash:ls")  # another session
    assert not await escalations.session_allowed("b1", "s1", "Bash:ls")  # another agent
    assert not await escalations.session_allowed("a1", "s1", "Bash:rm")  # another key
    await escalations.allow_for_session("a1", "s1", "Bash:ls", "Bash", "bob")  # idempotent
    await escalations.allow_for_session("a1", None, "Edit:*", "Edit", "ann")  # any session
    assert await escalations.session_allowed("a1", "s9", "Edit:*")
    assert await escalations.session_allowed("a1", None, "Edit:*")


async def test_decided_calls_are_the_answered_requests_of_one_agent_and_tool_newest_first(
        escalations: EscalationStore) -> None:
    """What rules are learned from: answered permission requests only, with their decision."""
    for i, (agent, tool, decision) in enumerate([
            ("a1", "Bash", "allow"), ("a1", "Bash", "deny"), ("a1", "Write", "allow"),
            ("b1", "Bash", "allow"), ("a1", "Bash", "allow_session")]):
        await _open(escalations, f"e{i}", agent_id=agent, tool_name=tool,
                    tool_input={"command": f"c{i}"})
        await escalations.close(f"e{i}", status="answered", answer={"decision": decision},
                                by="ann", via="tg", now=T0 + i)
    await _open(escalations, "cancelled", tool_name="Bash", tool_input={"command": "x"})
    await escalations.close("cancelled", status="cancelled", answer={"decision": "deny"},
                            by="switchboard", via="switchboard")
    await _open(escalations, "still-open", tool_name="Bash", tool_input={"command": "y"})
    assert await escalations.decided_calls("a1", "Bash") == [
        ({"command": "c4"}, "allow_session"), ({"command": "c1"}, "deny"),
        ({"command": "c0"}, "allow")]
    assert await escalations.decided_calls("a1", "Bash", limit=1) == [
        ({"command": "c4"}, "allow_session")]
    assert await escalations.decided_calls("a1", "Read") == []
