"""One writer per agent session: a lease in the bucket, taken before the agent's process starts.

`db/leases/<agent id>.json` holds {"holder", "token", "expires_at", "nonce"}. The holder is this
supervisor instance (an id kept in the run directory, never in the database: a restored
database must not make a new container the old one). A lease held by another instance and not
yet expired is refused (`LeaseHeld`); an expired one, or our own, is taken with the next
fencing token. The write is conditional on the generation read (`if_generation_match`, which
GCS honours: two takers cannot both win), and, because the GCS emulator ignores that condition
on existing objects, each take is also read back after a settle delay: a taker that finds
someone else's nonce has lost. With the emulator that read-after-write check is what keeps
two supervisors apart; a write that lands after both reads (slower than the settle delay) is
the remaining window, closed on real GCS by the precondition.
"""

from __future__ import annotations

import json
import logging
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from supervisor.persistence.remote import PreconditionFailed, Remote, RemoteError

logger = logging.getLogger(__name__)

PREFIX = "db/leases/"
SETTLE_S = 0.3
PARALLEL = 8  # leases read and written at a time


class LeaseHeld(Exception):
    def __init__(self, agent_id: str, holder: str, expires_at: float) -> None:
        super().__init__(f"agent {agent_id} is driven by another supervisor ({holder}) until "
                         f"its lease ends at {time.strftime('%H:%M:%S', time.gmtime(expires_at))}"
                         " UTC")
        self.agent_id = agent_id
        self.holder = holder
        self.expires_at = expires_at


@dataclass(frozen=True, slots=True)
class Lease:
    agent_id: str
    holder: str
    token: int  # the fencing token: grows by one with every take
    expires_at: float


def instance_id(run_dir: Path) -> str:
    """This supervisor's id: made once per data directory and kept in its run directory."""
    path = run_dir / "instance-id"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        run_dir.mkdir(parents=True, exist_ok=True)
        ident = f"{socket.gethostname()}-{secrets.token_hex(4)}"
        path.write_text(ident)
        return ident


