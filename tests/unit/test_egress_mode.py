"""Which network an agent gets (supervisor/process/network.py) and which hosts the egress proxy
lets through (supervisor/guard/egress.py): pure decisions, no sandbox."""

from __future__ import annotations

from pathlib import Path

import pytest

from supervisor.config import Settings
from supervisor.guard.egress import host_allowed
from supervisor.process import network
from supervisor.process.sandbox import Isolation

SOCK = Path("/run/gw.sock")
ISO = Isolation(True, "test", bwrap="/usr/bin/bwrap-test")


@pytest.fixture
def netns(monkeypatch: pytest.MonkeyPatch) -> dict[str | None, str | None]:
    """The probe's answer for ISO's bwrap, set by the test (the real probe runs bwrap)."""
    monkeypatch.setattr(network, "_probed", {ISO.bwrap: None})
    return network._probed


def test_auto_is_model_only_where_it_can_be_made_and_open_otherwise(tmp_path, netns):
    s = Settings(home=tmp_path)
    assert network.mode_for(s, ISO, SOCK)[0] == "model-only"
    mode, why = network.mode_for(s, ISO, None)
    assert mode == "open" and "model gateway is not running" in why
    netns[ISO.bwrap] = "bwrap cannot make a network namespace here: denied"
    mode, why = network.mode_for(s, ISO, SOCK)
    assert mode == "open" and "denied" in why
    assert network.mode_for(s, Isolation(False, "none"), SOCK)[0] == "open"


def test_a_mode_asked_for_that_cannot_be_made_refuses_and_says_why(tmp_path, netns):
    for asked in ("model-only", "allowlist"):
        s = Settings(home=tmp_path, egress=asked)
        assert network.mode_for(s, ISO, SOCK)[0] == asked
        mode, why = network.mode_for(s, ISO, None)
        assert mode == "" and f"egress = {asked} cannot be enforced" in why
        assert "ANTHROPIC_API_KEY" in why
    assert network.mode_for(Settings(home=tmp_path, egress="open"), ISO, None)[0] == "open"


def test_the_allowlist_matches_hosts_and_domains_only_as_named():
    allowed = ("git.example.com", "*.pypi.example", ".files.example")
    assert host_allowed("git.example.com", allowed)
    assert host_allowed("GIT.Example.com.", allowed)
    assert host_allowed("a.pypi.example", allowed) and host_allowed("x.y.files.example", allowed)
    assert not host_allowed("example.com", allowed)
    assert not host_allowed("evilgit.example.com", allowed)
    assert not host_allowed("pypi.example.evil", allowed)
    assert not host_allowed("notpypi.example", allowed)
    assert not host_allowed("127.0.0.1", ())
