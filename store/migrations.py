"""Versioned schema migrations for both engines, from one list: applied in order, the version
recorded in SQLite's PRAGMA user_version or PostgreSQL's switchboard_schema row.

Each entry is written in SQLite's dialect. PostgreSQL runs the same entry through `for_postgres`:
a small DDL translation (types, identity ids, a binary collation for text), plus, where that is
not enough, an edit of the entry's own text kept here beside it (`_PG_EDITS`)."""

from __future__ import annotations

import functools
import re

# Append only: never edit a migration that has shipped; add a new one.
MIGRATIONS: tuple[str, ...] = (
    # 1: agents, their state transitions, their stream-json events, turns and costs.
    """
    CREATE TABLE agents (
        id            TEXT PRIMARY KEY,
        name          TEXT NOT NULL,
        parent_id     TEXT REFERENCES agents(id),
        model         TEXT,
        cwd           TEXT NOT NULL,
        prompt        TEXT NOT NULL,
        permission_mode TEXT NOT NULL DEFAULT 'default',
        state         TEXT NOT NULL,
        session_id    TEXT,
        launcher_pid  INTEGER,
        cli_pid       INTEGER,
        cost_baseline TEXT NOT NULL DEFAULT '{}',
        last_error    TEXT,
        created_at    REAL NOT NULL,
        updated_at    REAL NOT NULL
    );
    CREATE INDEX agents_parent ON agents(parent_id);
    CREATE UNIQUE INDEX agents_live_name ON agents(name)
        WHERE state NOT IN ('stopped', 'failed', 'killed');

    CREATE TABLE agent_transitions (
        id         INTEGER PRIMARY KEY AUTOINCREMENT,
        agent_id   TEXT NOT NULL REFERENCES agents(id),
        from_state TEXT,
        to_state   TEXT NOT NULL,
        reason     TEXT NOT NULL DEFAULT '',
        at         REAL NOT NULL
    );
    CREATE INDEX agent_transitions_agent ON agent_transitions(agent_id, id);

    CREATE TABLE agent_events (
        id       INTEGER PRIMARY KEY AUTOINCREMENT,
        agent_id TEXT NOT NULL REFERENCES agents(id),
        turn_id  INTEGER,
        kind     TEXT NOT NULL,
        summary  TEXT NOT NULL DEFAULT '',
        data     TEXT NOT NULL,
        at       REAL NOT NULL
    );
    CREATE INDEX agent_events_agent ON agent_events(agent_id, id);

    CREATE TABLE turns (
        id            INTEGER PRIMARY KEY AUTOINCREMENT,
        agent_id      TEXT NOT NULL REFERENCES agents(id),
        prompt        TEXT NOT NULL,
        status        TEXT NOT NULL,
        result_text   TEXT,
        error         TEXT,
        session_id    TEXT,
        cost_usd      REAL NOT NULL DEFAULT 0,
        input_tokens  INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0,
        started_at    REAL NOT NULL,
        ended_at      REAL
    );
    CREATE INDEX turns_agent ON turns(agent_id, id);

    CREATE TABLE costs (
        id            INTEGER PRIMARY KEY AUTOINCREMENT,
        agent_id      TEXT NOT NULL REFERENCES agents(id),
        turn_id       INTEGER REFERENCES turns(id),
        model         TEXT NOT NULL,
        cost_usd      REAL NOT NULL,
        input_tokens  INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0,
        at            REAL NOT NULL
    );
    CREATE INDEX costs_agent ON costs(agent_id);

    CREATE TABLE audit (
        id        INTEGER PRIMARY KEY AUTOINCREMENT,
        at        REAL NOT NULL,
        platform  TEXT NOT NULL,
        user_id   TEXT NOT NULL,
        user_name TEXT NOT NULL DEFAULT '',
        action    TEXT NOT NULL,
        args      TEXT NOT NULL DEFAULT '',
        ok        INTEGER NOT NULL,
        result    TEXT NOT NULL DEFAULT ''
    );
    """,
    # 2: escalations (the outbox front ends read), per-front-end deliveries, session allowances.
    """
    CREATE TABLE escalations (
        seq          INTEGER PRIMARY KEY AUTOINCREMENT,
        id           TEXT NOT NULL UNIQUE,
        agent_id     TEXT REFERENCES agents(id),
        kind         TEXT NOT NULL,
        title        TEXT NOT NULL,
        body         TEXT NOT NULL DEFAULT '',
        tool_name    TEXT,
        tool_input   TEXT,
        options      TEXT NOT NULL DEFAULT '[]',
        free_text    INTEGER NOT NULL DEFAULT 0,
        ref_id       TEXT,
        status       TEXT NOT NULL,
        answer       TEXT,
        answered_by  TEXT,
        answered_via TEXT,
        answered_at  REAL,
        created_at   REAL NOT NULL
    );
    CREATE INDEX escalations_open ON escalations(status, seq);
    CREATE INDEX escalations_agent ON escalations(agent_id, status);

    CREATE TABLE deliveries (
        escalation_id TEXT NOT NULL REFERENCES escalations(id),
        frontend      TEXT NOT NULL,
        delivered_at  REAL NOT NULL,
        PRIMARY KEY (escalation_id, frontend)
    );

    CREATE TABLE session_allowances (
        agent_id   TEXT NOT NULL REFERENCES agents(id),
        session_id TEXT,
        key        TEXT NOT NULL,
        tool_name  TEXT NOT NULL,
        granted_by TEXT NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (agent_id, key)
    );
    """,
    # 3: small persistent settings: the kill-switch halt flag, raised budgets, trigger cursors.
    """
    CREATE TABLE kv (
        key        TEXT PRIMARY KEY,
        value      TEXT NOT NULL,
        updated_at REAL NOT NULL
    );
    """,
    # 4: operators (per platform, with roles), one-time invite codes, and where each
    # escalation was shown in chat (so every copy can be edited once it is answered).
    """
    CREATE TABLE operators (
        platform   TEXT NOT NULL,
        user_id    TEXT NOT NULL,
        name       TEXT NOT NULL DEFAULT '',
        role       TEXT NOT NULL,
        added_by   TEXT NOT NULL,
        added_at   REAL NOT NULL,
        PRIMARY KEY (platform, user_id)
    );
    CREATE TABLE invites (
        code       TEXT PRIMARY KEY,
        role       TEXT NOT NULL,
        created_by TEXT NOT NULL,
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        used_by    TEXT,
        used_at    REAL,
        revoked    INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE chat_copies (
        escalation_id TEXT NOT NULL,
        platform      TEXT NOT NULL,
        chat_id       TEXT NOT NULL,
        message_id    TEXT NOT NULL,
        PRIMARY KEY (escalation_id, platform, chat_id)
    );
    CREATE INDEX chat_copies_message ON chat_copies(platform, chat_id, message_id);
    """,
    # 5: whether an agent may load its project's .claude settings, hooks, MCP servers, CLAUDE.md
    """
    ALTER TABLE agents ADD COLUMN project_settings INTEGER NOT NULL DEFAULT 0;
    """,
    # 6: the complete text of what an escalation asks about (a whole command, new file, diff,
    # plan), kept apart from the short body so chats can preview it and send it as a file
    # named detail_name.
    """
    ALTER TABLE escalations ADD COLUMN detail TEXT;
    ALTER TABLE escalations ADD COLUMN detail_name TEXT;
    """,
    # 7: invite codes are kept only as hashes (see store.operators.hash_code). Codes written in
    # clear by earlier versions cannot be hashed here (SQLite has no SHA-256): they are revoked
    # and overwritten, with secure_delete so that freed space is zeroed rather than left holding
    # them (the WAL is checkpointed after migrating, so old page copies go as well).
    """
    PRAGMA secure_delete = ON;
    ALTER TABLE invites RENAME COLUMN code TO code_hash;
    UPDATE invites SET code_hash = 'cleared-' || rowid,
                       revoked = CASE WHEN used_by IS NULL THEN 1 ELSE revoked END;
    """,
    # 8: escalation timers as rows. remind_at / expires_at: when the reminder is due
    # and when the timeout applies, wall-clock epoch seconds, NULL for never; reminded_at /
    # timed_out_at: when each fired, so each fires once; on_timeout: deny | pause;
    # survives_restart: the answer is read from the row, not handed to a call waiting in the
    # process that opened it, so a restart leaves the row open and its timers still fire.
    """
    ALTER TABLE escalations ADD COLUMN remind_at REAL;
    ALTER TABLE escalations ADD COLUMN expires_at REAL;
    ALTER TABLE escalations ADD COLUMN reminded_at REAL;
    ALTER TABLE escalations ADD COLUMN timed_out_at REAL;
    ALTER TABLE escalations ADD COLUMN on_timeout TEXT NOT NULL DEFAULT 'deny';
    ALTER TABLE escalations ADD COLUMN survives_restart INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX escalations_remind_due ON escalations(remind_at)
        WHERE status = 'open' AND reminded_at IS NULL AND timed_out_at IS NULL;
    CREATE INDEX escalations_expiry_due ON escalations(expires_at)
        WHERE status = 'open' AND timed_out_at IS NULL;
    """,
    # 9: when a chat copy was last edited to show its escalation's outcome; NULL while it
    # still shows the question (and its buttons), so a restart finds the copies to edit.
    """
    ALTER TABLE chat_copies ADD COLUMN settled_at REAL;
    """,
    # 10: each agent's status card in a chat, kept for the agent's whole life: on Slack the
    # card is the top message of the agent's thread, so the thread survives a restart and a
    # reply in it finds its agent (never looked up in the platform's history).
    """
    CREATE TABLE chat_threads (
        platform   TEXT NOT NULL,
        agent_id   TEXT NOT NULL,
        chat_id    TEXT NOT NULL,
        message_id TEXT NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (platform, agent_id, chat_id)
    );
    CREATE INDEX chat_threads_message ON chat_threads(platform, chat_id, message_id);
    """,
    # 11 (the bus): messages between agents and the operator; one delivery per recipient with
    # a per-recipient sequence, a lease (holder, fencing token, expiry) and how it ended;
    # topic subscriptions (a role is the topic "role:<name>").
    """
    CREATE TABLE bus_messages (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        sender      TEXT NOT NULL,
        sender_name TEXT NOT NULL,
        recipient   TEXT NOT NULL,
        type        TEXT NOT NULL,
        body        TEXT NOT NULL,
        reply_to    INTEGER,
        dedup_key   TEXT,
        expires_at  REAL,
        created_at  REAL NOT NULL
    );
    CREATE UNIQUE INDEX bus_messages_dedup ON bus_messages(sender, dedup_key)
        WHERE dedup_key IS NOT NULL;
    CREATE INDEX bus_messages_sender ON bus_messages(sender, id);
    CREATE TABLE bus_deliveries (
        message_id       INTEGER NOT NULL REFERENCES bus_messages(id),
        recipient_id     TEXT NOT NULL,
        seq              INTEGER NOT NULL,
        lane             INTEGER NOT NULL DEFAULT 1,
        state            TEXT NOT NULL,
        attempts         INTEGER NOT NULL DEFAULT 0,
        lease_holder     TEXT,
        lease_token      TEXT,
        lease_expires_at REAL,
        delivered_at     REAL,
        consumed_at      REAL,
        reason           TEXT,
        PRIMARY KEY (recipient_id, seq)
    );
    CREATE INDEX bus_deliveries_message ON bus_deliveries(message_id);
    CREATE INDEX bus_deliveries_open ON bus_deliveries(recipient_id, lane, seq)
        WHERE state IN ('queued', 'leased');
    CREATE TABLE bus_subscriptions (
        topic      TEXT NOT NULL,
        agent_id   TEXT NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (topic, agent_id)
    );
    CREATE INDEX bus_subscriptions_agent ON bus_subscriptions(agent_id);
    """,
    # 12: standing agents: each one's charter, and the questions already sent back to it
    # (at most once per question). Self-contained: nothing else refers to these tables.
    """
    CREATE TABLE agent_charters (
        agent_id   TEXT PRIMARY KEY REFERENCES agents(id),
        charter    TEXT NOT NULL,
        created_at REAL NOT NULL
    );
    CREATE TABLE charter_sendbacks (
        agent_id     TEXT NOT NULL,
        question_key TEXT NOT NULL,
        question     TEXT NOT NULL,
        lines        TEXT NOT NULL,
        at           REAL NOT NULL,
        PRIMARY KEY (agent_id, question_key)
    );
    """,
    # 13 (repositories, docs/repositories.md): registered bare repositories; each agent's
    # worktree (recorded before it is created: state 'creating', so GC never takes one that a
    # spawn is making); and the archive branches GC left for work it would otherwise remove.
    """
    CREATE TABLE repos (
        name           TEXT PRIMARY KEY,
        url            TEXT NOT NULL,
        path           TEXT NOT NULL,
        default_branch TEXT NOT NULL,
        created_at     REAL NOT NULL,
        fetched_at     REAL
    );
    CREATE TABLE worktrees (
        agent_id   TEXT PRIMARY KEY,
        agent_name TEXT NOT NULL,
        repo       TEXT NOT NULL,
        path       TEXT NOT NULL,
        admin      TEXT NOT NULL DEFAULT '',
        branch     TEXT NOT NULL,
        base       TEXT NOT NULL,
        head       TEXT,
        private    INTEGER NOT NULL DEFAULT 0,
        state      TEXT NOT NULL,
        created_at REAL NOT NULL,
        removed_at REAL
    );
    CREATE INDEX worktrees_repo ON worktrees(repo, state);
    CREATE TABLE repo_archives (
        ref        TEXT PRIMARY KEY,
        repo       TEXT NOT NULL,
        agent_id   TEXT NOT NULL,
        agent_name TEXT NOT NULL,
        commit_sha TEXT NOT NULL,
        reason     TEXT NOT NULL,
        created_at REAL NOT NULL
    );
    CREATE INDEX repo_archives_repo ON repo_archives(repo, created_at);
    """,
    # 14 (the scheduler): schedules, and one row per slot of each: ran, skipped (and why),
    # failed, timed out, interrupted. The unique (schedule_id, slot_key) is the claim: whoever
    # inserts the row runs the slot, so no restart or second scheduler runs it twice. Last and
    # next run and consecutive failures are derived from these rows, never stored.
    """
    CREATE TABLE schedules (
        id           TEXT PRIMARY KEY,
        spec         TEXT NOT NULL,
        tz           TEXT NOT NULL,
        target_kind  TEXT NOT NULL,
        target       TEXT NOT NULL,
        model        TEXT,
        prompt       TEXT NOT NULL,
        enabled      INTEGER NOT NULL DEFAULT 1,
        paused_why   TEXT NOT NULL DEFAULT '',
        missed       TEXT NOT NULL DEFAULT 'skip',
        overlap      TEXT NOT NULL DEFAULT 'skip',
        timeout_s    REAL NOT NULL,
        budget_usd   REAL,
        notify       TEXT NOT NULL DEFAULT 'failure',
        created_by   TEXT NOT NULL,
        owner_agent  TEXT,
        expires_at   REAL,
        created_at   REAL NOT NULL,
        deleted_at   REAL
    );
    CREATE INDEX schedules_owner ON schedules(owner_agent) WHERE deleted_at IS NULL;
    CREATE TABLE schedule_runs (
        id           INTEGER PRIMARY KEY AUTOINCREMENT,
        schedule_id  TEXT NOT NULL REFERENCES schedules(id),
        slot_key     TEXT NOT NULL,
        slot_at      REAL NOT NULL,
        status       TEXT NOT NULL,
        reason       TEXT NOT NULL DEFAULT '',
        catch_up     INTEGER NOT NULL DEFAULT 0,
        manual       INTEGER NOT NULL DEFAULT 0,
        agent_id     TEXT,
        message_id   INTEGER,
        cost_usd     REAL NOT NULL DEFAULT 0,
        outcome      TEXT NOT NULL DEFAULT '',
        claimed_by   TEXT NOT NULL DEFAULT '',
        started_at   REAL NOT NULL,
        ended_at     REAL
    );
    CREATE UNIQUE INDEX schedule_runs_slot ON schedule_runs(schedule_id, slot_key);
    CREATE INDEX schedule_runs_recent ON schedule_runs(schedule_id, slot_at);
    CREATE INDEX schedule_runs_live ON schedule_runs(status) WHERE status = 'running';
    """,
    # 15 (fleet ingest): aggregates kept with each turn in the same transaction, so /status,
    # /cost and the budget check never scan turns or costs: per agent (turns, spend, tokens),
    # per agent and model, and per agent and UTC day (by the day a turn started); each front
    # end's delivery cursor, below which every escalation and notice is delivered to it, so the
    # outbox reads from there, never the whole history. Filled from the rows already there.
    """
    CREATE TABLE agent_totals (
        agent_id      TEXT PRIMARY KEY,
        turns         INTEGER NOT NULL DEFAULT 0,
        cost_usd      REAL NOT NULL DEFAULT 0,
        input_tokens  INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0
    );
    INSERT INTO agent_totals (agent_id, turns, cost_usd, input_tokens, output_tokens)
        SELECT agent_id, COUNT(*), SUM(cost_usd), SUM(input_tokens), SUM(output_tokens)
        FROM turns GROUP BY agent_id;
    CREATE TABLE model_totals (
        agent_id      TEXT NOT NULL,
        model         TEXT NOT NULL,
        turns         INTEGER NOT NULL DEFAULT 0,
        cost_usd      REAL NOT NULL DEFAULT 0,
        input_tokens  INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (agent_id, model)
    );
    INSERT INTO model_totals (agent_id, model, turns, cost_usd, input_tokens, output_tokens)
        SELECT agent_id, model, COUNT(DISTINCT turn_id), SUM(cost_usd), SUM(input_tokens),
               SUM(output_tokens)
        FROM costs GROUP BY agent_id, model;
    CREATE TABLE spend_days (
        day      INTEGER NOT NULL,
        agent_id TEXT NOT NULL,
        cost_usd REAL NOT NULL DEFAULT 0,
        PRIMARY KEY (day, agent_id)
    );
    INSERT INTO spend_days (day, agent_id, cost_usd)
        SELECT CAST(started_at / 86400 AS INTEGER), agent_id, SUM(cost_usd)
        FROM turns GROUP BY 1, 2;
    CREATE TABLE outbox_cursors (
        frontend TEXT PRIMARY KEY,
        seq      INTEGER NOT NULL
    );
    INSERT INTO outbox_cursors (frontend, seq)
        SELECT f.frontend, COALESCE((SELECT MIN(e.seq) - 1 FROM escalations e
                                     WHERE NOT EXISTS (SELECT 1 FROM deliveries d
                                                       WHERE d.escalation_id = e.id
                                                       AND d.frontend = f.frontend)),
                                    (SELECT COALESCE(MAX(seq), 0) FROM escalations))
        FROM (SELECT DISTINCT frontend FROM deliveries) f;
    """,
    # 16 (bus throughput): when a delivery ended (consumed, expired or dead-lettered), and the
    # open-deliveries index keyed on it instead of on the state: a lease (queued -> leased) and
    # its release (back to queued) no longer delete and re-insert the delivery's index entry,
    # since SQLite rewrites a partial index's entry whenever a column its WHERE names changes.
    """
    ALTER TABLE bus_deliveries ADD COLUMN ended_at REAL;
    UPDATE bus_deliveries SET ended_at = COALESCE(consumed_at, delivered_at, 0)
        WHERE state NOT IN ('queued', 'leased');
    DROP INDEX bus_deliveries_open;
    CREATE INDEX bus_deliveries_open ON bus_deliveries(recipient_id, lane, seq)
        WHERE ended_at IS NULL;
    """,
    # 17 (turn origins): who a turn came from, as data: a message's origin where its sender
    # does not say it (a schedule's or a parent agent's first prompt, a restart's note; NULL:
    # the sender says it), each turn's origin, and the bus messages each turn held.
    """
    ALTER TABLE bus_messages ADD COLUMN origin TEXT;
    ALTER TABLE turns ADD COLUMN origin TEXT;
    CREATE TABLE turn_messages (
        message_id INTEGER NOT NULL,
        turn_id    INTEGER NOT NULL,
        PRIMARY KEY (message_id, turn_id)
    );
    CREATE INDEX turn_messages_turn ON turn_messages(turn_id);
    """,
    # 18 (issue 28): files agents send out (send_file, /file), kept until every front end has
    # them, and the results agents report with a confidence grade (report_result).
    """
    CREATE TABLE outgoing_files (
        id         TEXT PRIMARY KEY,
        agent_id   TEXT NOT NULL,
        name       TEXT NOT NULL,
        content    BLOB NOT NULL,
        created_at REAL NOT NULL
    );
    CREATE TABLE results (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        agent_id    TEXT NOT NULL,
        agent_name  TEXT NOT NULL,
        turn_id     INTEGER,
        summary     TEXT NOT NULL,
        confidence  INTEGER NOT NULL CHECK (confidence BETWEEN 0 AND 100),
        evidence    TEXT NOT NULL DEFAULT '',
        needs_review INTEGER NOT NULL DEFAULT 0,
        created_at  REAL NOT NULL
    );
    CREATE INDEX results_recent ON results(created_at);
    """,
    # 19: the web console's sign-in links, browser sessions and HTTP API tokens (store/web.py).
    """
    CREATE TABLE web_credentials (
        id          TEXT PRIMARY KEY,
        secret_hash TEXT NOT NULL UNIQUE,
        kind        TEXT NOT NULL CHECK (kind IN ('link', 'session', 'token')),
        operator    TEXT NOT NULL,
        label       TEXT NOT NULL DEFAULT '',
        csrf        TEXT NOT NULL DEFAULT '',
        created_at  REAL NOT NULL,
        expires_at  REAL,
        used_at     REAL,
        last_seen   REAL,
        revoked_at  REAL,
        revoked_by  TEXT
    );
    CREATE INDEX web_credentials_operator ON web_credentials(operator, kind);
    """,
    # 20 (reviewer agents, docs/reviewers.md): each request offered to a reviewer agent, what
    # it decided and why, and the operator's overturn of it.
    """
    CREATE TABLE reviews (
        id            TEXT PRIMARY KEY,
        agent_id      TEXT NOT NULL,
        agent_name    TEXT NOT NULL,
        reviewer_id   TEXT NOT NULL,
        reviewer_name TEXT NOT NULL,
        kind          TEXT NOT NULL,
        title         TEXT NOT NULL,
        summary       TEXT NOT NULL,
        tool_name     TEXT,
        session_key   TEXT,
        session_id    TEXT,
        status        TEXT NOT NULL DEFAULT 'open',
        answer        TEXT NOT NULL DEFAULT '',
        reasoning     TEXT NOT NULL DEFAULT '',
        created_at    REAL NOT NULL,
        decided_at    REAL,
        overturned_by TEXT,
        overturned_at REAL
    );
    CREATE INDEX reviews_recent ON reviews(created_at);
    """,
    # 21 (issue 30): every `switchboard run` on the database, as a worker (store/workers.py);
    # times on the database's clock.
    """
    CREATE TABLE workers (
        id               TEXT PRIMARY KEY,
        host             TEXT NOT NULL,
        pid              INTEGER NOT NULL,
        started_at       REAL NOT NULL,
        heartbeat_at     REAL NOT NULL,
        agents           INTEGER NOT NULL DEFAULT 0,
        memory_available INTEGER,
        coordinator      INTEGER NOT NULL DEFAULT 0
    );
    """,
    # 22 (issue 30): each agent's lease (store/leases.py); one running turn per agent.
    """
    CREATE TABLE agent_leases (agent_id TEXT PRIMARY KEY, owner TEXT, placed_on TEXT,
        epoch INTEGER NOT NULL DEFAULT 0, renewed_at REAL, expires_at REAL, cancel TEXT,
        cancel_by TEXT);
    CREATE INDEX agent_leases_owner ON agent_leases(owner);
    CREATE INDEX agent_leases_placed ON agent_leases(placed_on);
    UPDATE turns SET status = 'interrupted', error = 'closed by migration 22' WHERE status =
        'running' AND id NOT IN (SELECT MAX(id) FROM turns WHERE status = 'running' GROUP BY
        agent_id);
    CREATE UNIQUE INDEX turns_one_running ON turns(agent_id) WHERE status = 'running';
    """,
)


