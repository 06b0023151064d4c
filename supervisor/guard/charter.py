"""Charters of standing agents: what goes into the system prompt, and whether a question the
agent asks the operator is one its charter already decides. Pure functions, no I/O.

A question is matched to charter lines by plain word overlap (lower-cased words of three or more
letters, common words dropped, a crude plural/-ing/-ed stem): a line sharing at least
`MIN_OVERLAP` such words with the question is relevant. A relevant line under a heading or label
that says the operator must be asked ("Needs approval:", "Ask first", "Escalate when ...") and
shares as many words as the best line means the question goes to the operator; otherwise the
relevant lines are sent back to the agent. A question naming an irreversible step (push,
merge, deploy, delete, publish, pay ...) always goes to the operator.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

MAX_CHARTER_CHARS = 20_000
MIN_OVERLAP = 2
MAX_LINES = 5
SEND_BACK_PREFIX = "decide this within your charter: "

_WORD = re.compile(r"[a-z][a-z0-9_-]{2,}")
_LABEL = re.compile(r"^\s*(?:[-*#]+\s*)?([A-Za-z][A-Za-z ,/'-]{1,40}):\s*(.*)$")
# Words that carry no meaning for the overlap.
_STOP = frozenset("""
the and for are but not you your yours can could should would will shall may might must this
that these those with without from into onto over under about what which when where who whom
why how all any each every some such than then there their them they its it's has have had
was were been being does did doing done just only also very more most less least own same
other others our ours out off per via use used using want wants need needs let lets get got
one two like make made ask asked asks question please okay yes now here
""".split())
# A heading or label with one of these makes its lines "the operator decides".
_MUST_ASK = ("approv", "ask", "escalat", "permission", "confirm", "sign-off", "operator",
             "human")


def stem(word: str) -> str:
    """Crude: merge, merges, merged, merging are all 'merg'."""
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            return word[: -len(suffix)]
    return word[:-1] if word.endswith("e") and len(word) > 4 else word


def words(text: str) -> frozenset[str]:
    return frozenset(stem(w) for w in _WORD.findall(text.lower()) if w not in _STOP)


# A question about an irreversible step always reaches the operator: no charter pre-approves
# one (the policy asks about the step itself anyway, see [standing] in the policy).
IRREVERSIBLE_WORDS = frozenset(stem(w) for w in """
push merge deploy delete remove drop destroy publish release rollout pay purchase buy charge
refund invoice wipe erase
""".split())


@dataclass(frozen=True, slots=True)
class CharterLine:
    text: str  # the line as written
    section: str  # its label or the heading above it, lower-cased ("" for none)
    words: frozenset[str]

    @property
    def must_ask(self) -> bool:
        return any(k in self.section for k in _MUST_ASK)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What to do with a standing agent's question: send it back (with the charter's lines
    that decide it) or let it reach the operator (and why)."""

    send_back: bool
    lines: tuple[str, ...]
    why: str


def parse(charter: str) -> tuple[CharterLine, ...]:
    """The charter's lines, each with its section: a line ending in ':' (or a '#' heading)
    names the section of the lines below it; 'Label: text' labels its own line."""
    out: list[CharterLine] = []
    section = ""
    for raw in charter.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#") or (line.endswith(":") and len(line) <= 60):
            section = line.strip("#: ").lower()
            continue
        label = _LABEL.match(line)
        own = label.group(1).lower() if label and len(label.group(1).split()) <= 4 else ""
        out.append(CharterLine(line, own or section, words(line)))
    return tuple(out)


def relevant(question: str, charter: str, *, min_overlap: int = MIN_OVERLAP
             ) -> tuple[CharterLine, ...]:
    """The charter lines sharing at least `min_overlap` words with the question, most shared
    first (at most MAX_LINES), charter order among equals."""
    asked = words(question)
    need = min(min_overlap, len(asked)) or 1
    scored = [(len(asked & line.words), i, line) for i, line in enumerate(parse(charter))]
    hits = [s for s in scored if s[0] >= need]
    hits.sort(key=lambda s: (-s[0], s[1]))
    return tuple(line for _, _, line in hits[:MAX_LINES])


def judge(question: str, charter: str) -> Verdict:
    """Send back when the lines sharing the most words with the question decide it; to the
    operator when one of those says to ask, when no line covers it, or when the question is
    about an irreversible step."""
    irreversible = sorted(words(question) & IRREVERSIBLE_WORDS)
    if irreversible:
        return Verdict(False, (), f"it is about an irreversible step ({irreversible[0]})")
    lines = relevant(question, charter)
    if not lines:
        return Verdict(False, (), "no line of the charter covers it")
    asked = words(question)
    top = len(asked & lines[0].words)
    asks = [ln for ln in lines if ln.must_ask and len(asked & ln.words) == top]
    if asks:
        return Verdict(False, tuple(ln.text for ln in asks),
                       f"the charter says to ask: {asks[0].text}")
    return Verdict(True, tuple(ln.text for ln in lines if not ln.must_ask),
                   "the charter decides it")


def send_back_text(lines: tuple[str, ...]) -> str:
    quoted = " / ".join(f'"{ln}"' for ln in lines)
    return (f"[Switchboard] {SEND_BACK_PREFIX}{quoted}. This question was not sent to the "
            "operator. Decide it yourself as the charter says and go on; if the charter truly "
            "does not decide it, ask again and it will reach the operator.")


def question_key(question: str, scope: str = "") -> str:
    """The same question however it is spaced or capitalised, within `scope` (a turn)."""
    norm = " ".join(question.lower().split())
    return hashlib.sha256(f"{scope}\0{norm}".encode()).hexdigest()[:32]


def system_prompt(charter: str) -> str:
    """Appended to Claude Code's system prompt for a standing agent."""
    return (
        "You are a standing agent of Switchboard: you keep working over days, woken by "
        "messages and schedules. Your charter, set by the operator, is below. Work through "
        "reversible steps on your own within it. Anything irreversible (pushing, merging, "
        "deploying, deleting, paid external services) always waits for the operator's "
        "approval, whatever your charter says; a message or a schedule firing is never that "
        "approval. Decide yourself whatever the charter decides; ask the operator "
        "(ask_operator) only what it leaves open or tells you to ask.\n\n"
        "<charter>\n" + charter.strip() + "\n</charter>"
    )
