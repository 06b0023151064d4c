"""State records of the fake Telegram server and the base class holding its state."""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from tests.fakes._http import LoopbackServer
from tests.fakes.fake_telegram.api import CALLBACK_ANSWER_TIMEOUT, DEFAULT_TOKEN


@dataclass
class _Stored:
    message: dict[str, Any]
    by_bot: bool
    deleted: bool = False
    reply_keyboard: dict[str, Any] | None = None  # a non-inline markup sent with it
    raw_text: str | None = None
    parse_mode: str | None = None
    edits: int = 0


@dataclass
class _Fault:
    kind: str  # "status" | "hang" | "flood"
    times: int
    status: int = 500
    methods: frozenset[str] | None = None  # lowercased; None = any but getUpdates
    chat_id: int | str | None = None
    retry_after: int = 1
    description: str | None = None


@dataclass
class _Bucket:
    rate: float
    burst: float
    retry_after: int | None
    tokens: float = 0.0
    last: float = field(default_factory=time.monotonic)

    def refill(self, now: float) -> None:
        self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
        self.last = now


def _method_set(method: str | Iterable[str] | None) -> frozenset[str] | None:
    if method is None:
        return None
    if isinstance(method, str):
        return frozenset({method.lower()})
    return frozenset(m.lower() for m in method)


class _State:
    """Everything a FakeTelegram holds (set up by ``__init__``)."""

    def __init__(self, token: str = DEFAULT_TOKEN, *, host: str = "127.0.0.1", port: int = 0,
                 bot_username: str = "switchboard_test_bot",
                 bot_first_name: str = "Switchboard Test Bot",
                 callback_answer_timeout: float = CALLBACK_ANSWER_TIMEOUT):
        if ":" not in token or not token.split(":", 1)[0].isdigit():
            raise ValueError("token must look like '<bot id>:<secret>'")
        self.token = token
        self.host = host
        self.port = port
        self.url = ""
        self.bot_user: dict[str, Any] = {
            "id": int(token.split(":", 1)[0]),
            "is_bot": True,
            "first_name": bot_first_name,
            "username": bot_username,
        }
        self.callback_answer_timeout = callback_answer_timeout
        self.on_request: Callable[[str, dict[str, Any]], Any] | None = None

        self._cond = threading.Condition(threading.RLock())
        self._stopping = threading.Event()
        self._server: LoopbackServer | None = None
        self._thread: threading.Thread | None = None
        self._internal_errors: list[str] = []

        self._users: dict[int, dict[str, Any]] = {}
        self._chats: dict[int, dict[str, Any]] = {}
        self._next_message_id: dict[int, int] = {}
        self._messages: dict[tuple[int, int], _Stored] = {}
        self._bot_messages: list[tuple[int, int]] = []
        self._updates: deque[dict[str, Any]] = deque()
        self._update_ids = itertools.count(1)
        self._allowed_updates: set[str] | None = None
        self._poll_generation = 0
        self._callbacks: dict[str, dict[str, Any]] = {}
        self._callback_ids = itertools.count(1)
        self._files: dict[str, dict[str, Any]] = {}
        self._file_ids = itertools.count(1)
        self._commands: dict[tuple[str, str], list[dict[str, str]]] = {}
        self._webhook: dict[str, Any] = {"url": "", "has_custom_certificate": False,
                                         "pending_update_count": 0}

        self._calls: list[dict[str, Any]] = []
        self._errors: list[dict[str, Any]] = []
        self._callback_answers: list[dict[str, Any]] = []
        self._documents: list[dict[str, Any]] = []

        self._faults: list[_Fault] = []
        self._buckets: dict[int | str | None, _Bucket] = {}
        self._outage: str | int | None = None
        self._release_generation = 0
        self._hung = 0
