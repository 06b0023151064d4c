"""The notice digest's rule (bot/kit/digest.py), pure: at most one routine message a window,
the first at once; what needs an answer, a loud notice, a long one or one with a file never
waits."""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.kit.digest import DIGEST_BODY_CHARS, Gatherer, digest, gatherable
from supervisor.api import Kind


@dataclass(frozen=True)
class Row:  # the fields the digest reads of an escalation row
    id: str
    title: str
    body: str = ""
    kind: str = Kind.NOTICE
    detail: str | None = None
    tool_name: str | None = None
    status: str = "info"
    options: tuple[str, ...] = field(default=())


def test_what_may_wait_for_a_digest() -> None:
    assert gatherable(Row("a", "dev finished", "All well."))  # type: ignore[arg-type]
    assert not gatherable(Row("b", "dev wants to use Bash", kind=Kind.PERMISSION,  # type: ignore[arg-type]
                              status="open"))
    assert not gatherable(Row("c", "dev ended with an error"))  # type: ignore[arg-type]
    assert not gatherable(Row("d", "dev finished", "x" * (DIGEST_BODY_CHARS + 1)))  # type: ignore[arg-type]
    assert not gatherable(Row("e", "dev: blocked by policy", detail="rm -rf /"))  # type: ignore[arg-type]


def test_one_routine_message_a_window_the_first_at_once() -> None:
    g = Gatherer(60.0)
    a, b, c, d = (Row(x, f"{x} finished", "ok") for x in "abcd")
    assert g.offer(a, 0.0)  # type: ignore[arg-type]
    assert not g.offer(b, 10.0) and not g.offer(c, 59.0)  # type: ignore[arg-type]
    assert not g.offer(b, 59.5)  # type: ignore[arg-type] # offered again: held once
    assert g.next_due() == 60.0 and g.due(59.9) == []
    assert [r.id for r in g.due(60.0)] == ["b", "c"] and g.next_due() is None
    assert not g.offer(d, 100.0)  # type: ignore[arg-type] # within the window the digest began
    assert [r.id for r in g.due(120.0)] == ["d"]
    assert g.offer(Row("e", "e finished"), 180.0)  # type: ignore[arg-type]
    loud = Row("f", "f ended with an error")
    assert g.offer(loud, 181.0)  # type: ignore[arg-type]


def test_no_window_sends_everything_at_once() -> None:
    g = Gatherer(0.0)
    assert all(g.offer(Row(x, "x finished"), 0.0) for x in "abc")  # type: ignore[arg-type]


def test_a_digest_shows_each_notice_whole() -> None:
    reply = digest([Row("a", "dev finished", "All well."),  # type: ignore[list-item]
                    Row("b", "qa finished", "Two flaky tests.")])
    text = reply.plain()
    assert text.startswith("ℹ️ 2 notices") and "dev finished" in text
    assert "Two flaky tests." in text and not reply.buttons