# Where the translation is not enough, the PostgreSQL form of a few lines of an entry, as
# (SQLite text, PostgreSQL text) pairs. Each SQLite text must be in its entry (checked).
_PG_EDITS: dict[int, tuple[tuple[str, str], ...]] = {
    # SQLite's secure_delete has no counterpart (PostgreSQL has no free pages to zero in the
    # same sense; VACUUM reclaims them), and rowid is SQLite's: any unique text will do.
    7: (("PRAGMA secure_delete = ON;", ""),
        ("'cleared-' || rowid", "'cleared-' || md5(random()::text || clock_timestamp()::text)")),
    # A cast to an integer truncates in SQLite and rounds in PostgreSQL: the day a turn began.
    15: (("CAST(started_at / 86400 AS INTEGER)", "CAST(FLOOR(started_at / 86400) AS BIGINT)"),),
}

# Types: every SQLite INTEGER is a 64-bit integer, REAL a double, BLOB bytes; an
# AUTOINCREMENT key an identity column (given explicitly by the bus's writer, which assigns
# its ids itself); text compares byte by byte, as in SQLite, whatever the database's locale.
_PG_TYPES = (
    (re.compile(r"\bINTEGER PRIMARY KEY AUTOINCREMENT\b"),
     "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"),
    (re.compile(r"\bINTEGER\b"), "BIGINT"),
    (re.compile(r"\bREAL\b"), "DOUBLE PRECISION"),
    (re.compile(r"\bBLOB\b"), "BYTEA"),
    (re.compile(r"\bTEXT\b"), 'TEXT COLLATE "C"'),
)


@functools.cache
def for_postgres(number: int) -> str:
    """Migration `number` (from 1) in PostgreSQL's dialect."""
    script = MIGRATIONS[number - 1]
    for old, new in _PG_EDITS.get(number, ()):
        if old not in script:
            raise AssertionError(f"migration {number} has no {old!r} to edit")
        script = script.replace(old, new)
    for pattern, replacement in _PG_TYPES:
        script = pattern.sub(replacement, script)
    return script


def identity_columns() -> dict[str, str]:
    """table -> its AUTOINCREMENT key column: the id an INSERT into it returns."""
    found = re.findall(r"CREATE TABLE (\w+) \(\s*(\w+)\s+INTEGER PRIMARY KEY AUTOINCREMENT",
                       "\n".join(MIGRATIONS))
    return dict(found)
