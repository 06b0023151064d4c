"""What deploy/ promises, held against the code: the compose file runs the image with the options
the image test proves (tests/image/), and the seccomp profile adds only what bubblewrap needs."""

from __future__ import annotations

import json
import re
from pathlib import Path

from supervisor.config import Settings

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
BUBBLEWRAP_CALLS = {"clone", "unshare", "setns", "mount", "umount2", "pivot_root", "sethostname"}


def test_the_seccomp_profile_is_a_deny_by_default_profile_plus_bubblewraps_calls():
    profile = json.loads((DEPLOY / "seccomp-sandbox.json").read_text())
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO"
    ours = [r for r in profile["syscalls"] if r.get("comment", "").startswith("Switchboard")]
    assert len(ours) == 1 and set(ours[0]["names"]) == BUBBLEWRAP_CALLS
    assert ours[0]["action"] == "SCMP_ACT_ALLOW" and "args" not in ours[0]
    # Nothing granted unconditionally that Docker's default keeps for CAP_SYS_ADMIN, but ours.
    unconditional = {n for r in profile["syscalls"] if r["action"] == "SCMP_ACT_ALLOW"
                     and not r.get("includes") and not r.get("args") for n in r["names"]}
    assert not {"bpf", "ptrace", "kexec_load", "init_module", "reboot", "swapon"} & unconditional


def test_compose_runs_the_image_as_the_image_test_does():
    compose = (DEPLOY / "docker-compose.yml").read_text()
    for option in ("seccomp=seccomp-sandbox.json", "apparmor=unconfined",
                   "systempaths=unconfined"):
        assert f"- {option}" in compose, option
    assert "seccomp=unconfined" not in compose
    assert "/healthz" in compose and "restart: unless-stopped" in compose
    grace = int(re.search(r"stop_grace_period: (\d+)s", compose).group(1))
    defaults = Settings.model_fields
    assert grace > defaults["shutdown_grace_s"].default + defaults["kill_grace_s"].default
    image_test = (DEPLOY.parent / "tests" / "image" / "test_image.py").read_text()
    assert "seccomp-sandbox.json" in image_test and "systempaths=unconfined" in image_test


def test_the_scale_out_compose_runs_two_workers_on_postgresql_as_the_single_one_runs():
    """deploy/docker-compose.scale-out.yml: PostgreSQL and two workers, each with the single
    compose file's sandbox options and grace, the image built with the postgresql extra, its
    own volume and port, and the database's password only from deploy/.env."""
    import tomllib

    import yaml

    text = (DEPLOY / "docker-compose.scale-out.yml").read_text()
    services = yaml.safe_load(text)["services"]
    single = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())["services"]
    one = single["switchboard"]
    workers = {n: s for n, s in services.items() if n.startswith("worker-")}
    assert len(workers) == 2 and set(services) == {"postgres", *workers}
    extras = tomllib.loads((DEPLOY.parent / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    for name, w in workers.items():
        assert w["security_opt"] == one["security_opt"], name
        assert w["stop_grace_period"] == one["stop_grace_period"], name
        assert w["healthcheck"]["test"] == one["healthcheck"]["test"], name
        assert w["build"]["args"]["EXTRAS"] in extras, name
        assert w["env_file"] == ".env" and w["depends_on"]["postgres"]["condition"] == \
            "service_healthy", name
        url = w["environment"]["SWITCHBOARD_DATABASE_URL"]
        assert url.startswith("postgresql://switchboard:${POSTGRES_PASSWORD:?") and \
            url.endswith("@postgres:5432/switchboard"), url
        assert w["hostname"] == name
    assert len({w["volumes"][0] for w in workers.values()}) == 2  # one data volume a worker
    assert len({w["ports"][0] for w in workers.values()}) == 2
    assert all(p.startswith("127.0.0.1:") for w in workers.values() for p in w["ports"])
    pg = services["postgres"]
    assert "ports" not in pg and pg["environment"]["POSTGRES_PASSWORD"].startswith(
        "${POSTGRES_PASSWORD:?")
    assert 'ARG EXTRAS=""' in (DEPLOY.parent / "Dockerfile").read_text()
