"""Loopback HTTP server plumbing shared by the fake Telegram and the mock Anthropic API."""

from __future__ import annotations

import contextlib
import select
import socket
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ClientGone(Exception):
    """The HTTP client went away, or the server is stopping: drop the connection."""


class LoopbackServer(ThreadingHTTPServer):
    """A threaded server that tracks live sockets so ``stop`` can cut keep-alive clients."""

    daemon_threads = True
    # Don't join handler threads on server_close(): idle keep-alive connections would
    # make stop() wait. We shut their sockets down ourselves instead.
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 128  # many clients may connect at once

    def __init__(self, addr: tuple[str, int], handler: type[BaseHTTPRequestHandler],
                 owner: Any, on_error: Callable[[str], None]):
        self.owner = owner
        self.on_error = on_error
        self.live_sockets: set[socket.socket] = set()
        self.live_lock = threading.Lock()
        super().__init__(addr, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.live_lock:
            self.live_sockets.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.live_lock:
            self.live_sockets.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Client disconnects are routine (interrupts, killed clients): stay quiet.
        # Anything else is recorded by the owner instead of spewing to stderr.
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, ClientGone, OSError)):
            return
        self.on_error(repr(exc))

    def close_live_sockets(self) -> None:
        with self.live_lock:
            socks = list(self.live_sockets)
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


class QuietHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 handler base: no logging, dropped clients ignored, body and liveness helpers."""

    protocol_version = "HTTP/1.1"
    server: LoopbackServer  # type: ignore[assignment]
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def handle(self) -> None:
        try:
            super().handle()
        except (ConnectionError, ClientGone, TimeoutError, OSError):
            self.close_connection = True

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            return self.rfile.read(length)
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        return b""

    def _client_gone(self) -> bool:
        """True if the peer closed (or reset) the connection."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            if not readable:
                return False
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True


def serve_in_thread(server: LoopbackServer, name: str) -> threading.Thread:
    """Run ``server.serve_forever`` in a started daemon thread."""
    thread = threading.Thread(
        target=server.serve_forever,
        kwargs={"poll_interval": 0.05},
        name=name,
        daemon=True,
    )
    thread.start()
    return thread


def stop_serving(server: LoopbackServer | None, thread: threading.Thread | None) -> None:
    """Shut ``server`` down, cut its live connections, close it and join its thread."""
    if server is not None:
        server.shutdown()
        server.close_live_sockets()
        server.server_close()
    if thread is not None:
        thread.join(timeout=5)
