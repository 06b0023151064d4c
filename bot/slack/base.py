"""What every module of the Slack front end shares, importing none of them: the platform's
name, where a message goes (the kit's ChatId parsed as a Route), message timestamps, one Web API
call with its errors in the kit's terms, and the sanitiser every typed text passes."""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncSlackResponse

from bot.kit import ChatId, ChatRefused, ChatUnavailable, RateLimited
from supervisor import sanitize

PLATFORM = "slack"


# -- where a message goes: the kit's ChatId, parsed here only -----------------------------------


@dataclass(frozen=True, slots=True)
class Route:
    """`C…`: the channel; `eph:C:U[:TS]`: only U sees it (in TS's thread); `dm:U`: the app's
    DM with U (for App Home and modals, which have no channel)."""

    channel: str
    user: str | None = None
    thread: str | None = None
    ephemeral: bool = False

    @classmethod
    def of(cls, chat: ChatId) -> Route:
        kind, _, rest = chat.partition(":")
        if kind == "eph":
            channel, user, *thread = rest.split(":")
            return cls(channel, user, thread[0] if thread else None, True)
        if kind == "dm":
            return cls(rest, rest)
        return cls(chat)


def ephemeral(channel: str, user: str, thread: str | None = None) -> ChatId:
    return ChatId(f"eph:{channel}:{user}" + (f":{thread}" if thread else ""))


def dm(user: str) -> ChatId:
    return ChatId(f"dm:{user}")


def is_ts(value: str | None) -> bool:
    """A message timestamp (1700000000.000100), as thread_ts needs: not a file id."""
    head, _, tail = (value or "").partition(".")
    return head.isdigit() and tail.isdigit()


async def call(request: Awaitable[AsyncSlackResponse]) -> AsyncSlackResponse:
    """One Web API call, its errors in the kit's terms."""
    try:
        return await request
    except SlackApiError as exc:
        response = exc.response
        error = str(response.get("error") or "")
        if error == "ratelimited" or response.status_code == 429:
            retry = float(response.headers.get("Retry-After", response.headers.get(
                "retry-after", "1")))
            raise RateLimited(retry, error) from exc
        if response.status_code >= 500 or error in ("internal_error", "fatal_error",
                                                    "service_unavailable", "request_timeout"):
            raise ChatUnavailable(error or f"HTTP {response.status_code}") from exc
        raise ChatRefused(error or str(exc)) from exc
    except (aiohttp.ClientError, SlackClientError, TimeoutError, OSError) as exc:
        raise ChatUnavailable(str(exc) or type(exc).__name__) from exc


def sanitise(text: str) -> str:
    """Every piece of text typed in Slack passes here before Switchboard reads it: messages,
    slash commands, modal fields: the kit's sanitiser (control characters, terminal escapes,
    lone surrogates), then trimmed. Text over the kit's size limit is passed on whole, for the
    front desk to refuse with its reason."""
    cleaned = sanitize.clean(text)
    return (text if cleaned.problem else cleaned.text).strip()
