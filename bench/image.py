"""The Docker image: its size, cold start to /readyz, and how long `docker stop` takes.

Run from the repository root after `make image-test` built the image:
    .venv/bin/python bench/image.py [image]        (default switchboard:test)

Each figure against a baseline measured in the same run:
* size: the image against its Debian base (what Switchboard, Python, the CLI and the agents'
  tools add). Goal: under 1,000 MB in all.
* cold start: `docker run` to the first 200 from /readyz on a fresh volume, against the same
  Switchboard started on the host (`switchboard run --headless`, same settings) to its first
  200 from /readyz: what the container adds. Goal: under 10 s.
* stop: `docker stop` of an idle Switchboard (drain, agents killed, database closed) against
  `docker stop` of a container of the same image running only `sleep` under tini. Goal: under
  5 s.
REPEATS runs each; medians printed. Needs a Docker engine (see deploy/ci/image-test).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._common import result  # noqa: E402
from tests.conftest import free_port  # noqa: E402

IMAGE = sys.argv[1] if len(sys.argv) > 1 else "switchboard:test"
BASE = os.environ.get("BASE_IMAGE", "switchboard-base:bookworm")
SECCOMP = ROOT / "deploy" / "seccomp-sandbox.json"
REPEATS = 3
# Needs a Docker engine and a built image: only when named (make bench ONLY=image).
SUITE = {"opt_in": True, "smoke": False}
OPTS = ["--network=host", "--security-opt", f"seccomp={SECCOMP}",
        "--security-opt", "apparmor=unconfined", "--security-opt", "systempaths=unconfined"]


def docker(*args: str) -> str:
    return subprocess.run(["docker", *args], check=True, capture_output=True, text=True,
                          timeout=180).stdout.strip()


def ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


def until_ready(port: int, started: float, what: str, timeout: float = 120) -> float:
    while not ready(port):
        if time.monotonic() - started > timeout:
            raise SystemExit(f"{what}: /readyz on port {port} did not answer within {timeout}s")
        time.sleep(0.05)
    return time.monotonic() - started


def container_start() -> tuple[float, str, str]:
    name, volume, port = f"sbb-{uuid.uuid4().hex[:8]}", f"sbb-{uuid.uuid4().hex[:8]}", free_port()
    started = time.monotonic()
    docker("run", "-d", "--name", name, *OPTS, "-v", f"{volume}:/data",
           "-e", f"PORT={port}", "-e", "SWITCHBOARD_HTTP_HOST=127.0.0.1", IMAGE)
    return until_ready(port, started, f"container {name}"), name, volume


def host_start() -> float:
    home = Path(tempfile.mkdtemp(prefix="sbb"))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SWITCHBOARD_", "TELEGRAM_"))}
    env.update(SWITCHBOARD_HOME=str(home), PORT=str(port), SWITCHBOARD_HTTP_HOST="127.0.0.1")
    exe = Path(sys.executable).absolute().with_name("switchboard")
    started = time.monotonic()
    proc = subprocess.Popen([str(exe), "run", "--headless"], env=env, cwd=home,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        return until_ready(port, started, "host")
    finally:
        proc.terminate()
        proc.wait(60)
        shutil.rmtree(home, ignore_errors=True)


def stop(name: str) -> float:
    started = time.monotonic()
    docker("stop", "-t", "45", name)
    took = time.monotonic() - started
    docker("rm", "-f", name)
    return took


def line(what: str, figure: float, unit: str, base: float, goal: str) -> None:
    print(f"{what:<34} {figure:9.2f} {unit:<3} baseline {base:9.2f} {unit:<3} "
          f"ratio {figure / base if base else float('inf'):6.2f}x   goal {goal}")
    result(what, figure, unit, goal=goal.split(" (")[0], baseline=base,
           ratio=figure / base if base else None)


def main() -> None:
    size = int(docker("image", "inspect", "-f", "{{.Size}}", IMAGE)) / 1e6
    base = int(docker("image", "inspect", "-f", "{{.Size}}", BASE)) / 1e6
    starts, hosts, stops, sleeps = [], [], [], []
    for _ in range(REPEATS):
        took, name, volume = container_start()
        starts.append(took)
        stops.append(stop(name))
        docker("volume", "rm", "-f", volume)
        hosts.append(host_start())
        bare = f"sbb-{uuid.uuid4().hex[:8]}"
        docker("run", "-d", "--name", bare, "--network=none", "--entrypoint", "/usr/bin/tini",
               IMAGE, "--", "sleep", "1000")
        sleeps.append(stop(bare))
    print(f"image {IMAGE}, {REPEATS} runs, medians")
    line("image size", size, "MB", base, "< 1000 MB (baseline: the Debian base)")
    line("cold start to /readyz", statistics.median(starts), "s", statistics.median(hosts),
         "< 10 s (baseline: the same on the host)")
    line("docker stop, idle", statistics.median(stops), "s", statistics.median(sleeps),
         "< 5 s (baseline: tini + sleep)")


if __name__ == "__main__":
    main()