class Leases:
    def __init__(self, remote: Remote, holder: str, *, ttl_s: float = 60.0,
                 settle_s: float = SETTLE_S, now: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.remote = remote
        self.holder = holder
        self.ttl_s = ttl_s
        self.settle_s = settle_s
        self._now = now
        self._sleep = sleep
        self.held: dict[str, Lease] = {}
        self._lock = threading.Lock()  # guards `held`
        # One take, renewal or release at a time: this supervisor's own writes must not race
        # each other (the start's take beside an agent's first start, a renewal beside a take:
        # each read-back would find the other's nonce and call the lease another's).
        self._ops = threading.Lock()

    def _read(self, agent_id: str) -> tuple[dict[str, object] | None, int]:
        st = self.remote.stat(PREFIX + agent_id + ".json")
        data = self.remote.get_bytes(PREFIX + agent_id + ".json")
        if data is None:
            return None, 0
        try:
            body = json.loads(data)
        except ValueError:
            body = None
        return (body if isinstance(body, dict) else None), st.generation if st else 0

    def acquire(self, agent_ids: Iterable[str]) -> tuple[list[Lease], list[LeaseHeld]]:
        """Take the leases of `agent_ids` (PARALLEL at a time, one settle delay for all of
        them). Returns (taken, refused)."""
        wanted = list(agent_ids)
        with self._ops:
            with self._lock:  # ours already (taken at start, say): not written again
                already = [self.held[a] for a in wanted if a in self.held]
                ids = [a for a in wanted if a not in self.held]
            if not ids:
                return already, []
            now = self._now()
            with ThreadPoolExecutor(max_workers=min(PARALLEL, len(ids))) as pool:
                first = list(pool.map(lambda a: self._try_take(a, now), ids))
                wrote = {a: r for a, r in zip(ids, first, strict=True) if isinstance(r, tuple)}
                refused = [r for r in first if isinstance(r, LeaseHeld)]
                if wrote and self.settle_s > 0:
                    self._sleep(self.settle_s)
                checked = list(pool.map(lambda item: self._confirm(item[0], item[1], now),
                                        wrote.items()))
        taken = already + [c for c in checked if isinstance(c, Lease)]
        refused += [c for c in checked if isinstance(c, LeaseHeld)]
        return taken, refused

    def _try_take(self, agent_id: str, now: float) -> tuple[str, int] | LeaseHeld:
        """Write our claim unless another holds the lease: (nonce, token), or the refusal."""
        body, generation = self._read(agent_id)
        holder = str(body.get("holder", "")) if body else ""
        expires = float(body.get("expires_at", 0)) if body else 0.0  # type: ignore[arg-type]
        if body and holder != self.holder and expires > now:
            return LeaseHeld(agent_id, holder, expires)
        token = int(body.get("token", 0)) + 1 if body else 1  # type: ignore[call-overload]
        nonce = secrets.token_hex(8)
        try:
            self._write(agent_id, token, nonce, generation)
        except PreconditionFailed:
            return LeaseHeld(agent_id, "a supervisor that took it just now", now)
        return nonce, token

    def _confirm(self, agent_id: str, claim: tuple[str, int], now: float) -> Lease | LeaseHeld:
        """Read the claim back after the settle delay: still ours, or someone else's."""
        nonce, token = claim
        body, _ = self._read(agent_id)
        if not body or body.get("nonce") != nonce:
            return LeaseHeld(agent_id, str(body.get("holder", "?")) if body else "?",
                             float(body.get("expires_at", 0)) if body  # type: ignore[arg-type]
                             else now)
        lease = Lease(agent_id, self.holder, token, now + self.ttl_s)
        with self._lock:
            self.held[agent_id] = lease
        logger.info("lease taken agent=%s token=%d holder=%s", agent_id, token, self.holder)
        return lease

    def _write(self, agent_id: str, token: int, nonce: str, generation: int) -> None:
        body = {"agent_id": agent_id, "holder": self.holder, "token": token,
                "expires_at": self._now() + self.ttl_s, "nonce": nonce}
        self.remote.put_bytes(PREFIX + agent_id + ".json", json.dumps(body).encode(),
                              if_generation_match=generation)

    def renew(self) -> list[str]:
        """Extend every lease we hold; the ids of those we found taken from us (by a
        supervisor that saw ours expire), which the caller must stop driving."""
        with self._ops:
            return self._renew_held()

    def _renew_held(self) -> list[str]:
        lost = []
        with self._lock:
            held = list(self.held.values())
        for lease in held:
            try:
                body, generation = self._read(lease.agent_id)
                if body is None or body.get("holder") != self.holder or \
                        int(body.get("token", 0)) != lease.token:  # type: ignore[call-overload]
                    lost.append(lease.agent_id)
                    with self._lock:
                        self.held.pop(lease.agent_id, None)
                    logger.error("lease lost agent=%s to=%s", lease.agent_id,
                                 body.get("holder") if body else None)
                    continue
                self._write(lease.agent_id, lease.token, str(body.get("nonce", "")), generation)
            except RemoteError:
                logger.warning("lease renewal failed agent=%s", lease.agent_id, exc_info=True)
        return lost

    def release(self, agent_ids: Iterable[str] | None = None) -> None:
        """Give leases back (at shutdown): the next supervisor need not wait for them to
        expire."""
        with self._ops:
            self._release(agent_ids)

    def _release(self, agent_ids: Iterable[str] | None) -> None:
        with self._lock:
            ids = list(self.held) if agent_ids is None else [a for a in agent_ids
                                                               if a in self.held]
        for agent_id in ids:
            try:
                body, generation = self._read(agent_id)
                if body and body.get("holder") == self.holder:
                    # Expired, not deleted: the next taker's token must still be higher.
                    body["expires_at"] = 0
                    self.remote.put_bytes(PREFIX + agent_id + ".json",
                                          json.dumps(body).encode(),
                                          if_generation_match=generation)
            except RemoteError:  # PreconditionFailed included: it is someone else's now
                logger.warning("lease release failed agent=%s", agent_id, exc_info=True)
            with self._lock:
                self.held.pop(agent_id, None)
