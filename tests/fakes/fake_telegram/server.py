"""The HTTP request handler of the fake Telegram server."""

from __future__ import annotations

import json
from typing import Any

from tests.fakes._http import QuietHandler


class _Handler(QuietHandler):
    """Hands every request to the owning FakeTelegram; JSON / raw answers."""

    server_version = "FakeTelegram/1.0"

    def do_POST(self) -> None:  # noqa: N802
        self.server.owner._dispatch(self)

    do_GET = do_POST  # noqa: N815

    def _send(self, status: int, data: bytes, content_type: str = "application/json",
              headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _send_json(self, status: int, obj: Any) -> None:
        try:
            body = json.dumps(obj, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: JSON's \uXXXX escape carries it
            body = json.dumps(obj).encode("ascii")
        self._send(status, body)
