"""The console's slice of the settings: where its command history lives, and the name it
reads the escalations' outbox under."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from supervisor.config import Settings

HISTORY_FILE = "console_history"
FRONTEND = "console"


@dataclass(frozen=True, slots=True)
class ConsoleSettings:
    home: Path
    # The outbox's deliveries and cursor are kept per front end name, in the database. On a
    # shared database every worker may run a console: each reads the outbox under a name of
    # its own data directory, else the first console to show a row marks it delivered for all.
    frontend: str = FRONTEND

    @property
    def history_path(self) -> Path:
        """Commands typed at the console, kept across runs (readable by its owner only)."""
        return self.home / HISTORY_FILE

    @classmethod
    def of(cls, settings: Settings) -> ConsoleSettings:
        shared = bool(settings.database_url)
        return cls(Path(settings.home),
                   f"{FRONTEND}:{settings.instance_id}" if shared else FRONTEND)
