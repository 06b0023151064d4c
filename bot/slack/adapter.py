"""Slack as the kit's ChatAdapter: Replies as Block Kit in the channel (an agent's messages under
its card, the thread's top message), replies to one operator as ephemeral messages, long output
as files, and button presses answered only where the presser must read something."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from slack_sdk.web.async_client import AsyncWebClient

from bot.kit import (
    ChatId,
    ChatRefused,
    ChatUnavailable,
    FileTooBig,
    IncomingFile,
    Layout,
    MessageId,
    TapId,
)
from bot.slack import render
from bot.slack.base import PLATFORM, Route, call, is_ts
from commands.base import Attachment, Reply

FILE_HOST = "files.slack.com"


class SlackAdapter:
    """The kit's ChatAdapter over one AsyncWebClient: Replies as Block Kit, every agent's
    messages in the channel (under its card, the thread's top message), replies to one
    operator as ephemeral messages, long output as files."""

    platform = PLATFORM

    def __init__(self, client: AsyncWebClient, channel: str) -> None:
        self.client = client
        self.channel = channel
        self._taps: OrderedDict[str, ChatId] = OrderedDict()
        self._tap_ids = 0
        self._dms: dict[str, str] = {}

    def layout(self, reply: Reply, /) -> Layout:
        return render.layout(reply)

    async def direct_chat(self, user_id: str, /) -> ChatId:
        return ChatId(self.channel)  # operators share the channel; each agent has a thread

    async def send(self, chat: ChatId, reply: Reply, /, *, reply_to: MessageId | None = None,
                   silent: bool = False, offer_kill: bool = False) -> MessageId:
        route = Route.of(chat)
        body = render.message(reply)
        thread = route.thread or (reply_to if is_ts(reply_to) else None)
        if route.ephemeral:
            assert route.user is not None
            sent = await call(self.client.chat_postEphemeral(
                channel=route.channel, user=route.user, thread_ts=thread, **body))
            return MessageId(str(sent.get("message_ts") or ""))
        sent = await call(self.client.chat_postMessage(
            channel=route.channel, thread_ts=thread, unfurl_links=False, unfurl_media=False,
            **body))
        return MessageId(str(sent["ts"]))

    async def edit(self, chat: ChatId, message: MessageId, reply: Reply, /) -> None:
        route = Route.of(chat)
        if route.ephemeral or not is_ts(message):
            return  # an ephemeral message cannot be edited by the Web API
        await call(self.client.chat_update(channel=route.channel, ts=message,
                                           **render.message(reply)))

    async def _dm_channel(self, user: str) -> str:
        if user not in self._dms:
            opened = await call(self.client.conversations_open(users=user))
            self._dms[user] = str(opened["channel"]["id"])
        return self._dms[user]

    async def send_document(self, chat: ChatId, document: Attachment, /, *, caption: str = "",
                            reply_to: MessageId | None = None) -> MessageId:
        route = Route.of(chat)
        channel = await self._dm_channel(route.user) if route.user else route.channel
        thread = None if route.user else (route.thread or (reply_to if is_ts(reply_to)
                                                            else None))
        done = await call(self.client.files_upload_v2(
            channel=channel, thread_ts=thread, content=document.content,
            filename=document.filename, title=document.filename,
            initial_comment=render.escape(caption) or None))
        return MessageId(str((done.get("file") or {}).get("id") or ""))

    def incoming_files(self, event: dict[str, Any]) -> tuple[IncomingFile, ...]:
        """The files of a `file_share` message, each downloaded on demand."""
        out = []
        for f in event.get("files") or []:
            if not isinstance(f, dict):
                continue
            url = str(f.get("url_private_download") or f.get("url_private") or "")
            mime = str(f.get("mimetype") or "") or None
            kind = "photo" if (mime or "").startswith("image/") else "document"
            size = f.get("size")
            out.append(IncomingFile(str(f.get("name") or ""), kind,
                                    int(size) if isinstance(size, int) else None, mime,
                                    self._fetcher(url, size if isinstance(size, int) else None)))
        return tuple(out)

    def _trusted(self, url: str) -> bool:
        """Our bot token goes only to Slack's file host or the API's own host (a test fake, an
        Enterprise Grid host): never to whatever host an event names."""
        host = urlsplit(url).hostname or ""
        api = urlsplit(self.client.base_url).hostname or ""
        return urlsplit(url).scheme in ("https", "http") and host in (FILE_HOST, api)

    def _fetcher(self, url: str, declared: int | None) -> Any:
        async def fetch(limit: int, /) -> bytes:
            if declared is not None and declared > limit:
                raise FileTooBig(declared)
            if not self._trusted(url):
                raise ChatRefused(f"the file's address is not Slack's ({urlsplit(url).hostname})")
            headers = {"Authorization": f"Bearer {self.client.token}"}
            try:
                async with aiohttp.ClientSession() as session, session.get(
                        url, headers=headers, allow_redirects=False) as resp:
                    if resp.status != 200:
                        raise ChatUnavailable(f"Slack answered {resp.status} for the file")
                    if resp.content_type == "text/html":
                        # Slack's answer to a download it will not authorise: a sign-in page.
                        raise ChatRefused("Slack sent a sign-in page instead of the file; the "
                                          "app needs the files:read scope")
                    data = await resp.content.read(limit + 1)
            except aiohttp.ClientError as exc:
                raise ChatUnavailable(str(exc)) from exc
            if len(data) > limit:
                raise FileTooBig(None)
            return data
        return fetch

    def tap(self, chat: ChatId) -> TapId:
        """A button press, answered (if at all) with a message only its presser sees."""
        self._tap_ids += 1
        tap = TapId(f"t{self._tap_ids}")
        self._taps[tap] = chat
        while len(self._taps) > 1000:
            self._taps.popitem(last=False)
        return tap

    async def answer_tap(self, tap: TapId, text: str = "", /, *, alert: bool = False) -> None:
        # Slack has no toast: only what the presser must read ("not allowed", "already
        # answered by …") is sent; "Done." is the card changing.
        chat = self._taps.get(tap)
        if chat is None or not alert or not text:
            return
        await self.send(chat, Reply.text(text))
