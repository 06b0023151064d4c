"""Log lines as JSON objects, one a line, for collectors (a container's stderr, journald):
stable keys ts, level, logger, msg, then the fields the line carries."""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable
from typing import Any

from supervisor.redact import SECRETS, RedactingFormatter

# Attributes every LogRecord has; anything else on a record came from `extra=`.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message", "asctime", "taskName"}
STABLE = ("ts", "level", "logger", "msg")
# The `key=value` fields our messages carry (conventions: greppable fields) whose values are
# one token by nature, lifted out as keys of their own. Others (error=..., reason=...) may hold
# spaces and stay in msg only, rather than be cut at the first space.
FIELDS = ("agent", "name", "platform", "frontend", "chat", "service", "task", "signal", "pid",
          "turn", "escalation", "state", "exit_code", "count")
_FIELD = re.compile(r"(?<![\w.-])(" + "|".join(FIELDS) + r")=([^\s,;]+)")


def _plain(value: Any) -> Any:
    """A JSON value: numbers, booleans and None as they are, anything else as text."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


class JsonFormatter(RedactingFormatter):
    """One JSON object per record, on one line (newlines in a message or a traceback are
    escaped by JSON). A RedactingFormatter, so supervisor.redact.install keeps it and sets its
    redactor, but one that redacts each text value before encoding rather than the finished
    line: a mask run over JSON could eat the backslash of an escaped quote and break it."""

    def __init__(self, redact: Callable[[str], str] = SECRETS) -> None:
        super().__init__(logging.Formatter(), redact)

    def format(self, record: logging.LogRecord) -> str:
        msg = record.getMessage()
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        out: dict[str, Any] = {"ts": f"{ts}.{int(record.msecs):03d}Z",
                               "level": record.levelname, "logger": record.name, "msg": msg}
        for key, value in _FIELD.findall(msg):
            out.setdefault(key, value)
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                out.setdefault(key, _plain(value))
        if record.exc_info:
            out["exc"] = self.inner.formatException(record.exc_info)
        if record.stack_info:
            out["stack"] = self.inner.formatStack(record.stack_info)
        clean = {k: self.redact(v) if isinstance(v, str) else v for k, v in out.items()}
        return json.dumps(clean, ensure_ascii=False)


__all__ = ["FIELDS", "JsonFormatter", "STABLE"]
