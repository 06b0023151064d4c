"""Slack's events, commands and interactions, parsed into the kit's messages and taps. Every
listener acks first (Slack waits at most 3 s) and does the work after; every delivery is
handled once (event_id, and (channel, ts) for a mention that also arrives as a message)."""

from __future__ import annotations

import logging
import re
from collections import OrderedDict
from typing import Any, Protocol

from slack_bolt.app.async_app import AsyncApp

from bot.kit import ChatId, Incoming, MessageId, Sender, Tap
from bot.slack.adapter import SlackAdapter
from bot.slack.base import PLATFORM, dm, ephemeral, is_ts, sanitise
from bot.slack.render import DENY_REASON
from bot.slack.views import Front as ViewsFront
from bot.slack.views import Home, command_of, open_deny, open_details, open_send, open_spawn

logger = logging.getLogger(__name__)

_MENTION = re.compile(r"<@[A-Z0-9]+(?:\|[^>]*)?>")
SPAWN_MODAL, DENY_MODAL, SEND_MODAL = "sb_spawn", "sb_deny_reason", "sb_send"
SEND_SHORTCUT = "sb_send_to_agent"
OPEN_SPAWN = "sb_open_spawn"
STOP_EVENT = "agent_session_stopped"
SEEN_MAX = 10_000


