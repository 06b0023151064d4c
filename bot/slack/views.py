"""Slack's own surfaces: App Home per operator (what needs them now, the fleet, recent actions,
the kill switch), republished when opened and when what it shows changes, and the modals
(spawn, deny with a reason, details, send to an agent) with their validation."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Sequence
from typing import Any, Protocol

from slack_sdk.web.async_client import AsyncWebClient

from bot.kit import ActivityKind, AgentActivity, ChatError, ChatId, FleetPort, FrontDesk
from bot.kit import escalation as esc_render
from bot.kit.cards import ICONS
from bot.kit.ports import Escalation
from bot.slack.base import PLATFORM, call, sanitise
from bot.slack.render import actions, context, plain, section
from bot.slack.render import escape as mrkdwn
from bot.slack.settings import SlackSettings
from commands.base import Button, Role
from commands.render import money
from supervisor.api import AgentView

logger = logging.getLogger(__name__)

HOME_BLOCKS = 100  # a view holds at most 100 blocks
SECTION_SHOWN = 2800
NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9._-]{0,39}$")
MODAL_TEXT = 2900


class Front(Protocol):
    """What App Home and the agent sessions read of the front end (bot/slack/front.py)."""

    @property
    def fleet(self) -> FleetPort: ...

    @property
    def settings(self) -> SlackSettings: ...

    @property
    def client(self) -> AsyncWebClient | None: ...

    @property
    def desk(self) -> FrontDesk | None: ...


def _cut(text: str, limit: int = SECTION_SHOWN) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


# -- App Home --------------------------------------------------------------------------------------


def kill_switch_blocks(halt: Any, admin: bool) -> list[dict[str, Any]]:
    if halt is None:
        kill = Button("🛑 KILL ALL", "/killall confirm", confirm=True)
        return [section("*Kill switch:* off. KILL ALL stops every agent process at once and "
                        "refuses new work until an admin turns it off."), *actions(((kill,),))]
    blocks = [section(f"*🛑 Kill switch ON* since {mrkdwn(str(halt.by))} via "
                      f"{mrkdwn(str(halt.via))}: {mrkdwn(halt.reason or '-')}")]
    if admin:
        blocks += actions(((Button("Turn the kill switch off", "/killswitch off confirm",
                                   confirm=True),),))
    return blocks


def escalation_blocks(rows: Sequence[Escalation]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [section(f"*Needs you now:* {len(rows)} open request(s)"
                                         if rows else "*Needs you now:* nothing.")]
    for row in rows[:10]:
        card = esc_render.card(row).reply
        head = "\n".join(b.text for b in card.blocks[:2])
        out += [section(_cut(mrkdwn(head), 1500)), *actions(card.buttons)]
    return out


def fleet_blocks(agents: Sequence[tuple[AgentView, float, str]]) -> list[dict[str, Any]]:
    if not agents:
        return [section("*Fleet:* no agents yet.")]
    lines = [f"{ICONS.get(str(a.state), '🤖')} *{mrkdwn(a.name)}* `{a.id}` {a.state} · "
             f"{money(cost)} · {mrkdwn(_cut(outcome.splitlines()[0] if outcome else '-', 80))}"
             for a, cost, outcome in agents[:30]]
    return [section("*Fleet*"), section(_cut("\n".join(lines)))]


def home_view(*, rows: Sequence[Escalation], agents: Sequence[tuple[AgentView, float, str]],
              recent: Sequence[Any], halt: Any, role: Role | None) -> dict[str, Any]:
    if role is None:
        return {"type": "home", "blocks": [section(
            "This is a private Switchboard. Ask its admin for an invite code, then send "
            "`/sb start <code>`.")]}
    spawn = {"type": "actions", "block_id": "sb-home-spawn", "elements": [
        {"type": "button", "action_id": "sb_open_spawn", "text": plain("🚀 Spawn an agent", 75),
         "style": "primary"}]}
    lines = [f"{'✅' if r.ok else '⚠️'} {mrkdwn(r.user_name or r.user_id)}: {mrkdwn(r.action)} "
             f"{mrkdwn(_cut(r.args, 60))}" for r in recent]
    blocks = [*kill_switch_blocks(halt, role >= Role.ADMIN), {"type": "divider"},
              *escalation_blocks(rows), {"type": "divider"}, *fleet_blocks(agents), spawn,
              {"type": "divider"},
              section("*Recent actions*\n" + (_cut("\n".join(lines)) if lines else "none"))]
    return {"type": "home", "blocks": blocks[:HOME_BLOCKS]}


class Home:
    """One App Home per operator who opened it this run; all of them republished (at most
    every card interval) when the fleet changes."""

    def __init__(self, front: Front) -> None:
        self.front = front
        self.users: set[str] = set()
        self.dirty = False
        self.published: dict[str, dict[str, Any]] = {}
        self.sessions = Sessions(front)

    async def changed(self) -> None:
        self.dirty = True

    async def opened(self, user: str, client: Any) -> None:
        self.users.add(user)
        await self.publish(user)

    async def view_for(self, user: str) -> dict[str, Any]:
        fleet = self.front.fleet
        operator = await fleet.operator(PLATFORM, user)
        role = operator.role if operator is not None else None
        if role is None:
            return home_view(rows=(), agents=(), recent=(), halt=None, role=None)
        agents = []
        for a in fleet.agents(include_ended=True)[-30:]:
            try:
                d = await fleet.agent_detail(a.id)
            except Exception:  # noqa: BLE001 - gone between the two calls
                d = None
            agents.append((a, d.cost_usd, d.last_error or d.last_answer or "") if d is not None
                          else (a, 0.0, ""))
        return home_view(rows=await fleet.pending(), agents=agents,
                         recent=await fleet.recent_actions(8), halt=fleet.halt_state(), role=role)

    async def publish(self, user: str) -> None:
        client = self.front.client
        assert client is not None
        view = await self.view_for(user)
        if self.published.get(user) == view:
            return
        try:
            await call(client.views_publish(user_id=user, view=view))
            self.published[user] = view
        except ChatError as exc:
            logger.warning("could not publish App Home user=%s error=%s", user, exc)

    async def run(self) -> None:
        """Follow the fleet: any change marks every home dirty (republished at most every card
        interval), and a state change sets the status of the agent's session at once."""
        with self.front.fleet.subscribe() as feed:
            publisher = asyncio.create_task(self._publish_loop(), name="slack-home-publish")
            try:
                while True:
                    event = await feed.next()
                    self.dirty = True
                    if isinstance(event, AgentActivity) and event.kind == ActivityKind.STATE:
                        await self.sessions.state(event.agent_id, event.text)
            finally:
                publisher.cancel()
                await asyncio.gather(publisher, return_exceptions=True)

    async def _publish_loop(self) -> None:
        clock = self.front.desk.clock if self.front.desk else None
        assert clock is not None
        while True:
            await self.sessions.sync_all()
            if self.dirty:
                self.dirty = False
                for user in sorted(self.users):
                    await self.publish(user)
            await clock.sleep(self.front.settings.slack_card_interval_s)


