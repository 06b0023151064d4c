"""The front-end kit: everything a chat front end does that is not parsing or rendering."""

from bot.kit.actions import action_of
from bot.kit.links import Link, Links, LinkState
from bot.kit.outbox import ChatStats, Outbox, Pace, Priority
from bot.kit.ports import (
    ActivityKind,
    AgentActivity,
    AgentView,
    AuditEntry,
    ChatAdapter,
    ChatCopy,
    ChatError,
    ChatId,
    ChatRefused,
    ChatUnavailable,
    Clock,
    EscalationClosed,
    EventFeed,
    FileFetch,
    FileTooBig,
    FleetEvent,
    FleetPort,
    Incoming,
    IncomingFile,
    Layout,
    MessageId,
    Operator,
    RateLimited,
    Sender,
    SystemClock,
    Tap,
    TapId,
)
from bot.kit.service import CommandRunner, FrontDesk

__all__ = [
    "ActivityKind", "AgentActivity", "AgentView", "AuditEntry", "ChatAdapter", "ChatCopy",
    "ChatStats", "Link", "LinkState", "Links",
    "ChatError", "ChatId", "ChatRefused", "ChatUnavailable", "Clock", "CommandRunner",
    "EscalationClosed", "EventFeed", "FileFetch", "FileTooBig", "FleetEvent", "FleetPort",
    "FrontDesk", "Incoming", "IncomingFile",
    "Layout", "MessageId", "Operator", "Outbox", "Pace", "Priority", "RateLimited", "Sender",
    "SystemClock", "Tap", "TapId", "action_of",
]
