"""Who is asking, on the web: a browser session (a cookie from a one-time sign-in link sent in
chat) or an API token (`Authorization: Bearer`), each acting as one operator with that
operator's role now. Every change is a POST that carries the session's CSRF token and comes from
this origin; nothing changes on a GET. The sign-in pages and the headers every response gets
(a strict Content-Security-Policy among them: agents' text is shown here and agents are hostile)
are here too.

Sign-in is two steps on purpose: the link's GET shows a page with a button and uses nothing,
because chat apps fetch a link to preview it, and a preview must not spend a one-time link."""

from __future__ import annotations

import hmac
import html
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from aiohttp import web
from multidict import MultiDict, MultiDictProxy

from commands.base import Caller, Role
from supervisor.api import SupervisorError
from supervisor.api.web import NEW_LINK, SESSION_TTL_S, link_refusal

if TYPE_CHECKING:
    from bot.web.listener import Listener, WebContext

logger = logging.getLogger(__name__)

SESSION_COOKIE = "switchboard_session"
CSRF_FIELD = "csrf"
CSRF_HEADER = "X-CSRF-Token"
ANONYMOUS = Caller("web:anonymous", "anonymous", Role.VIEWER, "web")
# Scripts and styles only from this origin: no inline script, so text an agent wrote can never
# run here even if some page forgot to escape it; no framing (clickjacking the kill switch).
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    # The sign-in link is in a path: it must not leave this site in a Referer header. Not
    # no-referrer: under it a browser sends "Origin: null" with a form's POST, and
    # same_origin() would refuse every sign-in and every button (seen in a real chromium).
    "Referrer-Policy": "same-origin",
}
OWN_PATHS = ("/healthz", "/readyz", "/metrics")  # the listener's own: no page headers


@dataclass(frozen=True, slots=True)
class Principal:
    """The operator a request acts as. `via`: session (a browser) or token (a script);
    `csrf`: the session's CSRF token ("" for a token, which no other site can send)."""

    caller: Caller
    via: str
    csrf: str
    credential_id: str


def _wants_html(request: web.Request) -> bool:
    return "text/html" in request.headers.get("Accept", "") and \
        not request.path.startswith("/api/")


def refusal(request: web.Request, status: int, what: str, fix: str) -> web.HTTPException:
    """An HTTP error that says what was wrong and what to do: JSON for scripts, a small page
    for a browser."""
    cls: type[web.HTTPException] = {401: web.HTTPUnauthorized, 403: web.HTTPForbidden,
                                    400: web.HTTPBadRequest, 404: web.HTTPNotFound,
                                    409: web.HTTPConflict}.get(status, web.HTTPBadRequest)
    if _wants_html(request):
        return cls(text=message_page("Switchboard", what, fix), content_type="text/html")
    return cls(text=json.dumps({"ok": False, "error": what, "fix": fix}),
               content_type="application/json")


async def principal(request: web.Request, ctx: WebContext) -> Principal | None:
    """The operator behind the request's bearer token or session cookie, or None."""
    header = request.headers.get("Authorization", "")
    if header:
        scheme, _, secret = header.partition(" ")
        if scheme.lower() != "bearer" or not secret.strip():
            return None
        holder = await ctx.api.web.holder(secret.strip(), "token")
        via, platform = "token", "api"
    else:
        cookie = request.cookies.get(SESSION_COOKIE, "")
        if not cookie:
            return None
        holder = await ctx.api.web.holder(cookie, "session")
        via, platform = "session", "web"
    if holder is None:
        return None
    caller = Caller(holder.operator, holder.name, Role[holder.role.upper()], platform)
    return Principal(caller, via, holder.csrf, holder.credential_id)


