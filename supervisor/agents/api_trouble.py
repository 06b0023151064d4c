"""The CLI's own retries of a failing model API within one turn (its `system/api_retry`
messages), and when the operator is told: the CLI retries a 500 for minutes with nothing else
to show, so after a few tries, or half a minute of them, the operator hears the status and
how many tries so far, once per turn."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

TELL_AFTER_TRIES = 4  # about 8 s of the CLI's backoff (0.5 s doubling)
TELL_AFTER_S = 30.0  # whichever comes first: well within a minute


@dataclass(frozen=True, slots=True)
class ApiTroubleNotice:
    title: str
    body: str


class ApiTrouble:
    """One agent's API retries in its current turn; `begin` at each turn."""

    def __init__(self) -> None:
        self.begin()

    def begin(self) -> None:
        self.tries = 0
        self.since: float | None = None
        self.told = False

    def retried(self, name: str, data: dict[str, Any], now: float) -> ApiTroubleNotice | None:
        """One `api_retry` message: the notice to send, when it is time to tell."""
        self.tries += 1
        if self.since is None:
            self.since = now
        failing_s = now - self.since
        if self.told or (self.tries < TELL_AFTER_TRIES and failing_s < TELL_AFTER_S):
            return None
        self.told = True
        status = data.get("error_status")
        error = str(data.get("error") or "").strip()[:200]
        what = f"HTTP {status}" if status else "no answer"
        if error:
            what += f" ({error})"
        limit = data.get("max_retries")
        of = f" of {limit}" if isinstance(limit, int) else ""
        delay_ms = data.get("retry_delay_ms")
        nxt = (f", the next in {delay_ms / 1000:.0f}s"
               if isinstance(delay_ms, (int, float)) else "")
        return ApiTroubleNotice(
            f"{name}: the model API keeps failing",
            f"The model API answered {what}: {self.tries} failed tries{of} in this turn over "
            f"{failing_s:.0f}s{nxt}. The CLI keeps retrying and the turn goes on by itself "
            f"when the API answers again. If it does not, check the API's status page and "
            f"ANTHROPIC_BASE_URL, or /stop {name} to end the turn.")


__all__ = ["ApiTrouble", "ApiTroubleNotice"]
