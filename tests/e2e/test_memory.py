"""Managed project memory end to end (issue 28): the operator's curated region and what earlier
agents' turns left reach the next agent's system prompt (the real CLI, from a file; never on its
command line), each finished turn adds its line, the curated region stays the operator's byte
for byte, and `/memory show|edit|search` work from Telegram."""

from __future__ import annotations

import pytest

from tests.conftest import make_settings, processes_with_tag, wait_for
from tests.e2e.test_telegram import ADMIN, start, stop, tg_settings
from tests.fakes.fake_telegram import FakeTelegram
from tests.integration.test_standing_real import system_text

pytestmark = [pytest.mark.timeout(180), pytest.mark.real_cli]

VIEWER = 400
# (A chat trims what ends a message, as Telegram does; inside, every byte is kept.)
CURATED = ("Build: `make test` first.\n\nSecrets are in Vault — never in the repo.\n"
           "  indented  (end)")


@pytest.fixture
def fake_tg():
    with FakeTelegram() as fake:
        for uid, name in ((ADMIN, "alice"), (VIEWER, "vera")):
            fake.add_chat(uid, first_name=name, username=name)
        yield fake


@pytest.fixture
async def app_tg(short_home, mock_api, fake_tg):
    (short_home / "t").mkdir(exist_ok=True)
    settings = tg_settings(make_settings(short_home, mock_api), fake_tg).with_(
        memory_managed_bytes=300, memory_slice_bytes=600)
    app, front = await start(settings, fake_tg)
    await app.store.operators.upsert("telegram", str(VIEWER), "", "viewer", "test")
    yield app, fake_tg
    await stop(app, front)


def hits(fake, chat, needle):
    return [m for m in fake.sent(chat) if needle in (m.get("text") or "")]


async def reply(fake, chat, needle):
    found = await fake.wait_for(lambda: hits(fake, chat, needle), 30, what=repr(needle))
    return found[-1]["text"]


async def test_memory_reaches_the_next_agent_and_is_kept_trimmed_and_searchable(
        app_tg, tmp_path, mock_api):
    app, fake = app_tg
    work = tmp_path / "proj"
    work.mkdir()
    fake.user_sends(ADMIN, f"/memory edit {work} {CURATED}")
    await reply(fake, ADMIN, "The curated region of dir:")
    fake.user_sends(VIEWER, f"/memory edit {work} mine now")
    await reply(fake, VIEWER, "needs the operator role")

    # Six turns of one agent; the budget (300 bytes) keeps the newest few, the rest archived.
    fake.user_sends(ADMIN, f"/spawn first --cwd {work} TEXT: fixed the flaky login test")
    await wait_for(lambda: any(a.name == "first" for a in app.api.agents()), 30, "spawned")
    r = await app.pool.fleet.get("first")
    for i in range(5):
        await wait_for(lambda: r.state == "idle", 60, "a turn")
        before = len(await app.store.turns.recent(r.id, 50))
        await app.api.ask(r.id, f"TEXT: step {i} done with the exporter")

        async def more(before=before):
            rows = await app.store.turns.recent(r.id, 50)
            return len(rows) > before and rows[0].status != "running"

        await wait_for(more, 60, f"turn {i}")
    await wait_for(lambda: r.state == "idle", 60, "the last turn")
    shown = app.api.memory.memory.read(f"dir:{work.resolve()}")
    assert shown.curated == CURATED.encode()  # the operator's, byte for byte
    assert shown.managed[-1].endswith("first: step 4 done with the exporter")
    assert sum(len(m.encode()) + 1 for m in shown.managed) <= 300

    # The first line was trimmed into the archive: search finds it.
    fake.user_sends(VIEWER, "/memory search first flaky login")
    found = await reply(fake, VIEWER, "memory and archive")
    assert "first: fixed the flaky login test" in found

    # A second agent on the same directory starts knowing both.
    before = len(mock_api.requests)
    fake.user_sends(ADMIN, f"/spawn second --cwd {work} TEXT: hello")
    second = None

    async def started():
        nonlocal second
        if not any(a.name == "second" for a in app.api.agents()):
            return False
        second = await app.pool.fleet.get("second")
        return len(mock_api.requests) > before

    await wait_for(started, 60, "the second agent's first request")
    system = system_text(mock_api.requests[before])
    assert "Project memory (dir:" in system
    assert "Secrets are in Vault — never in the repo." in system
    assert "first: step 4 done with the exporter" in system
    assert "Shared context:" in system  # the notes it had before are still there
    # Given through a file, not on the command line.
    for proc in processes_with_tag(second.tag):
        try:
            argv = " ".join(proc.cmdline())
        except Exception:  # noqa: BLE001 - gone since the scan
            continue
        assert "Vault" not in argv

    fake.user_sends(ADMIN, "/memory show second")
    text = await reply(fake, ADMIN, "Memory of dir:")
    assert "Secrets are in Vault" in text and "archived" in text
