"""The Telegram front end's slice of the settings: what it reads of them, and nothing else."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from supervisor.config import Settings
from supervisor.config_types import Secret


@dataclass(frozen=True, slots=True)
class TelegramSettings:
    telegram_token: Secret | None
    telegram_admin_ids: tuple[str, ...]
    telegram_api_base_url: str | None
    telegram_webhook_url: str | None
    telegram_webhook_secret: Secret | None
    status_card_interval_s: float
    notice_digest_s: float
    public_url: str | None  # where the web console is: each escalation links to its page

    @classmethod
    def of(cls, settings: Settings) -> TelegramSettings:
        """The same names as the settings' own, so each is found in docs/configuration."""
        return cls(**{f.name: getattr(settings, f.name) for f in dataclasses.fields(cls)})
