"""A hostile agent and the shared-context directory: the one part of the data directory bound
into its sandbox. It may read and write there, and nothing else of the data directory shows
through it: not the database beside it, not by `..`, not through a link it plants, which the
supervisor's sync to the bucket does not follow either."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from bot.app import Switchboard
from supervisor.config import CONTEXT_VAR, Settings
from tests.conftest import PERMISSIVE_POLICY, make_settings
from tests.fakes.gcs import Emulator
from tests.security.conftest import bash_script, spawn_fleet, tool_calls

pytestmark = [pytest.mark.real_cli, pytest.mark.timeout(180)]

MARK = "SBCTX-SECRET-in-the-database"


@pytest.fixture
async def ctx_app(short_home, mock_api, gcs: Emulator) -> AsyncIterator[Switchboard]:
    (short_home / "t").mkdir(exist_ok=True)
    settings: Settings = make_settings(short_home, mock_api, policy_file=PERMISSIVE_POLICY,
                                       gcs_bucket="sb", storage_emulator_host=gcs.host)
    async with Switchboard(settings) as app:
        await app.store.kv.set("probe", MARK)  # type: ignore[union-attr]
        (settings.context_dir / "plan.md").write_text("# the plan: written by the operator\n")
        yield app


async def test_the_shared_context_exposes_nothing_else(ctx_app: Switchboard, mock_api,
                                                       gcs: Emulator) -> None:
    settings = ctx_app.settings
    ctx, sb = settings.context_dir.resolve(), settings.home.resolve()
    script = f"""
CTX="${CONTEXT_VAR}"; SB='{sb}'
echo "== ctx $CTX"
cat "$CTX/plan.md"
echo "agent notes" > "$CTX/notes.md"; echo "write rc=$?"
echo "== data dir"; ls -A "$SB" 2>&1
echo "== db"; cat "$SB/switchboard.db" 2>&1 | head -c 300; echo
cat "$CTX/../switchboard.db" 2>&1 | head -c 300; echo
echo "escape" > "$CTX/../escaped.md"; echo "escape rc=$?"
ln -s "$SB/switchboard.db" "$CTX/db.md"; echo "link rc=$?"
ln -s /etc/passwd "$CTX/passwd.md"
cat "$CTX/db.md" 2>&1 | head -c 300; echo
echo "== done"
"""
    await spawn_fleet(ctx_app, ["hostile"], bash_script(script))
    out = "\n".join(c.result for c in tool_calls(mock_api))
    assert "== done" in out, out
    # It reads and writes the shared context ...
    assert f"== ctx {ctx}" in out and "the plan: written by the operator" in out
    assert "write rc=0" in out and (ctx / "notes.md").read_text() == "agent notes\n"
    # ... sees nothing else of the data directory ...
    listing = out.split("== data dir", 1)[1].split("== db", 1)[0]
    # (mount points only: its own agents/ and workspaces/ entries, run/ for the launcher)
    assert set(listing.split()) <= {"agents", "context", "run", "workspaces"}, listing
    assert MARK not in out and "SQLite format" not in out
    # ... and what it wrote next to the context stayed in its sandbox.
    assert not (sb / "escaped.md").exists()
    # The sync to the bucket sends its notes, never what its links point at.
    snap = ctx_app.persistence.snapshots  # type: ignore[union-attr]
    assert snap is not None and snap.run_once("test") == "uploaded"
    manifest = json.loads(gcs.bucket("sb").blob("context/manifest.json").download_as_bytes())
    assert set(manifest["files"]) == {"plan.md", "notes.md"}, manifest
    for blob in gcs.bucket("sb").list_blobs(prefix="context/files/"):
        data = blob.download_as_bytes()
        assert MARK.encode() not in data and b"root:" not in data
