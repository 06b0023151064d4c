"""An agent's network: what its sandbox reaches. `open` shares the host's network (how agents
ran before). `model-only` gives the agent a network namespace of its own (bwrap
--unshare-net: its own loopback and nothing else) whose one way out is the relay
(supervisor/egress_relay.py) to the model gateway's Unix socket. `allowlist` adds a second port
to the egress proxy's socket, which lets through HTTPS to the hosts named in `egress_allow`.
`auto` is model-only where the gateway runs and the host can make network namespaces, else open.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from supervisor import launcher as launcher_module
from supervisor.config import Settings
from supervisor.process.sandbox import Isolation

# Where the sockets appear inside the sandbox: the agent's own /tmp, where bwrap can make the
# mount points (the host's /run is read-only there).
GATEWAY_INSIDE = Path("/tmp/.sb-gateway.sock")
PROXY_INSIDE = Path("/tmp/.sb-egress.sock")
PROXY_PORT = 3128  # inside the agent's namespace: no other listener there to collide with
PROBE_TIMEOUT_S = 20.0


@dataclass(frozen=True, slots=True)
class NetPlan:
    """One agent's network: its mode, the sockets bound into its sandbox (host, inside), the
    relay's spec for the launcher and what its environment gets."""

    mode: str
    binds: tuple[tuple[Path, Path], ...] = ()
    env: dict[str, str] = field(default_factory=dict)


_probed: dict[str | None, str | None] = {}


def netns_problem(iso: Isolation) -> str | None:
    """Why a network namespace cannot be made here, or None (probed once per bwrap)."""
    if not iso.ok or iso.bwrap is None:
        return "there is no sandbox"
    if iso.bwrap not in _probed:
        _probed[iso.bwrap] = _probe(iso.bwrap)
    return _probed[iso.bwrap]


def _probe(bwrap: str) -> str | None:
    check = shutil.which("true") or "/bin/true"
    try:
        done = subprocess.run(  # noqa: S603 - fixed argv
            [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--unshare-net", "--unshare-pid",
             "--die-with-parent", check],
            capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, env={"PATH": "/usr/bin:/bin"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap --unshare-net could not be run: {exc}"
    if done.returncode != 0:
        err = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        return f"bwrap cannot make a network namespace here: {err}"
    return None


def mode_for(settings: Settings, iso: Isolation, gateway_socket: Path | None) -> tuple[str, str]:
    """(the mode agents get, why): `auto` settled, or what makes the mode asked for impossible
    (then the mode is "" and agents are refused: they were promised a wall)."""
    asked = settings.egress
    if asked == "open":
        return "open", "egress = open: agents share the host's network"
    missing = None
    if gateway_socket is None:
        missing = ("the model gateway is not running (it needs an ANTHROPIC_API_KEY or "
                   "ANTHROPIC_AUTH_TOKEN to hold; see docs/gateway.md)")
    elif (problem := netns_problem(iso)) is not None:
        missing = problem
    if missing is None:
        mode = "model-only" if asked == "auto" else asked
        return mode, f"egress = {mode}: each agent in a network namespace of its own"
    if asked == "auto":
        return "open", f"egress = open (auto): {missing}"
    return "", f"egress = {asked} cannot be enforced: {missing}"


def plan(mode: str, gateway_socket: Path | None, gateway_port: int, relay: Path,
         proxy_socket: Path | None, token: str) -> NetPlan:
    """The sandbox's network for one agent in `mode` (settled by `mode_for`)."""
    if mode == "open" or gateway_socket is None:
        return NetPlan("open")
    binds = [(gateway_socket, GATEWAY_INSIDE)]
    spec = [str(relay), f"{gateway_port}={GATEWAY_INSIDE}"]
    env: dict[str, str] = {}
    if mode == "allowlist" and proxy_socket is not None:
        binds.append((proxy_socket, PROXY_INSIDE))
        spec.append(f"{PROXY_PORT}={PROXY_INSIDE}")
        proxy = f"http://agent:{token}@127.0.0.1:{PROXY_PORT}"
        env = {"HTTPS_PROXY": proxy, "https_proxy": proxy, "NO_PROXY": "127.0.0.1,localhost",
               "no_proxy": "127.0.0.1,localhost"}
    env[launcher_module.RELAY_VAR] = "|".join(spec)
    return NetPlan(mode, tuple(binds), env)


__all__ = ["GATEWAY_INSIDE", "PROXY_INSIDE", "PROXY_PORT", "NetPlan", "mode_for",
           "netns_problem", "plan"]
