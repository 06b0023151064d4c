"""supervisor.api over a real store and a pool that never starts an agent: the kill switch
refuses what starts or changes work in one place and lets looking, denying, taking access away
and the switch itself through; operators and invites; answers resolved from options; store
failures as StoreFailed; the views frozen."""

from __future__ import annotations

import dataclasses

import pytest

from commands.base import Caller, Role
from store.errors import StoreUnavailable
from supervisor.api import (
    ROLES,
    AgentView,
    EscalationView,
    Halted,
    InvalidRequest,
    Kind,
    StoreFailed,
    SupervisorAPI,
    UnknownOperator,
)
from tests.conftest import ADMIN, QuietSwitchboard, run

pytestmark = pytest.mark.timeout(30)

OTHER = Caller("test:other", "other", Role.OPERATOR, "test")


async def question(app: QuietSwitchboard, *, options: tuple[str, ...] = ("red", "blue"),
                   free_text: bool = False, kind: Kind = Kind.QUESTION) -> EscalationView:
    return await app.pool.escalations.open(agent_id=None, kind=kind, title="Which colour?",
                                           body="", options=options, free_text=free_text)


# -- the kill switch, checked once, in the API -------------------------------------------------


async def test_halted_refuses_what_starts_or_changes_work(quiet_app):
    api: SupervisorAPI = quiet_app.api
    await quiet_app.api.add_operator("test", "other", "other", "operator", added_by="test")
    open_q = await question(quiet_app)
    await api.halt(by=ADMIN, reason="test")
    assert api.halted and api.halt_state() is not None
    refused = [
        api.spawn("a", "hi", by=ADMIN), api.ask("a", "hi"), api.pause("a"), api.resume("a"),
        api.stop("a"), api.kill("a"), api.approve(open_q.id, by=ADMIN),
        api.approve_all("a", by=ADMIN), api.answer(open_q.id, "red", by=ADMIN),
        api.create_invite("viewer", by=ADMIN), api.set_role("test:other", "admin", by=ADMIN),
    ]
    for call in refused:
        with pytest.raises(Halted) as info:
            await call
        assert info.value.what.startswith("Refused: the kill switch is on (triggered by tester")
        assert "/killswitch off confirm" in info.value.fix


async def test_halted_still_looks_denies_removes_and_releases(quiet_app):
    api: SupervisorAPI = quiet_app.api
    await api.add_operator("test", "other", "other", "operator", added_by="test")
    await api.halt(by=ADMIN)
    assert api.agents(include_ended=True) == ()
    assert (await api.fleet()).counts == ()
    assert (await api.spend()).total_usd == 0
    assert await api.pending() == ()  # the kill switch closed what was open
    reply = await run(quiet_app, "/operators")
    assert reply.ok and "test:other other — operator" in reply.plain()
    assert (await api.remove_operator("test:other", by=ADMIN)).name == "other"
    assert "Kill switch off" in await api.release(by=ADMIN)
    assert not api.halted and api.halt_state() is None


async def test_a_halted_command_says_so_with_what_to_do(quiet_app):
    await quiet_app.api.halt(by=ADMIN)
    reply = await run(quiet_app, "/invite")
    assert not reply.ok
    assert reply.blocks[0].text.startswith("Refused: the kill switch is on (triggered by tester "
                                           "via test)")
    assert reply.blocks[1].text == "An admin can send /killswitch off confirm once it is safe."


# -- operators and invites, through the commands ------------------------------------------------


async def test_operators_list_role_and_remove(quiet_app):
    assert (await run(quiet_app, "/operators")).plain() == (
        "No operators yet: /invite makes a code for one.")
    await quiet_app.api.add_operator("test", "other", "Olga", "viewer", added_by="config")
    reply = await run(quiet_app, "/operators")
    assert reply.plain() == "Operators\ntest:other Olga — viewer (added by config)"
    reply = await run(quiet_app, "/operators role test:other ADMIN")
    assert reply.ok and reply.plain() == "test:other (Olga) is now admin."
    assert (await quiet_app.api.operator("test", "other")).role == "admin"
    reply = await run(quiet_app, "/operators remove test:other")
    assert reply.ok and reply.plain() == "Removed test:other (Olga)."
    assert await quiet_app.api.operators() == ()


@pytest.mark.parametrize("line,what", [
    ("/operators role test:ghost admin", "test:ghost is not an operator."),
    ("/operators remove test:ghost", "test:ghost is not an operator."),
    ("/operators role nocolon admin", "/operators: name the operator as platform:user_id, got "
                                      "'nocolon'."),
    ("/operators remove test:admin", "/operators: you cannot change or remove yourself."),
    ("/operators role test:other chief", "/operators: unknown role 'chief'; roles are viewer, "
                                         "operator, admin."),
    ("/invite chief", "/invite: unknown role 'chief'; roles are viewer, operator, admin."),
])
async def test_operator_changes_refused_say_why(quiet_app, line, what):
    await quiet_app.api.add_operator("test", "other", "Olga", "viewer", added_by="config")
    reply = await run(quiet_app, line)
    assert not reply.ok
    assert reply.blocks[0].text == what, reply.plain()
    assert (await quiet_app.api.operator("test", "other")).role == "viewer"


