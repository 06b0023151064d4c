"""Shared text helpers for command replies (durations, money, agent lines), over the API's
read models."""

from __future__ import annotations

import time
from collections.abc import Sequence

from supervisor.api import AgentView, HaltView, WorkerView
from supervisor.api.persistence import SnapshotView


def money(usd: float) -> str:
    return f"${usd:.4f}" if usd < 1 else f"${usd:.2f}"


def span(seconds: float) -> str:
    """A duration the way a person says it: 0s, 45s, 3m05s, 2h04m, 3d02h."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 86400}d{(s % 86400) // 3600:02d}h"


def ago(ts: float | None, now: float | None = None) -> str:
    """How long ago `ts` was, as `span` says it; "-" for never."""
    if not ts:
        return "-"
    return span((time.time() if now is None else now) - ts)


def agent_line(r: AgentView) -> str:
    extra = f" · {r.current_tool}" if r.current_tool else ""
    queued = f" · {r.queued} queued" if r.queued else ""
    parent = f" · child of {r.parent_id}" if r.parent_id else ""
    return f"{r.name} ({r.id}) — {r.state}{extra}{queued}{parent}"


def snapshot_line(s: SnapshotView) -> str:
    """/status's line about the bucket: the last good snapshot and its age, and trouble."""
    if s.generation is None:
        line = f"No snapshot in {s.where} yet."
    else:
        size = f", {s.size_bytes / 1024:.0f} KiB" if s.size_bytes is not None else ""
        line = (f"Last snapshot: generation {s.generation}, {ago(s.at)} ago{size} "
                f"({s.where}).")
    if s.failures:
        line += (f" ⚠ The last {s.failures} upload(s) failed ({s.last_error}); retrying. "
                 "`switchboard backup --to DIR` saves a copy by hand.")
    return line


def killswitch_line(h: HaltView | None) -> str:
    """/status's line about the kill switch: off, or on since when, by whom and how."""
    if h is None:
        return "Kill switch: off."
    why = f" ({h.reason})" if h.reason else ""
    return (f"🛑 Kill switch: ON since {ago(h.at)} ago, by {h.by} via {h.via}{why}: agents are "
            "refused until an admin sends /killswitch off confirm.")


def hosts_text(hosts: Sequence[WorkerView]) -> str:
    """/status's and `switchboard status`'s lines about the workers on the database (one on
    SQLite): agents, memory available, how long since each one's last heartbeat."""
    lines = []
    for h in hosts:
        marks = [m for m, on in (("coordinator", h.coordinator), ("this one", h.this)) if on]
        free = (f"{h.memory_available / 1e9:.1f} GB free" if h.memory_available is not None
                else "memory unknown")
        lines.append(f"Host {h.host} (pid {h.pid}{', ' + ', '.join(marks) if marks else ''}): "
                     f"{h.agents} agent(s), {free}, last heartbeat {span(h.heartbeat_age_s)} ago.")
    return "\n".join(lines)
