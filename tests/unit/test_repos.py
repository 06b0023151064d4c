"""Repositories, the parts that need no agent: sibling ranking, credentials kept off argv and
out of config, the sandbox's mounts for a worktree, the policy on git push, and the commands'
refusals."""

from __future__ import annotations

from pathlib import Path

from supervisor.config import Settings
from supervisor.guard.policy import Action, Policy
from supervisor.guard.protected import ProtectedPaths
from supervisor.process.sandbox import Isolation, agent_dirs, bwrap_args, hidden_paths
from supervisor.redact import SECRETS
from supervisor.repos.git import Credentials, config_env
from supervisor.repos.siblings import Notice, Siblings, covers, overlap, render
from tests.conftest import run


def _notice(name: str, paths: tuple[str, ...], at: float = 0.0, sha: str = "a" * 40) -> Notice:
    return Notice("proj", f"id-{name}", name, paths, at, at + 100, sha=sha, subject=f"{name} c")


def test_overlap_is_same_file_or_a_directory_of_it():
    assert covers("bot/outbox.py", "bot/outbox.py") and covers("bot/", "bot/outbox.py")
    assert covers("bot/outbox.py", "bot") and not covers("bot/outbox.py", "bot/out")
    assert overlap(("a.py", "bot/x.py", "c.py"), ("bot", "c.py")) == ("bot/x.py", "c.py")


def test_most_overlapping_first_three_at_a_time_and_no_overlap_never_delivers():
    s = Siblings()
    mine = ("shared.py", "lib/")
    assert s.hold("bee", _notice("cat", ("other.py",), at=5), mine) == 0
    assert s.take("bee", now=1) == []  # overlaps nothing: bee is not disturbed
    assert not s.relevant("bee", now=1)
    s.hold("bee", _notice("ant", ("shared.py",), at=1), mine)
    s.hold("bee", _notice("eel", ("lib/a.py", "lib/b.py", "shared.py"), at=2), mine)
    s.hold("bee", _notice("fox", ("lib/c.py",), at=3), mine)
    first = s.take("bee", now=4)
    assert [n.agent_name for n, _ in first] == ["eel", "fox", "ant"]  # by overlap, then newest
    assert [n.agent_name for n, _ in s.take("bee", now=4)] == []  # cat alone: still not sent
    text = render("proj", first)
    assert text.index("eel committed") < text.index("ant committed")
    assert "overlaps your work on lib/a.py, lib/b.py, shared.py" in text


def test_expired_notices_are_dropped():
    s = Siblings()
    s.hold("bee", _notice("ant", ("x",), at=0), ("x",))
    assert s.take("bee", now=500) == []


def test_credentials_travel_in_the_environment_only():
    creds = Credentials("tok-123", "x-access-token", Path("/keys/deploy"))
    env = creds.env()
    assert env["GIT_CONFIG_KEY_0"] == "http.extraHeader"
    assert env["GIT_CONFIG_VALUE_0"].startswith("Authorization: Basic ")
    assert "tok-123" not in " ".join(env.values())  # encoded, never plain
    assert "-i '/keys/deploy'" in env["GIT_SSH_COMMAND"]
    assert config_env([("a", "1"), ("b", "2")], start=1) == {
        "GIT_CONFIG_COUNT": "3", "GIT_CONFIG_KEY_1": "a", "GIT_CONFIG_VALUE_1": "1",
        "GIT_CONFIG_KEY_2": "b", "GIT_CONFIG_VALUE_2": "2"}


def test_the_ssh_key_is_hidden_from_agents(tmp_path):
    key = tmp_path / "deploy_key"
    key.write_text("PRIVATE")
    s = Settings(home=tmp_path / "sb", repo_ssh_key=key)
    _, files = hidden_paths(s, {})
    assert key.resolve() in files


