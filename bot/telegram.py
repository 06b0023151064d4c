"""The Telegram front end: every command, escalations pushed with buttons, live status cards,
a persistent KILL ALL button for admins, invite-code onboarding. python-telegram-bot v22,
embedded in Switchboard's event loop (initialize → start polling → start; never run_polling)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlparse

# RetryAfter.retry_after as a timedelta; the int form is deprecated and warns on every 429.
os.environ.setdefault("PTB_TIMEDELTA", "true")

from telegram import (  # noqa: E402
    BotCommand,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    KeyboardButton,
    ReplyKeyboardMarkup,
    ReplyParameters,
    Update,
    User,
)
from telegram.constants import ParseMode  # noqa: E402
from telegram.error import (  # noqa: E402
    BadRequest,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
)
from telegram.ext import (  # noqa: E402,E501
    Application,
    ApplicationBuilder,
    CallbackQueryHandler,
    MessageHandler,
    filters,
)

from bot.app import Switchboard  # noqa: E402
from bot.render import escape, plan_reply, preview, split_text, visible  # noqa: E402
from commands.agents import agent_buttons  # noqa: E402
from commands.approvals import detail_filename, escalation_buttons  # noqa: E402
from commands.base import Attachment, Button, Caller, Reply, Role, Text  # noqa: E402
from commands.dispatcher import REGISTRY, split_command  # noqa: E402
from commands.render import ago, money  # noqa: E402
from supervisor.api import (  # noqa: E402
    AgentOutput,
    EscalationEvent,
    Kind,
    StateChanged,
    TurnFinished,
)
from supervisor.api import EscalationView as EscalationRow  # noqa: E402

logger = logging.getLogger(__name__)

PLATFORM = "telegram"
KILL_TEXT = "🛑 KILL ALL"
CALLBACK_MAX = 64
STRANGER_TEXT = ("Sorry, this is a private Switchboard bot. If you should have access, ask its "
                 "admin for an invite code, then send /start <code>.")
MAX_BACKOFF_S = 30.0
# The card's share for the body (what kind of call, why asked) when a detail follows it, and
# without one (a question); anything longer is cut with a note and sent whole as a file.
BODY_CHARS = 1000
BODY_ALONE_CHARS = 3000


class CallbackCodec:
    """Callback data must be 1–64 bytes: short commands travel as they are, longer ones as a
    token into this table. Prefixes: '?' asks for a confirming tap, '!' is the confirmed tap,
    'i:' shows an escalation's details, 'x' cancels."""

    def __init__(self) -> None:
        self._tokens: dict[str, str] = {}

    def encode(self, command: str, prefix: str = "") -> str:
        data = prefix + command
        if len(data.encode()) <= CALLBACK_MAX:
            return data
        token = secrets.token_urlsafe(8)
        self._tokens[token] = command
        return f"{prefix}t:{token}"

    def decode(self, data: str) -> str | None:
        if data.startswith("t:"):
            return self._tokens.get(data[2:])
        return data


