"""The console's slice of the settings: where its command history lives."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from supervisor.config import Settings

HISTORY_FILE = "console_history"


@dataclass(frozen=True, slots=True)
class ConsoleSettings:
    home: Path

    @property
    def history_path(self) -> Path:
        """Commands typed at the console, kept across runs (readable by its owner only)."""
        return self.home / HISTORY_FILE

    @classmethod
    def of(cls, settings: Settings) -> ConsoleSettings:
        return cls(Path(settings.home))
