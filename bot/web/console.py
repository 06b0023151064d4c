"""The web console's routes on the listener: the pages (Needs you, Fleet, an agent, Bus,
Schedules, Audit and its export), the live event stream, the vendored client library under
/static, and /act, where every button posts. An action runs as a chat command through the one
command runner (roles, rate limits, the same audit rows as chat); nothing changes on a GET."""

from __future__ import annotations

import asyncio
import contextlib
import csv
import hashlib
import io
import logging
import mimetypes
import os
import re
from collections.abc import AsyncIterator
from dataclasses import asdict
from urllib.parse import urlencode, urlsplit

from aiohttp import web

from bot.web import auth
from bot.web.listener import Listener, WebContext
from bot.web.render import Regions
from bot.web.stream import FLEET, HEADER, NEEDS, Rows, Stream, agent_topic, serve
from commands.base import Role
from supervisor.api import InvalidRequest, SupervisorError
from supervisor.sanitize import clean

logger = logging.getLogger(__name__)

STATIC = os.path.join(os.path.dirname(__file__), "static")
STREAM_KEY = web.AppKey("console_stream", Stream)
NAV = (("/", "Needs you"), ("/fleet", "Fleet"), ("/bus", "Bus"), ("/schedules", "Schedules"),
       ("/audit", "Audit"))
# What a button may ask for: the command line it becomes and the role it needs (the command
# runner checks the role again, and the caller's rate limit, and audits it).
VERBS: dict[str, tuple[str, Role]] = {
    "approve": ("/approve {target}", Role.OPERATOR),
    "approve_session": ("/approve {target} session", Role.OPERATOR),
    # Every open request of one agent for one tool (target: the agent, text: the tool).
    "approve_all": ("/approve all {target} {text}", Role.OPERATOR),
    "deny": ("/deny {target} {text}", Role.OPERATOR),
    "answer": ("/answer {target} {text}", Role.OPERATOR),
    "pause": ("/pause {target}", Role.OPERATOR),
    "resume": ("/resume {target}", Role.OPERATOR),
    "stop": ("/stop {target}", Role.OPERATOR),
    "kill": ("/kill {target}", Role.OPERATOR),
    "ask": ("/ask {target} {text}", Role.OPERATOR),
    "killall": ("/killall confirm", Role.ADMIN),
    "release": ("/killswitch off confirm", Role.ADMIN),
}
TARGET = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}")
AUDIT_ROWS = 500


