"""Platform-neutral command plumbing: Reply data, declared parameters, the parser, Context."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, ClassVar, Protocol

from supervisor.api import InvalidRequest, SupervisorAPI
from supervisor.sanitize import CleanText, piece


class Role(IntEnum):
    VIEWER = 1
    OPERATOR = 2
    ADMIN = 3


@dataclass(frozen=True, slots=True)
class Caller:
    id: str
    name: str
    role: Role
    platform: str


@dataclass(frozen=True, slots=True)
class Text:
    """A block of text. style: plain, title, code (monospace, kept verbatim), error.
    A block with a filename is something the reader must be able to see whole (a command to
    approve): a chat too small for it shows the start and sends all of it as that file."""

    text: str
    style: str = "plain"
    filename: str = ""


@dataclass(frozen=True, slots=True)
class Button:
    label: str
    command: str  # the command line the button runs, e.g. "/pause a1b2c3"
    confirm: bool = False  # destructive: front ends ask for a confirming tap


@dataclass(frozen=True, slots=True)
class Attachment:
    filename: str
    content: bytes
    mime: str = "text/plain"


@dataclass(frozen=True, slots=True)
class Reply:
    blocks: tuple[Text, ...] = ()
    buttons: tuple[tuple[Button, ...], ...] = ()
    attachments: tuple[Attachment, ...] = ()
    ok: bool = True
    # What the audit row records instead of the reply's text, for replies that carry a secret.
    audit: str | None = None
    # The same news reaches every front end as a notice (the kill switch): a front end that
    # shows notices does not show this reply as well, so it arrives once.
    announced: bool = False

    @classmethod
    def text(cls, *lines: str, style: str = "plain", **kw: Any) -> Reply:
        return cls(blocks=tuple(Text(line, style) for line in lines), **kw)

    @classmethod
    def error(cls, what: str, fix: str = "") -> Reply:
        blocks = [Text(what, "error")]
        if fix:
            blocks.append(Text(fix))
        return cls(blocks=tuple(blocks), ok=False)

    def plain(self) -> str:
        return "\n".join(b.text for b in self.blocks)


@dataclass(frozen=True, slots=True)
class Context:
    """What a command runs with: the supervisor's one API, and who asked."""

    api: SupervisorAPI
    caller: Caller


class UsageError(InvalidRequest):
    """Bad arguments, found before the supervisor is asked; shown with the usage line like
    every InvalidRequest."""


@dataclass(frozen=True, slots=True)
class Arg:
    name: str
    help: str
    required: bool = True
    kind: type = str
    low: int | None = None
    high: int | None = None


@dataclass(frozen=True, slots=True)
class Opt:
    flag: str  # "--model"
    name: str
    help: str
    metavar: str = "X"
    switch: bool = False  # takes no value: present means True


@dataclass(frozen=True, slots=True)
class Rest:
    """Everything after the other parameters, verbatim (a prompt, a message)."""

    name: str
    help: str
    required: bool = True


Param = Arg | Opt | Rest

# A token: a quoted string, an --option=value whose value is quoted (so it may hold spaces),
# or a run of non-space characters.
_TOKEN = re.compile(
    r"""\s*("(?:[^"\\]|\\.)*"|'[^']*'|--[^\s="']+=(?:"(?:[^"\\]|\\.)*"|'[^']*')|\S+)"""
)


def _unquote(token: str) -> str:
    if len(token) >= 2 and token[0] == token[-1] and token[0] in "\"'":
        inner = token[1:-1]
        return re.sub(r"\\(.)", r"\1", inner) if token[0] == '"' else inner
    if token[:1] in "\"'":
        raise UsageError(f"unbalanced quote in {token!r}")
    return token


def parse_args(params: Sequence[Param], text: str) -> dict[str, Any]:
    """Positional Args in order, --options anywhere before the Rest, then the Rest verbatim."""
    opts = {p.flag: p for p in params if isinstance(p, Opt)}
    positionals = [p for p in params if not isinstance(p, Opt)]
    values: dict[str, Any] = {p.name: None for p in params}
    pos = 0
    index = 0
    while True:
        match = _TOKEN.match(text, pos)
        if not match or not match.group(1):
            break
        token = match.group(1)
        if token.startswith("--") and len(token) > 2:
            pos = _option(opts, values, text, match)
            continue
        if index >= len(positionals):
            raise UsageError(f"unexpected extra argument {token!r}")
        param = positionals[index]
        index += 1
        if isinstance(param, Rest):
            values[param.name] = text[match.start(1):].strip()
            pos = len(text)
            break
        values[param.name] = _positional(param, _unquote(token))
        pos = match.end()
    for param in positionals:
        if param.required and not values.get(param.name):
            raise UsageError(f"missing <{param.name}> ({param.help})")
    if isinstance(text, CleanText):  # so the API gets its words as clean as the line
        values = {k: piece(text, v) if isinstance(v, str) else v for k, v in values.items()}
    return values


def _option(opts: dict[str, Opt], values: dict[str, Any], text: str,
            match: re.Match[str]) -> int:
    """Sets the --option that `match` holds in `values`; where the next token starts."""
    flag, equals, inline = match.group(1).partition("=")
    if flag not in opts:
        known = ", ".join(opts) or "none"
        raise UsageError(f"unknown option {flag} (options: {known})")
    opt = opts[flag]
    if opt.switch:
        if equals:
            raise UsageError(f"{flag} takes no value")
        values[opt.name] = True
        return match.end()
    if equals and not inline:
        raise UsageError(f"{flag} needs a value: {flag} {opt.metavar}")
    if equals:
        values[opt.name] = _unquote(inline)
        return match.end()
    nxt = _TOKEN.match(text, match.end())
    if not nxt or not nxt.group(1) or nxt.group(1).startswith("--"):
        raise UsageError(f"{flag} needs a value: {flag} {opt.metavar}")
    values[opt.name] = _unquote(nxt.group(1))
    return nxt.end()


def _positional(param: Arg, raw: str) -> Any:
    """A positional Arg's value: the text, or a whole number within the Arg's bounds."""
    if param.kind is not int:
        return raw
    try:
        number = int(raw)
    except ValueError:
        raise UsageError(f"<{param.name}> must be a whole number, got {raw!r}") from None
    if (param.low is not None and number < param.low) or (
        param.high is not None and number > param.high
    ):
        raise UsageError(
            f"<{param.name}> must be between {param.low} and {param.high}, got {number}"
        )
    return number


def usage_line(name: str, params: Sequence[Param]) -> str:
    parts = [f"/{name}"]
    for p in params:
        if isinstance(p, Opt):
            parts.append(f"[{p.flag}]" if p.switch else f"[{p.flag} {p.metavar}]")
        elif p.required:
            parts.append(f"<{p.name}>")
        else:
            parts.append(f"[{p.name}]")
    return " ".join(parts)


class Command(Protocol):
    name: ClassVar[str]
    summary: ClassVar[str]
    params: ClassVar[tuple[Param, ...]]
    role: ClassVar[Role]
    examples: ClassVar[tuple[str, ...]]

    async def execute(self, ctx: Context, args: dict[str, Any]) -> Reply: ...


@dataclass
class CommandInfo:
    """What /help and the chat menus show for one command."""

    name: str
    summary: str
    usage: str
    role: Role
    params: tuple[Param, ...] = field(default_factory=tuple)
    examples: tuple[str, ...] = ()
