"""A fake Slack: the Web API, Socket Mode, and correctly signed HTTP requests."""

from tests.fakes.fake_slack.fake import (
    APP_TOKEN,
    BOT_TOKEN,
    BOT_USER,
    CHANNEL,
    SIGNING_SECRET,
    TEAM,
    FakeSlack,
    button,
    labels,
    text_of,
)
from tests.fakes.fake_slack.signing import sign

__all__ = ["APP_TOKEN", "BOT_TOKEN", "BOT_USER", "CHANNEL", "SIGNING_SECRET", "TEAM",
           "FakeSlack", "button", "labels", "sign", "text_of"]
