"""Team templates: the built-in file parses, a team_file adds and replaces by name, bad files are
refused with what is wrong, prompts get the members' names and the task."""

from __future__ import annotations

import pytest

from supervisor.errors import ConfigError
from supervisor.schedule.teams import agent_names, load, parse, prompt_of
from tests.conftest import run

GOOD = """
[pair]
summary = "two"
example = "do a thing"
[[pair.members]]
name = "a"
role = "writer"
prompt = "Write {prompt}; send it to {b}."
[[pair.members]]
name = "b"
role = "checker"
parent = "a"
prompt = "Check what {a} sends. {unknown} stays."
"""


def test_builtin_devteam_has_developer_reviewer_tester():
    team = load(None)["devteam"]
    assert [(m.name, m.role) for m in team.members] == [
        ("dev", "developer"), ("rev", "reviewer"), ("test", "tester")]
    assert team.example


def test_team_file_adds_and_replaces(tmp_path):
    f = tmp_path / "teams.toml"
    f.write_text(GOOD + '\n[devteam]\nsummary = "mine"\n[[devteam.members]]\nname = "x"\n'
                 'role = "r"\nprompt = "p"\n')
    teams = load(f)
    assert set(teams) >= {"pair", "devteam"} and teams["devteam"].summary == "mine"


def test_prompts_get_names_and_the_task():
    team = parse(GOOD, "t")["pair"]
    names = agent_names(team, "q")
    assert names == {"a": "q-a", "b": "q-b"}
    assert prompt_of(team.members[0], names, "a poem") == "Write a poem; send it to q-b."
    assert prompt_of(team.members[1], names, "x") == "Check what q-a sends. {unknown} stays."


@pytest.mark.parametrize(("text", "error"), [
    ("[t]\nsummary = 1\n", "needs a [[t.members]] list"),
    ("[t]\n[[t.members]]\nname = 'a'\nrole = 'r'\n", "a member has no prompt"),
    ("[t]\n[[t.members]]\nname = 'a'\nrole = 'r'\nprompt = 'p'\nparent = 'z'\n",
     "parent 'z' is not a member"),
    ("[t]\n[[t.members]]\nname = 'a'\nrole = 'r'\nprompt = 'p'\ncolour = 'red'\n",
     "unknown member key(s) colour"),
    ("[t\n", "t.toml"),
])
def test_bad_templates_are_refused_with_the_reason(text, error):
    with pytest.raises(ConfigError, match=__import__("re").escape(error)):
        parse(text, "t.toml")


async def test_team_command_refuses_an_unknown_template(quiet_app):
    reply = await run(quiet_app, "/team nosuch do it")
    assert not reply.ok and "there is no team template 'nosuch'" in reply.plain()
    assert "devteam" in (await run(quiet_app, "/team list")).plain()