class Console:
    """The pages and the stream, reading the listener's context per request."""

    def __init__(self, listener: Listener) -> None:
        self.listener = listener
        self.stream = Stream(self._render)
        self.regions = Regions(lambda: self.listener.context().api,
                               lambda: self.listener.context().links,
                               self.stream.recently_answered, self.stream.last_seen)
        self.static = _load_static()
        self.version = hashlib.sha256(b"".join(b for b, _ in self.static.values())).hexdigest()[:12]

    async def _render(self, topic: str, role: Role) -> str | Rows:
        return await self.regions.region(topic, role)

    # -- the stream's lifetime: the application's ------------------------------------------------

    async def lifespan(self, _app: web.Application) -> AsyncIterator[None]:
        """The stream's loops run as long as the listener's application (its cleanup context
        owns them: started at setup, cancelled and awaited at cleanup)."""
        tasks = [asyncio.create_task(self._follow(), name="web-console-follow"),
                 asyncio.create_task(self.stream.flush_forever(), name="web-console-flush"),
                 asyncio.create_task(self.stream.heartbeats(), name="web-console-heartbeat")]
        yield
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _follow(self) -> None:
        while True:
            ctx = self.listener.app.web_context()
            if ctx is None:  # the supervisor is not up yet
                await asyncio.sleep(0.2)
                continue
            await self.stream.follow(ctx.api)

    # -- pages ----------------------------------------------------------------------------------

    async def _page(self, request: web.Request, ctx: WebContext, who: auth.Principal, *,
                    title: str, active: str, main: str, live: str = "",
                    stream: dict[str, str] | None = None) -> web.Response:
        role = who.caller.role
        html = self.regions.page(
            "base.html", title=title, version=self.version, csrf=who.csrf,
            stream=urlencode(stream or {}), header=await self.regions.header(role), nav=NAV,
            active=active, who=who.caller.name, role_name=role.name.lower(),
            signout=who.via == "session", live=live, main=main)
        return web.Response(text=html, content_type="text/html",
                            headers={"Cache-Control": "no-store"})

    async def needs(self, request: web.Request) -> web.Response:
        ctx = self.listener.context()
        who = await auth.require(request, ctx)
        return await self._page(request, ctx, who, title="Needs you", active="/",
                                main=await self.regions.needs(who.caller.role), live=NEEDS,
                                stream={"view": NEEDS})

    async def fleet(self, request: web.Request) -> web.Response:
        ctx = self.listener.context()
        who = await auth.require(request, ctx)
        fleet = await self.regions.fleet(who.caller.role)
        return await self._page(request, ctx, who, title="Fleet", active="/fleet",
                                main=fleet.whole(), live=FLEET, stream={"view": FLEET})

    async def agent(self, request: web.Request) -> web.Response:
        ctx = self.listener.context()
        who = await auth.require(request, ctx)
        try:
            agent_id = await self.regions.agent_exists(request.match_info["ref"])
        except SupervisorError:
            raise web.HTTPNotFound(text="There is no such agent; the Fleet page lists them.\n")\
                from None
        role = who.caller.role
        diff = None
        with contextlib.suppress(SupervisorError):  # no worktree: no diff to show
            diff = await ctx.api.repos.diff(agent_id)
        main = self.regions.page("agent.html", role=role, topic=agent_topic(agent_id),
                                 agent_id=agent_id, region=await self.regions.agent(agent_id, role),
                                 diff=diff)
        return await self._page(request, ctx, who, title=agent_id, active="/fleet", main=main,
                                stream={"view": "agent", "agent": agent_id})

    async def bus(self, request: web.Request) -> web.Response:
        ctx = self.listener.context()
        who = await auth.require(request, ctx)
        messages = await ctx.api.messages(None, 100)
        dead = [(m, d) for m in messages for d in m.deliveries if d.state in ("dead", "expired")]
        main = self.regions.page("bus.html", view=await ctx.api.bus_state(),
                                 messages=list(reversed(messages)), dead=dead)
        return await self._page(request, ctx, who, title="Bus", active="/bus", main=main)

    async def schedules(self, request: web.Request) -> web.Response:
        ctx = self.listener.context()
        who = await auth.require(request, ctx)
        rows = [(s, await ctx.api.schedules.upcoming(s.id, 3),
                 await ctx.api.schedules.history(s.id, 10))
                for s in await ctx.api.schedules.list()]
        main = self.regions.page("schedules.html", schedules=rows)
        return await self._page(request, ctx, who, title="Schedules", active="/schedules",
                                main=main)

    async def audit(self, request: web.Request) -> web.StreamResponse:
        ctx = self.listener.context()
        who = await auth.require(request, ctx)
        q = request.query
        whom, action = q.get("who", "").strip(), q.get("action", "").strip()
        try:
            days = float(q.get("days") or 7)
            rows = [r for r in await ctx.api.record.audit(whom or None, days, AUDIT_ROWS)
                    if not action or r.action == action.lstrip("/")]
        except (ValueError, InvalidRequest) as exc:
            raise web.HTTPBadRequest(
                text=f"Bad filter: {exc}. days is a number above 0 (7 if left empty).\n")\
                from None
        fmt = request.match_info.get("fmt", "")
        if fmt == "json":
            return web.json_response([asdict(r) for r in rows],
                                     headers={"Content-Disposition":
                                              'attachment; filename="audit.json"'})
        if fmt == "csv":
            out = io.StringIO()
            writer = csv.writer(out)
            writer.writerow(["id", "at", "platform", "user_id", "user_name", "action", "args",
                             "ok", "result"])
            for r in rows:
                writer.writerow([r.id, r.at, r.platform, r.user_id, r.user_name, r.action,
                                 _cell(r.args), r.ok, _cell(r.result)])
            return web.Response(text=out.getvalue(), content_type="text/csv",
                                headers={"Content-Disposition": 'attachment; filename="audit.csv"'})
        query = urlencode({k: v for k, v in (("who", whom), ("days", f"{days:g}"),
                                             ("action", action)) if v})
        main = self.regions.page("audit.html", rows=rows, who=whom, days=f"{days:g}",
                                 action=action, query=query)
        return await self._page(request, ctx, who, title="Audit", active="/audit", main=main)

    # -- the stream -----------------------------------------------------------------------------

    async def events(self, request: web.Request) -> web.StreamResponse:
        ctx = self.listener.context()
        who = await auth.require(request, ctx)
        view = request.query.get("view", "")
        topics = {HEADER}
        if view in (NEEDS, FLEET):
            topics.add(view)
        elif view == "agent":
            topics.add(agent_topic(await self.regions.agent_exists(
                request.query.get("agent", ""))))
        with self.stream.connect(topics, who.caller.role) as client:
            return await serve(request, self.stream, client)

    # -- actions --------------------------------------------------------------------------------

    async def act(self, request: web.Request) -> web.Response:
        ctx = self.listener.context()
        who, form = await auth.require_change(request, ctx, Role.VIEWER)
        verb = str(form.get("verb", ""))
        if verb not in VERBS:
            return self._answer(request, False, (f"Unknown action {verb!r}.",
                                                 "Use the page's buttons."), 400)
        template, role = VERBS[verb]
        if who.caller.role < role:
            return self._answer(request, False, (
                f"{verb} needs the {role.name.lower()} role; you are "
                f"{who.caller.role.name.lower()}.", "Ask an admin to change your role."), 403)
        target = str(form.get("target", "")).strip()
        if "{target}" in template and not TARGET.fullmatch(target):
            return self._answer(request, False, (
                f"Bad target {target[:80]!r}: an agent or request id is letters, digits and"
                " . _ : -", "Use the page's buttons."), 400)
        text = str(form.get("text", "")).strip()
        if verb in ("ask", "answer", "approve_all") and not text:
            return self._answer(request, False, ("Write something first.",), 400)
        line = clean(template.format(target=target, text=text).strip())
        if line.problem:
            return self._answer(request, False, (line.problem,), 400)
        reply = await ctx.commands(who.caller, line.text)
        lines = tuple(b.text for b in reply.blocks) or ("Done.",)
        return self._answer(request, reply.ok, lines, 200)

    def _answer(self, request: web.Request, ok: bool, lines: tuple[str, ...],
                status: int) -> web.Response:
        """To htmx, the reply as a fragment for the page's flash area; to a plain form post,
        back to the page it came from (the stream shows the change)."""
        if request.headers.get("HX-Request") == "true":
            html = self.regions.page("flash.html", ok=ok, lines=lines)
            return web.Response(text=html, content_type="text/html", status=status)
        if status != 200:
            return web.Response(text="\n".join(lines) + "\n", status=status)
        back = urlsplit(request.headers.get("Referer", ""))
        path = back.path if back.path.startswith("/") and not back.path.startswith("//") else "/"
        raise web.HTTPSeeOther(path)

    # -- the vendored client library and the style sheet ---------------------------------------

    async def static_file(self, request: web.Request) -> web.Response:
        found = self.static.get(request.match_info["name"])
        if found is None:
            raise web.HTTPNotFound()
        body, kind = found
        # Pages name each file with the digest of them all (?v=): a new release is a new URL.
        return web.Response(body=body, content_type=kind,
                            headers={"Cache-Control": "public, max-age=31536000, immutable"})


