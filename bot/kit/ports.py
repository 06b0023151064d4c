"""The kit's seams: the platform side (ChatAdapter), the fleet side (FleetPort), the Clock, and
the small frozen values and errors that cross them."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import NewType, Protocol

from commands.base import Attachment, Button, Reply, Role
from supervisor.api import AgentDetail, AuditView, EscalationEvent, Event, HaltView
from supervisor.api import AgentView as FleetAgent
from supervisor.api import EscalationView as EscalationRow

ChatId = NewType("ChatId", str)  # a platform's chat (Telegram: the chat id; Slack: a channel)
MessageId = NewType("MessageId", str)
TapId = NewType("TapId", str)  # a button press, to be answered once

# The escalation read model the kit renders. Today the store's row; supervisor.api's frozen model
# takes its place when it lands (the kit reads fields only).
Escalation = EscalationRow


# -- errors the adapter raises, so the outbox knows what to do ----------------------------------


class ChatError(Exception):
    """Root of what a ChatAdapter raises.

    ChatError
    ├── RateLimited(retry_after_s)   the platform said "not now": wait that long, then retry
    ├── ChatUnavailable              timeouts, 5xx, connection refused: retry with backoff
    ├── ChatRefused                  the platform will never take this call (bad request,
    │                                blocked by the user): fail it, keep going
    └── FileTooBig(size)             a file to download is over the limit
    """


class RateLimited(ChatError):
    def __init__(self, retry_after_s: float, detail: str = "") -> None:
        super().__init__(f"rate limited, retry after {retry_after_s:.1f}s {detail}".strip())
        self.retry_after_s = retry_after_s


class ChatUnavailable(ChatError):
    pass


class ChatRefused(ChatError):
    pass


class FileTooBig(ChatError):
    """A file to download is over the limit (the platform said how big: `size`)."""

    def __init__(self, size: int | None) -> None:
        super().__init__(f"the file is too big ({size} bytes)" if size else "the file is too big")
        self.size = size


# -- the platform side ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Layout:
    """How a platform splits a Reply: messages that each fit one platform message (the last
    carries the reply's buttons) and files to send after them."""

    messages: tuple[Reply, ...]
    files: tuple[Attachment, ...] = ()


class ChatAdapter(Protocol):
    """One chat platform, parsing and rendering only. Every method is one platform call; the
    kit's outbox orders, retries and merges them. An edit that changes nothing succeeds."""

    @property
    def platform(self) -> str: ...

    def layout(self, reply: Reply, /) -> Layout: ...

    async def direct_chat(self, user_id: str, /) -> ChatId:
        """The private chat with this user (Telegram: the user id itself)."""
        ...

    async def send(self, chat: ChatId, reply: Reply, /, *, reply_to: MessageId | None = None,
                   silent: bool = False, offer_kill: bool = False) -> MessageId:
        """One message that fits (see `layout`). `silent`: no notification on the phone.
        `offer_kill`: show the platform's persistent kill-everything control with it."""
        ...

    async def edit(self, chat: ChatId, message: MessageId, reply: Reply, /) -> None: ...

    async def send_document(self, chat: ChatId, document: Attachment, /, *, caption: str = "",
                            reply_to: MessageId | None = None) -> MessageId: ...

    async def answer_tap(self, tap: TapId, text: str = "", /, *, alert: bool = False) -> None: ...


# -- what the adapter hands the kit -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Sender:
    user_id: str
    name: str  # what the platform calls them (username, else first name, else the id)


class FileFetch(Protocol):
    """Download a file the operator sent: at most `limit` + 1 bytes (more means too big).
    Raises ChatError when the platform will not give it."""

    async def __call__(self, limit: int, /) -> bytes: ...


@dataclass(frozen=True, slots=True)
class IncomingFile:
    """A photo or file attached to a message, not downloaded yet."""

    name: str  # as sent: untrusted, checked by the supervisor
    kind: str  # photo | document
    size: int | None  # as the platform declares it, if it does
    mime: str | None
    fetch: FileFetch


@dataclass(frozen=True, slots=True)
class Incoming:
    chat: ChatId
    sender: Sender
    text: str  # with files: their caption
    reply_to: MessageId | None = None  # the message this one answers, if any
    files: tuple[IncomingFile, ...] = ()
    agent_id: str | None = None  # the agent the platform knows it is for (Slack: the thread's)


@dataclass(frozen=True, slots=True)
class Tap:
    tap: TapId
    chat: ChatId
    message: MessageId
    sender: Sender
    action: str | None  # the button's action (see bot.kit.actions); None: no longer known


# -- the clock -----------------------------------------------------------------------------------


class Clock(Protocol):
    """Wall time, monotonic time and sleeping, injected so loops can be driven in tests.
    Positional-only, so any clock of this shape (supervisor/clock.py's) satisfies it."""

    def now(self) -> float: ...

    def monotonic(self) -> float: ...

    async def sleep(self, seconds: float, /) -> None: ...


class SystemClock:
    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float, /) -> None:
        await asyncio.sleep(seconds)


# -- the fleet side ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Operator:
    platform: str
    user_id: str
    name: str
    role: Role
    added_by: str


