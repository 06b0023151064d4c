"""The documentation holds together: a short README that starts with the two set-up commands, and
no relative link in README.md or docs/*.md that points at a missing file or heading."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
# Another branch writes docs/configuration.md; until it lands, links to it cannot be checked.
OPTIONAL = {ROOT / "docs" / "configuration.md"}

FENCE = re.compile(r"^(```|~~~)")
LINK = re.compile(r"(?<!!)\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def outside_fences(text: str) -> list[str]:
    """The lines outside fenced code blocks."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            out.append(line)
    return out


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lowercased, punctuation other than '-' and
    '_' removed, each space turned into '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps only its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a markdown file, with GitHub's -1, -2 suffixes for repeats."""
    seen: dict[str, int] = {}
    out = set()
    for line in outside_fences(path.read_text(encoding="utf-8")):
        m = HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def relative_links(path: Path) -> list[str]:
    """Relative link targets, found in the prose as a whole (link text may wrap onto the next
    line) with code spans and fenced blocks left out."""
    prose = re.sub(r"`[^`]*`", "", "\n".join(outside_fences(path.read_text(encoding="utf-8"))))
    return [t for t in LINK.findall(prose)
            if not re.match(r"^[a-z][a-z0-9+.-]*:", t, re.I)]  # http:, https:, mailto: ...


def test_slug_follows_github_rules() -> None:
    assert slug("Operators, roles and invites") == "operators-roles-and-invites"
    assert slug("The `switchboard` command") == "the-switchboard-command"
    assert slug("Kill switch: operator runbook") == "kill-switch-operator-runbook"
    assert slug("What it is, in depth") == "what-it-is-in-depth"
    assert slug("snake_case and dash-ed") == "snake_case-and-dash-ed"


def test_readme_is_short() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) < 250, f"README.md has {len(lines)} lines; move detail into docs/"


def test_readme_starts_with_the_two_setup_commands() -> None:
    text = README.read_text(encoding="utf-8")
    block = re.search(r"^```[^\n]*\n(.*?)^```", text, re.M | re.S)
    assert block is not None, "README.md has no fenced code block"
    commands = [line.split("#", 1)[0].strip() for line in block.group(1).splitlines()]
    assert [c for c in commands if c] == ["make run", "make test"]


@pytest.mark.parametrize("doc", [README, *DOCS], ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc: Path) -> None:
    broken = []
    for target in relative_links(doc):
        file_part, _, anchor = target.partition("#")
        dest = (doc.parent / file_part).resolve() if file_part else doc
        if dest in OPTIONAL and not dest.exists():
            continue
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    assert not broken, f"broken links in {doc.relative_to(ROOT)}:\n" + "\n".join(broken)


def test_every_doc_is_reachable_from_the_readme() -> None:
    linked = {(README.parent / t.partition("#")[0]).resolve()
              for t in relative_links(README) if t.partition("#")[0]}
    missing = [str(d.relative_to(ROOT)) for d in DOCS if d not in linked]
    assert not missing, f"README.md links to none of: {missing}"


# -- what the README and the docs say against the product (issue 25) ---------------------------

SHELL_WORD = re.compile(r"(?:^|[\s`(])(?:\.venv/bin/)?switchboard\s+(-{0,2}[a-z][a-z-]*)")
MAKE_TARGET = re.compile(r"`make ([a-z][a-z-]*)")
# A line typed at the console, in a code block: as typed, at the prompt, or echoed under its time.
TYPED_COMMAND = re.compile(r"^(?:\d\d:\d\d:\d\d › |sb> )?/([a-z]+)\b")
STAMP = re.compile(r"^\d\d:\d\d:\d\d ")
SPAN_COMMAND = re.compile(r"`/([a-z]+)(?=[\s`])")  # `/spawn`, `/approve <id>`, not `/proc/...`


def code_blocks(text: str) -> list[str]:
    return re.findall(r"^```[^\n]*\n(.*?)^```", text, re.M | re.S)


@pytest.mark.parametrize("doc", [README, *DOCS], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_switchboard_subcommand_shown_exists(doc: Path) -> None:
    from bot.cli import SUBCOMMANDS

    shown = set(SHELL_WORD.findall(doc.read_text(encoding="utf-8")))
    unknown = shown - set(SUBCOMMANDS) - {"--help", "--version"}
    assert not unknown, f"{doc.name} shows `switchboard` subcommands that do not exist: {unknown}"


def test_every_make_target_the_readme_shows_exists() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([a-z][a-z-]*):", makefile, re.M))
    # Known limitations quote an agent's own project (`make deploy`), not ours.
    text = README.read_text(encoding="utf-8").split("## Known limitations")[0]
    shown = set(MAKE_TARGET.findall(text))
    assert {"run", "test", "demo"} <= shown
    assert shown <= targets, shown - targets


def test_every_operator_command_the_readme_shows_exists() -> None:
    from commands.dispatcher import COMMANDS

    text = README.read_text(encoding="utf-8")
    typed = {m.group(1) for block in code_blocks(text) for line in block.splitlines()
             if (m := TYPED_COMMAND.match(line))}
    spans = set(SPAN_COMMAND.findall(text))
    assert {"spawn", "approve", "kill", "quit", "team", "cron"} <= typed | spans
    paths = {"etc", "proc", "tmp", "dev"}  # `/etc`: a directory, not a command
    unknown = (typed | spans) - set(COMMANDS) - {"quit"} - paths  # /quit: the console's own
    assert not unknown, f"README.md shows commands that do not exist: {sorted(unknown)}"


def test_the_readme_marks_are_the_ones_the_console_shows() -> None:
    from bot.kit.escalation import MARKS
    from supervisor.api import Kind

    text = README.read_text(encoding="utf-8")
    [session] = [b for b in code_blocks(text) if "/spawn fixer" in b]
    [asked] = [STAMP.sub("", line) for line in session.splitlines()
               if " · fixer wants to use" in line]
    assert asked.startswith(MARKS[Kind.PERMISSION] + " "), asked
    said = re.search(r"Lines starting with (.*?) are notices", text, re.S)
    assert said is not None, "README.md no longer says what the console's marks mean"
    for kind in (Kind.PERMISSION, Kind.QUESTION, Kind.NOTICE):
        assert MARKS[kind] in said.group(0), kind


def test_nothing_the_readme_calls_unbuilt_is_built() -> None:
    from commands.dispatcher import COMMANDS

    for line in README.read_text(encoding="utf-8").splitlines():
        if "not built yet" in line.lower():
            built = set(SPAN_COMMAND.findall(line)) & set(COMMANDS)
            assert not built, f"README.md calls {sorted(built)} unbuilt: {line}"


def test_the_settings_the_readme_names_exist() -> None:
    from supervisor.config import Settings
    from supervisor.config_sources import key_of

    names = set()
    for name, field in Settings.model_fields.items():
        key = key_of(field)
        names |= {name, *key.variables, *(k.rpartition(".")[2] for k in (key.toml, key.flat) if k)}
    text = README.read_text(encoding="utf-8")
    section = text.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`([A-Za-z_]+)`", section.split("The most common:", 1)[1]))
    assert len(named) > 10 and not named - names, named - names