def clean(text: str) -> str:
    """A message or command as typed: mentions of us dropped, the entities Slack escapes (`&`,
    `<`, `>`) turned back into what was typed, then sanitised."""
    text = _MENTION.sub("", text or "")
    return sanitise(text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&"))


def as_command(text: str) -> str:
    """`!verb args` (Slack swallows a leading `/` in threads) or `verb args` as `/verb args`."""
    text = text.strip()
    if text.startswith("!"):
        return "/" + text[1:]
    return text if text.startswith("/") else "/" + text


class Seen:
    """Deliveries already handled, by key, the newest SEEN_MAX of them: Slack retries an
    event it thinks was not acked, and a mention arrives as `app_mention` and as `message`."""

    def __init__(self, size: int = SEEN_MAX) -> None:
        self.size = size
        self._keys: OrderedDict[str, None] = OrderedDict()

    def first(self, *keys: str | None) -> bool:
        """True the first time any of `keys` is offered; every key is remembered."""
        keys_ = [k for k in keys if k]
        fresh = not any(k in self._keys for k in keys_)
        for key in keys_:
            self._keys[key] = None
            self._keys.move_to_end(key)
        while len(self._keys) > self.size:
            self._keys.popitem(last=False)
        return fresh


class Front(ViewsFront, Protocol):
    """What the listeners read of the front end (bot/slack/front.py)."""

    @property
    def seen(self) -> Seen: ...

    @property
    def bot_user_id(self) -> str: ...

    @property
    def adapter(self) -> SlackAdapter | None: ...

    @property
    def home(self) -> Home | None: ...


class Listeners:
    def __init__(self, front: Front) -> None:
        self.front = front

    @property
    def desk(self) -> Any:
        return self.front.desk

    async def _changed(self) -> None:
        if self.front.home is not None:
            await self.front.home.changed()

    def _ours(self, team: str | None) -> bool:
        wanted = self.front.settings.slack_team_id
        return not wanted or not team or team == wanted

    async def sender(self, user_id: str, client: Any) -> Sender:
        name = user_id
        try:
            info = await client.users_info(user=user_id)
            user = info.get("user") or {}
            profile = user.get("profile") or {}
            name = profile.get("display_name") or user.get("name") or user_id
        except Exception:  # noqa: BLE001 - the id is a name too
            logger.debug("users.info failed user=%s", user_id)
        return Sender(user_id, str(name))

    # -- the slash command ----------------------------------------------------------------------

    async def command(self, ack: Any, body: dict[str, Any], client: Any) -> None:
        await ack()
        if self.desk is None or not self._ours(body.get("team_id")):
            return
        text = clean(body.get("text") or "")
        user, channel = str(body.get("user_id")), str(body.get("channel_id"))
        sender = await self.sender(user, client)
        if text in ("", "spawn") or text == "home":
            caller = await self.desk.access.caller(sender)
            if caller is not None and text != "home":
                await open_spawn(client, body.get("trigger_id"))
                return
            if caller is not None:
                text = "help"
        await self.desk.on_message(Incoming(ephemeral(channel, user), sender, as_command(text)))

    # -- messages -------------------------------------------------------------------------------

    async def message(self, body: dict[str, Any], event: dict[str, Any], client: Any) -> None:
        if self.desk is None or not self._ours(body.get("team_id")):
            return
        shared = event.get("subtype") == "file_share"
        if event.get("bot_id") or (event.get("subtype") and not shared) or not event.get("user"):
            return  # bots (ourselves too), edits, joins: not the operator talking
        if event.get("user") == self.front.bot_user_id:
            return
        channel, ts = str(event.get("channel")), str(event.get("ts"))
        if not self.front.seen.first(body.get("event_id"), f"msg:{channel}:{ts}"):
            return
        mentioned = event.get("type") == "app_mention"
        dm_chat = event.get("channel_type") == "im"
        thread = event.get("thread_ts")
        if not (mentioned or dm_chat or thread):
            return  # channel chatter that is not for us
        text = clean(event.get("text") or "")
        user = str(event["user"])
        sender = await self.sender(user, client)
        chat = ephemeral(channel, user, thread if is_ts(thread) else None)
        adapter = self.front.adapter
        if shared and adapter is not None:
            agent = None
            if thread and not dm_chat:
                agent = await self.front.fleet.agent_for_card(PLATFORM, ChatId(channel),
                                                              MessageId(str(thread)))
            await self.desk.on_message(Incoming(chat, sender, text, None,
                                                adapter.incoming_files(event), agent))
            return
        line = None
        if thread and not dm_chat and not text.startswith("!"):
            # A plain reply in a thread: what it means is the kit's rule (an agent's thread: a
            # message to the agent, or the answer to its open question); else it is a command.
            line = await self.desk.reply_line(ChatId(channel), MessageId(str(thread)), text)
        await self.desk.on_message(Incoming(chat, sender, line or as_command(text)))

    # -- buttons ---------------------------------------------------------------------------------

    def _chat_of(self, body: dict[str, Any]) -> tuple[ChatId, MessageId]:
        user = str(body["user"]["id"])
        channel = (body.get("channel") or {}).get("id") or (body.get("container") or {}).get(
            "channel_id")
        message = (body.get("message") or {}).get("ts") or (body.get("container") or {}).get(
            "message_ts") or ""
        if not channel:
            return dm(user), MessageId("")
        thread = (body.get("message") or {}).get("thread_ts")
        return ephemeral(str(channel), user, thread if is_ts(thread) else None), MessageId(
            str(message))

    async def button(self, ack: Any, body: dict[str, Any], action: dict[str, Any],
                     client: Any) -> None:
        await ack()
        if self.desk is None or self.front.adapter is None or not self._ours(
                (body.get("team") or {}).get("id")):
            return
        chat, message = self._chat_of(body)
        sender = await self.sender(str(body["user"]["id"]), client)
        value = str(action.get("value") or "")
        if value.startswith("i:"):
            if await self.desk.access.caller(sender) is None:
                await self.desk.on_tap(Tap(self.front.adapter.tap(chat), chat, message, sender,
                                           value))
                return
            row = await self.desk.fleet.escalation(value[2:])
            await open_details(client, body.get("trigger_id"), row)
            return
        await self.desk.on_tap(Tap(self.front.adapter.tap(chat), chat, message, sender,
                                   value or None))
        await self._changed()

    async def deny_reason(self, ack: Any, body: dict[str, Any], action: dict[str, Any],
                          client: Any) -> None:
        await ack()
        await open_deny(client, body.get("trigger_id"), str(action.get("value") or ""))

    async def open_spawn(self, ack: Any, body: dict[str, Any], client: Any) -> None:
        await ack()
        await open_spawn(client, body.get("trigger_id"))

    # -- modals ----------------------------------------------------------------------------------

    async def submitted(self, ack: Any, body: dict[str, Any], view: dict[str, Any],
                        client: Any) -> None:
        if self.desk is None or not self._ours((body.get("team") or {}).get("id")):
            await ack()
            return
        line, errors = command_of(view, live=[a.name for a in self.front.fleet.agents()])
        if errors:
            await ack(response_action="errors", errors=errors)
            return
        user = str(body["user"]["id"])
        sender = await self.sender(user, client)
        caller = await self.desk.access.caller(sender)
        if caller is None:
            await ack(response_action="errors",
                      errors={next(iter(view["state"]["values"]), "x"): "Not allowed."})
            return
        await ack()
        await self.desk.command(dm(user), caller, line)
        await self._changed()

    # -- Slack's own surfaces ---------------------------------------------------------------------

    async def home_opened(self, event: dict[str, Any], client: Any) -> None:
        if event.get("tab", "home") == "home":
            if self.front.home is not None:
                await self.front.home.opened(str(event.get("user")), client)

    async def session_stopped(self, body: dict[str, Any], event: dict[str, Any],
                              client: Any) -> None:
        """The native Stop button of an agent session: the turn stops like /stop."""
        if self.desk is None or not self.front.seen.first(body.get("event_id")):
            return
        channel = str(event.get("channel") or event.get("channel_id") or "")
        thread = str(event.get("thread_ts") or "")
        user = str(event.get("user") or event.get("user_id") or "")
        agent = await self.front.fleet.agent_for_card(PLATFORM, ChatId(channel),
                                                      MessageId(thread))
        if agent is None or not user:
            return
        sender = await self.sender(user, client)
        await self.desk.on_message(Incoming(ephemeral(channel, user, thread), sender,
                                            f"/stop {agent}"))

    async def shortcut(self, ack: Any, body: dict[str, Any], client: Any) -> None:
        await ack()
        agents = self.front.fleet.agents()
        text = clean((body.get("message") or {}).get("text") or "")
        await open_send(client, body.get("trigger_id"), agents, text)


def register(bolt: AsyncApp, front: Front) -> None:
    on = Listeners(front)
    bolt.command(front.settings.slack_command)(on.command)
    bolt.event("app_mention")(on.message)
    bolt.event("message")(on.message)
    bolt.event("app_home_opened")(on.home_opened)
    bolt.event(STOP_EVENT)(on.session_stopped)
    bolt.action(re.compile(r"^sb:\d+$"))(on.button)
    bolt.action(DENY_REASON)(on.deny_reason)
    bolt.action(OPEN_SPAWN)(on.open_spawn)
    bolt.view(re.compile(f"^({SPAWN_MODAL}|{DENY_MODAL}|{SEND_MODAL})$"))(on.submitted)
    bolt.shortcut(SEND_SHORTCUT)(on.shortcut)