class TelegramFrontend:
    def __init__(self, app: Switchboard, *, poll_timeout_s: int = 10) -> None:
        self.app = app
        self.settings = app.settings
        self.poll_timeout_s = poll_timeout_s
        self.codec = CallbackCodec()
        self.ptb: Application[Any, Any, Any, Any, Any, Any] | None = None
        self._queues: dict[int, asyncio.Queue[tuple[Callable[[], Awaitable[Any]],
                                                    asyncio.Future[Any]]]] = {}
        self._workers: dict[int, asyncio.Task[None]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._refused: set[int] = set()
        self._cards: dict[tuple[str, int], tuple[int, str]] = {}  # (agent, chat) → (msg, text)
        self._dirty: set[str] = set()
        self.webhook_secret: str | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    async def __aenter__(self) -> TelegramFrontend:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        token = self.settings.telegram_token
        assert token is not None, "TELEGRAM_BOT_TOKEN is not set"
        builder = ApplicationBuilder().token(token.value).concurrent_updates(True)
        base = self.settings.telegram_api_base_url
        if base:
            builder = builder.base_url(f"{base.rstrip('/')}/bot").base_file_url(
                f"{base.rstrip('/')}/file/bot")
        self.ptb = builder.build()
        self.ptb.add_handler(CallbackQueryHandler(self._on_callback))
        self.ptb.add_handler(MessageHandler(filters.ALL, self._on_message))
        self.ptb.add_error_handler(self._on_error)
        await self.ptb.initialize()
        await self._seed_admins()
        await self.ptb.bot.set_my_commands(
            [BotCommand(c.name, c.summary[:256]) for c in REGISTRY])
        assert self.ptb.updater is not None
        url = self.settings.telegram_webhook_url
        if url:
            # Telegram sends the secret in X-Telegram-Bot-Api-Secret-Token with every update;
            # PTB's webhook server refuses calls without it (403).
            secret = self.settings.telegram_webhook_secret
            self.webhook_secret = secret.value if secret else secrets.token_urlsafe(32)
            await self.ptb.updater.start_webhook(
                listen=self.settings.telegram_webhook_listen,
                port=self.settings.telegram_webhook_port,
                url_path=urlparse(url).path.lstrip("/"), webhook_url=url,
                secret_token=self.webhook_secret)
        else:
            await self.ptb.updater.start_polling(poll_interval=0, timeout=self.poll_timeout_s)
        await self.ptb.start()
        self._tasks = [
            asyncio.create_task(self._deliver_outbox(), name="telegram-outbox"),
            asyncio.create_task(self._follow_events(), name="telegram-events"),
            asyncio.create_task(self._cards_loop(), name="telegram-cards"),
        ]
        logger.info("telegram front end started bot=%s", self.ptb.bot.username)

    async def stop(self, timeout_s: float = 10.0) -> None:
        """Stop taking updates, let running handlers finish (their sends still flow), then
        stop our own tasks; every step bounded, so a dead API cannot block shutdown."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        ptb = self.ptb
        if ptb is not None:
            with contextlib.suppress(Exception):
                if ptb.updater and ptb.updater.running:
                    await asyncio.wait_for(ptb.updater.stop(), timeout_s)
            with contextlib.suppress(Exception):
                if ptb.running:
                    await asyncio.wait_for(ptb.stop(), timeout_s)
        for task in self._workers.values():
            task.cancel()
        await asyncio.gather(*self._workers.values(), return_exceptions=True)
        self._workers, self._queues = {}, {}
        if ptb is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(ptb.shutdown(), timeout_s)
        self.ptb = None

    async def _seed_admins(self) -> None:
        repo = self.app.store.operators
        for uid in self.settings.telegram_admin_ids:
            if await repo.get(PLATFORM, uid) is None:
                await repo.upsert(PLATFORM, uid, "", "admin", "config")

    # -- sending: one queue per chat, 429s honoured, nothing dropped ------------------------------

    def _send(self, chat_id: int, call: Callable[[], Awaitable[Any]]) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        queue = self._queues.get(chat_id)
        if queue is None:
            queue = self._queues[chat_id] = asyncio.Queue()
            self._workers[chat_id] = asyncio.create_task(self._sender(chat_id, queue),
                                                         name=f"telegram-send:{chat_id}")
        queue.put_nowait((call, fut))
        return fut

    async def _sender(self, chat_id: int, queue: asyncio.Queue[Any]) -> None:
        while True:
            call, fut = await queue.get()
            backoff = 1.0
            while True:
                try:
                    result = await call()
                except RetryAfter as exc:
                    wait = exc.retry_after
                    delay = wait.total_seconds() if hasattr(wait, "total_seconds") else wait
                    logger.info("telegram 429 chat=%s retry_after=%.1f", chat_id, delay)
                    await asyncio.sleep(float(delay))
                    continue
                except BadRequest as exc:
                    if "not modified" in str(exc).lower():
                        result = None
                    else:
                        logger.error("telegram refused a message chat=%s error=%s", chat_id, exc)
                        if not fut.done():
                            fut.set_exception(exc)
                        break
                except Forbidden as exc:  # the user blocked the bot: nothing to retry
                    logger.warning("telegram forbidden chat=%s error=%s", chat_id, exc)
                    if not fut.done():
                        fut.set_exception(exc)
                    break
                except (NetworkError, TelegramError) as exc:  # timeouts, 5xx: keep trying
                    logger.warning("telegram send failed chat=%s error=%s retry_in=%.0fs",
                                   chat_id, exc, backoff)
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, MAX_BACKOFF_S)
                    continue
                if not fut.done():
                    fut.set_result(result)
                break

    def _keyboard(self, rows: tuple[tuple[Button, ...], ...]) -> InlineKeyboardMarkup | None:
        buttons = [[InlineKeyboardButton(b.label[:60], callback_data=self.codec.encode(
            b.command, "?" if b.confirm else "")) for b in row] for row in rows if row]
        return InlineKeyboardMarkup(buttons) if buttons else None

    async def send_reply(self, chat_id: int, reply: Reply, *,
                         extra_rows: tuple[tuple[Button, ...], ...] = ()) -> list[Any]:
        assert self.ptb is not None
        bot = self.ptb.bot
        chunks, files = plan_reply(reply)
        markup = self._keyboard(reply.buttons + extra_rows)
        futures = []
        for i, chunk in enumerate(chunks):
            last = i == len(chunks) - 1
            futures.append(self._send(chat_id, lambda c=chunk, m=(markup if last else None):
                                      bot.send_message(chat_id, c.html, parse_mode=ParseMode.HTML,
                                                       reply_markup=m)))
        for att in files:
            futures.append(self._send(chat_id, lambda a=att: bot.send_document(
                chat_id, document=a.content, filename=a.filename)))
        results = await asyncio.gather(*futures, return_exceptions=True)
        return [r for r in results if not isinstance(r, BaseException)]

    # -- who is talking ---------------------------------------------------------------------------

    async def _caller(self, user: User | None) -> Caller | None:
        if user is None:
            return None
        row = await self.app.store.operators.get(PLATFORM, str(user.id))
        if row is None:
            return None
        name = user.username or user.first_name or str(user.id)
        if row.name != name:
            await self.app.store.operators.upsert(PLATFORM, str(user.id), name, row.role,
                                                  row.added_by)
        return Caller(f"{PLATFORM}:{user.id}", name, Role[row.role.upper()], PLATFORM)

    async def _audit(self, user: User | None, action: str, args: str, ok: bool,
                     result: str) -> None:
        await self.app.store.audit.record(
            platform=PLATFORM, user_id=str(user.id if user else "?"),
            user_name=(user.username or user.first_name or "") if user else "", action=action,
            args=args, ok=ok, result=result)

    async def _operator_chats(self, min_role: Role) -> list[int]:
        rows = await self.app.store.operators.list(PLATFORM)
        return [int(r.user_id) for r in rows if Role[r.role.upper()] >= min_role]

    # -- inbound ----------------------------------------------------------------------------------

    async def _on_message(self, update: Update, context: Any) -> None:
        msg = update.effective_message
        user = update.effective_user
        chat = update.effective_chat
        if msg is None or chat is None or user is None:
            return
        text = (msg.text or "").strip()
        caller = await self._caller(user)
        if caller is None:
            await self._stranger(chat.id, user, text)
            return
        if text == KILL_TEXT:
            text = "/killall"
        elif text.startswith("/") and split_command(text)[0] == "start":
            await self._welcome(chat.id, caller)
            return
        elif msg.reply_to_message is not None and not text.startswith("/"):
            esc_id = await self.app.store.operators.escalation_for_message(
                PLATFORM, str(chat.id), str(msg.reply_to_message.message_id))
            if esc_id is None:
                await self.send_reply(chat.id, Reply.error(
                    "That message is not a question I asked.",
                    "Reply to a question's message to answer it, or send a command (/help)."))
                return
            text = f"/answer {esc_id} {text}"
        elif not text:
            await self.send_reply(chat.id, Reply.error(
                "I only understand text.", "Send /help for the commands."))
            return
        reply = await self.app.run_command(caller, text)
        await self.send_reply(chat.id, reply)

    async def _stranger(self, chat_id: int, user: User, text: str) -> None:
        command, code = split_command(text) if text.startswith("/") else ("", "")
        if command == "start" and code and len(code.split()) == 1:
            role = await self.app.store.operators.redeem_invite(code, f"{PLATFORM}:{user.id}")
            if role is not None:
                name = user.username or user.first_name or str(user.id)
                await self.app.store.operators.upsert(PLATFORM, str(user.id), name, role,
                                                      "invite")
                await self._audit(user, "start", "<invite>", True, f"joined as {role}")
                caller = Caller(f"{PLATFORM}:{user.id}", name, Role[role.upper()], PLATFORM)
                await self.app.pool.escalations.notify(
                    None, f"New {role}: {name}", f"Telegram user {user.id} joined with an invite.")
                await self._welcome(chat_id, caller)
                return
            await self._audit(user, "start", "<invite>", False, "invalid invite code")
            await self.send_reply(chat_id, Reply.error(
                "That invite code is not valid: it is mistyped, expired or already used.",
                "Ask an admin for a new one (/invite)."))
            return
        await self._audit(user, "refused", text[:200], False, "not an operator")
        logger.warning("telegram: refused a stranger user_id=%s username=%s", user.id,
                       user.username)
        if user.id not in self._refused:
            self._refused.add(user.id)
            await self.send_reply(chat_id, Reply.text(STRANGER_TEXT))

    async def _welcome(self, chat_id: int, caller: Caller) -> None:
        assert self.ptb is not None
        text = (f"Hello {escape(caller.name)}: you are {caller.role.name.lower()} of this "
                "Switchboard. Send /help for the commands; /agents lists the fleet.")
        markup: Any = None
        if caller.role >= Role.ADMIN:
            text += f"\nThe {KILL_TEXT} button below stops every agent (it asks first)."
            markup = ReplyKeyboardMarkup([[KeyboardButton(KILL_TEXT)]], resize_keyboard=True,
                                         is_persistent=True)
        bot = self.ptb.bot
        await self._send(chat_id, lambda: bot.send_message(chat_id, text, reply_markup=markup,
                                                           parse_mode=ParseMode.HTML))

    async def _on_callback(self, update: Update, context: Any) -> None:
        query = update.callback_query
        if query is None or query.message is None:
            return
        chat_id = query.message.chat.id
        caller = await self._caller(query.from_user)
        if caller is None:
            await self._audit(query.from_user, "refused", query.data or "", False,
                              "not an operator")
            await query.answer("You are not an operator of this Switchboard.", show_alert=True)
            return
        data = query.data or ""
        if data == "x":
            await query.answer("Cancelled.")
            return
        if data.startswith("i:"):
            await query.answer()
            await self._details(chat_id, data[2:])
            return
        confirm = data.startswith("?")
        confirmed = data.startswith("!")
        command = self.codec.decode(data[1:] if confirm or confirmed else data)
        if command is None:
            await query.answer("That button has expired; send the command instead.",
                               show_alert=True)
            return
        if confirm:
            await query.answer()
            await self.send_reply(chat_id, Reply(
                blocks=(Text(f"Are you sure? {command}"),),
                buttons=((Button("✅ Yes", command), Button("Cancel", "x")),)),
                extra_rows=())
            return
        reply = await self.app.run_command(caller, command)
        if not reply.ok:
            await query.answer(reply.plain()[:190], show_alert=True)
            if "already" not in reply.plain():
                await self.send_reply(chat_id, reply)
            return
        await query.answer("Done.")
        await self.send_reply(chat_id, reply)

    async def _details(self, chat_id: int, esc_id: str) -> None:
        """Everything about one escalation: the body and the complete detail, inline when it
        fits and as a file when not."""
        row = await self.app.pool.escalations.get(esc_id)
        if row is None:
            await self.send_reply(chat_id, Reply.error(f"No request {esc_id}."))
            return
        blocks = [Text(f"{row.id}: {row.title}", "title"),
                  Text(row.body or "-", "code", f"{row.id}-message.txt")]
        if row.detail:
            blocks.append(Text(row.detail, "code", detail_filename(row)))
        elif row.tool_input:  # a row from before details were kept: the raw input
            full = json.dumps(row.tool_input, indent=2, ensure_ascii=False)
            blocks.append(Text(full, "code", f"{row.id}-input.json"))
        await self.send_reply(chat_id, Reply(blocks=tuple(blocks)))

    async def _on_error(self, update: object, context: Any) -> None:
        logger.error("telegram handler failed", exc_info=context.error)

    # -- outbound: escalations, answered edits, status cards --------------------------------------

    def _escalation_card(self, row: EscalationRow) -> tuple[str, list[Attachment]]:
        """The card's HTML and the files it needs. The body (with "Why asked") comes first, so
        it stays in sight; then the detail, whole if it fits, else its start, a note that it
        is cut and the file that has all of it."""
        mark = {"notice": "ℹ️", "permission": "🔐", "question": "❓", "plan": "📝"}.get(row.kind,
                                                                                    "❓")
        html = f"{mark} <b>{escape(row.title)}</b>"
        files: list[Attachment] = []
        if row.kind != Kind.NOTICE:
            html += f"  <code>{row.id}</code>"
        if row.body:
            text = visible(row.body)  # escaped first, so escapes cannot overflow the card
            body = preview(text, BODY_CHARS if row.detail else BODY_ALONE_CHARS,
                           max_lines=len(text) + 1)  # by characters only
            shown = escape(body.text)
            html += f"\n<pre>{shown}</pre>" if row.kind != Kind.NOTICE else f"\n{shown}"
            if body.cut:
                name = f"{row.id}-message.txt"
                html += f"\n<b>{escape(body.note(name))}</b>"
                files.append(Attachment(name, row.body.encode()))
        if row.detail:
            seen = preview(visible(row.detail))
            html += f"\n<pre>{escape(seen.text)}</pre>"
            if seen.cut:
                name = detail_filename(row)
                html += f"\n<b>{escape(seen.note(name))}</b>"
                files.append(Attachment(name, row.detail.encode()))
        if row.kind in (Kind.QUESTION, Kind.PLAN) and row.free_text:
            html += "\n<i>Reply to this message to answer in your own words.</i>"
        return html, files

    def _escalation_html(self, row: EscalationRow) -> str:
        return self._escalation_card(row)[0]

    def _escalation_rows(self, row: EscalationRow) -> tuple[tuple[Button, ...], ...]:
        if row.kind == Kind.NOTICE:
            return ()
        buttons = escalation_buttons(row)
        rows = [buttons[i:i + 2] for i in range(0, len(buttons), 2)]
        rows.append((Button("🔎 Details", f"i:{row.id}"),))
        return tuple(tuple(r) for r in rows)

    async def _deliver_outbox(self) -> None:
        esc = self.app.pool.escalations
        async for row in esc.follow(PLATFORM):
            try:
                await self._push_escalation(row)
            except Exception:  # noqa: BLE001 - one bad row must not stop delivery
                logger.exception("telegram: could not deliver escalation id=%s", row.id)
            await esc.ack(row.id, PLATFORM)

    async def _push_escalation(self, row: EscalationRow) -> None:
        assert self.ptb is not None
        bot = self.ptb.bot
        needs_answer = row.kind != Kind.NOTICE and row.status == "open"
        chats = await self._operator_chats(Role.OPERATOR if needs_answer else Role.VIEWER)
        if row.kind == Kind.NOTICE and len(row.body) > 3000 and not row.detail:
            # A long final answer: the whole text, split or as a file.
            for chat in chats:
                await self.send_reply(chat, Reply(blocks=(Text(row.title, "title"),
                                                          Text(row.body))))
            return
        html, files = self._escalation_card(row)
        # The files go first and the card replies to them, so by the time its buttons show,
        # the whole text is already in the chat, right above them.
        sent = {chat: [self._send(chat, lambda c=chat, a=att: bot.send_document(
            c, document=a.content, filename=a.filename,
            caption=f"The whole text of {row.id} · {row.title}"[:1000])) for att in files]
            for chat in chats}
        markup = self._keyboard(self._escalation_rows(row)) if needs_answer else None
        futures = {}
        for chat in chats:
            above = None
            for fut in sent[chat]:
                try:
                    message = await fut
                    above = message.message_id if message is not None else above
                except TelegramError:
                    logger.exception("telegram: could not send the full text id=%s chat=%s",
                                     row.id, chat)
            reply_to = (ReplyParameters(above, allow_sending_without_reply=True)
                        if above is not None else None)
            futures[chat] = self._send(chat, lambda c=chat, r=reply_to: bot.send_message(
                c, html, parse_mode=ParseMode.HTML, reply_markup=markup, reply_parameters=r))
        for chat, fut in futures.items():
            with contextlib.suppress(TelegramError):
                message = await fut
                if message is not None and row.kind != Kind.NOTICE:
                    await self.app.store.operators.add_copy(row.id, PLATFORM, str(chat),
                                                            str(message.message_id))

    async def _mark_answered(self, row: EscalationRow) -> None:
        assert self.ptb is not None
        bot = self.ptb.bot
        answer = row.answer or {}
        verdict = {"allow": "✅ Allowed", "allow_session": "🔁 Allowed for the session",
                   "deny": "❌ Denied", "answer": "💬 Answered"}.get(answer.get("decision"),
                                                                     row.status)
        when = time.strftime("%H:%M:%S", time.localtime(row.answered_at or time.time()))
        who = row.answered_by or "?"
        via = f" via {row.answered_via}" if row.answered_via else ""
        text = answer.get("text") or ""
        footer = f"\n\n<b>{verdict}</b> by {escape(who)}{escape(via)} at {when}"
        if text:
            footer += f": {escape(split_text(text, 300)[0])}"
        if row.status in ("expired", "cancelled"):
            footer = f"\n\n<b>{row.status.capitalize()}</b> at {when}: {escape(text)}"
        html = self._escalation_html(row) + footer
        for chat_id, message_id in await self.app.store.operators.copies(row.id, PLATFORM):
            self._send(int(chat_id), lambda c=int(chat_id), m=int(message_id):
                       bot.edit_message_text(html, chat_id=c, message_id=m,
                                             parse_mode=ParseMode.HTML, reply_markup=None))

    async def _follow_events(self) -> None:
        async for event in self.app.hub.stream():
            try:
                if isinstance(event, EscalationEvent) and event.what == "answered":
                    await self._mark_answered(event.escalation)
                elif isinstance(event, (StateChanged, TurnFinished)) or (
                        isinstance(event, AgentOutput) and event.kind == "tool_use"):
                    self._dirty.add(event.agent_id)
            except Exception:  # noqa: BLE001 - keep following
                logger.exception("telegram: event handling failed")

    async def _cards_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.status_card_interval_s)
            dirty, self._dirty = self._dirty, set()
            for agent_id in dirty:
                try:
                    await self._update_card(agent_id)
                except Exception:  # noqa: BLE001 - one card must not stop the others
                    logger.exception("telegram: status card failed agent=%s", agent_id)

    async def _card_text(self, r: Any) -> str:
        totals = await self.app.store.turns.totals_by_agent(r.id)
        turns = totals[0].turns if totals else 0
        cost = totals[0].cost_usd if totals else 0.0
        icon = {"working": "⚙️", "waiting": "⏳", "idle": "💤", "paused": "⏸",
                "stalled": "🐢", "starting": "🚀", "stopped": "⏹", "failed": "💥",
                "killed": "💀"}.get(r.state, "🤖")
        return (f"{icon} <b>{escape(r.name)}</b> <code>{r.id}</code> — {escape(str(r.state))}\n"
                f"tool: {escape(r.current_tool or '-')}\n"
                f"turns: {turns} · cost: {money(cost)} · elapsed: {ago(r.created_at)}")

    async def _update_card(self, agent_id: str) -> None:
        assert self.ptb is not None
        bot = self.ptb.bot
        runner = next((r for r in self.app.pool.runners(include_dead=True) if r.id == agent_id),
                      None)
        if runner is None:
            return
        text = await self._card_text(runner)
        live = runner.state.live
        markup = self._keyboard((agent_buttons(runner),)) if live else None
        for chat in await self._operator_chats(Role.VIEWER):
            key = (agent_id, chat)
            known = self._cards.get(key)
            if known is None:
                if not live:
                    continue
                fut = self._send(chat, lambda c=chat: bot.send_message(
                    c, text, parse_mode=ParseMode.HTML, reply_markup=markup,
                    disable_notification=True))
                with contextlib.suppress(TelegramError):
                    message = await fut
                    self._cards[key] = (message.message_id, text)
                continue
            message_id, last = known
            if last != text:
                self._cards[key] = (message_id, text)
                self._send(chat, lambda c=chat, m=message_id: bot.edit_message_text(
                    text, chat_id=c, message_id=m, parse_mode=ParseMode.HTML,
                    reply_markup=markup))
            if not live:
                self._cards.pop(key, None)


async def run_telegram(app: Switchboard, *, retry_max_s: float = 300.0) -> None:
    """Keep the Telegram front end up for as long as this task runs. Telegram being down at
    start is retried with backoff (the console and the supervisor run meanwhile); a token
    Telegram refuses is reported once, and Switchboard goes on without Telegram."""
    delay = 5.0
    while True:
        front = TelegramFrontend(app)
        try:
            await front.start()
        except InvalidToken:
            await front.stop()
            logger.error("telegram: the bot token was refused; running without Telegram. "
                         "Check TELEGRAM_BOT_TOKEN (from @BotFather).")
            return
        except (TelegramError, OSError) as exc:
            await front.stop()
            logger.warning("telegram: cannot reach the Bot API (%s); retrying in %.0fs", exc,
                           delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, retry_max_s)
            continue
        try:
            await asyncio.Event().wait()  # until cancelled at shutdown
        finally:
            await front.stop()


__all__ = ["TelegramFrontend", "KILL_TEXT", "run_telegram"]
