"""The Docker image, run as a user runs it (`make image-test` builds it and sets
SWITCHBOARD_TEST_IMAGE; without it these are skipped): tini as PID 1, the supervisor not root,
health, readiness and metrics, an agent sandboxed inside the container with the documented
security options and no secret in its reach or in the logs, `docker stop` draining a running
turn, and a restart on the same volume resuming the agent's session.

The container shares the host's network (CI's engine has no bridge): the mock Anthropic API and
the fake Telegram Bot API listen on the host's loopback."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PERMISSIVE_POLICY, free_port
from tests.fakes.fake_telegram import FakeTelegram
from tests.fakes.mock_anthropic import MockAnthropic, user_directives
from tests.security.conftest import tool_calls

IMAGE = os.environ.get("SWITCHBOARD_TEST_IMAGE", "")
ROOT = Path(__file__).resolve().parents[2]
SECCOMP = ROOT / "deploy" / "seccomp-sandbox.json"
ADMIN = 4242
TOKEN = "7391048265:AAImageTestSecretPart_NotForAgents99"
API_KEY = "sk-ant-api03-ImageTestKeyForTheAgentsOnly-abc"
HOST_SECRET = "image-test-deploy-password-5151"  # in the container's env, for no agent
STOP_TIMEOUT_S = 45

pytestmark = [
    pytest.mark.skipif(not IMAGE, reason="SWITCHBOARD_TEST_IMAGE is not set: `make image-test` "
                       "builds the image and runs these"),
    pytest.mark.timeout(300),
]


def docker(*args: str, timeout: float = 120, check: bool = True) -> str:
    out = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if check and out.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)}: {out.returncode}\n{out.stderr}")
    return out.stdout.strip()


def http_get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def wait_until(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except (OSError, AssertionError):
            value = None
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class Deployment:
    """One container of the image on a named volume, with its fakes."""

    def __init__(self, mock: MockAnthropic, tg: FakeTelegram) -> None:
        self.mock, self.tg = mock, tg
        self.volume = f"sbtest-{uuid.uuid4().hex[:8]}"
        self.name = ""
        self.port = 0
        self.logs: list[str] = []

    def run(self) -> None:
        self.name = f"sbtest-{uuid.uuid4().hex[:8]}"
        self.port = free_port()
        docker("run", "-d", "--name", self.name, "--network=host",
               "--security-opt", f"seccomp={SECCOMP}", "--security-opt", "apparmor=unconfined",
               "--security-opt", "systempaths=unconfined",
               "--health-interval=2s", "--health-start-period=1s", "--health-timeout=5s",
               "-v", f"{self.volume}:/data",
               # Every tool call allowed: the sandbox must hold when the policy is wrong.
               "-v", f"{PERMISSIVE_POLICY}:/etc/switchboard/policy.toml:ro",
               "-e", "SWITCHBOARD_POLICY=/etc/switchboard/policy.toml",
               "-e", f"PORT={self.port}", "-e", "SWITCHBOARD_HTTP_HOST=127.0.0.1",
               "-e", f"ANTHROPIC_BASE_URL={self.mock.url}", "-e", f"ANTHROPIC_API_KEY={API_KEY}",
               "-e", f"TELEGRAM_BOT_TOKEN={TOKEN}", "-e", f"TELEGRAM_API_BASE_URL={self.tg.url}",
               "-e", f"TELEGRAM_ADMIN_IDS={ADMIN}", "-e", f"ACME_DEPLOY_PASSWORD={HOST_SECRET}",
               "-e", "SWITCHBOARD_SHUTDOWN_GRACE_S=30", "-e", "SWITCHBOARD_KILL_GRACE_S=5",
               IMAGE)
        wait_until(lambda: http_get(self.port, "/healthz")[0] == 200, 60, "/healthz")

    def stop(self) -> tuple[float, int]:
        started = time.monotonic()
        docker("stop", "-t", str(STOP_TIMEOUT_S), self.name, timeout=STOP_TIMEOUT_S + 30)
        took = time.monotonic() - started
        code = int(docker("inspect", "-f", "{{.State.ExitCode}}", self.name))
        self.logs.append(docker("logs", self.name, check=False))
        docker("rm", "-f", self.name, check=False)
        return took, code

    def exec(self, *cmd: str) -> str:
        return docker("exec", self.name, *cmd)

    def remove(self) -> None:
        if self.name:
            self.logs.append(docker("logs", self.name, check=False))
            docker("rm", "-f", self.name, check=False)
        docker("volume", "rm", "-f", self.volume, check=False)

    def says(self, needle: str, timeout: float = 90.0) -> dict[str, Any]:
        def find() -> dict[str, Any] | None:
            hits = [m for m in self.tg.sent(ADMIN) if needle in (m.get("text") or "")]
            return hits[-1] if hits else None

        return self.tg.wait_for_sync(find, timeout, what=f"{needle!r} on Telegram")


@pytest.fixture(scope="module")
def deployment() -> Iterator[Deployment]:
    with MockAnthropic() as mock, FakeTelegram(TOKEN) as tg:
        tg.add_chat(ADMIN, first_name="alice", username="alice")
        dep = Deployment(mock, tg)
        try:
            dep.run()
            yield dep
        finally:
            dep.remove()


def test_pid_1_is_tini_and_the_supervisor_is_not_root(deployment):
    assert deployment.exec("cat", "/proc/1/comm") == "tini"
    rows = [line.split(None, 2)[1:] for line in
            docker("top", deployment.name, "-eo", "pid,uid,args").splitlines()[1:]]
    supervisor = [uid for uid, args in rows if "switchboard run" in args]
    assert supervisor and set(supervisor) == {"10001"}, rows
    assert "0" not in {uid for uid, _ in rows}, rows  # nothing in the container runs as root


def test_health_readiness_and_metrics(deployment):
    from prometheus_client.parser import text_string_to_metric_families

    wait_until(lambda: docker("inspect", "-f", "{{.State.Health.Status}}", deployment.name)
               == "healthy", 60, "the container to be healthy")
    assert http_get(deployment.port, "/healthz")[0] == 200
    status, body = wait_until(lambda: (r := http_get(deployment.port, "/readyz"))[0] == 200 and r,
                              60, "/readyz")
    assert status == 200, body
    status, text = http_get(deployment.port, "/metrics")
    assert status == 200
    names = {f.name for f in text_string_to_metric_families(text)}
    assert any(n.startswith("switchboard_") for n in names), sorted(names)


def test_an_agent_is_sandboxed_and_no_secret_is_in_its_reach(deployment):
    doctor = deployment.exec("switchboard", "doctor")
    assert "[ok] isolation: bubblewrap" in doctor, doctor
    deployment.tg.user_sends(ADMIN, "/start")
    deployment.says("admin")
    probe = ("BASH: id; ps -eo pid,args; env; cat /proc/*/environ 2>&1 | tr '\\0' '\\n'")
    deployment.tg.user_sends(ADMIN, f"/spawn spy {probe}")
    deployment.says("spy finished")
    [result] = [c.result for c in tool_calls(deployment.mock) if c.command.startswith("id;")]
    assert "uid=10001" in result, result  # the probe ran, as the unprivileged user
    # Its own pid namespace: the supervisor, tini and the health checks are out of sight.
    assert "switchboard run" not in result and "tini" not in result, result
    seen = json.dumps(list(deployment.mock.requests))
    assert TOKEN not in seen and TOKEN.split(":", 1)[1] not in seen
    assert HOST_SECRET not in seen


def test_docker_stop_drains_a_running_turn_and_a_restart_resumes_the_session(deployment):
    deployment.tg.user_sends(ADMIN, "/spawn worker TEXT: first answer")
    deployment.says("worker finished")
    before = len(deployment.mock.requests)
    deployment.tg.user_sends(ADMIN, "/ask worker SLEEP 3: TEXT: drained answer")
    wait_until(lambda: len(deployment.mock.requests) > before, 60, "the turn to reach the API")
    took, code = deployment.stop()
    assert code == 0, deployment.logs[-1][-3000:]
    assert took < STOP_TIMEOUT_S
    assert "drained answer" in deployment.logs[-1] or any(
        "drained answer" in (m.get("text") or "") for m in deployment.tg.sent(ADMIN))

    deployment.run()  # the same volume: database, workspaces, the CLI's transcripts
    deployment.tg.user_sends(ADMIN, "/ask worker RECALL")
    reply = deployment.says("HISTORY:")
    history = reply["text"]
    assert "first answer" in history and "drained answer" in history, history
    assert "RECALL" in user_directives(deployment.mock.requests[-1])


def test_no_secret_in_the_logs(deployment):
    logs = "\n".join(deployment.logs) + docker("logs", deployment.name, check=False)
    logs += deployment.exec("cat", "/data/switchboard.log")
    for secret in (TOKEN, TOKEN.split(":", 1)[1], API_KEY, HOST_SECRET):
        assert secret not in logs
