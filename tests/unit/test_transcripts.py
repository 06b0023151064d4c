"""Bringing a transcript back before a resume (a fake session store: the SDK's in-memory one),
the note the first turn after a restart carries."""

from __future__ import annotations

import json

import pytest
from claude_agent_sdk import InMemorySessionStore, project_key_for_directory

from supervisor.agents.transcripts import MirrorOnly, bring_back, restart_note, transcript_file
from supervisor.errors import AgentFailed
from supervisor.process.sandbox import Isolation

SID = "3f1c2a9e-0000-4000-8000-000000000001"
NO_SANDBOX = Isolation(False, "none")


async def test_a_lost_local_transcript_is_written_back_from_the_store(tmp_path):
    store = InMemorySessionStore()
    cwd = str(tmp_path / "ws")
    entries = [{"type": "user", "uuid": "a", "n": 1}, {"type": "assistant", "uuid": "b"}]
    await store.append({"project_key": project_key_for_directory(cwd), "session_id": SID},
                       entries)
    env = {"CLAUDE_CONFIG_DIR": str(tmp_path / "cfg")}
    assert await bring_back(store, env, cwd, SID, NO_SANDBOX) is None
    path = transcript_file(tmp_path / "cfg", cwd, SID)
    assert [json.loads(x) for x in path.read_text().splitlines()] == entries
    assert path.stat().st_mode & 0o077 == 0


async def test_the_local_copy_wins_and_a_missing_one_says_why(tmp_path):
    store = InMemorySessionStore()
    cwd = str(tmp_path / "ws")
    env = {"CLAUDE_CONFIG_DIR": str(tmp_path / "cfg")}
    why = await bring_back(store, env, cwd, SID, NO_SANDBOX)
    assert why is not None and SID in why and "neither on this disk nor in the bucket" in why
    path = transcript_file(tmp_path / "cfg", cwd, SID)
    path.parent.mkdir(parents=True)
    path.write_text('{"type":"user","uuid":"local"}\n')
    assert await bring_back(store, env, cwd, SID, NO_SANDBOX) is None
    assert "local" in path.read_text()


async def test_a_planted_symlink_in_the_config_dir_is_refused(tmp_path):
    store = InMemorySessionStore()
    cwd = str(tmp_path / "ws")
    await store.append({"project_key": project_key_for_directory(cwd), "session_id": SID},
                       [{"type": "user", "uuid": "a"}])
    (tmp_path / "cfg").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "cfg" / "projects").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(AgentFailed, match="symbolic link"):
        await bring_back(store, {"CLAUDE_CONFIG_DIR": str(tmp_path / "cfg")}, cwd, SID,
                         NO_SANDBOX)
    assert list((tmp_path / "elsewhere").iterdir()) == []


async def test_the_sdk_is_given_a_store_that_only_appends():
    inner = InMemorySessionStore()
    key = {"project_key": "p", "session_id": SID}
    mirror = MirrorOnly(inner)
    await mirror.append(key, [{"type": "user", "uuid": "a"}])  # type: ignore[arg-type]
    assert await inner.load(key) == [{"type": "user", "uuid": "a"}]  # type: ignore[arg-type]
    assert await mirror.load(key) is None  # type: ignore[arg-type]


def test_restart_note_says_when_and_whether_the_turn_was_cut():
    cut = restart_note(0.0, True)
    assert "1970-01-01 00:00:00 UTC" in cut and "interrupted" in cut and "git status" in cut
    done = restart_note(0.0, False)
    assert "had finished" in done and "interrupted" not in done
