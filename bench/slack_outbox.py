"""Slack chat outbox: how close to Slack's rate limit the front end runs, and how long an
escalation takes to reach Slack.

Run from the repository root:  .venv/bin/python bench/slack_outbox.py

One Switchboard with the real Slack front end (slack-bolt over Socket Mode, the kit's outbox)
against the fake Slack (tests/fakes/fake_slack), whose channel accepts at most RATE calls a
second (chat.postMessage, chat.update and chat.postEphemeral together, bursts of BURST), and
answers more with 429 + Retry-After. The front end's pace is set to the same limit.

The fleet is AGENTS agents as the front end sees them (rows in the store, views served by the
bench's fleet, no processes: the figure is the outbox's, not the CLI's). Each has its live card
(the top of its thread) before the clock starts. Then all of them finish a turn at once: each
card changes (idle, its answer's last lines) and each posts its final answer as a notice in its
thread. Figures:

* messages and edits per second delivered to the fake until every answer and card is shown,
  and that rate / RATE (1.0: running at the limit), and the 429s it met;
* baseline, measured in the same run: the same number of calls sent straight through
  slack-sdk as fast as it can, its AsyncRateLimitErrorRetryHandler honouring Retry-After (what a
  front end without an outbox does): its rate, ratio and 429s;
* escalation created → its card in Slack, p50 / p99: the 50 final answers of the burst (they
  queue behind each other at RATE), and N_IDLE permission requests one at a time on an idle
  channel.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from slack_sdk.http_retry.builtin_async_handlers import (  # noqa: E402
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient  # noqa: E402

from bench._common import percentile, quiet_logging, result, scratch_dir, smoke  # noqa: E402
from bot.app import Switchboard  # noqa: E402
from bot.fleet import ApiFleet  # noqa: E402
from bot.kit import ActivityKind, AgentActivity, AgentView, Pace  # noqa: E402
from bot.slack.front import SlackFrontend  # noqa: E402
from supervisor.config import Secret  # noqa: E402
from supervisor.guard.escalations import Kind  # noqa: E402
from tests.conftest import make_settings  # noqa: E402
from tests.fakes.fake_slack import APP_TOKEN, BOT_TOKEN, CHANNEL, FakeSlack  # noqa: E402

AGENTS = 5 if smoke() else 50
RATE = 10.0  # calls a second the fake's channel takes
BURST = 4
N_IDLE = 2 if smoke() else 20
TIMEOUT_S = 120.0


class BenchFleet(ApiFleet):
    """The fleet as the kit sees it, with AGENTS agents that exist only as views."""

    def __init__(self, api: object) -> None:
        super().__init__(api)  # type: ignore[arg-type]
        self.states: dict[str, str] = {}
        self.started = time.time() - 60

    async def agent(self, agent_id: str, /) -> AgentView | None:
        state = self.states.get(agent_id)
        if state is None:
            return await super().agent(agent_id)
        return AgentView(agent_id, agent_id, state, True, None, self.started, 1, 0.01)


async def wait(pred, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + TIMEOUT_S
    while not pred():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        await asyncio.sleep(0.005)


def rate_of(fake: FakeSlack, since: float, until: float) -> tuple[int, float]:
    calls = [d for d in fake.delivered if since <= d[0] <= until and d[2] == CHANNEL]
    return len(calls), len(calls) / (until - since)


async def burst(app: Switchboard, front: SlackFrontend, fleet: BenchFleet,
                fake: FakeSlack) -> dict[str, float]:
    assert front.desk is not None and app.pool is not None
    ids = [f"a{i:02d}" for i in range(AGENTS)]
    for agent_id in ids:
        await app.pool.store.agents.create(id=agent_id, name=agent_id, parent_id=None,
                                           model=None, cwd="/", prompt="", state="stopped",
                                           permission_mode="default")
        fleet.states[agent_id] = "working"
        front.desk.cards.note(AgentActivity(agent_id, ActivityKind.STATE, "working"))
    await wait(lambda: len(fake.top()) >= AGENTS, "every card")
    await front.desk.outbox.flush(TIMEOUT_S)
    cards = {m["text"].split()[1]: m for m in fake.top()}
    limited, t0 = fake.limited, time.monotonic()
    created: dict[str, float] = {}
    for agent_id in ids:  # every agent finishes its turn at once
        fleet.states[agent_id] = "idle"
        front.desk.cards.note(AgentActivity(agent_id, ActivityKind.TEXT, f"done: {agent_id}"))
        row = await app.pool.escalations.open(agent_id=agent_id, kind=Kind.NOTICE,
                                              title=f"{agent_id} finished",
                                              body=f"The answer of {agent_id}.")
        created[row.title] = row.created_at

    def shown() -> bool:
        answers = sum(1 for m in fake.messages if m["thread_ts"] and "finished" in m["text"])
        edited = all("idle" in cards[a]["text"] for a in ids)
        return answers >= AGENTS and edited

    await wait(shown, "every answer and card")
    t1 = time.monotonic()
    count, per_s = rate_of(fake, t0, t1)
    arrived = {m["text"].split("\n")[0].lstrip("ℹ️ ").strip(): m["at"] for m in fake.messages
               if m["thread_ts"] and "finished" in m["text"]}
    lat = [arrived[t] - c for t, c in created.items() if t in arrived]
    return {"calls": count, "per_s": per_s, "ratio": per_s / RATE,
            "limited": fake.limited - limited, "seconds": t1 - t0,
            "p50": percentile(lat, 50), "p99": percentile(lat, 99)}


async def idle_escalations(app: Switchboard, fake: FakeSlack) -> tuple[float, float]:
    assert app.pool is not None
    lat = []
    for i in range(N_IDLE):
        row = await app.pool.escalations.open(
            agent_id="a00", kind=Kind.PERMISSION, title=f"a00 wants to use Bash {i}",
            body="Why asked: bench", tool_name="Bash", tool_input={"command": f"touch {i}"},
            options=("allow", "deny"))
        await wait(lambda: any(row.id in m["text"] for m in fake.messages),  # noqa: B023
                   "the card")
        at = next(m["at"] for m in fake.messages if row.id in m["text"])
        lat.append(at - row.created_at)
        await app.pool.escalations.cancel_one(row.id, "bench")
        card = next(m for m in fake.messages if row.id in m["text"])
        await wait(lambda: card["edits"] > 0, "the card settled")  # noqa: B023
        await asyncio.sleep(BURST / RATE)  # an idle channel again: the pace's bucket is full
    return percentile(lat, 50), percentile(lat, 99)


async def baseline(fake: FakeSlack, calls: int) -> dict[str, float]:
    client = AsyncWebClient(token=BOT_TOKEN, base_url=fake.url,
                            retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=1000)])
    top = await client.chat_postMessage(channel=CHANNEL, text="baseline")
    await asyncio.sleep(BURST / RATE)  # start with a full bucket, like the outbox
    limited, t0 = fake.limited, time.monotonic()
    for i in range(calls):
        if i % 2:
            await client.chat_update(channel=CHANNEL, ts=top["ts"], text=f"edit {i}")
        else:
            await client.chat_postMessage(channel=CHANNEL, thread_ts=top["ts"], text=f"m {i}")
    t1 = time.monotonic()
    if client.session is not None:
        await client.session.close()
    _, per_s = rate_of(fake, t0, t1)
    return {"per_s": per_s, "ratio": per_s / RATE, "limited": fake.limited - limited,
            "seconds": t1 - t0}


async def main() -> None:
    quiet_logging()
    with scratch_dir("sbslk") as home, FakeSlack(rate_per_s=RATE, burst=BURST) as fake:
        settings = make_settings(home, fake=True).with_(
            slack_bot_token=Secret(BOT_TOKEN), slack_app_token=Secret(APP_TOKEN),
            slack_api_url=fake.url, slack_channel=CHANNEL, slack_admin_ids=("UALICE",),
            slack_card_interval_s=0.5)
        fake.add_user("UALICE", "alice")
        async with Switchboard(settings) as app:
            assert app.api is not None
            fleet = BenchFleet(app.api)
            app.fleet = fleet
            front = SlackFrontend(app.slack_context(), pace=Pace(RATE, BURST))
            await front.start()
            await front.connect()
            try:
                ours = await burst(app, front, fleet, fake)
                idle = await idle_escalations(app, fake)
            finally:
                await front.stop()
        base = await baseline(fake, int(ours["calls"]))
    print(f"Slack outbox: {AGENTS} agents finishing a turn at once, fake limit {RATE:g} calls/s "
          f"per channel (bursts of {BURST})")
    print(f"  outbox:   {ours['calls']:.0f} calls in {ours['seconds']:.1f} s = "
          f"{ours['per_s']:.2f} calls/s, {ours['ratio']:.2f}x the limit, "
          f"{ours['limited']:.0f} x 429")
    print(f"  baseline: the same calls through slack-sdk's retry handler: {base['per_s']:.2f} "
          f"calls/s, {base['ratio']:.2f}x the limit, {base['limited']:.0f} x 429 "
          f"({base['seconds']:.1f} s)")
    print(f"  outbox / baseline rate: {ours['per_s'] / base['per_s']:.2f}x")
    print(f"  escalation created -> card in Slack, {AGENTS} at once: p50 {ours['p50'] * 1000:.0f}"
          f" ms, p99 {ours['p99'] * 1000:.0f} ms")
    print(f"  escalation created -> card in Slack, one at a time ({N_IDLE}): p50 "
          f"{idle[0] * 1000:.1f} ms, p99 {idle[1] * 1000:.1f} ms")
    result(f"Slack outbox calls/s, {AGENTS} agents at once, vs slack-sdk retry", ours["per_s"],
           "calls/s", baseline=base["per_s"], ratio=ours["per_s"] / base["per_s"],
           note=f"fake limit {RATE:g}/s")
    result("escalation -> Slack card, one at a time (p50)", idle[0] * 1000, "ms")


if __name__ == "__main__":
    asyncio.run(main())