def _cell(text: str) -> str:
    """A CSV cell a spreadsheet will not run as a formula."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def _load_static() -> dict[str, tuple[bytes, str]]:
    files: dict[str, tuple[bytes, str]] = {}
    for name in sorted(os.listdir(STATIC)):
        if name.endswith((".js", ".css")):
            with open(os.path.join(STATIC, name), "rb") as fh:
                kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
                files[name] = (fh.read(), kind)
    return files


async def _no_icon(_request: web.Request) -> web.Response:
    return web.Response(status=204, headers={"Cache-Control": "public, max-age=86400"})


async def _stream_headers(_request: web.Request, response: web.StreamResponse) -> None:
    """The page headers (auth.SECURITY_HEADERS) also on what a handler prepares itself (the
    event stream), which auth's middleware sees only once it is sent."""
    for name, value in auth.SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)


def install(app: web.Application, listener: Listener) -> None:
    """The console's routes on the listener's application (Listener.install)."""
    console = Console(listener)
    app[STREAM_KEY] = console.stream
    app.cleanup_ctx.append(console.lifespan)
    app.on_response_prepare.append(_stream_headers)
    app.router.add_get("/", console.needs)
    app.router.add_get("/fleet", console.fleet)
    app.router.add_get("/agents/{ref}", console.agent)
    app.router.add_get("/bus", console.bus)
    app.router.add_get("/schedules", console.schedules)
    app.router.add_get("/audit", console.audit)
    app.router.add_get("/audit.{fmt:csv|json}", console.audit)
    app.router.add_get("/events", console.events)
    app.router.add_post("/act", console.act)
    app.router.add_get("/static/{name}", console.static_file)
    # Browsers ask for it on every page; without this the listener's POST catch-all says 405.
    app.router.add_get("/favicon.ico", _no_icon)


__all__ = ["Console", "STREAM_KEY", "VERBS", "install"]
