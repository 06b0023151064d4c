"""Protected paths: credentials reads refused by the default policy; Switchboard's own files
refused whatever the policy; writes that change what agents run asked whatever the policy."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from supervisor.guard.policy import Action, Decision, Policy
from supervisor.guard.protected import ProtectedPaths, may_match, write_hazard

HOME = os.path.expanduser("~")
PERMISSIVE = Path(__file__).resolve().parents[1] / "fakes" / "permissive_policy.toml"


@pytest.fixture(scope="module")
def sb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("sbhome")
    (home / "workspaces" / "me-1" / "src").mkdir(parents=True)
    (home / "workspaces" / "other-2").mkdir()
    (home / "switchboard.db").write_text("")
    return home


@pytest.fixture(scope="module")
def protected(sb: Path) -> ProtectedPaths:
    return ProtectedPaths(home=sb, settings=sb / "switchboard.toml", policy="/srv/team.toml",
                          credentials="/srv/gcs-key.json")


@pytest.fixture(scope="module", params=["default", "permissive"])
def policy(request: pytest.FixtureRequest, protected: ProtectedPaths) -> Policy:
    path = None if request.param == "default" else PERMISSIVE
    return Policy.load(path, protected=protected)


def me(sb: Path) -> str:
    return str(sb / "workspaces" / "me-1")


def call(policy: Policy, tool: str, cwd: str, **inp: object) -> Decision:
    return policy.decide("me", tool, inp if tool != "Bash" else {"command": inp["command"]}, cwd)


# -- credentials (rules of the default policy) ----------------------------------------------------

SECRETS = ["~/.ssh/id_rsa", "~/.ssh", "~/.aws/credentials", "~/.config/gcloud/adc.json",
           "~/.gnupg/secring.gpg", "~/.netrc", "~/.docker/config.json", "~/.kube/config",
           "/proc/1/environ", "/proc/self/environ", "/proc/42/task/42/environ", "/proc/1/mem",
           "/proc/1/cmdline", "/proc/1/fd/3", "/etc/shadow", "/etc/shadow-", "/etc/sudoers",
           "/etc/sudoers.d/admins"]


@pytest.mark.parametrize("path", SECRETS)
@pytest.mark.parametrize("tool", ["Read", "NotebookRead", "LS"])
def test_default_policy_refuses_reading_credentials(tool: str, path: str) -> None:
    key = "notebook_path" if tool == "NotebookRead" else "path" if tool == "LS" else "file_path"
    decision = Policy.load(None).decide("a", tool, {key: path}, "/work/repo")
    assert decision.action is Action.DENY, decision
    assert decision.reason.startswith("holds")


@pytest.mark.parametrize(("inp", "action"), [
    ({"pattern": "k", "path": "~/.ssh"}, Action.DENY),
    ({"pattern": "k", "path": "/proc/1/environ"}, Action.DENY),
    ({"pattern": "k", "path": "~", "glob": ".aws/*"}, Action.DENY),
    ({"pattern": "k", "path": "~"}, Action.ASK),  # searches ~/.ssh too
    ({"pattern": "k", "path": "/"}, Action.ASK),
    ({"pattern": "k", "path": "/proc"}, Action.ASK),
    ({"pattern": "k", "path": "/work/repo"}, Action.ALLOW),
    ({"pattern": "k"}, Action.ALLOW),  # the cwd
])
def test_grep_is_judged_by_where_it_searches(inp: dict, action: Action) -> None:
    decision = Policy.load(None).decide("a", "Grep", inp, "/work/repo")
    assert decision.action is action, decision


@pytest.mark.parametrize(("inp", "action"), [
    ({"pattern": "*", "path": "~/.kube"}, Action.DENY),
    ({"pattern": "~/.ssh/*"}, Action.DENY),
    ({"pattern": HOME + "/.ssh/id_*"}, Action.DENY),
    ({"pattern": "**/*.py"}, Action.ALLOW),
    ({"pattern": "**/*", "path": "~"}, Action.ALLOW),  # names only, no contents
])
def test_glob_is_judged_by_its_path_and_pattern(inp: dict, action: Action) -> None:
    decision = Policy.load(None).decide("a", "Glob", inp, "/work/repo")
    assert decision.action is action, decision


@pytest.mark.parametrize(("command", "action"), [
    ("cat ~/.ssh/id_rsa", Action.DENY),
    ("cat $HOME/.aws/credentials", Action.DENY),
    ('f=~/.netrc; cat "$f"', Action.DENY),
    ("cat < ~/.ssh/id_rsa", Action.DENY),
    ("head -c 100 /proc/1/environ", Action.DENY),
    ("echo ok && cp ~/.kube/config k", Action.DENY),
    ("python -c \"print(open('/etc/shadow').read())\"", Action.DENY),
    ("cat ~/.ss?/id_rsa", Action.ASK),  # a glob that may match
    ("cat /proc/*/environ", Action.DENY),  # a glob that matches one now
    ("grep -r password ~", Action.ASK),
    ("rg password /", Action.ASK),
    ("tar czf all.tgz ~", Action.ASK),
    ("cp -r ~ backup", Action.ASK),
    ("grep -rn TODO src", Action.ALLOW),
    ("cat README.md", Action.ALLOW),
])
def test_bash_words_naming_credentials_are_refused(command: str, action: Action) -> None:
    decision = Policy.load(None).decide("a", "Bash", {"command": command}, "/work/repo")
    assert decision.action is action, decision


# -- Switchboard's own files (built in: the permissive policy cannot open them) -------------------


def test_switchboard_files_are_refused_to_read_and_write(policy: Policy, sb: Path) -> None:
    for target in (sb / "switchboard.db", sb / "switchboard.log", sb / "run" / "x.sock",
                   sb / "switchboard.toml", sb / "workspaces" / "other-2" / "notes",
                   Path("/srv/team.toml"), Path("/srv/gcs-key.json"), sb):
        for tool in ("Read", "Write", "Edit"):
            decision = call(policy, tool, me(sb), file_path=str(target))
            assert decision.action is Action.DENY, (tool, target, decision)
            assert "Switchboard's own files" in decision.reason
    for inp in ({"path": str(sb)}, {"path": str(sb / "workspaces")}):
        assert call(policy, "LS", me(sb), **inp).action is Action.DENY
    grep = call(policy, "Grep", me(sb), pattern="x", path=str(sb.parent))
    assert grep.action is Action.ASK and "Switchboard's own files" in grep.reason


def test_the_agents_own_workspace_is_not_switchboards(policy: Policy, sb: Path) -> None:
    mine = me(sb)
    assert call(policy, "Read", mine, file_path=f"{mine}/src/app.py").action is Action.ALLOW
    assert call(policy, "Read", mine, file_path="src/app.py").action is Action.ALLOW
    assert call(policy, "Grep", mine, pattern="x").action is Action.ALLOW
    assert call(policy, "Glob", mine, pattern="**/*.py").action is Action.ALLOW
    assert call(policy, "Bash", mine, command="ls src").action is Action.ALLOW
    assert call(policy, "Bash", mine, command="cat *").action is Action.ALLOW
    # the same path is Switchboard's for another agent, and when the cwd is not a workspace
    other = str(sb / "workspaces" / "other-2")
    assert call(policy, "Read", other, file_path=f"{mine}/src/app.py").action is Action.DENY
    assert call(policy, "Read", str(sb), file_path=f"{sb}/switchboard.db").action is Action.DENY


@pytest.mark.parametrize("command", [
    "cat {sb}/switchboard.db", "sqlite3 {sb}/switchboard.db .dump", "tail -f {sb}/switchboard.log",
    "cat ../other-2/notes", "cd .. && ls", "ls {sb}/workspaces", "cp x {sb}/switchboard.toml",
    "echo x > {sb}/switchboard.db", "cat < {sb}/switchboard.db", "cat /srv/team.toml",
    "cp /srv/gcs-key.json .", "ls ../*/", "bash -c 'cat {sb}/switchboard.log'",
])
def test_bash_words_naming_switchboard_files_are_refused(policy: Policy, sb: Path,
                                                          command: str) -> None:
    decision = call(policy, "Bash", me(sb), command=command.format(sb=sb))
    assert decision.action in (Action.DENY, Action.ASK), decision
    assert "Switchboard's own files" in decision.reason, decision


def test_protected_paths_default_and_policy_api(tmp_path: Path) -> None:
    default = Policy.load(None)
    assert default.protected == ProtectedPaths.default()
    db = os.path.expanduser("~/.switchboard/switchboard.db")
    assert default.decide("a", "Read", {"file_path": db}, "/work").action is Action.DENY
    mine = ProtectedPaths(home=tmp_path)
    wired = default.with_protected(mine)
    assert wired.protected is mine and wired.source == default.source
    assert wired.decide("a", "Read", {"file_path": str(tmp_path / "x")}, "/w").action is Action.DENY
    assert wired.decide("a", "Read", {"file_path": db}, "/w").action is Action.ALLOW
    loose = Policy.from_dict({"default": "allow"}, protected=mine)
    assert loose.decide("a", "Write", {"file_path": str(tmp_path)}, "/w").action is Action.DENY
    assert ProtectedPaths(home=None, settings=None).targets() == ()


# -- writes that change what agents run (built in: asked whatever the policy says) ----------------

HAZARDS = [
    (".claude/settings.json", "Claude Code settings"),
    (".claude/settings.local.json", "Claude Code settings"),
    (".claude/hooks/pre.sh", "Claude Code settings"),
    (".claude/agents/x.md", "Claude Code settings"),
    (".claude/commands/deploy.md", "Claude Code settings"),
    ("~/.claude.json", "MCP servers"),
    ("CLAUDE.md", "instructions"),
    ("sub/CLAUDE.local.md", "instructions"),
    (".mcp.json", "MCP servers"),
    (".git/hooks/pre-commit", "git's config and hooks"),
    (".git/config", "git's config and hooks"),
    ("sub/.git", "git's config and hooks"),
    (".gitattributes", "programs git runs"),
    ("~/.gitconfig", "git configuration"),
    ("~/.bashrc", "start-up"),
    ("~/.bash_profile", "start-up"),
    ("~/.profile", "start-up"),
    ("~/.zshrc", "start-up"),
    (".envrc", "start-up"),
    ("/etc/profile.d/x.sh", "start-up"),
    ("~/.ssh/authorized_keys", "ssh"),
]


@pytest.mark.parametrize(("path", "why"), HAZARDS)
@pytest.mark.parametrize("tool", ["Write", "Edit", "MultiEdit", "NotebookEdit"])
def test_writing_what_changes_agents_asks_under_any_policy(policy: Policy, tool: str, path: str,
                                                           why: str) -> None:
    key = "notebook_path" if tool == "NotebookEdit" else "file_path"
    decision = policy.decide("a", tool, {key: path}, "/work/repo")
    assert decision.action is not Action.ALLOW, decision
    if decision.rule == "protected paths":
        assert decision.reason.startswith("writes ") and why in decision.reason


def test_an_allow_rule_cannot_open_a_protected_write_and_a_deny_still_denies() -> None:
    policy = Policy.from_dict({"rules": [
        {"tool": "Write|Bash", "action": "allow"},
        {"tool": "Edit", "path": "/work/repo/.claude/**", "action": "deny"},
    ]})
    write = policy.decide("a", "Write", {"file_path": ".claude/settings.json"}, "/work/repo")
    assert write.action is Action.ASK
    assert write.reason == ("writes /work/repo/.claude/settings.json: Claude Code settings, "
                            "hooks, agents and commands there change what agents run")
    edit = policy.decide("a", "Edit", {"file_path": ".claude/settings.json"}, "/work/repo")
    assert edit.action is Action.DENY
    assert policy.decide("a", "Write", {"file_path": "src/a.py"}, "/work/repo").action is (
        Action.ALLOW)


BASH_HAZARDS = [
    "echo '{}' > .claude/settings.json",
    "cat x >> CLAUDE.md",
    "cp x .claude/settings.json",
    "cp -r tpl/.claude .",
    "tee .mcp.json < x",
    "sed -i s/a/b/ ~/.bashrc",
    "mv hook .git/hooks/pre-commit",
    "ln -s ../../x .git/hooks/post-checkout",
    "chmod +x .git/hooks/pre-push",
    "git config core.hooksPath .hooks",
    "git config --global alias.st '!sh -c x'",
    "git -C sub config --add core.pager evil",
    "python -c \"open('.claude/settings.json', 'w').write('{}')\"",
    "f=.claude/settings.json; cp x \"$f\"",
    "cp x .cl''aude/settings.json",
    "cp x $'\\x2eclaude/settings.json'",
    "cp x .clau{d,}e/settings.json",
    "cp x .cl*/settings.json",
    "rm *.md",
    "cd .claude && cp ../x settings.json",
    "cd .git/hooks; cp x pre-commit",
    "dd of=CLAUDE.md if=x",
    "install -m 755 x .git/hooks/pre-commit",
    "bash -c 'cp x .claude/settings.json'",
    "sudo tee /etc/profile.d/x.sh",
    "rsync -a x/ ~/.ssh/",
]


@pytest.mark.parametrize("command", BASH_HAZARDS)
def test_bash_writing_what_changes_agents_asks_under_any_policy(policy: Policy,
                                                                command: str) -> None:
    decision = policy.decide("a", "Bash", {"command": command}, "/work/repo")
    assert decision.action is not Action.ALLOW, decision


def test_bash_protected_write_reasons_name_the_command() -> None:
    policy = Policy.load(PERMISSIVE)
    decision = policy.decide("a", "Bash", {"command": "ls && cp x .claude/settings.json && ls"},
                             "/work/repo")
    assert decision.action is Action.ASK and decision.rule == "protected paths"
    assert decision.reason == ("may write .claude/settings.json: Claude Code settings, hooks, "
                               "agents and commands there change what agents run "
                               "(in: cp x .claude/settings.json)")


@pytest.mark.parametrize("command", [
    "cat .claude/settings.json", "ls .claude", "grep -r hook .claude", "git config --get user.name",
    "git config --list", "git config user.name", "cp a.py b.py", "rm -f *.o", "git status",
    "echo CLAUDE.md is nice",
])
def test_reading_or_unrelated_commands_stay_allowed_under_permissive(command: str) -> None:
    decision = Policy.load(PERMISSIVE).decide("a", "Bash", {"command": command}, "/work/repo")
    assert decision.action is Action.ALLOW, decision


def test_write_hazard_and_may_match() -> None:
    assert write_hazard("/work/repo/.claude") is not None
    assert write_hazard("/work/repo/.CLAUDE/settings.json") is not None  # case-blind file systems
    assert write_hazard("/work/repo/.github/workflows/ci.yml") is None
    assert write_hazard("/work/repo/.gitignore") is None
    assert may_match("/root/.ss?/id_rsa", "/root/.ssh/**")
    assert may_match("/root/*", "/root/.switchboard") is False  # * skips dot files
    assert may_match("/tmp/*", "/root/.ssh/**") is False
