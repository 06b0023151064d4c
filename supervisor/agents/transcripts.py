"""Agents' Claude sessions across restarts and replaced containers.

With a bucket configured, the SDK mirrors every transcript line an agent's CLI writes to the
bucket (store/gcs_sessions.py, one object per batch, flushed as each frame arrives). Before an
agent's CLI starts with `resume=<session id>`, `bring_back` makes sure the transcript is where
the CLI reads it: the agent's own config directory, visible inside its sandbox. It is written
there from the bucket when the local disk lost it (a new container), so the SDK itself is given
a store that only appends (`MirrorOnly`): its own resume path would write the transcript under
the host's /tmp, which a sandboxed agent cannot see. A transcript that neither the disk nor the
bucket holds is a deterministic failure: the agent goes to `resume_failed`, the operator is
asked once whether to start it fresh with a summary of its work, and nothing retries it.

The CLI itself repairs a transcript that ends in a tool call without its result (a SIGKILL in
the middle of a Bash command): on resume it adds a tool_result saying the call was interrupted,
so the API accepts the next request (checked by tests/integration/test_transcripts_real.py
against a mock API that refuses an unpaired tool_use, as the real one does).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from claude_agent_sdk import SessionKey, SessionStoreEntry, project_key_for_directory

from store import Store
from store.escalations import EscalationRow
from supervisor.errors import AgentFailed, SupervisorError
from supervisor.guard.escalations import Answer, Escalations, Kind, Timeouts
from supervisor.process.sandbox import _place_file

if TYPE_CHECKING:
    from supervisor.agents.fleet import FleetReader
    from supervisor.process.sandbox import Isolation

logger = logging.getLogger(__name__)

FRESH_TOOL = "switchboard:fresh-start"
FRESH = "Start fresh with a summary"
LEAVE = "Leave it"
NEVER = Timeouts(reminder_s=float("inf"), timeout_s=float("inf"))
EXCERPT_CHARS = 400
SUMMARY_TURNS = 10


class MirrorOnly:
    """The session store the SDK is given: appends go to the bucket; `load` says "nothing
    here", so the SDK leaves the resume to the CLI and its local file, which `bring_back` put
    in the agent's own config directory first."""

    def __init__(self, store: Any) -> None:
        self.store = store

    async def append(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        await self.store.append(key, entries)

    async def load(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        return None


def config_dir_of(env: Mapping[str, str]) -> Path:
    """The CLAUDE_CONFIG_DIR the agent's CLI uses (its private one when sandboxed)."""
    return Path(env.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude")


def transcript_file(config_dir: Path, cwd: str, session_id: str) -> Path:
    return config_dir / "projects" / project_key_for_directory(cwd) / f"{session_id}.jsonl"


async def bring_back(store: Any, env: Mapping[str, str], cwd: str, session_id: str,
                     iso: Isolation | None) -> str | None:
    """Make the session's transcript readable for `--resume`. None when it is (on disk
    already, or written there from the bucket); otherwise why it cannot be resumed. A bucket
    that cannot be read is a passing failure: AgentFailed, retried like any start failure."""
    path = transcript_file(config_dir_of(env), cwd, session_id)
    if path.is_file():
        return None  # the local copy is at least as new as the bucket's
    key = {"project_key": project_key_for_directory(cwd), "session_id": session_id}
    try:
        entries = await store.load(key)
    except Exception as exc:  # noqa: BLE001 - any client error: the bucket could not be read
        raise AgentFailed(None, "", f"the session transcript could not be read from the "
                                    f"bucket ({exc})") from exc
    if not entries:
        return (f"its transcript (session {session_id}) is neither on this disk nor in the "
                "bucket")
    data = "".join(_line(e) for e in entries).encode()
    config_dir_of(env).mkdir(parents=True, exist_ok=True)
    _make_dirs(path.parent, config_dir_of(env), iso)
    _place_file(data, path, _owner(iso))
    logger.info("transcript restored from the bucket session=%s entries=%d", session_id,
                len(entries))
    return None


def _line(entry: Any) -> str:
    return json.dumps(entry, separators=(",", ":")) + "\n"


def _owner(iso: Isolation | None) -> Any:
    from supervisor.process.sandbox import Isolation

    return iso if iso is not None and iso.ok else Isolation(False, "none")


def _make_dirs(target: Path, root: Path, iso: Isolation | None) -> None:
    """Create `target` under `root` one component at a time, refusing a symbolic link (the
    agent owns its config directory and could plant one to make us write elsewhere)."""
    rel = target.relative_to(root)
    cur = root
    for part in rel.parts:
        cur = cur / part
        if cur.is_symlink():
            raise AgentFailed(None, "", f"{cur} is a symbolic link; refusing to write the "
                                        "transcript through it")
        if not cur.is_dir():
            cur.mkdir(mode=0o700)
            if iso is not None and iso.ok and iso.uid is not None and iso.gid is not None:
                os.chown(cur, iso.uid, iso.gid, follow_symlinks=False)


def restart_note(at: float, interrupted: bool) -> str:
    """What the first turn after a restart tells the agent."""
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at))
    text = (f"[Switchboard] The supervisor was restarted at {when}; your session was resumed "
            "in a new process.")
    if interrupted:
        text += (" Your last turn was interrupted by the restart before it finished, and it is "
                 "not run again. Commands and edits from it may or may not have taken effect: "
                 "re-check the working directory and the branch (git status, git log, the files "
                 "you were changing) before you go on, and do not redo work that is already "
                 "done.")
    else:
        text += " Your last turn had finished before the restart."
    return text + " The message after this one is your next task."


def _excerpt(text: str | None) -> str:
    text = (text or "").strip().replace("\n", " ")
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS] + "…"


