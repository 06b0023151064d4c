"""Hostile agents against the egress policy (docs/gateway.md#egress): the real CLI, every tool
allowed, each agent in a network namespace of its own whose only ways out are the supervisor's
sockets. In `model-only` mode it reaches the model and nothing else; in `allowlist` mode a named
host is reached through the proxy and an unnamed one is refused, recorded and asked about once,
and one tap allows it for that agent.

Before this, every probe below connected: the sandbox shared the host's network."""

from __future__ import annotations

import http.server
import os
import socket
import sys
import threading
from collections.abc import AsyncIterator, Iterator

import psutil
import pytest

from bot.app import Switchboard
from supervisor.config import Settings
from tests.conftest import run, wait_for
from tests.security.conftest import bash_script, spawn_fleet, tool_calls

pytestmark = [pytest.mark.real_cli, pytest.mark.timeout(240)]

SECRET_PAGE = "HELLO-FROM-AN-ALLOWED-HOST"


class _Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        data = SECRET_PAGE.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def host_service() -> Iterator[int]:
    """A service on the host, on every address: what a contained agent must not reach directly."""
    server = http.server.ThreadingHTTPServer(("0.0.0.0", 0), _Page)  # noqa: S104
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


PY = os.path.realpath(sys.executable)
# A DNS query for example.com to a server; prints "answered" if anything comes back in 2 s.
UDP_PROBE = r"""cat > /tmp/udp.py <<'EOF'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
s.sendto(bytes(12) + b"\x07example\x03com\x00\x00\x01\x00\x01", (sys.argv[1], int(sys.argv[2])))
print("answered", s.recv(512))
EOF
"""


def host_address() -> str:
    """An address of this host that is not loopback (where a service on every address is)."""
    for addrs in psutil.net_if_addrs().values():
        for a in addrs:
            if a.family == socket.AF_INET and not a.address.startswith("127."):
                return str(a.address)
    pytest.skip("this host has no address but loopback")


@pytest.fixture
def dns_server() -> Iterator[int]:
    """A stand-in DNS server on every address of the host: it answers any datagram."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("0.0.0.0", 0))  # noqa: S104
    sock.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                data, peer = sock.recvfrom(512)
            except OSError:
                continue
            sock.sendto(data[:2] + b"\x81\x80" + data[4:], peer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    port = sock.getsockname()[1]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:  # control: it answers
        probe.settimeout(5)
        probe.sendto(bytes(12), (host_address(), port))
        assert probe.recv(512)
    yield port
    stop.set()
    thread.join(5)
    sock.close()


def output(mock) -> str:
    return "\n".join(c.result for c in tool_calls(mock))


@pytest.fixture
async def contained_app(hostile_settings: Settings) -> AsyncIterator[Switchboard]:
    async with Switchboard(hostile_settings.with_(egress="model-only")) as app:
        yield app


async def test_model_only_reaches_the_model_and_nothing_else(contained_app, mock_api,
                                                             host_service, dns_server):
    app = contained_app
    assert app.core is not None
    gw = app.core.gateway
    mock_port = mock_api.url.rsplit(":", 1)[1]
    script = rf"""
probe() {{ echo "== $1"; shift; out=$("$@" 2>&1); rc=$?; printf '%s' "$out" | head -c 400
    echo; echo "rc=$rc"; }}
