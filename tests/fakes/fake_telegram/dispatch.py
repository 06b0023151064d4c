"""Request dispatch of the fake Telegram server: routing, answers and fault injection."""

from __future__ import annotations

import copy
import re
import time
from typing import Any
from urllib.parse import unquote, urlsplit

from tests.fakes._http import ClientGone
from tests.fakes.fake_telegram.api import ApiError
from tests.fakes.fake_telegram.commands import _ChatMethods
from tests.fakes.fake_telegram.decoding import Upload, _decode_request
from tests.fakes.fake_telegram.messages import _MessageMethods
from tests.fakes.fake_telegram.server import _Handler
from tests.fakes.fake_telegram.state import _Fault
from tests.fakes.fake_telegram.updates import _UpdateMethods

_HTML_BODIES = {
    502: b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>"
         b"502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n",
    504: b"<html>\r\n<head><title>504 Gateway Time-out</title></head>\r\n<body>\r\n<center><h1>"
         b"504 Gateway Time-out</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n"
         b"</html>\r\n",
}
_STATUS_TEXT = {
    400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
    409: "Conflict", 413: "Request Entity Too Large", 429: "Too Many Requests",
    500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable",
    504: "Gateway Time-out",
}


class _Dispatch(_UpdateMethods, _MessageMethods, _ChatMethods):
    """Routing of ``/bot<token>/<method>`` and ``/file/...`` requests."""

    def _dispatch(self, h: _Handler) -> None:
        url = urlsplit(h.path)
        body = h._read_body()
        if url.path.startswith("/file/bot"):
            self._serve_file(h, url.path)
            return
        m = re.fullmatch(r"/bot([^/]*)/([A-Za-z0-9_]+)/?", unquote(url.path))
        if not m:
            h._send_json(404, {"ok": False, "error_code": 404, "description": "Not Found"})
            return
        token, method = m.group(1), m.group(2)
        call: dict[str, Any] = {"method": method, "params": {}, "files": {}, "encoding": "",
                                "status": None, "description": None, "at": time.time()}
        with self._cond:
            self._calls.append(call)
        try:
            params, files, encoding = _decode_request(
                h.headers.get("Content-Type", ""), body, url.query)
        except ApiError as e:
            self._answer_error(h, call, e, method, {})
            return
        with self._cond:
            call["params"] = copy.deepcopy(params)
            call["files"] = {k: {"filename": f.filename, "size": len(f.content),
                                 "content_type": f.content_type} for k, f in files.items()}
            call["encoding"] = encoding

        if self._apply_faults(h, call, method, params):
            return
        if token != self.token:
            # A token-shaped stranger is unauthorized; anything else is not a bot URL at all.
            if re.fullmatch(r"\d+:[A-Za-z0-9_-]+", token):
                self._answer_error(h, call, ApiError(401, "Unauthorized"), method, params)
            else:
                self._answer_error(h, call, ApiError(404, "Not Found"), method, params)
            return
        self._call_method(h, call, method, params, files)

    def _call_method(self, h: _Handler, call: dict[str, Any], method: str,
                     params: dict[str, Any], files: dict[str, Upload]) -> None:
        """Runs the ``_m_<method>`` handler (or the test's on_request override) and answers."""
        handler = getattr(self, f"_m_{method.lower()}", None)
        try:
            if self.on_request is not None:
                override = self.on_request(method, copy.deepcopy(params))
                if isinstance(override, ApiError):
                    raise override
                if override is not None:
                    self._answer(h, call, override)
                    return
            if handler is None:
                raise ApiError(404, "Not Found")
            if method.lower() == "getupdates":
                result = self._m_getupdates(params, h, call)
            else:
                result = handler(params, files)
        except ApiError as e:
            self._answer_error(h, call, e, method, params, injected=e.injected)
            return
        except ClientGone:
            with self._cond:
                call["description"] = call["description"] or "(connection dropped)"
            raise
        except Exception as e:  # noqa: BLE001 - a bug in the fake becomes a 500
            self._internal_errors.append(f"{method}: {e!r}")
            self._answer_error(h, call, ApiError(500, f"Internal Server Error: {e!r}"),
                               method, params)
            return
        self._answer(h, call, result)

    def _answer(self, h: _Handler, call: dict[str, Any], result: Any) -> None:
        with self._cond:
            call["status"] = 200
        h._send_json(200, {"ok": True, "result": result})

    def _answer_error(self, h: _Handler, call: dict[str, Any], error: ApiError, method: str,
                      params: dict[str, Any], *, injected: bool = False,
                      record: bool = True) -> None:
        with self._cond:
            call["status"] = error.status
            call["description"] = error.description
            if 400 <= error.status < 500 and record:
                self._errors.append({"method": method, "status": error.status,
                                     "description": error.description,
                                     "params": copy.deepcopy(params), "injected": injected})
        h._send_json(error.status, error.body())

    def _apply_faults(self, h: _Handler, call: dict[str, Any], method: str,
                      params: dict[str, Any]) -> bool:
        """Injected outages/failures; True if the request was dealt with."""
        lowered = method.lower()
        with self._cond:
            outage = self._outage
            fault: _Fault | None = None
            if outage is None:
                for f in self._faults:
                    if f.kind == "flood":
                        continue
                    if f.methods is None and lowered == "getupdates":
                        continue
                    if f.methods is not None and lowered not in f.methods:
                        continue
                    fault = f
                    f.times -= 1
                    if f.times <= 0:
                        self._faults.remove(f)
                    break
        if outage == "hang" or (fault is not None and fault.kind == "hang"):
            self._hang(h, call)
        status = outage if isinstance(outage, int) else (fault.status if fault else None)
        if status is None:
            return False
        description = (fault.description if fault and fault.description
                       else _STATUS_TEXT.get(status, f"Error {status}"))
        if status in _HTML_BODIES and not (fault and fault.description):
            with self._cond:
                call["status"] = status
                call["description"] = description
            h._send(status, _HTML_BODIES[status], "text/html")
        else:
            self._answer_error(h, call, ApiError(status, description), method, params,
                               injected=True)
        return True

    def _hang(self, h: _Handler, call: dict[str, Any]) -> None:
        with self._cond:
            generation = self._release_generation
            self._hung += 1
            try:
                while (self._release_generation == generation
                       and not self._stopping.is_set()):
                    self._cond.wait(0.05)
                    if h._client_gone():
                        break
            finally:
                self._hung -= 1
        with self._cond:
            call["description"] = "(hung: no answer)"
        raise ClientGone("hung request released")

    def _serve_file(self, h: _Handler, path: str) -> None:
        # PTB percent-encodes the whole URL path (the token's ':' included).
        m = re.fullmatch(r"/file/bot([^/]*)/(.+)", unquote(path))
        if not m or m.group(1) != self.token:
            h._send_json(404, {"ok": False, "error_code": 404, "description": "Not Found"})
            return
        file_path = m.group(2)
        with self._cond:
            info = next((f for f in self._files.values() if f["file_path"] == file_path), None)
        if info is None or info["bytes"] is None:
            h._send_json(404, {"ok": False, "error_code": 404, "description": "Not Found"})
            return
        h._send(200, info["bytes"], info["mime_type"] or "application/octet-stream")
