"""Repository for turns and the per-turn, per-model cost ledger."""

from __future__ import annotations

import time
from dataclasses import dataclass

from store.db import Database
from store.escalations import EscalationDraft, EscalationRepo


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


@dataclass(frozen=True, slots=True)
class CostLine:
    key: str  # agent id or model name
    cost_usd: float
    input_tokens: int
    output_tokens: int
    turns: int


class TurnRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def start(self, agent_id: str, prompt: str) -> int:
        return await self.db.execute(
            "INSERT INTO turns (agent_id, prompt, status, started_at) VALUES (?,?,?,?)",
            (agent_id, prompt, "running", time.time()),
        )

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
        now = time.time()
        async with self.db.transaction() as conn:
            if notice is not None:
                await EscalationRepo.insert(conn, notice, now)
            await conn.execute(
                "UPDATE turns SET status=?, result_text=?, error=?, session_id=?, cost_usd=?,"
                " input_tokens=?, output_tokens=?, ended_at=? WHERE id=?",
                (status, result_text, error, session_id, cost_usd, input_tokens, output_tokens,
                 now, turn_id),
            )
            async with conn.execute("SELECT agent_id FROM turns WHERE id=?", (turn_id,)) as cur:
                row = await cur.fetchone()
            agent_id = row[0] if row else None
            for model, (m_cost, m_in, m_out) in (model_costs or {}).items():
                await conn.execute(
                    "INSERT INTO costs (agent_id, turn_id, model, cost_usd, input_tokens,"
                    " output_tokens, at) VALUES (?,?,?,?,?,?,?)",
                    (agent_id, turn_id, model, m_cost, m_in, m_out, now),
                )

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
        now = time.time()
        async with self.db.transaction() as conn:
            cur = await conn.execute(
                "UPDATE turns SET status='interrupted', error=?, ended_at=? WHERE id=? AND"
                " status='running'", (error, now, turn_id))
            if cur.rowcount != 1:
                return False
            if report is not None:
                await EscalationRepo.insert(conn, report, now)
            return True

    async def close_running(self, agent_id: str | None, error: str) -> int:
        """Mark turns left running (by a crash or restart) as interrupted."""
        where = "status = 'running'" + (" AND agent_id = ?" if agent_id else "")
        params: tuple[str | float, ...] = (error, time.time()) + ((agent_id,) if agent_id else ())
        async with self.db.transaction() as conn:
            cur = await conn.execute(
                f"UPDATE turns SET status='interrupted', error=?, ended_at=? WHERE {where}", params
            )
            return cur.rowcount

    async def spent_since(self, since: float, agent_id: str | None) -> float:
        where, params = ("AND agent_id = ?", (since, agent_id)) if agent_id else ("", (since,))
        row = await self.db.fetchone(
            f"SELECT SUM(cost_usd) AS c FROM turns WHERE started_at >= ? {where}", params)
        return float(row["c"] or 0.0) if row else 0.0

    async def recent(self, agent_id: str, n: int = 5) -> list[TurnRow]:
        rows = await self.db.fetchall(
            "SELECT * FROM turns WHERE agent_id=? ORDER BY id DESC LIMIT ?", (agent_id, n)
        )
        return [TurnRow(**dict(r)) for r in rows]

    async def totals_by_agent(self, agent_id: str | None = None) -> list[CostLine]:
        where, params = ("WHERE agent_id = ?", (agent_id,)) if agent_id else ("", ())
        rows = await self.db.fetchall(
            "SELECT agent_id AS key, SUM(cost_usd) AS c, SUM(input_tokens) AS i,"
            f" SUM(output_tokens) AS o, COUNT(*) AS n FROM turns {where} GROUP BY agent_id",
            params,
        )
        return [CostLine(r["key"], r["c"] or 0.0, r["i"] or 0, r["o"] or 0, r["n"]) for r in rows]

    async def totals_by_model(self, agent_id: str | None = None) -> list[CostLine]:
        where, params = ("WHERE agent_id = ?", (agent_id,)) if agent_id else ("", ())
        rows = await self.db.fetchall(
            "SELECT model AS key, SUM(cost_usd) AS c, SUM(input_tokens) AS i,"
            f" SUM(output_tokens) AS o, COUNT(DISTINCT turn_id) AS n FROM costs {where}"
            " GROUP BY model ORDER BY c DESC",
            params,
        )
        return [CostLine(r["key"], r["c"] or 0.0, r["i"] or 0, r["o"] or 0, r["n"]) for r in rows]
