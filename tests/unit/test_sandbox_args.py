"""bwrap's argv for an agent: what is hidden, what is bound, and in which order."""

from __future__ import annotations

from pathlib import Path

from supervisor.config import Settings
from supervisor.process.sandbox import Isolation, agent_dirs, bwrap_args


def _argv(tmp_path: Path, **kw: object) -> list[str]:
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    policy = repo / "tests" / "policy.toml"
    policy.write_text("")
    cli = repo / "claude"
    cli.write_text("")
    settings = Settings(home=tmp_path / "sb", policy_file=policy, **kw)  # type: ignore[arg-type]
    iso = Isolation(True, "test", bwrap="/usr/bin/bwrap", uid=61000, gid=61000)
    dirs = agent_dirs(settings, "abcdef")
    ws = tmp_path / "sb" / "workspaces" / "a-abcdef"
    ws.mkdir(parents=True)
    return bwrap_args(settings, iso, dirs, ws, {}, cli)


def test_parents_of_a_blanked_file_are_made_traversable_first(tmp_path):
    """Regression: the policy file blanked inside /tmp made its parents 0700 (bwrap's default
    for missing ones), and the CLI beside it could not be reached by the agent uid."""
    argv = _argv(tmp_path)
    blank = argv.index(str(tmp_path / "repo" / "tests" / "policy.toml"))
    assert argv[blank - 2:blank] == ["--ro-bind", "/dev/null"]
    for parent in (tmp_path / "repo", tmp_path / "repo" / "tests"):
        made = [i for i, a in enumerate(argv) if a == str(parent) and argv[i - 1] == "--dir"]
        assert made, f"{parent} is never made"
        assert made[0] < blank, f"{parent} is made after the file in it is blanked"
        assert argv[made[0] - 3:made[0]] == ["--perms", "0755", "--dir"], parent


def test_the_data_dir_and_home_are_hidden_and_the_workspace_bound(tmp_path):
    argv = _argv(tmp_path)
    ws = str(tmp_path / "sb" / "workspaces" / "a-abcdef")
    assert ["--bind", ws, ws] == argv[argv.index(ws) - 1:argv.index(ws) + 2]
    tmpfs = [argv[i + 1] for i, a in enumerate(argv) if a == "--tmpfs"]
    assert str(Path.home().resolve()) in tmpfs
    assert "--unshare-pid" in argv and "--as-pid-1" in argv and "--die-with-parent" in argv
    assert argv[argv.index("--cap-drop") + 1] == "ALL"


def test_other_agents_projects_are_hidden_but_not_system_directories(tmp_path):
    repo = tmp_path / "other-project"
    repo.mkdir()
    settings = Settings(home=tmp_path / "sb")
    iso = Isolation(True, "test", bwrap="/usr/bin/bwrap")
    dirs = agent_dirs(settings, "abcdef")
    ws = tmp_path / "mine"
    ws.mkdir()
    argv = bwrap_args(settings, iso, dirs, ws, {}, Path("/usr/bin/true"),
                      peers=(repo, Path("/usr"), ws))
    tmpfs = [argv[i + 1] for i, a in enumerate(argv) if a == "--tmpfs"]
    assert str(repo.resolve()) in tmpfs
    assert "/usr" not in tmpfs and str(ws.resolve()) not in tmpfs


def test_a_walled_network_is_its_own_namespace_with_only_the_sockets_bound(tmp_path):
    """egress model-only/allowlist (supervisor/process/network.py): --unshare-net, and the
    supervisor's sockets bound read-only into the agent's /tmp after /tmp itself."""
    from supervisor.process.network import GATEWAY_INSIDE, PROXY_INSIDE, plan

    settings = Settings(home=tmp_path / "sb")
    iso = Isolation(True, "test", bwrap="/usr/bin/bwrap")
    dirs = agent_dirs(settings, "abcdef")
    ws = tmp_path / "mine"
    ws.mkdir()
    gw, proxy, relay = tmp_path / "gw.sock", tmp_path / "egress.sock", tmp_path / "relay.py"
    open_argv = bwrap_args(settings, iso, dirs, ws, {}, Path("/usr/bin/true"))
    assert "--unshare-net" not in open_argv
    net = plan("allowlist", gw, 4242, relay, proxy, "sbg-tok")
    argv = bwrap_args(settings, iso, dirs, ws, {}, Path("/usr/bin/true"), net=net.binds)
    assert "--unshare-net" in argv
    tmp_bind = argv.index("/tmp")
    for sock, inside in ((gw, GATEWAY_INSIDE), (proxy, PROXY_INSIDE)):
        at = argv.index(str(inside))
        assert argv[at - 2:at] == ["--ro-bind", str(sock)] and at > tmp_bind
    assert net.env["HTTPS_PROXY"] == "http://agent:sbg-tok@127.0.0.1:3128"
    assert net.env["SWITCHBOARD_EGRESS_RELAY"] == \
        f"{relay}|4242={GATEWAY_INSIDE}|3128={PROXY_INSIDE}"
    only = plan("model-only", gw, 4242, relay, proxy, "sbg-tok")
    assert [inside for _s, inside in only.binds] == [GATEWAY_INSIDE]
    assert "HTTPS_PROXY" not in only.env
    assert plan("open", gw, 4242, relay, proxy, "sbg-tok").binds == ()