probe interfaces cat /proc/net/dev
probe mock curl -sS -m 5 http://127.0.0.1:{mock_port}/v1/messages
probe loopback-service curl -sS -m 5 http://127.0.0.1:{host_service}/
probe host-address curl -sS -m 5 http://{host_address()}:{host_service}/
probe localhost-name curl -sS -m 5 http://localhost:{host_service}/
probe dns getent hosts example.com
{UDP_PROBE}
probe dns-loopback {PY} /tmp/udp.py 127.0.0.1 {dns_server}
probe dns-host {PY} /tmp/udp.py {host_address()} {dns_server}
probe gateway curl -sS -m 5 -o /dev/null -w 'status=%{{http_code}}' {gw.url}/v1/messages
echo "== done"
"""
    [agent] = await spawn_fleet(app, ["boxed"], bash_script(script))
    out = output(mock_api)
    assert "== done" in out, out[-3000:]
    # The turn completed: the model answered the tool result, through the gateway's socket.
    turns = await app.store.turns.recent(agent.id)
    assert turns[0].status == "ok", turns[0]
    assert SECRET_PAGE not in out, out
    sections = dict(part.split("\n", 1) for part in out.split("== ")[1:] if "\n" in part)
    for name in ("mock", "loopback-service", "host-address", "localhost-name"):
        assert "curl: (" in sections[name] and "rc=0" not in sections[name], (name, sections)
    assert "rc=0" not in sections["dns"], sections["dns"]
    for name in ("dns-loopback", "dns-host"):  # a DNS server the host itself reaches
        assert "answered b'" not in sections[name] and "rc=0" not in sections[name], sections
    interfaces = sections["interfaces"]
    assert "lo:" in interfaces and not any(
        line.strip().split(":")[0] not in ("lo", "Inter-|", "face |bytes")
        for line in interfaces.splitlines()[2:] if ":" in line and "rc=" not in line), interfaces
    # Control: the gateway answers inside (401: no token in this probe), so the relay works.
    assert "status=401" in sections["gateway"], sections["gateway"]


@pytest.fixture
async def allowlist_app(hostile_settings: Settings) -> AsyncIterator[Switchboard]:
    settings = hostile_settings.with_(egress="allowlist", egress_allow=("localhost",))
    async with Switchboard(settings) as app:
        yield app


async def test_allowlist_lets_a_named_host_through_and_reports_an_unnamed_one_once(
        allowlist_app, mock_api, host_service):
    app = allowlist_app
    assert app.core is not None
    proxy = app.core.gateway.proxy
    script = rf"""
probe() {{ echo "== $1"; shift; out=$("$@" 2>&1); rc=$?; printf '%s' "$out" | head -c 400
    echo; echo "rc=$rc"; }}
probe named curl -sS -m 10 -p --noproxy '' -x "$HTTPS_PROXY" http://localhost:{host_service}/
probe unnamed curl -sS -m 10 -p --noproxy '' -x "$HTTPS_PROXY" http://127.0.0.1:{host_service}/
probe again curl -sS -m 10 -p --noproxy '' -x "$HTTPS_PROXY" http://127.0.0.1:{host_service}/
probe direct curl -sS -m 5 http://127.0.0.1:{host_service}/
probe no-token curl -sS -m 10 -p --noproxy '' -x http://127.0.0.1:3128 http://localhost:{host_service}/
echo "== done"
"""
    [agent] = await spawn_fleet(app, ["fetcher"], bash_script(script))
    out = output(mock_api)
    assert "== done" in out, out[-3000:]
    sections = dict(part.split("\n", 1) for part in out.split("== ")[1:] if "\n" in part)
    assert SECRET_PAGE in sections["named"], sections["named"]
    for name in ("unnamed", "again", "direct", "no-token"):
        assert SECRET_PAGE not in sections[name], (name, sections[name])
    assert "403" in sections["unnamed"], sections["unnamed"]
    assert "407" in sections["no-token"], sections["no-token"]
    assert proxy.refused[(agent.id, "127.0.0.1")] == 2
    assert proxy.tunnels[(agent.id, "localhost")] == 1

    async def notices() -> list[str]:
        rows = await app.store.escalations.undelivered("test-view", 1000)
        return [r.title for r in rows if "tried to reach" in r.title]

    await wait_for(notices, 10, "the refusal question")
    assert await notices() == ["fetcher tried to reach 127.0.0.1: refused"]  # once, not twice
    # One tap allows that host for that agent.
    [row] = [r for r in await app.pool.escalations.pending() if "tried to reach" in r.title]
    assert row.options == ("Allow 127.0.0.1 for fetcher", "Keep refusing")
    assert (await run(app, f"/answer {row.id} 1")).ok
    await wait_for(lambda: "127.0.0.1" in proxy.allowed.get(agent.id, ()), 10, "the allowance")
    before = len(tool_calls(mock_api))
    again = f"curl -sS -m 10 -p --noproxy '' -x \"$HTTPS_PROXY\" http://127.0.0.1:{host_service}/"
    assert (await run(app, f"/ask fetcher {bash_script(again)}")).ok
    await wait_for(lambda: len(tool_calls(mock_api)) > before and agent.state == "idle", 60,
                   "the second fetch")
    assert SECRET_PAGE in tool_calls(mock_api)[-1].result
