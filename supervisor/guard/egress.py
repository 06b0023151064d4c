"""The egress proxy: in `allowlist` mode, an agent's one way to a host other than the model. An
HTTP CONNECT proxy on a Unix socket of the supervisor, bound into each such agent's sandbox and
reached through its relay (supervisor/process/network.py). The agent names itself with its
gateway token as the proxy password (`HTTPS_PROXY=http://agent:<token>@127.0.0.1:<port>`, set
for it), so a killed agent's token opens nothing here either. A host not allowed is refused
with a 403 saying how to allow it, recorded, and the operator is told once per host per agent.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

from supervisor.config import Settings

logger = logging.getLogger(__name__)

HEAD_LIMIT = 16384
CONNECT_TIMEOUT_S = 15.0
BUFFER = 65536
# (agent id, agent name, host): a refusal the operator has not been told of yet.
Refusal = Callable[[str, str, str], Awaitable[None]]


def host_allowed(host: str, allowed: tuple[str, ...]) -> bool:
    """`host` is named (case aside), or lies under a named `*.domain` or `.domain`."""
    host = host.lower().rstrip(".")
    for entry in allowed:
        entry = entry.lower().rstrip(".")
        if entry.startswith("*."):
            entry = entry[1:]
        if host == entry or (entry.startswith(".") and host.endswith(entry)):
            return True
    return False


class EgressProxy:
    """Start with `start(path)`; `close` ends the server and every tunnel."""

    def __init__(self, settings: Settings, agent_of: Callable[[str], tuple[str, str] | None],
                 on_refused: Refusal | None = None) -> None:
        self.settings = settings
        self._agent_of = agent_of
        self._on_refused = on_refused
        self.allowed: dict[str, set[str]] = {}  # agent id -> hosts allowed for it alone
        self.refused: dict[tuple[str, str], int] = {}  # (agent id, host) -> refusals
        self.tunnels: dict[tuple[str, str], int] = {}  # (agent id, host) -> tunnels opened
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.socket: Path | None = None

    def allow(self, agent_id: str, host: str) -> None:
        """One more host for one agent (the operator's answer to a refusal); held in memory."""
        self.allowed.setdefault(agent_id, set()).add(host.lower())

    async def start(self, path: Path) -> None:
        if self._server is not None:
            return
        os.makedirs(path.parent, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        self._server = await asyncio.start_unix_server(self._serve, str(path), limit=HEAD_LIMIT)
        os.chmod(path, 0o666)
        self.socket = path

    async def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if server is not None:
            await server.wait_closed()
        if self.socket is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.socket)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._tunnel(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()

    async def _tunnel(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        first, *lines = head.split("\r\n")
        parts = first.split(" ")
        auth = next((ln.split(":", 1)[1].strip() for ln in lines
                     if ln.lower().startswith("proxy-authorization:")), "")
        who = self._agent_of(_password(auth))
        if who is None:
            await _answer(writer, 407, "no valid agent token: the proxy is for Switchboard's "
                          "agents (HTTPS_PROXY, as set for them)",
                          'Proxy-Authenticate: Basic realm="switchboard"\r\n')
            return
        agent_id, name = who
        if len(parts) != 3 or parts[0] != "CONNECT":
            await _answer(writer, 405, "only HTTPS (CONNECT) goes through Switchboard's egress "
                          "proxy; use an https:// address")
            return
        host, _, port_text = parts[1].rpartition(":")
        host = host.strip("[]")
        if not host or not port_text.isdigit():
            await _answer(writer, 400, f"CONNECT needs host:port, not {parts[1]!r}")
            return
        if not (host_allowed(host, self.settings.egress_allow)
                or host.lower() in self.allowed.get(agent_id, ())):
            await self._refuse(writer, agent_id, name, host)
            return
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                up_reader, up_writer = await asyncio.open_connection(host, int(port_text))
        except (OSError, TimeoutError) as exc:
            await _answer(writer, 502, f"could not reach {host}:{port_text}: {exc}")
            return
        key = (agent_id, host.lower())
        self.tunnels[key] = self.tunnels.get(key, 0) + 1
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.drain()
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            up_writer.close()

    async def _refuse(self, writer: asyncio.StreamWriter, agent_id: str, name: str,
                      host: str) -> None:
        key = (agent_id, host.lower())
        first = key not in self.refused
        self.refused[key] = self.refused.get(key, 0) + 1
        logger.warning("egress refused agent=%s host=%s", agent_id, host)
        await _answer(writer, 403, f"{host} is not among the hosts {name} may reach (egress = "
                      "allowlist); the operator can add it to egress_allow")
        if first and self._on_refused is not None:
            # The operator's answer may take hours: asked in a task of the proxy's own (ended
            # with it), not on this connection.
            task = asyncio.create_task(self._ask(agent_id, name, host),
                                       name=f"egress-refused-{agent_id}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _ask(self, agent_id: str, name: str, host: str) -> None:
        assert self._on_refused is not None
        try:
            await self._on_refused(agent_id, name, host)
        except Exception:  # noqa: BLE001 - a failed question never breaks the proxy
            logger.exception("egress refusal question failed agent=%s", agent_id)


def _password(header: str) -> str:
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic":
        return ""
    try:
        return base64.b64decode(value.strip(), validate=True).decode().partition(":")[2]
    except (binascii.Error, UnicodeDecodeError):
        return ""


async def _answer(writer: asyncio.StreamWriter, status: int, message: str,
                  extra: str = "") -> None:
    reason = {400: "Bad Request", 403: "Forbidden", 405: "Method Not Allowed",
              407: "Proxy Authentication Required", 502: "Bad Gateway"}[status]
    body = f"Switchboard: {message}\n".encode()
    writer.write(f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\n{extra}"
                 f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
    with contextlib.suppress(ConnectionError):
        await writer.drain()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(BUFFER):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            if writer.can_write_eof():
                writer.write_eof()


__all__ = ["EgressProxy", "host_allowed"]
