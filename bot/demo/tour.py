"""`switchboard demo`: a whole Switchboard in a throw-away data directory, its agents the real
bundled `claude` CLI on the scripted model (bot/demo/model.py), driven by the same commands an
operator types, every step printed as it happens and every request answered by the script."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bot.app import Switchboard
from bot.demo.model import OPTIONS, REVIEWER_ACK, REVIEWER_PROMPT, SCOUT_PROMPT, ScriptedModel
from commands.base import Caller, Role
from supervisor.api import AgentOutput, EscalationEvent, StateChanged, TurnFinished
from supervisor.config import Settings

YOU = Caller("demo:operator", "you", Role.ADMIN, "demo")
TIMEOUT_S = 240.0


@dataclass(slots=True)
class Seen:
    """What the tour has shown so far: it is complete when every one is true."""

    approval: bool = False  # a permission request, approved with /approve
    question: bool = False  # a question, answered with /answer
    bus_message: bool = False  # the scout's brief, taken by the reviewer as a turn
    long_answer: bool = False  # the scout's final report

    def complete(self) -> bool:
        return self.approval and self.question and self.bus_message and self.long_answer

    def missing(self) -> list[str]:
        return [name for name in ("approval", "question", "bus_message", "long_answer")
                if not getattr(self, name)]


def demo_settings(root: Path, model_url: str) -> Settings:
    """Settings of the demo's own, none read from the environment or a file: the operator's
    credentials never reach the demo's agents, and the CLI talks only to the script."""
    for part in ("claude/.claude", "t"):
        (root / part).mkdir(parents=True, exist_ok=True)
    env = {
        "HOME": str(root / "claude"),
        "CLAUDE_CONFIG_DIR": str(root / "claude/.claude"),
        "ANTHROPIC_BASE_URL": model_url,
        "ANTHROPIC_API_KEY": "demo-no-key",  # the script asks for none; the CLI wants one set
        "CLAUDE_CODE_MAX_RETRIES": "0",
        "TMPDIR": str(root / "t"),  # short: the CLI puts a unix socket under it
    }
    # Without a sandbox on this host the demo still runs: its one command writes NOTES.md in
    # the demo's workspace, and it asks first.
    return Settings(home=root / "sb", agent_env=env, allow_unisolated_agents=True,
                    console=False, log_format="text")


class Tour:
    def __init__(self, app: Switchboard, say: Callable[[str], None]) -> None:
        self.app = app
        self.say = say
        self.seen = Seen()
        self.reviewer_ready = asyncio.Event()
        self.done = asyncio.Event()

    async def command(self, line: str) -> str:
        self.say(f"\n> {line}")
        reply = await self.app.run_command(YOU, line)
        text = reply.plain()
        self.say(text)
        return text

    def output(self, event: AgentOutput) -> None:
        text = event.text if event.kind == "text" else event.text.splitlines()[0][:160]
        mark = {"tool_use": "→ ", "tool_result": "← "}.get(event.kind, "")
        for line in f"{mark}{text}".splitlines() or [""]:
            self.say(f"[{event.name}] {line}")

    async def escalation(self, event: EscalationEvent) -> None:
        row = event.escalation
        if event.what != "created":
            return
        if row.kind == "notice":
            self.say(f"ℹ {row.title}")
            return
        self.say(f"\n🔐 {row.id} · {row.title}\n   {row.body}")
        if row.kind == "permission":
            await self.command(f"/approve {row.id}")
            self.seen.approval = True
        elif row.kind == "question":
            self.say("   (the demo picks option 1, " + OPTIONS[0][0] + ")")
            await self.command(f"/answer {row.id} 1")
            self.seen.question = True
        else:
            await self.command(f"/approve {row.id}")

    async def event(self, event: object) -> None:
        if isinstance(event, AgentOutput):
            self.output(event)
        elif isinstance(event, StateChanged):
            self.say(f"[{event.name}] {event.old or 'new'} → {event.new}")
        elif isinstance(event, EscalationEvent):
            await self.escalation(event)
        elif isinstance(event, TurnFinished):
            self.finished(event)
        if self.seen.complete():
            self.done.set()

    def finished(self, event: TurnFinished) -> None:
        self.say(f"[{event.name}] ✓ turn finished" if event.ok
                 else f"[{event.name}] ✗ turn ended: {event.result_text[:300]}")
        if event.name == "reviewer":
            self.reviewer_ready.set()
            if REVIEWER_ACK in event.result_text:
                self.seen.bus_message = True
        elif event.name == "scout" and event.result_text.startswith("## Scout's report"):
            self.seen.long_answer = True

    async def follow(self, queue: asyncio.Queue[object]) -> None:
        while True:
            await self.event(await queue.get())

    async def run(self) -> None:
        await self.command(f"/spawn reviewer {REVIEWER_PROMPT}")
        await self.reviewer_ready.wait()
        await self.command(f"/spawn scout {SCOUT_PROMPT}")
        await self.done.wait()
        await self.command("/messages")
        await self.command("/status")


async def tour(settings: Settings, say: Callable[[str], None],
               timeout_s: float = TIMEOUT_S) -> Seen:
    """Run the scripted flow on a Switchboard of its own; what it saw, complete or not."""
    async with Switchboard(settings) as app:
        assert app.api is not None
        guide = Tour(app, say)
        with app.api.subscription() as queue:
            follower = asyncio.create_task(guide.follow(queue),  # type: ignore[arg-type]
                                           name="demo-follow")
            try:
                await asyncio.wait_for(guide.run(), timeout_s)
            except TimeoutError:
                say(f"\nThe demo did not finish in {timeout_s:g}s; missing: "
                    f"{', '.join(guide.seen.missing())}. The log: {settings.log_path}")
            finally:
                follower.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await follower
        return guide.seen


INTRO = """Switchboard demo: two real claude agents on a scripted local model (no key, no
network). The scout runs a command (it asks first), asks you a question, messages the
reviewer over the bus and writes a long report. Every request is answered for you, with the
commands you would type; they are shown after '>'."""

OUTRO = """
Done: a permission request approved, a question answered, a message between two agents and a
long answer, all on the real claude CLI. To run your own agents, give them credentials
(ANTHROPIC_API_KEY, or the CLI's login: see `switchboard doctor`) and start `make run`."""


def cmd_demo(*, keep: bool = False, say: Callable[[str], None] | None = None) -> int:
    from bot.cli import configure_logging  # the entry point configures logging, once

    out = say or (lambda text: print(text, flush=True))
    # Short: the CLI's socket path under TMPDIR must stay under ~107 bytes.
    root = Path(tempfile.mkdtemp(prefix="sbdemo", dir="/tmp"))
    try:
        with ScriptedModel() as model:
            settings = demo_settings(root, model.url)
            configure_logging(settings, to_stderr=False)
            out(INTRO)
            seen = asyncio.run(tour(settings, out))
        if seen.complete():
            out(OUTRO)
        if keep:
            out(f"\nThe demo's data directory is kept: {root}")
        return 0 if seen.complete() else 1
    except KeyboardInterrupt:
        return 130
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(cmd_demo())
