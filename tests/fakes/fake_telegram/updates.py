"""Bot API methods: getMe, logOut, close, webhooks and getUpdates long polling."""

from __future__ import annotations

import copy
import time
from collections import deque
from typing import Any

from tests.fakes._http import ClientGone
from tests.fakes.fake_telegram.api import CONFLICT_POLLER, CONFLICT_WEBHOOK, ApiError, _bad
from tests.fakes.fake_telegram.decoding import Upload
from tests.fakes.fake_telegram.helpers import _Helpers
from tests.fakes.fake_telegram.server import _Handler

_UPDATE_TYPES_DEFAULT_EXCLUDED = {"chat_member", "message_reaction", "message_reaction_count"}


class _UpdateMethods(_Helpers):
    """getMe, logOut, close, webhook methods and getUpdates."""

    def _m_getme(self, params: dict[str, Any], files: dict[str, Upload]) -> Any:
        return {**self.bot_user, "can_join_groups": True, "can_read_all_group_messages": False,
                "supports_inline_queries": False, "can_connect_to_business": False,
                "has_main_web_app": False}

    def _m_logout(self, params: dict[str, Any], files: dict[str, Upload]) -> Any:
        return True

    def _m_close(self, params: dict[str, Any], files: dict[str, Upload]) -> Any:
        return True

    def _m_setwebhook(self, params: dict[str, Any], files: dict[str, Upload]) -> Any:
        url = params.get("url") or ""
        if url and not str(url).lower().startswith("https://"):
            raise _bad("bad webhook: An HTTPS URL must be provided for webhook")
        with self._cond:
            self._webhook["url"] = url
            if params.get("drop_pending_updates"):
                self._updates.clear()
        return True

    def _m_deletewebhook(self, params: dict[str, Any], files: dict[str, Upload]) -> Any:
        with self._cond:
            self._webhook["url"] = ""
            if params.get("drop_pending_updates"):
                self._updates.clear()
        return True

    def _m_getwebhookinfo(self, params: dict[str, Any], files: dict[str, Upload]) -> Any:
        with self._cond:
            return {**self._webhook, "pending_update_count": len(self._updates)}

    def _m_getupdates(self, params: dict[str, Any], h: _Handler, call: dict[str, Any]) -> Any:
        limit, timeout = _poll_limits(params)
        with self._cond:
            if self._webhook["url"]:
                raise ApiError(409, CONFLICT_WEBHOOK)
            if "allowed_updates" in params:
                allowed = params["allowed_updates"]
                self._allowed_updates = set(allowed) if isinstance(allowed, list) and allowed \
                    else None
            self._confirm(params.get("offset"))
            self._poll_generation += 1
            generation = self._poll_generation
            self._cond.notify_all()
            deadline = time.monotonic() + timeout
            last_check = 0.0
            while True:
                if self._stopping.is_set():
                    raise ClientGone("stopping")
                if self._poll_generation != generation:
                    break  # superseded by a newer getUpdates
                batch = self._deliverable(limit)
                now = time.monotonic()
                if batch or now >= deadline:
                    return batch
                if now - last_check >= 0.1:
                    last_check = now
                    if h._client_gone():
                        raise ClientGone("poller went away")
                self._cond.wait(min(0.05, deadline - now))
        # Superseded: the real server answers the older request with 409.
        if h._client_gone():
            raise ClientGone("superseded poller already gone")
        raise ApiError(409, CONFLICT_POLLER)

    def _confirm(self, offset: Any) -> None:
        """getUpdates' offset: drops the updates it confirms (a negative one keeps the last)."""
        if not isinstance(offset, int):
            return
        if offset < 0:
            keep = list(self._updates)[offset:]
            self._updates = deque(keep)
        else:
            while self._updates and self._updates[0]["update_id"] < offset:
                self._updates.popleft()

    def _deliverable(self, limit: int) -> list[dict[str, Any]]:
        allowed = self._allowed_updates
        out = []
        for update in list(self._updates):
            kind = next(k for k in update if k != "update_id")
            wanted = (kind in allowed) if allowed is not None \
                else kind not in _UPDATE_TYPES_DEFAULT_EXCLUDED
            if not wanted:
                self._updates.remove(update)  # filtered updates are dropped
                continue
            out.append(copy.deepcopy(update))
            if len(out) >= limit:
                break
        return out


def _poll_limits(params: dict[str, Any]) -> tuple[int, float]:
    """getUpdates' limit (clamped to 1..100) and timeout (0 when missing or not valid)."""
    limit = params.get("limit", 100)
    timeout = params.get("timeout", 0)
    if not isinstance(limit, int):
        limit = 100
    limit = min(100, max(1, limit))
    if not isinstance(timeout, (int, float)) or timeout < 0:
        timeout = 0
    return limit, timeout
