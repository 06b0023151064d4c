"""The web console's event stream (bot/web/stream.py) without a server: frames, topics rendered
once per role and sent only to the pages that show them and only when they changed, resuming
from an id or taking a snapshot, and a page too far behind cut off so it comes back fresh."""

from __future__ import annotations

import asyncio

from bot.web.stream import (
    CLIENT_QUEUE,
    FLEET,
    HEADER,
    NEEDS,
    Rows,
    Stream,
    agent_topic,
    frame,
    topics_of,
)
from commands.base import Role
from supervisor.api import AgentOutput, AgentState, StateChanged, TurnFinished


class Drawn:
    """A renderer that counts its calls and draws what the test says each topic shows."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Role]] = []
        self.shows: dict[str, str] = {}

    async def __call__(self, topic: str, role: Role) -> str:
        self.calls.append((topic, role))
        return f"{self.shows.get(topic, topic)} as {role.name}"


def drain(queue: asyncio.Queue[bytes]) -> list[bytes]:
    """The frames queued, without their `: since` comment line (its time is the clock's)."""
    out = []
    while not queue.empty():
        data = queue.get_nowait()
        out.append(data.split(b"\n", 1)[1] if data.startswith(b": since ") else data)
    return out


def test_a_frame_carries_every_line_of_its_html_as_data():
    assert frame("e.3", "fleet", "<p>a</p>\n<p>b</p>") == (
        b"id: e.3\nevent: fleet\ndata: <p>a</p>\ndata: <p>b</p>\n\n")
    assert frame("e.4", "needs", "") == b"id: e.4\nevent: needs\ndata: \n\n"
    assert frame("e.5", "needs", "x", since=12.5) == (
        b": since 12.500000\nid: e.5\nevent: needs\ndata: x\n\n")


async def test_a_frame_says_when_its_oldest_change_happened():
    now = [100.0]
    stream = Stream(Drawn(), clock=lambda: now[0])
    with stream.connect({FLEET}, Role.VIEWER) as page:
        stream.mark([FLEET])
        now[0] = 100.25
        stream.mark([FLEET])  # a later change to the same region: the oldest one counts
        await stream.flush()
        assert page.queue.get_nowait().startswith(b": since 100.000000\nid: ")
        now[0] = 101.0
        stream.mark([FLEET])  # redrawn the same: no frame, and the next starts afresh
        await stream.flush()
        assert page.queue.empty()


def test_each_event_marks_the_regions_it_changes():
    assert topics_of(AgentOutput("a1", "x", "text", "hi")) == (FLEET, agent_topic("a1"))
    assert topics_of(StateChanged("a1", "x", None, AgentState.IDLE, "")) == (
        HEADER, FLEET, agent_topic("a1"))
    assert topics_of(TurnFinished("a1", "x", 1, True, "", 0.1)) == (
        HEADER, FLEET, agent_topic("a1"))


async def test_a_topic_is_rendered_once_per_role_and_sent_only_where_shown():
    drawn = Drawn()
    stream = Stream(drawn)
    with stream.connect({HEADER, FLEET}, Role.OPERATOR) as op1, \
            stream.connect({HEADER, FLEET}, Role.OPERATOR) as op2, \
            stream.connect({HEADER, FLEET}, Role.VIEWER) as viewer, \
            stream.connect({HEADER, NEEDS}, Role.OPERATOR) as needs:
        stream.mark([FLEET])
        await stream.flush()
        assert sorted(drawn.calls) == [(FLEET, Role.VIEWER), (FLEET, Role.OPERATOR)]
        sent = [drain(c.queue) for c in (op1, op2, viewer, needs)]
        assert sent[0] == sent[1] == [frame(f"{stream.epoch}.1", FLEET, "fleet as OPERATOR")]
        assert sent[2] == [frame(f"{stream.epoch}.1", FLEET, "fleet as VIEWER")]
        assert sent[3] == []  # that page does not show the fleet

        # Drawn again the same: nothing is sent, and the sequence does not move.
        stream.mark([FLEET])
        await stream.flush()
        assert [drain(c.queue) for c in (op1, viewer)] == [[], []]
        assert stream.seq == 1
        drawn.shows[FLEET] = "changed"
        stream.mark([FLEET, NEEDS])
        await stream.flush()
        assert drain(op1.queue) == [frame(f"{stream.epoch}.2", FLEET, "changed as OPERATOR")]
        assert drain(needs.queue) == [frame(f"{stream.epoch}.3", NEEDS, "needs as OPERATOR")]


async def test_a_page_that_comes_back_resumes_or_takes_a_fresh_snapshot():
    stream = Stream(Drawn())
    with stream.connect({HEADER, FLEET}, Role.VIEWER) as page:
        everything = frozenset({HEADER, FLEET})
        assert stream.stale(page, None) == everything  # no id: htmx's own reconnect
        assert stream.stale(page, "another-epoch.0") == everything  # a restarted server
        assert stream.stale(page, "garbage") == everything
        stream.mark([FLEET])
        await stream.flush()
        seen = stream.last_id
        assert stream.stale(page, seen) == frozenset()  # it has every frame
        stream.mark([HEADER])
        await stream.flush()
        assert stream.stale(page, seen) == {HEADER}  # only what changed since
        assert stream.stale(page, f"{stream.epoch}.99") == everything  # from the future
        assert await stream.opening(page, seen) == frame(stream.last_id, HEADER,
                                                         "header as VIEWER")
        assert await stream.opening(page, stream.last_id) == b""  # nothing to catch up


async def test_a_page_too_far_behind_is_cut_off_to_come_back_for_a_snapshot():
    drawn = Drawn()
    stream = Stream(drawn)
    with stream.connect({FLEET}, Role.VIEWER) as slow:
        for n in range(CLIENT_QUEUE + 5):
            drawn.shows[FLEET] = f"v{n}"
            stream.mark([FLEET])
            await stream.flush()
        assert slow.cut_off
        assert slow.queue.qsize() == CLIENT_QUEUE


async def test_answered_requests_are_remembered_for_a_while_newest_first():
    now = [1000.0]
    stream = Stream(Drawn(), clock=lambda: now[0])
    from supervisor.api import EscalationEvent

    class Row:
        def __init__(self, esc_id: str) -> None:
            self.id, self.agent_id = esc_id, "a1"

    for esc_id in ("e1", "e2"):
        stream.note(EscalationEvent("answered", Row(esc_id)))  # type: ignore[arg-type]
        now[0] += 10
    stream.note(EscalationEvent("created", Row("e3")))  # type: ignore[arg-type]
    assert stream.recently_answered() == ("e2", "e1")
    now[0] += 3600
    assert stream.recently_answered() == ()


class RowsDrawn:
    """A region of rows the test changes."""

    def __init__(self) -> None:
        self.rows = {"a": "1", "b": "1"}

    async def __call__(self, topic: str, role: Role) -> Rows:
        return Rows("<h1>x</h1><div>", tuple(
            (k, f'<div id="row-{k}">{k}{v}</div>') for k, v in self.rows.items()), "</div>")


async def test_while_the_same_rows_are_shown_only_the_changed_ones_are_sent():
    drawn = RowsDrawn()
    stream = Stream(drawn)
    with stream.connect({FLEET}, Role.VIEWER) as page:
        snap = await stream.opening(page, None)
        assert b'data: <h1>x</h1><div><div id="row-a">a1</div><div id="row-b">b1</div></div>' \
            in snap
        stream.mark([FLEET])
        await stream.flush()  # drawn the same as the page has it: nothing to send
        assert drain(page.queue) == []
        drawn.rows["b"] = "2"
        stream.mark([FLEET])
        await stream.flush()
        assert drain(page.queue) == [frame(stream.last_id, "fleet-rows",
                                           '<div hx-swap-oob="true" id="row-b">b2</div>')]
        drawn.rows["c"] = "1"  # another row: the whole region again
        stream.mark([FLEET])
        await stream.flush()
        [whole] = drain(page.queue)
        assert b"event: fleet\n" in whole and b'id="row-c"' in whole
        stream.mark([FLEET])
        await stream.flush()
        assert drain(page.queue) == []


async def test_a_page_opening_beside_others_starts_from_what_they_have_and_catches_up():
    """A page that opens while others of its role show the region gets the region as they
    have it (so the rows that change next apply to it as to them), and a redraw follows;
    frames queued for it before its opening are dropped (its opening has them)."""
    drawn = RowsDrawn()
    stream = Stream(drawn)
    with stream.connect({FLEET}, Role.VIEWER) as first:
        await stream.opening(first, None)
        drawn.rows["a"] = "2"  # changed, and not flushed yet
        with stream.connect({FLEET}, Role.VIEWER) as second:
            second.queue.put_nowait(b"stale frame")
            opening = await stream.opening(second, None)
            assert b'id="row-a">a1<' in opening  # as the first page has it
            assert second.queue.empty()
            await stream.flush()  # the opening marked the region: both catch up at once
            delta = frame(stream.last_id, "fleet-rows",
                          '<div hx-swap-oob="true" id="row-a">a2</div>')
            assert drain(first.queue) == drain(second.queue) == [delta]


async def test_a_region_that_fails_to_render_does_not_stop_the_others(caplog):
    class Broken(Drawn):
        async def __call__(self, topic: str, role: Role) -> str:
            if topic == NEEDS:
                raise KeyError("a bug in one template")
            return await super().__call__(topic, role)

    stream = Stream(Broken())
    with stream.connect({FLEET, NEEDS}, Role.VIEWER) as page:
        stream.mark([FLEET, NEEDS])
        await stream.flush()
        assert drain(page.queue) == [frame(stream.last_id, FLEET, "fleet as VIEWER")]
    assert "region failed to render topic=needs" in caplog.text