# Each thread is a Slack agent session; its status follows the agent's state.
SESSION_STATUS = {"starting": "processing", "working": "processing", "waiting": "suspended",
                  "idle": "active", "paused": "active", "stalled": "processing",
                  "stopped": "closed", "failed": "closed", "killed": "closed",
                  "resume_failed": "suspended"}
ASSISTANT_STATUS = {"processing": "is working…", "suspended": "is waiting for you…"}


class Sessions:
    """agents.sessions.setStatus on the agent's thread; where the workspace does not allow
    agent sessions, assistant.threads.setStatus (a status line) instead, from then on."""

    def __init__(self, front: Front) -> None:
        self.front = front
        self.fallback = False
        self.wanted: dict[str, str] = {}
        self.shown: dict[str, str] = {}

    async def state(self, agent_id: str, state: str) -> None:
        status = SESSION_STATUS.get(state)
        if status is not None:
            self.wanted[agent_id] = status
            await self.sync(agent_id)

    async def sync_all(self) -> None:
        """What could not be set yet (the thread was not recorded): again."""
        for agent_id in [a for a, s in self.wanted.items() if self.shown.get(a) != s]:
            await self.sync(agent_id)

    async def sync(self, agent_id: str) -> None:
        status = self.wanted.get(agent_id)
        client = self.front.client
        if status is None or client is None or self.shown.get(agent_id) == status:
            return
        channel = self.front.settings.slack_channel or ""
        thread = await self.front.fleet.card(PLATFORM, agent_id, ChatId(channel))
        if thread is None:
            return
        self.shown[agent_id] = status
        if not self.fallback:
            try:
                await call(client.api_call("agents.sessions.setStatus", json={
                    "channel_id": channel, "thread_ts": thread, "status": status}))
                return
            except ChatError as exc:
                logger.info("agent sessions unavailable (%s): using assistant thread status",
                            exc)
                self.fallback = True
        try:
            await call(client.api_call("assistant.threads.setStatus", json={
                "channel_id": channel, "thread_ts": thread,
                "status": ASSISTANT_STATUS.get(status, "")}))
        except ChatError as exc:
            logger.warning("could not set a thread's status agent=%s error=%s", agent_id, exc)


# -- modals ----------------------------------------------------------------------------------------


def _input(block_id: str, label: str, *, multiline: bool = False, optional: bool = False,
           hint: str = "", initial: str = "") -> dict[str, Any]:
    element: dict[str, Any] = {"type": "plain_text_input", "action_id": "v",
                               "multiline": multiline}
    if initial:
        element["initial_value"] = initial[:MODAL_TEXT]
    block: dict[str, Any] = {"type": "input", "block_id": block_id, "label": plain(label, 2000),
                             "element": element, "optional": optional}
    if hint:
        block["hint"] = plain(hint, 2000)
    return block


