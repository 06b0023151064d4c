"""Errors raised by the store.

    StoreError                 root of everything this package raises
    ├── StoreUnavailable       the database cannot be opened or written (disk full, read-only)
    ├── Conflict               a write broke a uniqueness rule (e.g. a live agent name)
    ├── MigrationError         a migration failed or the file is newer than this code
    └── Fenced                 a write about an agent whose lease this worker no longer holds
"""

from __future__ import annotations


class StoreError(Exception):
    """Root of the store's exceptions."""


class StoreUnavailable(StoreError):
    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"the database at {path} cannot be used: {reason}")
        self.path = path
        self.reason = reason


class Conflict(StoreError):
    def __init__(self, reason: str) -> None:
        super().__init__(f"conflicting write: {reason}")
        self.reason = reason


class MigrationError(StoreError):
    pass


class Fenced(StoreError):
    """A write about an agent by a worker that no longer holds its lease at that epoch (another
    worker took the agent over): refused, so two workers never both drive one agent."""

    def __init__(self, agent_id: str, owner: str, epoch: int) -> None:
        super().__init__(f"agent {agent_id}'s lease is no longer held by {owner} at epoch "
                         f"{epoch}: another worker took it over")
        self.agent_id = agent_id
        self.owner = owner
        self.epoch = epoch