def test_worktree_mounts_come_after_the_workspace_in_order(tmp_path):
    s = Settings(home=tmp_path / "sb")
    iso = Isolation(True, "test", bwrap="/usr/bin/bwrap")
    ws = s.workspaces / "ant-x"
    bare = s.repos_dir / "p.git"
    binds = ((bare, bare, False), (bare / "worktrees" / "ant-x", bare / "worktrees" / "ant-x",
                                   True))
    argv = bwrap_args(s, iso, agent_dirs(s, "x"), ws, {}, Path("/usr/bin/true"), binds=binds)
    at_ws = argv.index(str(ws.resolve()))
    at_bare = [i for i, a in enumerate(argv) if a == str(bare)][0]
    assert at_ws < at_bare
    assert argv[at_bare - 1] == "--ro-bind"
    admin = str(bare / "worktrees" / "ant-x")
    assert argv[argv.index(admin) - 1] == "--bind"


def test_git_push_is_asked_about_by_its_own_rule():
    """Not merely by the default: the rule names pushing as the operator's call."""
    policy = Policy.load(None, protected=ProtectedPaths.default())
    for cmd in ("git push", "git push origin agent/x", "cd src && git push -u origin HEAD"):
        d = policy.decide("a", "Bash", {"command": cmd}, "/tmp/w")
        assert d.action == Action.ASK and d.rule.endswith(": git push"), (cmd, d)


async def test_repo_commands_refuse_what_is_wrong(quiet_app):
    r = await run(quiet_app, "/repo add p https://user:s3cr3t-pw@example.com/x.git")
    assert not r.ok and "credentials" in r.plain() and "repo_token" in r.plain()
    # Refused, and still audited: the audit's redactor masks the password from now on.
    assert "s3cr3t-pw" not in SECRETS("/repo add p https://user:s3cr3t-pw@example.com/x.git")
    r = await run(quiet_app, "/repo frob p")
    assert not r.ok and "unknown action" in r.plain()
    r = await run(quiet_app, "/spawn a --base main do it")
    assert not r.ok and "--base needs --repo" in r.plain()
    r = await run(quiet_app, "/spawn a --repo p --cwd /tmp do it")
    assert not r.ok and "exclude each other" in r.plain()
    r = await run(quiet_app, "/diff nobody")
    assert not r.ok and "no agent" in r.plain().lower()
    r = await run(quiet_app, "/repo archives nothere")
    assert not r.ok and "no repository" in r.plain().lower()


async def test_repo_add_list_fetch_fast_forwards_only_and_remove(quiet_app, tmp_path):
    from tests.integration.test_repos_fake import git, make_origin

    origin = make_origin(tmp_path / "origin")
    r = await run(quiet_app, f"/repo add proj {origin}")
    assert r.ok and "default branch main" in r.plain(), r.plain()
    bare = quiet_app.settings.repos_dir / "proj.git"
    assert "proj" in (await run(quiet_app, "/repo list")).plain()
    (origin / "README").write_text("moved on\n")
    git("commit", "-qam", "upstream", cwd=origin)
    git("checkout", "-qb", "feature", cwd=origin)
    r = await run(quiet_app, "/repo fetch proj")
    assert r.ok and "moved feature, main" in r.plain(), r.plain()
    assert git("--git-dir", str(bare), "rev-parse", "main") == git("rev-parse", "main",
                                                                   cwd=origin)
    # A branch that moved here (a /merge) is never rewound by a fetch.
    local = git("--git-dir", str(bare), "commit-tree", "main^{tree}", "-p", "main", "-m", "m")
    git("--git-dir", str(bare), "update-ref", "refs/heads/main", local)
    r = await run(quiet_app, "/repo fetch proj")
    assert r.ok and "no local branch moved" in r.plain(), r.plain()
    assert git("--git-dir", str(bare), "rev-parse", "main") == local
    assert (await run(quiet_app, "/repo add proj /nonexistent")).ok is False
    r = await run(quiet_app, "/repo remove proj")
    assert r.ok and not bare.exists()
