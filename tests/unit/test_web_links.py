"""Deep links (issue 26): with a public URL configured, every escalation card a chat gets links
to its page in the web console (a request to Needs you, a notice to its agent's page), as
plain text every chat makes a link of; without one, no link."""

from __future__ import annotations

from bot.kit.escalation import card, web_link
from store.escalations import EscalationRow

URL = "https://sb.example.org"


def row(kind: str, agent_id: str | None = "a1", status: str = "open") -> EscalationRow:
    return EscalationRow(
        seq=1, id="k3x9", agent_id=agent_id, kind=kind, title="fixer wants to use Bash",
        body="Why asked: Bash: no rule decides it", tool_name="Bash",
        tool_input={"command": "make deploy"}, options=(), free_text=False, ref_id=None,
        status=status, answer=None, answered_by=None, answered_via=None, answered_at=None,
        created_at=1.0, detail="make deploy", detail_name="command.sh")


def texts(kind: str, url: str, **kw: object) -> list[str]:
    return [b.text for b in card(row(kind, **kw), url).reply.blocks]  # type: ignore[arg-type]


def test_a_request_links_to_needs_you_and_a_notice_to_its_agent():
    assert texts("permission", URL)[-1] == f"Open in the web console: {URL}/#req-k3x9"
    assert texts("question", URL)[-1] == f"Open in the web console: {URL}/#req-k3x9"
    assert texts("notice", URL)[-1] == f"Open in the web console: {URL}/agents/a1"
    assert web_link(row("notice", agent_id=None), URL) == ""


def test_no_public_url_no_link():
    for kind in ("permission", "question", "notice"):
        assert not any("web console" in t for t in texts(kind, ""))
