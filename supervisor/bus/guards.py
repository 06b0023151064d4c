"""The bus's storm guards, pure and clocked: a sliding window per sender -> recipient pair with a
cooldown, identical repeats, request/reply rounds and the fleet-wide message-rate alarm.

Each check takes `now` (monotonic seconds) and returns a refusal (what to tell the sending
agent) or None; none of them touches the store, so they are tested with plain numbers.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class GuardLimits:
    pair_limit: int = 20  # messages per sender -> recipient pair ...
    pair_window_s: float = 60.0  # ... in this sliding window, then
    pair_cooldown_s: float = 60.0  # this long refused
    round_limit: int = 10  # replies in one request/reply chain
    rate_alarm_per_min: int = 600  # fleet-wide messages a minute before the operator is told


@dataclass(slots=True)
class _Pair:
    sent: deque[float] = field(default_factory=deque)
    cooldown_until: float = 0.0
    recent: dict[int, float] = field(default_factory=dict)  # body digest -> when sent


@dataclass(frozen=True, slots=True)
class Refusal:
    reason: str
    cut_off: bool = False  # this refusal started a pair's cooldown (tell the operator once)
    dropped: bool = False  # an identical repeat: dropped, not an error


def digest(kind: str, body: str) -> int:
    """Identity of a message's content within one window, in memory only."""
    return hash((kind, body))


class Guards:
    def __init__(self, limits: GuardLimits) -> None:
        self.limits = limits
        self._pairs: dict[tuple[str, str], _Pair] = {}
        self._fleet: deque[float] = deque()
        self._alarm_until = 0.0
        self._depth: dict[int, int] = {}  # message id -> its place in a request/reply chain

    def check_pair(self, sender: str, recipient: str, kind: str, body: str,
                   now: float, recipient_name: str = "") -> Refusal | None:
        """Before a message from `sender` to `recipient` is stored. Counts it when admitted."""
        lim = self.limits
        pair = self._pairs.get((sender, recipient))
        if pair is None:  # not setdefault: that would build a _Pair for every message
            pair = self._pairs[(sender, recipient)] = _Pair()
        who = recipient_name or recipient
        if now < pair.cooldown_until:
            return Refusal(f"refused: you sent {who} too many messages; wait "
                           f"{pair.cooldown_until - now:.0f}s, or batch the rest into one "
                           "message")
        cutoff = now - lim.pair_window_s
        sent, recent = pair.sent, pair.recent
        while sent and sent[0] <= cutoff:
            sent.popleft()
        while recent:  # insertion order is time order: the oldest go first
            oldest = next(iter(recent))
            if recent[oldest] > cutoff:
                break
            del recent[oldest]
        key = digest(kind, body)
        if key in pair.recent:
            return Refusal(f"dropped: the same message went to {who} {now - pair.recent[key]:.0f}s "
                           "ago; send something new, or wait for the answer", dropped=True)
        if len(pair.sent) >= lim.pair_limit:
            pair.cooldown_until = now + lim.pair_cooldown_s
            pair.sent.clear()
            return Refusal(f"refused: {lim.pair_limit} messages to {who} in "
                           f"{lim.pair_window_s:.0f}s is the limit; wait "
                           f"{lim.pair_cooldown_s:.0f}s, or batch the rest into one message",
                           cut_off=True)
        pair.sent.append(now)
        pair.recent[key] = now
        return None

    def check_round(self, reply_to: int | None) -> Refusal | None:
        if reply_to is None:
            return None
        depth = self._depth.get(reply_to, 0) + 1
        if depth > self.limits.round_limit:
            return Refusal(f"refused: this exchange has gone {self.limits.round_limit} rounds; "
                           "stop replying, or ask the operator (ask_operator) how to go on")
        return None

    def stored(self, message_id: int, reply_to: int | None) -> None:
        self._depth[message_id] = self._depth.get(reply_to, 0) + 1 if reply_to else 0
        if len(self._depth) > 100_000:  # a bound, not a history: the oldest go first
            for old in list(self._depth)[:50_000]:
                del self._depth[old]

    def fleet_rate(self, now: float, n: int = 1) -> int | None:
        """Count `n` messages; the rate per minute when it passes the alarm (once a minute)."""
        fleet = self._fleet
        if n == 1:
            fleet.append(now)
        else:
            fleet.extend([now] * n)
        cutoff = now - 60
        while fleet and fleet[0] <= cutoff:
            fleet.popleft()
        if len(fleet) > self.limits.rate_alarm_per_min and now >= self._alarm_until:
            self._alarm_until = now + 60
            return len(fleet)
        return None
