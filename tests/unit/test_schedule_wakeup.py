"""The agents' schedule_wakeup MCP tool: bound to the calling agent, capped (how often, how
many, how long), audited, listed for the operator and removable by them; and a reminder that
fires as a notice. On an injected clock, over the real API and store (no agent process)."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from store import open_store
from supervisor.api import SupervisorAPI
from supervisor.clock import FakeClock
from supervisor.config import Settings
from supervisor.core import Core
from supervisor.events import EventHub
from tests.conftest import ADMIN

T0 = 1_796_130_000.0  # Tue 1 Dec 2026 14:20 UTC


@dataclass(frozen=True)
class Agent:
    id: str
    name: str
    parent_id: str | None = None


@pytest.fixture
async def api(fake_settings: Settings, migrated_db: Path) -> AsyncIterator[SupervisorAPI]:
    fake_settings.db_path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(migrated_db, fake_settings.db_path)
    store = await open_store(fake_settings.db_path)
    core = Core(fake_settings.with_(schedule_agent_max=2), store, EventHub(),
                clock=FakeClock(T0))
    try:
        yield SupervisorAPI.over(core)
    finally:
        await store.db.close()


async def call(api: SupervisorAPI, agent: Agent, when: str, prompt: str) -> tuple[bool, str]:
    [tool] = api._pool.tool_makers["schedules"](agent)  # type: ignore[arg-type]
    assert tool.name == "schedule_wakeup"
    out: dict[str, Any] = await tool.handler({"when": when, "prompt": prompt})
    return not out.get("is_error"), out["content"][0]["text"]


async def test_wakeups_are_the_agents_own_capped_audited_and_removable(
        api: SupervisorAPI) -> None:
    me = Agent("abc123", "watcher")
    ok, text = await call(api, me, "every 5 minutes", "poll the queue")
    assert not ok and "wakeups repeat at most every 10 min" in text
    ok, text = await call(api, me, "every 2 hours", "check the queue")
    assert ok and text.startswith("Scheduled ") and "Every 2 hours, next " in text
    ok, _ = await call(api, me, "in 20 min", "look again")
    assert ok
    ok, text = await call(api, me, "in 30 min", "one more")
    assert not ok and "you have 2 wakeups; the limit is 2" in text
    views = await api.schedules.list()
    assert {(v.target_kind, v.owner_agent, v.created_by) for v in views} == {
        ("message", "abc123", "agent:abc123")}
    assert all(v.expires_at == T0 + 7 * 86400 for v in views)
    audit = [(a.action, a.user_id) for a in await api.recent_actions(10)]
    assert audit.count(("schedule_wakeup", "agent:abc123")) == 2
    deleted = await api.schedules.delete(views[0].id, by=ADMIN)
    assert deleted.id == views[0].id
    ok, _ = await call(api, me, "in 30 min", "one more")
    assert ok  # room again once the operator removed one


async def test_expired_wakeups_are_removed_and_a_reminder_fires_as_a_notice(
        api: SupervisorAPI) -> None:
    ok, _ = await call(api, Agent("abc123", "watcher"), "every 2 hours", "check the queue")
    assert ok
    await api.schedules.remind("in 20 min", "stretch", by=ADMIN)
    clock: FakeClock = api._pool.clock  # type: ignore[assignment]
    clock.advance(20 * 60)
    await api.schedules.tick()
    notices = [(e.title, e.body) for e in await api._store.escalations.undelivered("test")]
    assert [(t[:10], b) for t, b in notices] == [("⏰ Reminder", "stretch")]
    reminders = [v for v in await api.schedules.list() if v.target_kind == "notice"]
    assert reminders[0].last is not None and reminders[0].last.status == "ran"
    # A week on, the agent's wakeup has expired: removed, and the agent's notice says so.
    clock.advance(7 * 86400)
    await api.schedules.tick()
    assert [v.target_kind for v in await api.schedules.list()] == ["notice"]
    titles = [e.title for e in await api._store.escalations.undelivered("test")]
    assert any(t.startswith("Schedule ") and t.endswith(" expired") for t in titles)


async def test_a_slot_that_passes_between_draft_and_confirm_still_runs(
        api: SupervisorAPI) -> None:
    draft = await api.schedules.draft("in 1 sec", None, "tea is ready", by=ADMIN)
    clock: FakeClock = api._pool.clock  # type: ignore[assignment]
    clock.advance(5)  # the operator taps Create a few seconds later
    view = await api.schedules.confirm(draft.id, by=ADMIN)
    await api.schedules.tick()
    [run] = await api.schedules.history(view.id)
    assert (run.status, run.reason) == ("ran", "")
