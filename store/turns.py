"""Repository for turns and the per-turn, per-model cost ledger."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from store.clock import Now, system_now
from store.db import AnyConnection, AnyDatabase
from store.escalations import EscalationDraft, EscalationRepo
from store.fence import check_fence
from store.text_search import contains_all


@dataclass(frozen=True, slots=True)
class TurnRow:
    id: int
    agent_id: str
    prompt: str
    status: str
    result_text: str | None
    error: str | None
    session_id: str | None
    cost_usd: float
    input_tokens: int
    output_tokens: int
    started_at: float
    ended_at: float | None
    origin: str | None = None  # who asked for it (supervisor/bus/inbox.py Origin); None: before 17


@dataclass(frozen=True, slots=True)
class CostLine:
    key: str  # agent id or model name
    cost_usd: float
    input_tokens: int
    output_tokens: int
    turns: int


@dataclass(frozen=True, slots=True)
class Tally:
    """Every turn that ended, by status, and every dollar, by agent and model: what /metrics
    reads on each scrape, so it must never cost a scan."""

    outcomes: tuple[tuple[str, int], ...]
    costs: tuple[tuple[str, str, float], ...]  # (agent_id, model, cost_usd)


DAY_S = 86400


async def _add_totals(conn: AnyConnection, row: Any, cost_usd: float,
                      input_tokens: int, output_tokens: int) -> None:
    """A turn's new cost and tokens into the roll-ups, as the change from what it had (a turn
    finished twice is counted once)."""
    agent_id, _, old_cost, old_in, old_out, started_at = row
    d_cost, d_in, d_out = cost_usd - old_cost, input_tokens - old_in, output_tokens - old_out
    if not (d_cost or d_in or d_out):
        return
    await conn.execute(
        "INSERT INTO agent_totals (agent_id, cost_usd, input_tokens, output_tokens)"
        " VALUES (?,?,?,?) ON CONFLICT (agent_id) DO UPDATE SET"
        " cost_usd = agent_totals.cost_usd + excluded.cost_usd,"
        " input_tokens = agent_totals.input_tokens + excluded.input_tokens,"
        " output_tokens = agent_totals.output_tokens + excluded.output_tokens",
        (agent_id, d_cost, d_in, d_out))
    if d_cost:
        await conn.execute(
            "INSERT INTO spend_days (day, agent_id, cost_usd) VALUES (?,?,?)"
            " ON CONFLICT (day, agent_id) DO UPDATE SET"
            " cost_usd = spend_days.cost_usd + excluded.cost_usd",
            (int(started_at // DAY_S), agent_id, d_cost))


class TurnRepo:
    def __init__(self, db: AnyDatabase, *, now: Now = system_now) -> None:
        self.db = db
        self._now = now
        # Kept in memory from the first tally() on, by the same transactions that write the
        # rows, so it always equals what a GROUP BY over turns and costs would say.
        self._outcomes: dict[str, int] | None = None
        self._costs: dict[tuple[str, str], float] = {}
        self._has_rollups: bool | None = None  # migration 12's tables (read-only: maybe not)

    async def tally(self) -> Tally:
        if self._outcomes is None:
            # Once per process; inside a write transaction so no finish slips in between.
            async with self.db.transaction() as conn:
                async with conn.execute("SELECT status, COUNT(*) FROM turns WHERE status !="
                                        " 'running' GROUP BY status") as cur:
                    outcomes = {str(r[0]): int(r[1]) for r in await cur.fetchall()}
                async with conn.execute("SELECT agent_id, model, cost_usd FROM model_totals")\
                        as cur:
                    costs = {(str(r[0]), str(r[1])): float(r[2] or 0.0)
                             for r in await cur.fetchall()}
            self._outcomes, self._costs = outcomes, costs
        return Tally(tuple(sorted(self._outcomes.items())),
                     tuple((a, m, c) for (a, m), c in sorted(self._costs.items())))

    def _count(self, old: str | None, new: str, n: int = 1) -> None:
        if self._outcomes is None:
            return
        if old is not None and old != "running":
            self._outcomes[old] = self._outcomes.get(old, 0) - n
        self._outcomes[new] = self._outcomes.get(new, 0) + n

    async def start(self, agent_id: str, prompt: str, *, origin: str | None = None,
                    message_ids: Sequence[int] = (),
                    fence: tuple[str, int] | None = None) -> int:
        """A turn begins: its prompt, who asked for it (`origin`, comma-separated when its
        messages came from several), and the bus messages it holds. `fence`: (owner, epoch)
        of the agent's lease (store/leases.py), checked in the same transaction. One turn
        runs per agent: a second start while one is running is a Conflict."""
        async with self.db.transaction() as conn:
            await check_fence(conn, agent_id, fence)
            async with conn.execute(
                "INSERT INTO turns (agent_id, prompt, status, started_at, origin)"
                " VALUES (?,?,?,?,?)",
                (agent_id, prompt, "running", self._now(), origin),
            ) as cur:
                turn_id = cur.lastrowid or 0
            if message_ids:
                await conn.executemany(
                    "INSERT INTO turn_messages (message_id, turn_id) VALUES (?,?)"
                    " ON CONFLICT DO NOTHING",
                    [(m, turn_id) for m in message_ids])
            await conn.execute(
                "INSERT INTO agent_totals (agent_id, turns) VALUES (?, 1)"
                " ON CONFLICT (agent_id) DO UPDATE SET turns = agent_totals.turns + 1", (agent_id,))
        return turn_id

    async def finish(
        self,
        turn_id: int,
        *,
        status: str,
        result_text: str | None = None,
        error: str | None = None,
        session_id: str | None = None,
        cost_usd: float = 0.0,
        input_tokens: int = 0,
        output_tokens: int = 0,
        model_costs: dict[str, tuple[float, int, int]] | None = None,
        notice: EscalationDraft | None = None,
    ) -> None:
        """End a turn; `notice` (the operator's "turn finished") goes in the same
        transaction, so a crash can never leave a finished turn without its notice."""
        now = self._now()
        async with self.db.transaction() as conn:
            if notice is not None:
                await EscalationRepo.insert(conn, notice, now)
            async with conn.execute("SELECT agent_id, status, cost_usd, input_tokens,"
                                    " output_tokens, started_at FROM turns WHERE id=?",
                                    (turn_id,)) as cur:
                row = await cur.fetchone()
            agent_id, old = (row[0], row[1]) if row else (None, None)
            if row is not None:
                await _add_totals(conn, row, cost_usd, input_tokens, output_tokens)
            await conn.execute(
                "UPDATE turns SET status=?, result_text=?, error=?, session_id=?, cost_usd=?,"
                " input_tokens=?, output_tokens=?, ended_at=? WHERE id=?",
                (status, result_text, error, session_id, cost_usd, input_tokens, output_tokens,
                 now, turn_id),
            )
            for model, (m_cost, m_in, m_out) in (model_costs or {}).items():
                await conn.execute(
                    "INSERT INTO costs (agent_id, turn_id, model, cost_usd, input_tokens,"
                    " output_tokens, at) VALUES (?,?,?,?,?,?,?)",
                    (agent_id, turn_id, model, m_cost, m_in, m_out, now),
                )
                await conn.execute(
                    "INSERT INTO model_totals (agent_id, model, turns, cost_usd, input_tokens,"
                    " output_tokens) VALUES (?,?,1,?,?,?) ON CONFLICT (agent_id, model) DO"
                    " UPDATE SET turns = model_totals.turns + 1,"
                    " cost_usd = model_totals.cost_usd + excluded.cost_usd,"
                    " input_tokens = model_totals.input_tokens + excluded.input_tokens,"
                    " output_tokens = model_totals.output_tokens + excluded.output_tokens",
                    (agent_id, model, m_cost, m_in, m_out))
        # Committed: now the tally (a row that was not there changes nothing).
        if row is not None:
            self._count(old, status)
            if self._outcomes is not None:
                for model, (m_cost, _, _) in (model_costs or {}).items():
                    key = (str(agent_id), model)
                    self._costs[key] = self._costs.get(key, 0.0) + m_cost

    async def running(self) -> list[TurnRow]:
        rows = await self.db.fetchall("SELECT * FROM turns WHERE status='running' ORDER BY id")
        return [TurnRow(**dict(r)) for r in rows]

    async def get(self, turn_id: int) -> TurnRow | None:
        row = await self.db.fetchone("SELECT * FROM turns WHERE id=?", (turn_id,))
        return TurnRow(**dict(row)) if row else None

    async def interrupt(self, turn_id: int, error: str, *,
                        report: EscalationDraft | None = None) -> bool:
        """Mark a turn left running as interrupted, with the escalation that reports it in
        the same transaction (so it is reported once, or not at all and still running).
        False if it was no longer running."""
        now = self._now()
        async with self.db.transaction() as conn:
            cur = await conn.execute(
                "UPDATE turns SET status='interrupted', error=?, ended_at=? WHERE id=? AND"
                " status='running'", (error, now, turn_id))
            if cur.rowcount != 1:
                return False
            if report is not None:
                await EscalationRepo.insert(conn, report, now)
        self._count(None, "interrupted")
        return True

    async def close_running(self, agent_id: str | None, error: str) -> int:
        """Mark turns left running (by a crash or restart) as interrupted."""
        where = "status = 'running'" + (" AND agent_id = ?" if agent_id else "")
        params: tuple[str | float, ...] = (error, self._now()) + ((agent_id,) if agent_id else ())
        async with self.db.transaction() as conn:
            cur = await conn.execute(
                f"UPDATE turns SET status='interrupted', error=?, ended_at=? WHERE {where}", params
            )
            closed = cur.rowcount
        if closed > 0:
            self._count(None, "interrupted", closed)
        return closed

    async def spent_since(self, since: float, agent_id: str | None) -> float:
        """Spend of the turns started since `since`. From a UTC day's start (the budgets'
        case) it is read from the per-day roll-up: a row per agent and day, never the turns."""
        where, params = ("AND agent_id = ?", (since, agent_id)) if agent_id else ("", (since,))
        if since % DAY_S == 0:
            day = int(since // DAY_S)
            params = (day, agent_id) if agent_id else (day,)
            row = await self.db.fetchone(
                f"SELECT SUM(cost_usd) AS c FROM spend_days WHERE day >= ? {where}", params)
        else:
            row = await self.db.fetchone(
                f"SELECT SUM(cost_usd) AS c FROM turns WHERE started_at >= ? {where}", params)
        return float(row["c"] or 0.0) if row else 0.0

    async def spent_by_agent_since(self, day_start: float) -> dict[str, float]:
        """Spend per agent since the start of a UTC day, from the per-day roll-up (one read
        for the whole fleet: the web console's fleet page)."""
        rows = await self.db.fetchall(
            "SELECT agent_id, SUM(cost_usd) AS c FROM spend_days WHERE day >= ?"
            " GROUP BY agent_id", (int(day_start // DAY_S),))
        return {str(r["agent_id"]): float(r["c"] or 0.0) for r in rows}

    async def holding(self, agent_id: str, message_id: int) -> TurnRow | None:
        """The first turn of `agent_id` that held bus message `message_id`, or None."""
        row = await self.db.fetchone(
            "SELECT t.* FROM turn_messages tm JOIN turns t ON t.id = tm.turn_id"
            " WHERE tm.message_id = ? AND t.agent_id = ? ORDER BY t.id LIMIT 1",
            (message_id, agent_id))
        return TurnRow(**dict(row)) if row else None

    async def message_ids(self, turn_id: int) -> list[int]:
        """The bus messages a turn held, in id order."""
        rows = await self.db.fetchall(
            "SELECT message_id FROM turn_messages WHERE turn_id = ? ORDER BY message_id",
            (turn_id,))
        return [int(r[0]) for r in rows]

    async def recent(self, agent_id: str, n: int = 5) -> list[TurnRow]:
        rows = await self.db.fetchall(
            "SELECT * FROM turns WHERE agent_id=? ORDER BY id DESC LIMIT ?", (agent_id, n)
        )
        return [TurnRow(**dict(r)) for r in rows]

    async def search(self, words: Sequence[str], *, since: float = 0.0,
                     limit: int = 200) -> list[TurnRow]:
        """Turns whose prompt, result or error holds every word, newest first."""
        where, params = contains_all(("prompt", "result_text", "error"), words)
        rows = await self.db.fetchall(
            f"SELECT * FROM turns WHERE started_at >= ? AND {where} ORDER BY id DESC LIMIT ?",
            (since, *params, limit))
        return [TurnRow(**dict(r)) for r in rows]

    async def totals_by_agent(self, agent_id: str | None = None) -> list[CostLine]:
        """Every turn and dollar per agent: the roll-up kept with each turn, one row an agent."""
        where, params = ("WHERE agent_id = ?", (agent_id,)) if agent_id else ("", ())
        if await self._rollups():
            sql = ("SELECT agent_id AS key, cost_usd AS c, input_tokens AS i,"
                   f" output_tokens AS o, turns AS n FROM agent_totals {where} ORDER BY agent_id")
        else:  # a database an older version left, opened read-only (not migrated): the rows
            sql = ("SELECT agent_id AS key, SUM(cost_usd) AS c, SUM(input_tokens) AS i,"
                   f" SUM(output_tokens) AS o, COUNT(*) AS n FROM turns {where}"
                   " GROUP BY agent_id")
        rows = await self.db.fetchall(sql, params)
        return [CostLine(r["key"], r["c"] or 0.0, r["i"] or 0, r["o"] or 0, r["n"]) for r in rows]

    async def _rollups(self) -> bool:
        if self._has_rollups is None:
            self._has_rollups = not self.db.read_only or await self.db.fetchone(
                "SELECT 1 FROM sqlite_master WHERE name = 'agent_totals'") is not None
        return self._has_rollups

    async def totals_by_model(self, agent_id: str | None = None) -> list[CostLine]:
        where, params = ("WHERE agent_id = ?", (agent_id,)) if agent_id else ("", ())
        rows = await self.db.fetchall(
            "SELECT model AS key, SUM(cost_usd) AS c, SUM(input_tokens) AS i,"
            f" SUM(output_tokens) AS o, SUM(turns) AS n FROM model_totals {where}"
            " GROUP BY model ORDER BY c DESC",
            params,
        )
        return [CostLine(r["key"], r["c"] or 0.0, r["i"] or 0, r["o"] or 0, r["n"]) for r in rows]
