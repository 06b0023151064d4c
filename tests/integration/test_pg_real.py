"""One fleet on three workers with the REAL claude CLI (issue 30, acceptance item 2): three
`switchboard run` processes on one PostgreSQL database, their agents the bundled `claude` on the
mock Anthropic API. Everything is typed on the coordinator's console. An agent pinned on another
worker asks to run a command the default policy escalates: the request is shown on the
coordinator, `/approve` there reaches the call waiting on the agent's worker, and the command
really runs (its file is in the agent's workspace, its output went back to the model). That agent
then sends a bus message (its `send_message` tool) to an agent pinned on the third worker, whose
next turn is that message. test_pg_fleet.py covers the same ground, and more, with the fake CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakes.mock_anthropic import MockAnthropic
from tests.integration.test_approvals_real import tool_results
from tests.integration.test_pg_fleet import owners, q, settle, turns_of
from tests.pg import database, pg_cluster
from tests.subproc import Supervisor, write_config

__all__ = ["database", "pg_cluster"]
pytestmark = [pytest.mark.real_cli, pytest.mark.timeout(360)]
SEND = "mcp__switchboard__send_message"


def test_real_cli_approval_and_bus_across_workers(
        short_home: Path, database: str, mock_api: MockAnthropic) -> None:
    homes = [short_home / f"w{i}" for i in (1, 2, 3)]
    sups: list[Supervisor] = []
    try:
        for home in homes:  # one by one: the first coordinates
            write_config(home, mock_api, database_url=database, allow_unisolated_agents=True)
            sups.append(Supervisor(home))
            sups[-1].expect("Switchboard console", 120)
        settle(lambda: len(q(database, "SELECT 1 FROM workers")) == 3, 60, "three workers")
        [(coordinator,)] = settle(lambda: q(database, "SELECT pid FROM workers WHERE"
                                                      " coordinator = 1"), 30, "a coordinator")
        sups.sort(key=lambda s: s.proc.pid != coordinator)  # the coordinator first
        run_real(database, sups, mock_api)
    except BaseException:
        dump(database, homes)
        raise
    finally:
        for sup in sups:
            sup.stop()


def dump(url: str, homes: list[Path]) -> None:
    """What reading a failure needs (pytest shows it with the failure): each worker's last log
    lines, the escalations and the turns."""
    for home in homes:
        log = home / "switchboard.log"
        if log.exists():
            print(f"==== {home}", *log.read_text().splitlines()[-40:], sep="\n")
    print("==== escalations", q(url, "SELECT id, kind, status, title FROM escalations"))
    print("==== turns", q(url, "SELECT agent_id, status, prompt FROM turns"))


def worker_id(url: str, sup: Supervisor) -> str:
    [(wid,)] = q(url, "SELECT id FROM workers WHERE pid = %s", (sup.proc.pid,))
    return str(wid)


def run_real(url: str, sups: list[Supervisor], mock: MockAnthropic) -> None:
    w1, w2, w3 = sups
    # The recipient of the bus message, pinned on the third worker, idle after its first turn.
    w1.send(f"/spawn ear --host {worker_id(url, w3)} TEXT: listening")
    w1.expect("Spawned ear", 60)
    # (a) An approval answered on the coordinator reaches an agent on another worker.
    w1.send(f"/spawn asker --host {worker_id(url, w2)} BASH: touch approved.txt")
    w1.expect("Spawned asker", 60)
    w1.expect("asker wants to use Bash", 120)  # shown on the coordinator's console
    [(esc_id, detail)] = q(url, "SELECT id, detail FROM escalations WHERE kind = 'permission'"
                                " AND status = 'open'")
    assert detail == "touch approved.txt"
    placed = owners(url)
    assert placed == {"ear": w3.proc.pid, "asker": w2.proc.pid}, placed
    [(cwd,)] = q(url, "SELECT cwd FROM agents WHERE name = 'asker'")
    assert not (Path(cwd) / "approved.txt").exists()  # not before the answer
    w1.send(f"/approve {esc_id}")
    settle(lambda: ("ok", "BASH: touch approved.txt") in turns_of(url, "asker"), 120,
           "the asker's turn ended")
    assert (Path(cwd) / "approved.txt").exists()  # the command ran, on the agent's worker
    [answered] = q(url, "SELECT status, answered_via FROM escalations WHERE id = %s",
                   (esc_id,))
    assert answered == ("answered", "console"), answered
    assert not any("denied" in r.lower() or "blocked" in r.lower()
                   for r in tool_results(mock)), tool_results(mock)
    settle(lambda: q(url, "SELECT state FROM agents WHERE name = 'ear'") == [("idle",)], 120,
           "ear idle after its first turn")

    # (b) A bus message from the real CLI on the second worker reaches the one on the third.
    send = json.dumps({"to": "ear", "type": "info", "body": "TEXT: heard across workers"})
    w1.send(f"/send asker TOOL {SEND} {send}")
    heard = settle(lambda: [p for s, p in turns_of(url, "ear")
                            if s == "ok" and "heard across workers" in p], 120,
                   "ear's turn with the message")
    assert 'from="asker"' in heard[0], heard
    # The message's turn ran on the CLI the third worker runs: its request reached the model.
    assert any("heard across workers" in json.dumps(body) and 'from=\\"asker\\"'
               in json.dumps(body) for body in mock.requests)
    sent = settle(lambda: [p for s, p in turns_of(url, "asker") if s == "ok" and SEND in p], 60,
                  "the sender's turn ended")
    assert len(sent) == 1 and [s for s, _ in turns_of(url, "asker")] == ["ok", "ok"]
    assert owners(url) == placed  # nobody moved
