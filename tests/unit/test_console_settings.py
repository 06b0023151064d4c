"""The console's slice of the settings: the name it reads the escalations' outbox under."""

from __future__ import annotations

from pathlib import Path

from bot.console import FRONTEND, ConsoleSettings
from supervisor.config import Settings

URL = "postgresql://sb@/fleet?host=/run/postgresql"


def test_on_sqlite_the_console_keeps_its_one_name() -> None:
    assert ConsoleSettings.of(Settings(home=Path("/srv/sb"))).frontend == FRONTEND == "console"


def test_on_a_shared_database_each_data_directory_reads_the_outbox_under_its_own_name() -> None:
    """Regression (issue 30): the consoles of every worker read the outbox as "console", so the
    first to show a row marked it delivered for all: the coordinator's console missed the
    requests of agents on other workers."""
    one, two = (ConsoleSettings.of(Settings(home=Path(h), database_url=URL))
                for h in ("/srv/w1", "/srv/w2"))
    assert one.frontend != two.frontend
    assert one.frontend.startswith(f"{FRONTEND}:")
    again = ConsoleSettings.of(Settings(home=Path("/srv/w1"), database_url=URL))
    assert again.frontend == one.frontend  # the same after a restart: its cursor is kept
