"""`/policy test` (issue 27): a candidate policy, a file or one more rule, replayed on the tool
calls recorded in the last days; the counts it would allow, ask and deny against the running
policy's, and every call whose decision changes. A real Switchboard and its SQLite store, the
history recorded as the ingest records an agent's assistant messages, the real front desk."""

from __future__ import annotations

import time

import pytest
from claude_agent_sdk.types import AssistantMessage, ToolUseBlock

from supervisor.agents.records import record_of
from tests.integration.test_guards_once import ALICE, desk_with  # noqa: F401
from tests.integration.test_kit import add_staff, dm, says

pytestmark = pytest.mark.timeout(60)

HISTORY = [  # (agent, tool, input) as the models asked for them
    ("dev", "Bash", {"command": "npm test"}),
    ("dev", "Bash", {"command": "npm test"}),
    ("dev", "Bash", {"command": "npm run build"}),
    ("dev", "Bash", {"command": "gh pr merge 7"}),  # denied by the built-in blocklist
    ("dev", "Read", {"file_path": "/srv/app/README.md"}),  # allowed by [tools]
    ("ops", "Bash", {"command": "sudo systemctl restart app"}),  # an ask rule
    ("ops", "Write", {"file_path": "/srv/app/notes.md", "content": "x"}),
]


async def record(app, *, old: bool = False) -> None:
    agents = {}
    for i, (name, tool, inp) in enumerate(HISTORY):
        if name not in agents:
            agents[name] = f"{name}-id"
            if await app.store.agents.get(f"{name}-id") is None:
                await app.store.agents.create(id=f"{name}-id", name=name, parent_id=None,
                                              model=None, cwd="/srv/app", prompt="p",
                                              permission_mode="default", state="idle")
        data = record_of(AssistantMessage(content=[ToolUseBlock(f"t{i}", tool, inp)],
                                          model="m")).data
        await app.store.events.append(agents[name], None, "assistant", f"call {i}", data)
    if old:  # three days ago (within the events' retention)
        await app.store.db.execute("UPDATE agent_events SET at = ?", (time.time() - 3 * 86_400,))


async def test_one_more_rule_is_replayed_with_the_counts_and_the_changed_calls(desk_with):  # noqa: F811
    async with desk_with() as (app, desk, chat):
        await record(app)
        await says(desk, ALICE, '/policy test {tool = "Bash", command = "npm", action = "allow"}')
        text = chat.texts(dm(ALICE))[-1]
        assert ("Replayed 7 tool call(s) of 2 agent(s) from the last 7 day(s) against the "
                'running policy plus {tool = "Bash", command = "npm", action = "allow"}: it '
                "would allow 4 (now 1), ask 2 (now 5), deny 1 (same as now).") in text, text
        assert "3 call(s) change:" in text
        assert text.count("dev: Bash: npm test: ask -> allow") == 2
        assert "dev: Bash: npm run build: ask -> allow" in text
        assert "gh pr merge" not in text and "ops:" not in text


async def test_a_policy_file_is_replayed_and_a_long_list_goes_whole_in_a_file(desk_with,  # noqa: F811
                                                                             tmp_path):
    async with desk_with() as (app, desk, chat):
        for _ in range(4):
            await record(app)
        strict = tmp_path / "strict.toml"
        strict.write_text('default = "deny"\n[tools]\nRead = "allow"\n')
        await says(desk, ALICE, f"/policy test {strict}")
        shown = chat.sent(dm(ALICE))
        text = next(m.text for m in reversed(shown) if "Replayed" in m.text)
        assert (f"Replayed 28 tool call(s) of 2 agent(s) from the last 7 day(s) against {strict}: "
                "it would allow 4 (same as now), ask 0 (now 20), deny 24 (now 4).") in text, text
        assert "20 call(s) change:" in text and "and 5 more: all of them are in " \
            "policy-test.txt" in text
        files = [m.document for m in shown if m.document is not None]
        assert files and files[-1].filename.endswith("policy-test.txt")
        listing = files[-1].content.decode().splitlines()
        assert len(listing) == 20 and listing.count("ops: Bash: sudo systemctl restart app: "
                                                    "ask -> deny") == 4
        await says(desk, ALICE, '/policy test {tool = "Write", action = "deny"}')
        assert "deny 8 (now 4)" in chat.texts(dm(ALICE))[-1]


async def test_the_replay_window_bad_candidates_and_who_may_test(desk_with, tmp_path):  # noqa: F811
    async with desk_with() as (app, desk, chat):
        await add_staff(app)
        await record(app, old=True)
        await says(desk, ALICE, '/policy test --days 2 {tool = "Bash", action = "allow"}')
        assert "Replayed 0 tool call(s)" in chat.texts(dm(ALICE))[-1]
        assert "try more --days" in chat.texts(dm(ALICE))[-1]
        await says(desk, ALICE, '/policy test {tool = "Bash", action = "allow"}')
        assert "from the last 7 day(s)" in chat.texts(dm(ALICE))[-1]
        assert "Replayed 7 tool call(s)" in chat.texts(dm(ALICE))[-1]
        # Bad candidates: what was wrong, and nothing else happens.
        await says(desk, ALICE, '/policy test {tool = "Bash", action = "maybe"}')
        assert "rule.action: must be one of allow, ask, deny (got 'maybe')" in \
            chat.texts(dm(ALICE))[-1]
        await says(desk, ALICE, "/policy test {tool = Bash}")
        assert "not a TOML inline table" in chat.texts(dm(ALICE))[-1]
        await says(desk, ALICE, f"/policy test {tmp_path / 'missing.toml'}")
        assert "cannot read" in chat.texts(dm(ALICE))[-1]
        await says(desk, ALICE, "/policy test --days soon x")
        assert "--days needs a number" in chat.texts(dm(ALICE))[-1]
        bob = type(ALICE)("200", "bob")
        await says(desk, bob, '/policy test {tool = "Bash", action = "allow"}')
        assert "only an admin can test a policy" in chat.texts(dm(bob))[-1]
