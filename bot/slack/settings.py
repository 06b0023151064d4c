"""The Slack front end's slice of the settings: what it reads of them, and nothing else."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from supervisor.config import Settings
from supervisor.config_types import Secret


@dataclass(frozen=True, slots=True)
class SlackSettings:
    slack_bot_token: Secret | None
    slack_app_token: Secret | None
    slack_mode: str
    slack_signing_secret: Secret | None
    slack_http_listen: str
    slack_http_port: int
    slack_api_url: str | None
    slack_channel: str | None
    slack_admin_ids: tuple[str, ...]
    slack_team_id: str | None
    slack_command: str
    slack_card_interval_s: float
    public_url: str | None  # where the web console is: each escalation links to its page

    @classmethod
    def of(cls, settings: Settings) -> SlackSettings:
        """The same names as the settings' own, so each is found in docs/configuration."""
        return cls(**{f.name: getattr(settings, f.name) for f in dataclasses.fields(cls)})