async def test_an_invite_is_redeemed_once(quiet_app):
    reply = await run(quiet_app, "/invite viewer")
    assert reply.ok and reply.blocks[0].text == "Invite code for a new viewer:"
    code = reply.blocks[1].text.removeprefix("/start ")
    assert "within 60 minutes" in reply.plain()
    joined = await quiet_app.api.redeem_invite(code, "test", "42", "Nina")
    assert (joined.platform, joined.user_id, joined.name, joined.role, joined.added_by) == (
        "test", "42", "Nina", "viewer", "invite")
    assert await quiet_app.api.redeem_invite(code, "test", "43", "Otto") is None
    assert await quiet_app.api.operator("test", "43") is None


def test_roles_are_the_command_roles():
    assert ROLES == tuple(r.name.lower() for r in Role)


# -- escalations --------------------------------------------------------------------------------


async def test_an_option_number_is_answered_as_the_option(quiet_app):
    row = await question(quiet_app)
    reply = await run(quiet_app, f"/answer {row.id} 2")
    assert reply.ok and reply.plain() == f"Answered {row.id}: blue"
    closed = await quiet_app.api.escalation(row.id)
    assert (closed.status, closed.answer, closed.answered_by) == (
        "answered", {"decision": "answer", "text": "blue"}, "tester")
    again = await run(quiet_app, f"/answer {row.id} red")
    assert not again.ok and again.blocks[0].text.startswith(f"Too late: {row.id} was already "
                                                            "answered by tester via test")


@pytest.mark.parametrize("text,what", [
    ("3", "option 3 does not exist; pick 1 to 2 or type an answer"),
    ("green", "pick one of: red, blue"),
])
async def test_an_answer_outside_the_options_is_refused(quiet_app, text, what):
    row = await question(quiet_app)
    with pytest.raises(InvalidRequest, match=what):
        await quiet_app.api.answer(row.id, text, by=ADMIN)
    assert (await quiet_app.api.escalation(row.id)).status == "open"


async def test_approve_and_answer_refuse_the_wrong_kind(quiet_app):
    q = await question(quiet_app)
    p = await question(quiet_app, kind=Kind.PERMISSION, options=())
    with pytest.raises(InvalidRequest, match=f"use /answer {q.id}"):
        await quiet_app.api.approve(q.id, by=ADMIN)
    with pytest.raises(InvalidRequest, match=f"use /approve {p.id}"):
        await quiet_app.api.answer(p.id, "yes", by=ADMIN)
    denied = await quiet_app.api.deny(p.id, by=OTHER, reason="not now")
    assert (denied.answer, denied.answered_by, denied.answered_via) == (
        {"decision": "deny", "text": "not now"}, "other", "test")


# -- errors and views ---------------------------------------------------------------------------


async def test_a_store_failure_underneath_is_store_failed(quiet_app, monkeypatch):
    cause = StoreUnavailable("db", "disk I/O error")

    async def broken(agent_id: str | None = None) -> list[object]:
        raise cause

    monkeypatch.setattr(quiet_app.store.turns, "totals_by_agent", broken)
    with pytest.raises(StoreFailed) as info:
        await quiet_app.api.fleet()
    assert info.value.cause is cause and info.value.__cause__ is cause
    assert info.value.what == "The state database failed: the database at db cannot be used: " \
                              "disk I/O error."


async def test_an_audit_write_that_fails_is_reported_not_raised(quiet_app, monkeypatch):
    async def broken(**kw: object) -> int:
        raise StoreUnavailable("db", "disk I/O error")

    assert await quiet_app.api.audit(ADMIN, "agents", "", ok=True, result="x")
    monkeypatch.setattr(quiet_app.store.audit, "record", broken)
    assert not await quiet_app.api.audit(ADMIN, "agents", "", ok=True, result="x")


async def test_unknown_operator_carries_who(quiet_app):
    with pytest.raises(UnknownOperator) as info:
        await quiet_app.api.remove_operator("test:ghost", by=ADMIN)
    assert info.value.who == "test:ghost"
    assert info.value.fix == "Send /operators to list them."


def test_views_are_frozen():
    fields = {f.name: None for f in dataclasses.fields(AgentView)}
    view = AgentView(**fields)
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.name = "x"  # type: ignore[misc]
    assert not hasattr(view, "__dict__")  # slotted