async def require(request: web.Request, ctx: WebContext,
                  role: Role = Role.VIEWER) -> Principal:
    """The principal, or the request ends: a browser without a session goes to /signin, a
    script gets 401; a role too low gets 403 saying which role it needs."""
    who = await principal(request, ctx)
    if who is None:
        if _wants_html(request) and request.method == "GET":
            raise web.HTTPSeeOther("/signin")
        if request.headers.get("Authorization"):
            # Recorded (never the token): someone holds a revoked token, or is guessing.
            await ctx.api.audit(Caller("api:unknown", "unknown", Role.VIEWER, "api"), "refused",
                                f"{request.method} {request.path}"[:200], ok=False,
                                result="an API token that does not work")
            raise refusal(request, 401, "That API token does not work: it is unknown, revoked "
                          "(by /token revoke or the kill switch) or its operator was removed.",
                          "Make a new one with /token new <label> in chat.")
        raise refusal(request, 401, "Not signed in (or the session ended: it lasts "
                      f"{SESSION_TTL_S / 3600:.0f} hours, and the kill switch ends every one).",
                      "Send /web in chat for a sign-in link, or use an API token.")
    if who.caller.role < role:
        raise refusal(request, 403, f"This needs the {role.name.lower()} role; you are "
                      f"{who.caller.role.name.lower()}.", "Ask an admin to change your role.")
    return who


def same_origin(request: web.Request) -> bool:
    """A POST a browser sent from this site (Origin, else Referer, else Sec-Fetch-Site); a
    script without those headers passes (it has no cookies of ours to abuse)."""
    source = request.headers.get("Origin") or request.headers.get("Referer")
    if source:
        parts = urlsplit(source)
        return parts.netloc == request.host and parts.scheme in ("http", "https")
    return request.headers.get("Sec-Fetch-Site", "same-origin") in ("same-origin", "none")


async def require_change(request: web.Request, ctx: WebContext, role: Role = Role.OPERATOR,
                         ) -> tuple[Principal, MultiDictProxy[str]]:
    """For every request that changes something: a POST, by a principal with `role`; from a
    browser session also from this origin and with the session's CSRF token (the form's
    `csrf` field, or the X-CSRF-Token header). Returns the principal and the form."""
    if request.method != "POST":
        raise web.HTTPMethodNotAllowed(request.method, ["POST"])
    who = await require(request, ctx, role)
    form: MultiDictProxy[str] = MultiDictProxy(MultiDict())
    if request.content_type in ("application/x-www-form-urlencoded", "multipart/form-data"):
        posted = await request.post()
        form = MultiDictProxy(MultiDict(
            (k, v) for k, v in posted.items() if isinstance(v, str)))
    if who.via == "session":
        sent = request.headers.get(CSRF_HEADER) or form.get(CSRF_FIELD, "")
        if not same_origin(request) or not sent or not hmac.compare_digest(sent, who.csrf):
            await ctx.api.audit(who.caller, "refused", request.path, ok=False,
                                result="a change without this session's CSRF token")
            raise refusal(request, 403, "Refused: this change did not come from a Switchboard "
                          "page (its CSRF token is missing or wrong).",
                          "Reload the page and try again.")
    return who, form


# -- sign-in pages ---------------------------------------------------------------------------


def message_page(title: str, what: str, fix: str = "", body: str = "") -> str:
    """A small page of its own (sign-in, refusals): escaped text, the console's stylesheet."""
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8>"
            f"<meta name=viewport content='width=device-width, initial-scale=1'>"
            f"<title>{html.escape(title)}</title><link rel=stylesheet href='/static/app.css'>"
            f"</head><body class=signin><main class=card><h1>Switchboard</h1>"
            f"<p class=what>{html.escape(what)}</p>"
            + (f"<p class=fix>{html.escape(fix)}</p>" if fix else "")
            + body + "</main></body></html>")


def _cookie_secure(ctx: WebContext) -> bool:
    return ctx.public_url.startswith("https://")


