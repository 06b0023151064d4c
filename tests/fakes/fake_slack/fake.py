"""FakeSlack: a loopback Slack Web API (the methods Switchboard calls, with Slack's shapes,
error names and limits, rate limits with 429 + Retry-After) and a Socket Mode WebSocket
server (hello, envelopes, acks, disconnect/refresh), on aiohttp in a thread of its own; and
the users' side: slash commands, events, button clicks, modal submissions and App Home,
delivered over Socket Mode or as correctly signed HTTP requests."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import math
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, quote

import aiohttp
from aiohttp import web

from tests.fakes.fake_slack.blocks import MESSAGE_TEXT_REFUSED, check_blocks
from tests.fakes.fake_slack.signing import sign

BOT_TOKEN, APP_TOKEN, SIGNING_SECRET = "xoxb-fake-bot-token", "xapp-fake-app-token", "fake-secret"
TEAM, BOT_USER, APP_ID = "T0FAKE", "UBOT", "A0FAKE"
CHANNEL = "C0AGENTS"
PACED = ("chat.postMessage", "chat.update", "chat.postEphemeral")
FATAL_ON = ("auth.test", "apps.connections.open")


class ApiError(Exception):
    def __init__(self, error: str, status: int = 200, **extra: Any) -> None:
        super().__init__(error)
        self.error, self.status, self.extra = error, status, extra


class FakeSlack:
    """All public methods are thread-safe; the `async` ones are awaited from the test's loop.

    Inspection: `messages`, `thread`, `top`, `ephemerals`, `homes`, `modals`, `files`,
    `calls`, `errors` (every refusal a test did not ask for), `statuses`, `acks`, `delivered`.
    Faults: `rate_per_s` (a per-channel bucket with `burst`), `storm(n)`, `refuse(error)`,
    `agent_sessions` (False: agents.sessions.setStatus is not allowed), `refresh()`.
    """

    def __init__(self, *, rate_per_s: float | None = None, burst: int = 4,
                 retry_after_s: int = 1) -> None:
        self.rate_per_s, self.burst, self.retry_after_s = rate_per_s, burst, retry_after_s
        self.lock = threading.RLock()
        self.url = ""
        self.users: dict[str, dict[str, Any]] = {}
        self.messages: list[dict[str, Any]] = []
        self.ephemerals: list[dict[str, Any]] = []
        self.homes: dict[str, list[dict[str, Any]]] = {}
        self.modals: list[dict[str, Any]] = []
        self.files: list[dict[str, Any]] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.errors: list[dict[str, Any]] = []
        self.statuses: list[tuple[str, str, str, str]] = []
        self.acks: dict[str, Any] = {}
        self.delivered: list[tuple[float, str, str]] = []  # (monotonic, method, channel) taken
        self.limited = 0  # 429s answered
        self.connections = 0
        self.agent_sessions = True
        self._refusal: str | None = None
        self._storm = 0
        self._buckets: dict[str, tuple[float, float]] = {}  # per channel, all paced methods
        self._seq = itertools.count(1)
        self._uploads: dict[str, dict[str, Any]] = {}
        self._shared: dict[str, dict[str, Any]] = {}  # files users shared, by id
        self.downloads: list[tuple[str, bool]] = []  # (file id, authorised) of each GET
        self._sockets: list[web.WebSocketResponse] = []
        self._waiting: dict[str, asyncio.Future[Any]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.http_target: str | None = None  # HTTP mode: where the app listens
        self.signing_secret = SIGNING_SECRET
        self.add_user(BOT_USER, "switchboard", bot=True)

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> FakeSlack:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            loop.run_until_complete(self._serve())
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._shutdown())
            loop.close()

        self._thread = threading.Thread(target=run, name="FakeSlack", daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    async def _serve(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/api/{method}", self._api)
        app.router.add_get("/api/{method}", self._api)
        app.router.add_post("/upload/{file_id}", self._upload)
        app.router.add_get("/files-pri/{team_file}/{name}", self._download)
        app.router.add_get("/files-pri/{team_file}/download/{name}", self._download)
        app.router.add_get("/link/", self._socket)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.base = f"http://127.0.0.1:{port}"
        self.url = f"{self.base}/api/"
        self._session = aiohttp.ClientSession()

    async def _shutdown(self) -> None:
        for ws in list(self._sockets):
            with contextlib.suppress(Exception):
                await ws.close()
        if self._session is not None:
            await self._session.close()
        if self._runner is not None:
            await self._runner.cleanup()

    def stop(self) -> None:
        loop = self._loop
        if loop is not None and self._thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            self._thread.join(10)
        self._loop = self._thread = None

    def __enter__(self) -> FakeSlack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- set-up and faults ----------------------------------------------------------------------

    def add_user(self, user_id: str, name: str, *, team: str = TEAM, bot: bool = False) -> None:
        with self.lock:
            self.users[user_id] = {"id": user_id, "name": name, "team_id": team, "is_bot": bot,
                                   "profile": {"display_name": name}}

    def storm(self, n: int) -> None:
        """The next `n` paced calls are answered 429 ratelimited, with Retry-After."""
        with self.lock:
            self._storm = n

    def refuse(self, error: str | None) -> None:
        """auth.test and apps.connections.open answer this error (invalid_auth...)."""
        with self.lock:
            self._refusal = error

    # -- the Web API ----------------------------------------------------------------------------

    async def _params(self, request: web.Request) -> dict[str, Any]:
        raw = await request.read()
        if request.method == "GET":
            params: dict[str, Any] = dict(request.query)
        elif request.content_type == "application/json":
            params = json.loads(raw or b"{}")
        elif request.content_type == "multipart/form-data":
            form = await request.post()
            for k, v in form.items():
                params[k] = v if isinstance(v, str) else "<file>"
        else:
            params = dict(parse_qsl(raw.decode()))
        params = {**dict(request.query), **params}  # the SDK sends some arguments as a query
        for key in ("blocks", "view", "files"):
            if isinstance(params.get(key), str):
                with contextlib.suppress(ValueError):
                    params[key] = json.loads(params[key])
        auth = request.headers.get("Authorization", "")
        params.setdefault("token", auth.removeprefix("Bearer ").strip())
        return params

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params = await self._params(request)
        with self.lock:
            self.calls.append((method, {k: v for k, v in params.items() if k != "token"}))
        try:
            self._check_token(method, params)
            self._pace(method, str(params.get("channel") or params.get("channel_id") or ""))
            handler: Callable[[dict[str, Any]], dict[str, Any]] = getattr(
                self, "m_" + method.replace(".", "_"), self._unknown)
            with self.lock:
                result = handler(params)
        except ApiError as exc:
            body: dict[str, Any] = {"ok": False, "error": exc.error, **exc.extra}
            headers = {}
            if exc.error == "ratelimited":
                headers["Retry-After"] = str(exc.extra.pop("retry_after"))
                body = {"ok": False, "error": "ratelimited"}
            elif not exc.extra.get("injected"):
                with self.lock:
                    self.errors.append({"method": method, **body})
            body.pop("injected", None)
            return web.json_response(body, status=exc.status, headers=headers)
        except Exception as exc:  # a bug of the fake, or a call it cannot read: loud
            with self.lock:
                self.errors.append({"method": method, "error": "fake_crashed", "detail": repr(exc)})
            return web.json_response({"ok": False, "error": "fatal_error"}, status=500)
        return web.json_response({"ok": True, **result})

    def _check_token(self, method: str, params: dict[str, Any]) -> None:
        token = params.get("token")
        if method in FATAL_ON and self._refusal:
            raise ApiError(self._refusal, injected=True)
        wanted = APP_TOKEN if method == "apps.connections.open" else BOT_TOKEN
        if token != wanted:
            raise ApiError("invalid_auth" if token else "not_authed")

    def _pace(self, method: str, channel: str) -> None:
        if method not in PACED:
            return
        with self.lock:
            if self._storm > 0:
                self._storm -= 1
                self.limited += 1
                raise ApiError("ratelimited", 429, retry_after=self.retry_after_s)
            if self.rate_per_s is None:
                return
            now = time.monotonic()
            tokens, at = self._buckets.get(channel, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - at) * self.rate_per_s)
            if tokens < 1:
                self.limited += 1
                self._buckets[channel] = (tokens, now)
                wait = math.ceil((1 - tokens) / self.rate_per_s)
                raise ApiError("ratelimited", 429, retry_after=max(1, wait))
            self._buckets[channel] = (tokens - 1, now)

    def _unknown(self, params: dict[str, Any]) -> dict[str, Any]:
        raise ApiError("unknown_method")

    def _ts(self) -> str:
        return f"{int(time.time())}.{next(self._seq):06d}"

    def _content(self, params: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
        text = str(params.get("text") or "")
        blocks = params.get("blocks")
        if blocks is None and not text:
            raise ApiError("no_text")
        if blocks is not None:
            errors, size = check_blocks(blocks)
            if errors:
                raise ApiError("invalid_blocks", errors=errors)
            if size > MESSAGE_TEXT_REFUSED:
                raise ApiError("msg_too_long")
            if not text:
                raise ApiError("missing_text_fallback")  # the SDK warns; we refuse outright
        return text[:40_000], blocks or []

    def _channel(self, params: dict[str, Any], key: str = "channel") -> str:
        channel = str(params.get(key) or "")
        if channel in self.users:  # a user id: the app's DM with them
            return "D" + channel
        if not channel or channel[0] not in "CDG":
            raise ApiError("channel_not_found")
        return channel

    def _thread_of(self, channel: str, thread_ts: Any) -> str | None:
        if not thread_ts:
            return None
        top = self.find(channel, str(thread_ts))
        if top is None or top.get("thread_ts"):
            raise ApiError("thread_not_found")
        return str(thread_ts)

    def m_auth_test(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"url": "https://fake.slack.com/", "team": "Fake", "user": "switchboard",
                "team_id": TEAM, "user_id": BOT_USER, "bot_id": "BFAKE"}

    def m_apps_connections_open(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"url": f"ws://{self.base.removeprefix('http://')}/link/?ticket={next(self._seq)}"}

    def m_chat_postMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel(params)
        text, blocks = self._content(params)
        thread = self._thread_of(channel, params.get("thread_ts"))
        ts = self._ts()
        msg = {"channel": channel, "ts": ts, "thread_ts": thread, "text": text, "blocks": blocks,
               "edits": 0, "history": [], "at": time.time()}
        self.messages.append(msg)
        self.delivered.append((time.monotonic(), "chat.postMessage", channel))
        return {"channel": channel, "ts": ts, "message": {"text": text, "ts": ts}}

    def m_chat_update(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel(params)
        msg = self.find(channel, str(params.get("ts")))
        if msg is None:
            raise ApiError("message_not_found")
        text, blocks = self._content(params)
        msg["history"].append(msg["text"])
        msg.update(text=text, blocks=blocks, edits=msg["edits"] + 1)
        self.delivered.append((time.monotonic(), "chat.update", channel))
        return {"channel": channel, "ts": msg["ts"], "text": text}

    def m_chat_postEphemeral(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel(params)
        user = str(params.get("user") or "")
        if user not in self.users:
            raise ApiError("user_not_in_channel")
        text, blocks = self._content(params)
        ts = self._ts()
        self.ephemerals.append({"channel": channel, "user": user, "text": text,
                                "blocks": blocks, "thread_ts": params.get("thread_ts"),
                                "ts": ts})
        self.delivered.append((time.monotonic(), "chat.postEphemeral", channel))
        return {"message_ts": ts}

    def m_conversations_open(self, params: dict[str, Any]) -> dict[str, Any]:
        user = str(params.get("users") or "")
        if user not in self.users:
            raise ApiError("user_not_found")
        return {"channel": {"id": "D" + user}}

    def m_users_info(self, params: dict[str, Any]) -> dict[str, Any]:
        user = self.users.get(str(params.get("user")))
        if user is None:
            raise ApiError("user_not_found")
        return {"user": user}

    def _view(self, params: dict[str, Any]) -> dict[str, Any]:
        view = params.get("view")
        if not isinstance(view, dict):
            raise ApiError("invalid_arguments")
        errors, _ = check_blocks(view.get("blocks") or [], view=True)
        if errors:
            raise ApiError("invalid_arguments", response_metadata={"messages": errors})
        return view

    def m_views_publish(self, params: dict[str, Any]) -> dict[str, Any]:
        view = self._view(params)
        user = str(params.get("user_id"))
        if view.get("type") != "home" or user not in self.users:
            raise ApiError("invalid_arguments")
        self.homes[user] = view["blocks"]
        return {"view": {"id": f"V{next(self._seq)}", **view}}

    def m_views_open(self, params: dict[str, Any]) -> dict[str, Any]:
        view = self._view(params)
        if not params.get("trigger_id"):
            raise ApiError("invalid_trigger_id")
        entry = {"trigger_id": params["trigger_id"], "view": view, "id": f"V{next(self._seq)}"}
        self.modals.append(entry)
        return {"view": {"id": entry["id"], **view}}

    def m_files_getUploadURLExternal(self, params: dict[str, Any]) -> dict[str, Any]:
        fid = f"F{next(self._seq):08d}"
        self._uploads[fid] = {"filename": params.get("filename"),
                              "length": int(params.get("length") or 0), "content": None}
        return {"upload_url": f"{self.base}/upload/{fid}", "file_id": fid}

    async def _upload(self, request: web.Request) -> web.Response:
        fid = request.match_info["file_id"]
        data = await request.read()
        with self.lock:
            if fid not in self._uploads:
                return web.Response(status=404, text="not found")
            self._uploads[fid]["content"] = data
        return web.Response(text=f"OK - {len(data)}")

    def user_file(self, user: str, content: bytes, name: str,
                  mimetype: str = "application/octet-stream") -> dict[str, Any]:
        """A file a user uploads into Slack, as a `file_share` message's `files` carry it:
        `url_private` and `url_private_download` on the fake's host, which serve the bytes
        only with the bot token as a Bearer header (without it, as Slack does, a sign-in page
        in HTML with status 200)."""
        fid = f"F{next(self._seq):08d}"
        with self.lock:
            self._shared[fid] = {"content": content, "mimetype": mimetype}
        quoted = quote(name or "file", safe="")
        base = f"{self.base}/files-pri/{TEAM}-{fid}"
        filetype = name.rsplit(".", 1)[-1].lower() if "." in name else "binary"
        return {"id": fid, "created": int(time.time()), "timestamp": int(time.time()),
                "name": name, "title": name, "mimetype": mimetype, "filetype": filetype,
                "pretty_type": filetype.upper(), "user": user, "user_team": TEAM,
                "editable": False, "size": len(content), "mode": "hosted",
                "is_external": False, "external_type": "", "is_public": False,
                "public_url_shared": False, "display_as_bot": False, "username": "",
                "url_private": f"{base}/{quoted}",
                "url_private_download": f"{base}/download/{quoted}",
                "permalink": f"{self.base}/files/{user}/{fid}/{quoted}",
                "is_starred": False, "has_rich_preview": False, "file_access": "visible"}

    def file_share_event(self, user: str, text: str, files: list[dict[str, Any]], *,
                         channel: str = CHANNEL, thread_ts: str | None = None,
                         **extra: Any) -> dict[str, Any]:
        """The `message` event (subtype `file_share`) of a user sharing files."""
        return self.message_event(user, text, channel=channel, thread_ts=thread_ts,
                                  subtype="file_share", files=files, upload=False,
                                  display_as_bot=False, **extra)

    async def _download(self, request: web.Request) -> web.Response:
        fid = request.match_info["team_file"].rsplit("-", 1)[-1]
        authorised = request.headers.get("Authorization") == f"Bearer {BOT_TOKEN}"
        with self.lock:
            self.downloads.append((fid, authorised))
            shared = self._shared.get(fid)
        if not authorised:
            return web.Response(text="<!DOCTYPE html><html><body>Sign in to Slack</body></html>",
                                content_type="text/html")
        if shared is None:
            return web.Response(status=404, text="file not found")
        return web.Response(body=shared["content"], content_type=shared["mimetype"])

    def m_files_completeUploadExternal(self, params: dict[str, Any]) -> dict[str, Any]:
        out = []
        channel = self._channel(params, "channel_id") if params.get("channel_id") else None
        thread = self._thread_of(channel, params.get("thread_ts")) if channel else None
        for f in params.get("files") or []:
            upload = self._uploads.pop(str(f.get("id")), None)
            if upload is None or upload["content"] is None:
                raise ApiError("file_not_found")
            entry = {"id": f["id"], "channel": channel, "thread_ts": thread,
                     "filename": upload["filename"], "content": upload["content"],
                     "comment": params.get("initial_comment")}
            self.files.append(entry)
            out.append({"id": f["id"], "title": f.get("title") or upload["filename"]})
        return {"files": out}

    def m_assistant_threads_setStatus(self, params: dict[str, Any]) -> dict[str, Any]:
        self.statuses.append(("assistant.threads.setStatus", str(params.get("channel_id")),
                              str(params.get("thread_ts")), str(params.get("status"))))
        return {}

    def m_agents_sessions_setStatus(self, params: dict[str, Any]) -> dict[str, Any]:
        if not self.agent_sessions:
            raise ApiError("not_allowed", injected=True)
        self.statuses.append(("agents.sessions.setStatus", str(params.get("channel_id")),
                              str(params.get("thread_ts")), str(params.get("status"))))
        return {}

    # -- Socket Mode ----------------------------------------------------------------------------

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        # Counted before the handshake's answer goes out: the client's connect returns as soon
        # as it has that answer, and a count made after it raced the client (a test that
        # looked at once saw 0 connections, in a fresh-clone run of 284b779's suite).
        with self.lock:
            self.connections += 1
        await ws.prepare(request)
        self._sockets.append(ws)
        await ws.send_json({"type": "hello", "num_connections": len(self._sockets),
                            "connection_info": {"app_id": APP_ID},
                            "debug_info": {"host": "fake", "approximate_connection_time": 3600}})
        try:
            async for msg in ws:
                if msg.type != aiohttp.WSMsgType.TEXT:
                    continue
                data = json.loads(msg.data)
                envelope = data.get("envelope_id")
                with self.lock:
                    self.acks[envelope] = data.get("payload")
                fut = self._waiting.pop(envelope, None)
                if fut is not None and not fut.done():
                    fut.set_result(data.get("payload"))
        finally:
            if ws in self._sockets:
                self._sockets.remove(ws)
        return ws

    async def _envelope(self, kind: str, payload: dict[str, Any], retry: int,
                        timeout_s: float) -> Any:
        deadline = time.monotonic() + timeout_s
        while not self._sockets:
            if time.monotonic() > deadline:
                raise TimeoutError("no Socket Mode connection")
            await asyncio.sleep(0.02)
        envelope = f"env-{next(self._seq)}"
        fut = asyncio.get_running_loop().create_future()
        self._waiting[envelope] = fut
        await self._sockets[-1].send_json({
            "envelope_id": envelope, "type": kind, "payload": payload,
            "accepts_response_payload": kind != "events_api", "retry_attempt": retry,
            "retry_reason": "timeout" if retry else ""})
        return await asyncio.wait_for(fut, timeout_s)  # acked within 3 s in Slack's terms

    def refresh(self) -> None:
        """Slack's "refresh_requested": the app must reconnect with a new URL."""
        self._run(self._refresh())

    async def _refresh(self) -> None:
        for ws in list(self._sockets):
            await ws.send_json({"type": "disconnect", "reason": "refresh_requested"})

    # -- HTTP mode ------------------------------------------------------------------------------

    async def post(self, body: str, content_type: str, *, timestamp: int | None = None,
                   secret: str | None = None, retry: int = 0) -> tuple[int, str]:
        """One request to the app, signed with `secret` (the right one by default) at
        `timestamp` (now by default); awaited from the test's loop."""
        return await asyncio.wrap_future(self._run(self._post(
            body, content_type, timestamp=timestamp, secret=secret, retry=retry)))

    async def _post(self, body: str, content_type: str, *, timestamp: int | None = None,
                    secret: str | None = None, retry: int = 0) -> tuple[int, str]:
        assert self.http_target and self._session is not None
        ts = int(time.time()) if timestamp is None else timestamp
        headers = {"Content-Type": content_type, "X-Slack-Request-Timestamp": str(ts),
                   "X-Slack-Signature": sign(secret or self.signing_secret, ts, body)}
        if retry:
            headers["X-Slack-Retry-Num"] = str(retry)
            headers["X-Slack-Retry-Reason"] = "http_timeout"
        async with self._session.post(self.http_target, data=body.encode(),
                                      headers=headers) as resp:
            return resp.status, await resp.text()

    # -- the users' side ------------------------------------------------------------------------

    def _run(self, coro: Any) -> Any:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    async def _deliver(self, kind: str, payload: dict[str, Any], retry: int = 0,
                       timeout_s: float = 3.0) -> Any:
        if self.http_target is None:
            return await self._envelope(kind, payload, retry, timeout_s)
        if kind == "slash_commands":
            from urllib.parse import urlencode

            status, text = await self._post(urlencode(payload),
                                           "application/x-www-form-urlencoded", retry=retry)
        elif kind == "interactive":
            from urllib.parse import urlencode

            status, text = await self._post(urlencode({"payload": json.dumps(payload)}),
                                           "application/x-www-form-urlencoded", retry=retry)
        else:
            status, text = await self._post(json.dumps(payload), "application/json",
                                           retry=retry)
        if status != 200:
            raise AssertionError(f"the app answered {status}: {text}")
        return json.loads(text) if text.startswith("{") else None

    async def send(self, kind: str, payload: dict[str, Any], retry: int = 0) -> Any:
        """Deliver over the configured transport, from the fake's thread; the ack's payload (or
        the HTTP reply) comes back. Acks must come within 3 s, as in Slack."""
        return await asyncio.wrap_future(self._run(self._deliver(kind, payload, retry)))

    def _user(self, user: str) -> dict[str, Any]:
        u = self.users[user]
        return {"id": user, "username": u["name"], "name": u["name"], "team_id": u["team_id"]}

    async def slash(self, user: str, text: str, *, channel: str = CHANNEL,
                    command: str = "/sb") -> Any:
        return await self.send("slash_commands", {
            "command": command, "text": text, "user_id": user,
            "user_name": self.users[user]["name"], "channel_id": channel,
            "team_id": self.users[user]["team_id"], "trigger_id": f"trig-{next(self._seq)}",
            "response_url": f"{self.base}/respond", "api_app_id": APP_ID})

    async def event(self, event: dict[str, Any], *, event_id: str | None = None,
                    retry: int = 0, team: str = TEAM) -> Any:
        return await self.send("events_api", {
            "token": "legacy", "team_id": team, "api_app_id": APP_ID, "event": event,
            "type": "event_callback", "event_id": event_id or f"Ev{next(self._seq):08d}",
            "event_time": int(time.time()), "authorizations": [
                {"team_id": team, "user_id": BOT_USER, "is_bot": True}]}, retry)

    def message_event(self, user: str, text: str, *, channel: str = CHANNEL,
                      thread_ts: str | None = None, kind: str = "message",
                      ts: str | None = None, **extra: Any) -> dict[str, Any]:
        event = {"type": kind, "user": user, "text": text, "channel": channel,
                 "ts": ts or self._ts(), "channel_type": "channel", "team": TEAM, **extra}
        if thread_ts:
            event["thread_ts"] = thread_ts
        return event

    async def click(self, user: str, where: dict[str, Any], label: str, *,
                    home: bool = False) -> Any:
        """Press the button whose text contains `label` in a message or in a home's blocks."""
        blocks = where if isinstance(where, list) else where["blocks"]
        action = button(blocks, label)
        payload: dict[str, Any] = {
            "type": "block_actions", "user": self._user(user),
            "team": {"id": self.users[user]["team_id"]}, "api_app_id": APP_ID,
            "trigger_id": f"trig-{next(self._seq)}", "response_url": f"{self.base}/respond",
            "actions": [{**action, "block_id": action.get("block_id", "b"),
                         "action_ts": self._ts()}]}
        if home:
            payload["container"] = {"type": "view", "view_id": "VHOME"}
            payload["view"] = {"id": "VHOME", "type": "home", "blocks": blocks}
        else:
            payload["container"] = {"type": "message", "message_ts": where["ts"],
                                    "channel_id": where["channel"]}
            payload["channel"] = {"id": where["channel"]}
            payload["message"] = {"ts": where["ts"], "text": where["text"], "blocks": blocks,
                                  **({"thread_ts": where["thread_ts"]}
                                     if where.get("thread_ts") else {})}
        return await self.send("interactive", payload)

    async def submit(self, user: str, modal: dict[str, Any], values: dict[str, str]) -> Any:
        view = modal["view"]
        state = {"values": {block: {"v": {"type": "plain_text_input", "value": value}}
                            for block, value in values.items()}}
        return await self.send("interactive", {
            "type": "view_submission", "user": self._user(user),
            "team": {"id": self.users[user]["team_id"]}, "api_app_id": APP_ID,
            "trigger_id": f"trig-{next(self._seq)}",
            "view": {"id": modal["id"], "type": "modal", "callback_id": view["callback_id"],
                     "private_metadata": view.get("private_metadata", ""), "state": state,
                     "blocks": view["blocks"]}})

    async def open_home(self, user: str) -> Any:
        return await self.event({"type": "app_home_opened", "user": user, "tab": "home",
                                 "channel": "D" + user})

    # -- inspection -----------------------------------------------------------------------------

    def find(self, channel: str, ts: str) -> dict[str, Any] | None:
        with self.lock:
            return next((m for m in self.messages if m["channel"] == channel
                         and m["ts"] == ts), None)

    def top(self, channel: str = CHANNEL) -> list[dict[str, Any]]:
        with self.lock:
            return [m for m in self.messages if m["channel"] == channel and not m["thread_ts"]]

    def thread(self, ts: str, channel: str = CHANNEL) -> list[dict[str, Any]]:
        with self.lock:
            return [m for m in self.messages if m["channel"] == channel
                    and m["thread_ts"] == ts]

    def to(self, user: str) -> list[dict[str, Any]]:
        """What only `user` was shown: ephemeral messages and the app's DMs."""
        with self.lock:
            return [e for e in self.ephemerals if e["user"] == user] + [
                m for m in self.messages if m["channel"] == "D" + user]

    async def wait_for(self, predicate: Callable[[], Any], timeout: float = 10.0,
                       what: str = "a condition") -> Any:
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                result = predicate()
            if result:
                return result
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            await asyncio.sleep(0.02)


def button(blocks: list[dict[str, Any]], label: str) -> dict[str, Any]:
    for block in blocks:
        for el in block.get("elements") or []:
            if el.get("type") == "button" and label in el["text"]["text"]:
                return {"action_id": el["action_id"], "value": el.get("value", ""),
                        "type": "button", "block_id": block.get("block_id", "b")}
    raise AssertionError(f"no button {label!r} in the blocks")


def text_of(blocks: list[dict[str, Any]]) -> str:
    out = []
    for block in blocks:
        if "text" in block:
            out.append(block["text"]["text"])
        for el in block.get("elements") or []:
            if isinstance(el.get("text"), str):
                out.append(el["text"])
    return "\n".join(out)


def labels(blocks: list[dict[str, Any]]) -> list[str]:
    return [el["text"]["text"] for b in blocks for el in b.get("elements") or []
            if el.get("type") == "button"]
