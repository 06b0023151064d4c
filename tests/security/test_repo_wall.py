"""A hostile agent in a repository worktree: it must not read the operator's remote credentials
(the token, the SSH key file) anywhere (its environment, the bare repository's config), and it
must not write what is not its own: the base branch, another agent's branch, worktree or
administrative directory, the shared object store. Its own `git commit` must work. Every probe
runs (the policy allows everything); the wall must hold anyway."""

from __future__ import annotations

import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.app import Switchboard
from tests.conftest import run, wait_for
from tests.integration.test_repos_fake import bare_git, make_origin
from tests.security.conftest import bash_script, tool_calls

pytestmark = [pytest.mark.real_cli, pytest.mark.timeout(240)]


@pytest.fixture
def outside() -> Iterator[Path]:
    """Outside /tmp (the agent's /tmp is its own, which would hide anything there anyway)."""
    base = Path(tempfile.mkdtemp(prefix="sbrepo", dir="/var/tmp"))
    base.chmod(0o711)
    yield base
    shutil.rmtree(base, ignore_errors=True)


async def test_credentials_hidden_and_only_its_own_branch_writable(permissive_settings,
                                                                   outside, mock_api):
    token = f"SBSECRET-token-{secrets.token_hex(8)}"
    key_secret = f"SBSECRET-sshkey-{secrets.token_hex(8)}"
    key = outside / "deploy_key"
    key.write_text(f"-----BEGIN OPENSSH PRIVATE KEY-----\n{key_secret}\n-----END-----\n")
    key.chmod(0o644)  # what hides it must be the sandbox, not its mode
    origin = make_origin(outside / "origin")
    settings = permissive_settings.with_(repo_token=token, repo_ssh_key=key)
    async with Switchboard(settings) as app:
        assert (await run(app, f"/repo add proj {origin}")).ok
        assert (await run(app, "/repo fetch proj")).ok
        victim_reply = await run(app, "/spawn victim --repo proj TEXT: ready")
        assert victim_reply.ok, victim_reply.plain()
        victim = await app.pool.fleet.get("victim")
        await wait_for(lambda: victim.state == "idle" and not victim.busy, 90, "victim idle")
        vt = app.pool.repos.tree_of(victim.id)
        bare = vt.bare
        main = bare_git(app, "proj", "rev-parse", "main")
        victim_head = (vt.admin / "HEAD").read_text()
        script = f"""
cat '{bare}/config'; env; cat '{key}'; echo "rc_key=$?"
echo HACK > '{bare}/refs/heads/main'; echo "rc_main=$?"
git update-ref refs/heads/main HEAD; echo "rc_update_ref=$?"
echo 0000000000000000000000000000000000000000 > '{bare}/refs/heads/agent/victim'
cat '{vt.path}/README'; echo pwned > '{vt.path}/README'; echo "rc_victim_wt=$?"
echo 'ref: refs/heads/main' > '{vt.admin}/HEAD'; echo "rc_victim_admin=$?"
rm -rf '{bare}'/objects/*; echo "rc_objects=$?"
git commit --allow-empty -qm 'spy commit' && echo COMMITTED
"""
        reply = await run(app, f"/spawn spy --repo proj {bash_script(script)}")
        assert reply.ok, reply.plain()
        spy = await app.pool.fleet.get("spy")
        await wait_for(lambda: spy.state == "idle" and not spy.busy, 120, "spy done")
        out = "\n".join(c.result for c in tool_calls(mock_api))
        assert "COMMITTED" in out, out  # its own commit works inside the sandbox
        assert token not in out and key_secret not in out, out
        assert "rc_key=0" not in out
        # Nothing outside its own branch changed.
        assert bare_git(app, "proj", "rev-parse", "main") == main
        assert bare_git(app, "proj", "rev-parse", "agent/victim") == main
        assert (vt.path / "README").read_text() == "hello\n"
        assert (vt.admin / "HEAD").read_text() == victim_head
        bare_git(app, "proj", "fsck", "--no-dangling")  # the shared objects are all there
        spy_head = app.pool.repos._heads
        await wait_for(lambda: spy_head.get(spy.id) != main, 30, "spy's commit taken in")
        assert bare_git(app, "proj", "log", "-1", "--format=%s", "agent/spy") == "spy commit"
        # The credential is nowhere an agent, a log line or the audit could take it from.
        assert token not in (bare / "config").read_text()
        audit = await app.store.audit.recent(50)
        assert all(token not in a.args + a.result for a in audit)
