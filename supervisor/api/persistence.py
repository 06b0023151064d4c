"""What the operator sees of the bucket: the last good snapshot, its age, and failing uploads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from supervisor.agents.pool import AgentPool


@dataclass(frozen=True, slots=True)
class SnapshotView:
    where: str  # gs://bucket/
    generation: int | None  # of the last good snapshot; None if there is none yet
    at: float | None  # when it was uploaded
    size_bytes: int | None
    failures: int  # uploads failed in a row
    last_error: str | None


class PersistenceAPI:
    def __init__(self, pool: AgentPool) -> None:
        self._pool = pool

    def snapshot(self) -> SnapshotView | None:
        """None when no bucket is configured."""
        persistence = self._pool.persistence
        status = persistence.status() if persistence is not None else None
        if status is None:
            return None
        last = status.last
        return SnapshotView(status.where, last.generation if last else None,
                            last.at if last else None, last.size if last else None,
                            status.failures, status.last_error)
