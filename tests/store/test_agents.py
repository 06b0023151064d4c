"""Conformance of AgentStore: agent rows, live-name uniqueness, lookups and state transitions."""

from __future__ import annotations

import pytest

from store import Store
from store.errors import Conflict
from store.escalations import EscalationDraft
from store.protocols import AgentStore
from tests.store.conftest import T0, FakeNow, MakeAgent, OpenAt


@pytest.fixture
def agents(store: Store) -> AgentStore:
    return store.agents


async def test_create_returns_the_row_and_records_the_spawn(agents: AgentStore,
                                                           clock: FakeNow) -> None:
    row = await agents.create(id="a1", name="alpha", parent_id=None, model="sonnet", cwd="/w",
                              prompt="do it", permission_mode="acceptEdits", state="starting",
                              project_settings=True)
    assert (row.id, row.name, row.parent_id, row.model, row.cwd, row.prompt) == (
        "a1", "alpha", None, "sonnet", "/w", "do it")
    assert (row.permission_mode, row.state, row.session_id, row.launcher_pid, row.cli_pid) == (
        "acceptEdits", "starting", None, None, None)
    assert (row.cost_baseline, row.last_error, row.project_settings) == ({}, None, True)
    assert row.created_at == row.updated_at == T0
    assert await agents.get("a1") == row
    [spawn] = await agents.transitions("a1")
    assert (spawn.agent_id, spawn.from_state, spawn.to_state, spawn.reason, spawn.at) == (
        "a1", None, "starting", "spawned", T0)


async def test_agents_repo_roundtrip(agents: AgentStore, make_agent: MakeAgent) -> None:
    await make_agent("a1", "alpha")
    await make_agent("c1", "child", parent_id="a1")
    row = await agents.get("a1")
    assert row is not None
    assert (row.name, row.state, row.cost_baseline, row.session_id) == (
        "alpha", "starting", {}, None)
    assert row.created_at > 0 and row.updated_at >= row.created_at
    assert row.project_settings is False
    await agents.update("a1", session_id="s-1", cost_baseline={"__total__": 0.25})
    row = await agents.get("a1")
    assert row is not None
    assert (row.session_id, row.cost_baseline) == ("s-1", {"__total__": 0.25})
    assert await agents.get("nope") is None
    assert [c.id for c in await agents.children("a1")] == ["c1"]


async def test_agent_create_is_atomic(agents: AgentStore, make_agent: MakeAgent) -> None:
    """The agent row and its first transition go in together or not at all."""
    await make_agent("a1", "alpha")
    with pytest.raises(Conflict, match="(?i)unique"):  # each engine's words for it
        await make_agent("a1", "beta")
    assert [t.reason for t in await agents.transitions("a1")] == ["spawned"]
    row = await agents.get("a1")
    assert row is not None and row.name == "alpha"


async def test_agent_state_transitions_are_recorded(agents: AgentStore,
                                                    make_agent: MakeAgent) -> None:
    await make_agent("a1", "alpha")
    await agents.set_state("a1", "starting", "idle", "turn finished")
    await agents.set_state("a1", "idle", "killed", "killed by operator")
    assert [(t.from_state, t.to_state, t.reason) for t in await agents.transitions("a1")] \
        == [(None, "starting", "spawned"), ("starting", "idle", "turn finished"),
            ("idle", "killed", "killed by operator")]
    row = await agents.get("a1")
    assert row is not None and row.state == "killed"


async def test_set_state_stamps_and_returns_the_time(agents: AgentStore, make_agent: MakeAgent,
                                                     clock: FakeNow) -> None:
    await make_agent("a1", "alpha")
    at = clock.advance(7.5)
    assert await agents.set_state("a1", "starting", "working", "turn started") == at
    row = await agents.get("a1")
    assert row is not None
    assert (row.state, row.created_at, row.updated_at) == ("working", T0, at)
    assert (await agents.transitions("a1"))[-1].at == at


async def test_live_names_are_unique_and_find_prefers_the_live_agent(
        agents: AgentStore, make_agent: MakeAgent) -> None:
    await make_agent("old1", "alpha", state="starting")
    assert await agents.live_name_taken("alpha")
    with pytest.raises(Conflict):  # the unique index backs the pool's check
        await make_agent("new1", "alpha", state="starting")
    await agents.set_state("old1", "starting", "killed", "")
    assert not await agents.live_name_taken("alpha")
    await make_agent("new1", "alpha", state="starting")
    found = await agents.find("alpha")
    assert found is not None and found.id == "new1"
    found = await agents.find("old1")
    assert found is not None and found.id == "old1"  # by id, even a dead one
    assert await agents.find("ghost") is None
    assert [a.id for a in await agents.list(live_only=True)] == ["new1"]
    assert {a.id for a in await agents.list()} == {"old1", "new1"}


@pytest.mark.parametrize("state", ["starting", "working", "idle", "waiting", "stalled",
                                   "paused"])
async def test_every_live_state_holds_the_name(agents: AgentStore, make_agent: MakeAgent,
                                               state: str) -> None:
    await make_agent("a1", "alpha", state=state)
    assert await agents.live_name_taken("alpha")
    assert [a.id for a in await agents.list(live_only=True)] == ["a1"]


