"""Bot API limits, error texts and the ``ApiError`` answer."""

from __future__ import annotations

from typing import Any

DEFAULT_TOKEN = "123456789:AAFakeTelegramTokenForTests_0123456789"
MAX_MESSAGE_LENGTH = 4096
MAX_CAPTION_LENGTH = 1024
MAX_CALLBACK_DATA_BYTES = 64
MAX_CALLBACK_ANSWER_LENGTH = 200
MAX_COPY_TEXT_LENGTH = 256
MAX_UPLOAD_BYTES = 50 * 1024 * 1024
MAX_DOWNLOAD_BYTES = 20 * 1024 * 1024  # getFile: "file is too big" above it
CALLBACK_ANSWER_TIMEOUT = 15.0
MAX_COMMANDS = 100

NOT_MODIFIED = (
    "message is not modified: specified new message content and reply markup are exactly "
    "the same as a current content and reply markup of the message"
)
QUERY_TOO_OLD = "query is too old and response timeout expired or query ID is invalid"
CONFLICT_POLLER = (
    "Conflict: terminated by other getUpdates request; make sure that only one bot instance "
    "is running"
)
CONFLICT_WEBHOOK = (
    "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to "
    "delete the webhook first"
)


class ApiError(Exception):
    """An error answer of the Bot API (raised inside method handlers)."""

    def __init__(self, status: int, description: str,
                 parameters: dict[str, Any] | None = None):
        super().__init__(description)
        self.status = status
        self.description = description
        self.parameters = parameters
        self.injected = False  # caused by fault injection (flood / rate_limit)

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ok": False, "error_code": self.status, "description": self.description,
        }
        if self.parameters:
            out["parameters"] = self.parameters
        return out


def _bad(description: str) -> ApiError:
    return ApiError(400, f"Bad Request: {description}")


def _entities_error(description: str) -> ApiError:
    return _bad(f"can't parse entities: {description}")
