"""A long-lived database, made fast: agents, events, turns, costs and delivered notices written
straight with sqlite3 `executemany` (a million rows in seconds), aggregates and cursors filled
as the migrations would."""

from __future__ import annotations

import json
import random
import sqlite3
import time
from pathlib import Path

from store.migrations import MIGRATIONS

CHUNK = 50_000


def migrated(path: Path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    for number, script in enumerate(MIGRATIONS, start=1):
        conn.executescript(f"BEGIN;\n{script}\nPRAGMA user_version={number};\nCOMMIT;")
    conn.close()


def fill(path: Path, *, agents: int = 300, events: int = 0, turns: int = 0,
         notices: int = 0, frontends: tuple[str, ...] = ()) -> None:
    """Rows as a busy fleet leaves them; `notices` are finished-turn notices, every one
    delivered to each of `frontends` (so the outbox has nothing to send)."""
    if not path.exists():
        migrated(path)
    rnd = random.Random(7)
    now = time.time()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous=OFF")
    ids = [f"f{i:04d}" for i in range(agents)]
    conn.execute("BEGIN")
    conn.executemany("INSERT OR IGNORE INTO agents (id, name, cwd, prompt, state, created_at,"
                     " updated_at) VALUES (?, ?, '/w', 'p', 'idle', ?, ?)",
                     [(a, "n" + a, now, now) for a in ids])
    conn.execute("COMMIT")
    data = json.dumps({"content": [{"text": "x" * 300}], "model": "claude-sonnet"})
    _chunks(conn, "INSERT INTO agent_events (agent_id, turn_id, kind, summary, data, at)"
            " VALUES (?,?,?,?,?,?)",
            ((ids[i % agents], None, "assistant", "some output", data, now - (events - i) * 0.01)
             for i in range(events)), events)
    _chunks(conn, "INSERT INTO turns (agent_id, prompt, status, result_text, cost_usd,"
            " input_tokens, output_tokens, started_at, ended_at) VALUES (?,?,?,?,?,?,?,?,?)",
            ((ids[i % agents], "do it", "ok", "done", 0.01, 100, 200, now - (turns - i) * 0.5,
              now) for i in range(turns)), turns)
    _chunks(conn, "INSERT INTO costs (agent_id, turn_id, model, cost_usd, input_tokens,"
            " output_tokens, at) VALUES (?,?,?,?,?,?,?)",
            ((ids[i % agents], i + 1, rnd.choice(("opus", "sonnet")), 0.01, 100, 200, now)
             for i in range(turns)), turns)
    _chunks(conn, "INSERT INTO escalations (id, agent_id, kind, title, body, status,"
            " created_at) VALUES (?,?,'notice',?,?,'info',?)",
            ((f"fill{i}", ids[i % agents], "agent finished", "done", now - 3600)
             for i in range(notices)), notices)
    for fe in frontends:
        _chunks(conn, "INSERT INTO deliveries (escalation_id, frontend, delivered_at)"
                " VALUES (?,?,?)", ((f"fill{i}", fe, now) for i in range(notices)), notices)
        conn.execute("INSERT OR REPLACE INTO kv (key, value, updated_at) VALUES (?,?,?)",
                     (f"frontend_seen:{fe}", json.dumps(now), now))
        if _has(conn, "outbox_cursors"):
            conn.execute("INSERT OR REPLACE INTO outbox_cursors (frontend, seq)"
                         " VALUES (?, (SELECT COALESCE(MAX(seq), 0) FROM escalations))", (fe,))
    if _has(conn, "agent_totals"):  # the roll-ups, as migration 12 fills them from the rows
        conn.executescript("""
            BEGIN;
            DELETE FROM agent_totals; DELETE FROM model_totals; DELETE FROM spend_days;
            INSERT INTO agent_totals (agent_id, turns, cost_usd, input_tokens, output_tokens)
                SELECT agent_id, COUNT(*), SUM(cost_usd), SUM(input_tokens), SUM(output_tokens)
                FROM turns GROUP BY agent_id;
            INSERT INTO model_totals (agent_id, model, turns, cost_usd, input_tokens, output_tokens)
                SELECT agent_id, model, COUNT(DISTINCT turn_id), SUM(cost_usd), SUM(input_tokens),
                       SUM(output_tokens) FROM costs GROUP BY agent_id, model;
            INSERT INTO spend_days (day, agent_id, cost_usd)
                SELECT CAST(started_at / 86400 AS INTEGER), agent_id, SUM(cost_usd)
                FROM turns GROUP BY 1, 2;
            COMMIT;
        """)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def _chunks(conn: sqlite3.Connection, sql: str, rows: object, n: int) -> None:
    it = iter(rows)  # type: ignore[call-overload]
    done = 0
    while done < n:
        batch = [next(it) for _ in range(min(CHUNK, n - done))]
        conn.execute("BEGIN")
        conn.executemany(sql, batch)
        conn.execute("COMMIT")
        done += len(batch)


def _has(conn: sqlite3.Connection, table: str) -> bool:
    """Whether the schema has `table` (the fill also serves an older schema, for a before)."""
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone() \
        is not None