@dataclass(frozen=True, slots=True)
class AuditEntry:
    platform: str
    user_id: str
    user_name: str
    action: str
    args: str
    ok: bool
    result: str


@dataclass(frozen=True, slots=True)
class ChatCopy:
    """Where one escalation was shown: edited when it is answered or expires."""

    escalation_id: str
    platform: str
    chat: ChatId
    message: MessageId


@dataclass(frozen=True, slots=True)
class AgentView:
    """What a status card shows of one agent."""

    id: str
    name: str
    state: str
    live: bool
    current_tool: str | None
    created_at: float
    turns: int
    cost_usd: float
    buttons: tuple[Button, ...] = ()


class ActivityKind(StrEnum):
    STATE = "state"
    TOOL = "tool"  # text: the tool call in one line
    TEXT = "text"  # text: what the agent wrote
    TURN = "turn"  # a turn finished


@dataclass(frozen=True, slots=True)
class AgentActivity:
    agent_id: str
    kind: ActivityKind
    text: str = ""


@dataclass(frozen=True, slots=True)
class EscalationClosed:
    """An escalation was answered, expired or cancelled: its copies are out of date."""

    escalation: Escalation
    at: float = field(default_factory=time.time)


FleetEvent = AgentActivity | EscalationClosed


class EventFeed(Protocol):
    async def next(self) -> FleetEvent: ...


class FleetPort(Protocol):
    """The fleet calls the kit and the front ends make (none reaches supervisor.api itself);
    satisfied over supervisor.api by bot/fleet.py (ApiFleet). What it returns are the API's
    frozen read models or the kit's own values."""

    async def operator(self, platform: str, user_id: str, /) -> Operator | None: ...

    async def operators(self, platform: str, /) -> Sequence[Operator]: ...

    async def save_operator(self, operator: Operator, /) -> None: ...

    async def redeem_invite(self, code: str, used_by: str, /) -> Role | None: ...

    async def audit(self, entry: AuditEntry, /) -> None: ...

    async def notify(self, title: str, body: str, /) -> None:
        """A notice to every front end (it needs no answer)."""
        ...

    def follow_escalations(self, frontend: str, /) -> AsyncIterator[Escalation]:
        """Every escalation and notice not yet acknowledged by `frontend`, then new ones."""
        ...

    async def ack_escalation(self, escalation_id: str, frontend: str, /) -> None: ...

    async def escalation(self, escalation_id: str, /) -> Escalation | None: ...

    async def record_copy(self, copy: ChatCopy, /) -> None: ...

    async def copies(self, escalation_id: str, platform: str, /) -> Sequence[ChatCopy]: ...

    async def escalation_for_message(self, platform: str, chat: ChatId,
                                     message: MessageId, /) -> str | None: ...

    async def unsettled(self, platform: str, /) -> Sequence[Escalation]:
        """Closed escalations with copies on `platform` not yet edited to say so."""
        ...

    async def settle(self, escalation_id: str, platform: str, /) -> None:
        """Its copies on `platform` now show the outcome."""
        ...

    def subscribe(self) -> contextlib.AbstractContextManager[EventFeed]: ...

    async def agent(self, agent_id: str, /) -> AgentView | None: ...

    async def card(self, platform: str, agent_id: str, chat: ChatId, /) -> MessageId | None:
        """The message of the agent's status card in `chat`, if one was ever sent."""
        ...

    async def record_card(self, platform: str, agent_id: str, chat: ChatId,
                          message: MessageId, /) -> None: ...

    async def agent_for_card(self, platform: str, chat: ChatId, message: MessageId,
                             /) -> str | None:
        """The agent whose status card `message` in `chat` is (Slack: the top of its thread)."""
        ...

    async def pending(self, agent_id: str | None = None, /) -> Sequence[Escalation]:
        """Open escalations: one agent's, or every one."""
        ...

    # -- files --------------------------------------------------------------------------------

    def attachment_limit(self) -> int:
        """The largest file, in bytes, an operator may send an agent."""
        ...

    async def outgoing_file(self, file_id: str, /) -> Attachment | None:
        """A file an agent sent out (a notice's ref_id when its tool_name is SENT_FILE)."""
        ...

    async def attach(self, agent_id: str, sent: IncomingFile, data: bytes, caption: str,
                     by: Sender, platform: str, /) -> Reply:
        """Store a file the operator sent in the agent's workspace and queue the turn that
        tells the agent; the reply says where it went, or why it was refused."""
        ...

    # -- what a front end's own surfaces show (Slack's App Home and modals, the console) -------

    def agents(self, *, include_ended: bool = False) -> Sequence[FleetAgent]: ...

    async def agent_detail(self, agent_id: str, /) -> AgentDetail | None: ...

    async def recent_actions(self, n: int, /) -> Sequence[AuditView]: ...

    def halt_state(self) -> HaltView | None: ...

    def events(self) -> AsyncIterator[Event | EscalationEvent]:
        """Every event from now on, as the supervisor publishes it (the console prints them
        whole; the chats follow `subscribe`'s digest)."""
        ...