def modal(callback_id: str, title: str, blocks: list[dict[str, Any]], *, submit: str = "Submit",
          metadata: str = "") -> dict[str, Any]:
    return {"type": "modal", "callback_id": callback_id, "title": plain(title, 24),
            "submit": plain(submit, 24), "close": plain("Cancel", 24),
            "private_metadata": metadata, "blocks": blocks}


async def _open(client: Any, trigger_id: Any, view: dict[str, Any]) -> None:
    if not trigger_id:
        return
    try:
        await call(client.views_open(trigger_id=trigger_id, view=view))
    except ChatError as exc:
        logger.warning("could not open a modal callback=%s error=%s", view.get("callback_id"),
                       exc)


async def open_spawn(client: Any, trigger_id: Any) -> None:
    await _open(client, trigger_id, modal("sb_spawn", "Spawn an agent", [
        _input("name", "Name", hint="A letter, then letters, digits, '.', '_' or '-'"),
        _input("prompt", "Prompt", multiline=True),
        _input("model", "Model", optional=True, hint="An alias or id, e.g. sonnet"),
        _input("cwd", "Working directory", optional=True,
               hint="An existing directory; empty: a fresh workspace"),
    ], submit="Spawn"))


async def open_deny(client: Any, trigger_id: Any, esc_id: str) -> None:
    await _open(client, trigger_id, modal("sb_deny_reason", "Deny with a reason", [
        section(f"Deny request `{mrkdwn(esc_id)}`; the agent is told why."),
        _input("reason", "Reason", multiline=True)], submit="Deny", metadata=esc_id))


async def open_details(client: Any, trigger_id: Any, row: Escalation | None) -> None:
    if row is None:
        blocks = [section("That request is no longer known.")]
    else:
        full = row.detail or json.dumps(row.tool_input or {}, indent=2, ensure_ascii=False)
        blocks = [section(f"*{mrkdwn(_cut(row.title, 200))}*  `{row.id}`"),
                  section(_cut(mrkdwn(row.body or "-"), MODAL_TEXT))]
        blocks += [section("```" + mrkdwn(full[i:i + 2000]).replace("```", "`\u200b``") + "```")
                   for i in range(0, min(len(full), 2000 * 40), 2000)]
        if len(full) > 2000 * 40:
            blocks.append(context("The rest is in the file sent with the request."))
    view = modal("sb_details", "Request details", blocks[:HOME_BLOCKS])
    view.pop("submit")
    view["close"] = plain("Close", 24)
    await _open(client, trigger_id, view)


async def open_send(client: Any, trigger_id: Any, agents: Sequence[AgentView], text: str) -> None:
    if not agents:
        view = modal("sb_send", "Send to agent", [section("No agent is running.")])
        view.pop("submit")
        await _open(client, trigger_id, view)
        return
    options = [{"text": plain(f"{a.name} ({a.id})", 75), "value": a.id} for a in agents[:100]]
    picker = {"type": "input", "block_id": "agent", "label": plain("Agent", 50),
              "element": {"type": "static_select", "action_id": "v", "options": options}}
    await _open(client, trigger_id, modal("sb_send", "Send to agent", [
        picker, _input("text", "Message", multiline=True, initial=text)], submit="Send"))


def _values(view: dict[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for block_id, fields in (view.get("state") or {}).get("values", {}).items():
        field = fields.get("v") or {}
        value = field.get("value")
        if value is None:
            value = (field.get("selected_option") or {}).get("value")
        out[block_id] = sanitise(str(value or ""))
    return out


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def command_of(view: dict[str, Any], *, live: Sequence[str] = ()) -> tuple[str, dict[str, str]]:
    """A submitted modal as one command line, or the errors to show in it (`live`: the names
    of live agents, which a new one may not take)."""
    values = _values(view)
    callback = view.get("callback_id")
    if callback == "sb_deny_reason":
        if not values.get("reason"):
            return "", {"reason": "Say why, or use the Deny button."}
        return f"/deny {view.get('private_metadata', '')} {values['reason']}", {}
    if callback == "sb_send":
        if not values.get("text"):
            return "", {"text": "Write the message to send."}
        return f"/ask {values.get('agent', '')} {values['text']}", {}
    errors: dict[str, str] = {}
    name = values.get("name", "")
    if not NAME_RE.match(name):
        errors["name"] = "A letter, then letters, digits, '.', '_' or '-' (40 at most)."
    elif name in live:
        errors["name"] = f"An agent named {name} is already running: choose another name."
    if not values.get("prompt"):
        errors["prompt"] = "Say what the agent should do."
    if errors:
        return "", errors
    line = f"/spawn {name}"
    if values.get("model"):
        line += f" --model {_quoted(values['model'])}"
    if values.get("cwd"):
        line += f" --cwd {_quoted(values['cwd'])}"
    return f"{line} {values['prompt']}", {}