async def fresh_summary(store: Store, agent_id: str, reason: str) -> str:
    """The first message of a fresh session that replaces a lost one: what Switchboard's own
    records hold of the agent's work (its task, its recent turns and their results)."""
    row = await store.agents.get(agent_id)
    turns = list(reversed(await store.turns.recent(agent_id, SUMMARY_TURNS)))
    lines = [f"[Switchboard] Your earlier Claude session could not be resumed ({reason}), so "
             "this is a new session. What Switchboard's records hold of your work so far:",
             f"Your original task: {_excerpt(row.prompt if row else '')}"]
    for t in turns:
        lines.append(f"- turn {t.id} ({t.status}): asked: {_excerpt(t.prompt)}; result: "
                     f"{_excerpt(t.result_text or t.error)}")
    lines.append("Look at the working directory and the branch to see what was already done "
                 "before you go on, and do not redo finished work. Then continue the task.")
    return "\n".join(lines)


async def report_resume_failed(escalations: Escalations, agent_id: str, name: str,
                               reason: str, prompt: str = "") -> EscalationRow:
    """One question to the operator, kept across restarts, with no timeout."""
    return await escalations.open(
        agent_id=agent_id, kind=Kind.QUESTION, title=f"{name}: its session could not be resumed",
        body=f"{reason}. Nothing retries it by itself and it takes no messages until you "
             f"choose. Start it fresh with a summary of its work (from Switchboard's records; "
             f"the conversation itself is lost), or leave it (/kill {name} ends it)?",
        tool_name=FRESH_TOOL, tool_input={"agent_id": agent_id, "reason": reason,
                                          "prompt": prompt},
        options=(FRESH, LEAVE), timeouts=NEVER, survives_restart=True)


def answer_hook(fleet: FleetReader, store: Store, escalations: Escalations) -> Any:
    """FRESH: the agent starts a new session whose first message is the summary."""

    async def act(row: EscalationRow, answer: Answer) -> None:
        if answer.text != FRESH or row.agent_id is None:
            return
        try:
            runner = await fleet.get(row.agent_id)
            asked = row.tool_input or {}
            summary = await fresh_summary(store, runner.id, str(asked.get("reason", "")))
            await runner.start_fresh(summary, by=answer.by, prompt=str(asked.get("prompt", "")))
        except SupervisorError as exc:
            await escalations.notify(row.agent_id, f"Not started fresh: {row.title}",
                                          str(exc), ref_id=row.id)
            return
        await escalations.notify(runner.id, f"{runner.name} starts a fresh session",
                                      f"Asked by {answer.by}; its first message is a summary of "
                                      "its earlier work.", ref_id=row.id)

    return act


__all__ = ["FRESH", "FRESH_TOOL", "LEAVE", "MirrorOnly", "answer_hook", "bring_back",
           "fresh_summary", "report_resume_failed", "restart_note", "transcript_file"]