async def _signin_help(request: web.Request) -> web.Response:
    return web.Response(text=message_page(
        "Sign in", "Sign in with a one-time link from chat.",
        "Send /web to the Switchboard bot (Telegram, Slack or the console); it replies with a "
        "link that works once, for ten minutes."), content_type="text/html")


def _signin_link(listener: Listener) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handler(request: web.Request) -> web.Response:
        ctx = listener.context()
        token = request.match_info["token"]
        state = await ctx.api.web.link_state(token)
        if state != "ok":
            return web.Response(status=410 if state != "unknown" else 404, text=message_page(
                "Sign in", link_refusal(state), NEW_LINK), content_type="text/html")
        form = (f"<form method=post action='/signin'><input type=hidden name=token "
                f"value='{html.escape(token, quote=True)}'><button type=submit class=primary>"
                "Sign in</button></form>")
        return web.Response(text=message_page(
            "Sign in", "Sign in to this Switchboard's web console?",
            "The link works once; this browser stays signed in for "
            f"{SESSION_TTL_S / 3600:.0f} hours.", form), content_type="text/html")
    return handler


def _signin(listener: Listener) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handler(request: web.Request) -> web.Response:
        ctx = listener.context()
        if not same_origin(request):  # login CSRF: another site signing this browser in
            raise refusal(request, 403, "Refused: a sign-in must come from this site's page.",
                          "Open the link from chat again.")
        posted = await request.post()
        token = posted.get("token")
        try:
            if not isinstance(token, str) or not token:
                raise SupervisorError("no token", what="This is not a sign-in link.",
                                      fix="Send /web in chat for one.")
            session = await ctx.api.web.redeem(token)
        except SupervisorError as exc:
            await ctx.api.audit(ANONYMOUS, "signin", "", ok=False, result=exc.what)
            return web.Response(status=403, text=message_page("Sign in", exc.what, exc.fix),
                                content_type="text/html")
        who = await ctx.api.web.holder(session.secret, "session")
        caller = ANONYMOUS if who is None else Caller(
            who.operator, who.name, Role[who.role.upper()], "web")
        await ctx.api.audit(caller, "signin", "", ok=True,
                            result=f"signed in to the web console (session {session.id})")
        response = web.HTTPSeeOther("/")
        response.set_cookie(SESSION_COOKIE, session.secret, max_age=int(SESSION_TTL_S),
                            httponly=True, samesite="Strict", secure=_cookie_secure(ctx),
                            path="/")
        raise response
    return handler


def _signout(listener: Listener) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handler(request: web.Request) -> web.Response:
        ctx = listener.context()
        who, _form = await require_change(request, ctx, Role.VIEWER)
        await ctx.api.web.sign_out(request.cookies.get(SESSION_COOKIE, ""))
        await ctx.api.audit(who.caller, "signout", "", ok=True,
                            result=f"signed out (session {who.credential_id})")
        response = web.HTTPSeeOther("/signin")
        response.del_cookie(SESSION_COOKIE, path="/")
        raise response
    return handler


@web.middleware
async def security_headers(request: web.Request,
                           handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
                           ) -> web.StreamResponse:
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        response = exc
        if request.path not in OWN_PATHS:
            response.headers.update(SECURITY_HEADERS)
        raise
    if request.path not in OWN_PATHS and not response.prepared:
        response.headers.update(SECURITY_HEADERS)
        response.headers.setdefault("Cache-Control", "no-store")
    return response


def install(app: web.Application, listener: Listener) -> None:
    """The sign-in routes and the headers every page gets."""
    app.middlewares.append(security_headers)
    app.router.add_get("/signin", _signin_help)
    app.router.add_get("/signin/{token}", _signin_link(listener))
    app.router.add_post("/signin", _signin(listener))
    app.router.add_post("/signout", _signout(listener))


__all__ = ["CSRF_FIELD", "CSRF_HEADER", "SESSION_COOKIE", "Principal", "install",
           "message_page", "principal", "refusal", "require", "require_change", "same_origin"]