@pytest.mark.parametrize("state", ["stopped", "failed", "killed"])
async def test_an_ended_agent_frees_its_name(agents: AgentStore, make_agent: MakeAgent,
                                             state: str) -> None:
    await make_agent("a1", "alpha", state=state)
    assert not await agents.live_name_taken("alpha")
    assert await agents.list(live_only=True) == []
    await make_agent("a2", "alpha")  # no conflict: the other one is not live


async def test_find_by_name_of_dead_agents_is_the_newest(agents: AgentStore,
                                                         make_agent: MakeAgent,
                                                         clock: FakeNow) -> None:
    await make_agent("x1", "alpha", state="killed")
    clock.advance(1)
    await make_agent("x2", "alpha", state="killed")
    found = await agents.find("alpha")
    assert found is not None and found.id == "x2"


async def test_find_prefers_an_id_over_a_name(agents: AgentStore, make_agent: MakeAgent,
                                              clock: FakeNow) -> None:
    await make_agent("bravo", "alpha")
    clock.advance(1)
    await make_agent("b2", "bravo")  # live, named like the first one's id
    found = await agents.find("bravo")
    assert found is not None and found.id == "bravo"


async def test_list_is_in_creation_order_then_id(agents: AgentStore, make_agent: MakeAgent,
                                                 clock: FakeNow) -> None:
    await make_agent("z", "zulu")
    clock.advance(1)
    await make_agent("m", "mike")
    await make_agent("b", "bravo")  # same time as "m": the id decides
    assert [a.id for a in await agents.list()] == ["z", "b", "m"]
    assert await agents.children("z") == []


async def test_children_are_in_creation_order(agents: AgentStore, make_agent: MakeAgent,
                                              clock: FakeNow) -> None:
    await make_agent("p", "parent")
    for child in ("c3", "c1", "c2"):
        clock.advance(1)
        await make_agent(child, f"n-{child}", parent_id="p")
    assert [c.id for c in await agents.children("p")] == ["c3", "c1", "c2"]
    assert [c.parent_id for c in await agents.children("p")] == ["p", "p", "p"]


async def test_update_writes_fields_and_stamps_updated_at(agents: AgentStore,
                                                          make_agent: MakeAgent,
                                                          clock: FakeNow) -> None:
    await make_agent("a1", "alpha")
    at = clock.advance(3)
    await agents.update("a1", launcher_pid=101, cli_pid=202, last_error="boom", model="haiku",
                        cost_baseline={"sonnet": 1.5, "__total__": 1.5})
    row = await agents.get("a1")
    assert row is not None
    assert (row.launcher_pid, row.cli_pid, row.last_error, row.model) == (
        101, 202, "boom", "haiku")
    assert row.cost_baseline == {"sonnet": 1.5, "__total__": 1.5}
    assert (row.created_at, row.updated_at, row.state) == (T0, at, "starting")
    assert len(await agents.transitions("a1")) == 1  # an update is no transition


async def test_unknown_agents_read_as_nothing(agents: AgentStore) -> None:
    assert await agents.get("ghost") is None
    assert await agents.find("ghost") is None
    assert await agents.list() == []
    assert await agents.children("ghost") == []
    assert await agents.transitions("ghost") == []
    assert not await agents.live_name_taken("ghost")


async def test_a_store_opened_with_a_fixed_now_stamps_exactly_that_time(open_at: OpenAt) -> None:
    """open_store(..., now=) reaches every repository that stamps rows by itself."""
    fixed = 1_234_567.25
    s = await open_at(lambda: fixed)
    agent = await s.agents.create(id="a1", name="alpha", parent_id=None, model=None, cwd="/w",
                                  prompt="p", permission_mode="default", state="starting")
    assert (agent.created_at, agent.updated_at) == (fixed, fixed)
    assert await s.agents.set_state("a1", "starting", "idle", "ready") == fixed
    await s.agents.update("a1", session_id="s")
    row = await s.agents.get("a1")
    assert row is not None and row.updated_at == fixed
    assert [t.at for t in await s.agents.transitions("a1")] == [fixed, fixed]
    assert await s.kv.touch("probe") == fixed and await s.kv.get("probe") == fixed
    turn = await s.turns.start("a1", "p")
    await s.turns.finish(turn, status="ok", notice=EscalationDraft(
        id="n1", agent_id="a1", kind="notice", title="done", status="info"))
    finished = await s.turns.get(turn)
    assert finished is not None and (finished.started_at, finished.ended_at) == (fixed, fixed)
    esc = await s.escalations.create(id="e1", agent_id="a1", kind="permission", title="t",
                                     body="b")
    notice = await s.escalations.get("n1")
    assert notice is not None and (esc.created_at, notice.created_at) == (fixed, fixed)
    await s.audit.record(platform="p", user_id="u", user_name="n", action="a", args="",
                         ok=True, result="")
    assert [r.at for r in await s.audit.recent()] == [fixed]
    await s.events.append("a1", turn, "text", "e", {})
    assert [e.at for e in await s.events.tail("a1", 1)] == [fixed]
    await s.repos.add("web", "u", "/r", "main")
    repo = await s.repos.get("web")
    assert repo is not None and (repo.created_at, repo.fetched_at) == (fixed, fixed)
    await s.operators.upsert("telegram", "1", "ann", "admin", "x")
    op = await s.operators.get("telegram", "1")
    assert op is not None and op.added_at == fixed
    assert await s.operators.create_invite("c", "viewer", "x", 10) == fixed + 10
