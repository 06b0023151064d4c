"""The command-line parser: tokens, quoting, --options, the verbatim Rest, and its error texts."""

from __future__ import annotations

import pytest

from commands.base import Arg, Opt, Reply, Rest, Text, UsageError, parse_args, usage_line
from commands.dispatcher import split_command

SPAWN_LIKE = (
    Arg("name", "the name"),
    Opt("--model", "model", "a model", "M"),
    Opt("--cwd", "cwd", "a directory", "DIR"),
    Rest("prompt", "what to do"),
)
LOGS_LIKE = (
    Arg("agent", "agent name or id"),
    Arg("n", "how many", required=False, kind=int, low=1, high=500),
)
OPTIONAL_ONLY = (Arg("which", "optional", required=False),)


# -- positionals and quoting ---------------------------------------------------------------------


def test_positionals_in_order_and_missing_optional_is_none():
    assert parse_args(LOGS_LIKE, "fixer 50") == {"agent": "fixer", "n": 50}
    assert parse_args(LOGS_LIKE, "fixer") == {"agent": "fixer", "n": None}
    assert parse_args(OPTIONAL_ONLY, "") == {"which": None}
    assert parse_args(OPTIONAL_ONLY, "   ") == {"which": None}


def test_double_quotes_group_words_and_honour_backslash_escapes():
    assert parse_args(LOGS_LIKE, '"my agent"')["agent"] == "my agent"
    assert parse_args(LOGS_LIKE, r'"say \"hi\" \\ now"')["agent"] == 'say "hi" \\ now'


def test_single_quotes_are_literal():
    assert parse_args(LOGS_LIKE, r"'a \"b\" c'")["agent"] == r"a \"b\" c"
    assert parse_args(LOGS_LIKE, "'it is' 7") == {"agent": "it is", "n": 7}


def test_whitespace_of_any_kind_separates_tokens():
    assert parse_args(LOGS_LIKE, "\n fixer\t\t 3 \n") == {"agent": "fixer", "n": 3}


def test_empty_quotes_count_as_missing_for_a_required_argument():
    with pytest.raises(UsageError, match=r"missing <agent> \(agent name or id\)"):
        parse_args(LOGS_LIKE, '""')


@pytest.mark.parametrize("text", ['"unclosed', "'unclosed", 'ok "unclosed', '"', "'"])
def test_unbalanced_quote_is_a_usage_error(text):
    with pytest.raises(UsageError, match="unbalanced quote"):
        parse_args((Arg("a", "a"), Arg("b", "b", required=False)), text)


# -- options ---------------------------------------------------------------------------------------


def test_option_with_separate_value():
    args = parse_args(SPAWN_LIKE, "fixer --model sonnet fix the tests")
    assert args == {"name": "fixer", "model": "sonnet", "cwd": None, "prompt": "fix the tests"}


def test_option_with_equals_value():
    args = parse_args(SPAWN_LIKE, "fixer --model=opus --cwd=/tmp fix it")
    assert (args["model"], args["cwd"], args["prompt"]) == ("opus", "/tmp", "fix it")


def test_option_value_may_be_quoted_in_both_forms():
    args = parse_args(SPAWN_LIKE, 'fixer --cwd "/tmp/my dir" go')
    assert args["cwd"] == "/tmp/my dir"
    args = parse_args(SPAWN_LIKE, "fixer --cwd '/tmp/my dir' go")
    assert args["cwd"] == "/tmp/my dir"


def test_equals_form_with_a_quoted_value_containing_spaces():
    """Regression: `--cwd="/a b"` used to split at the space and report an unbalanced quote."""
    args = parse_args(SPAWN_LIKE, 'fixer --cwd="/tmp/my dir" --model=\'big one\' go')
    assert (args["cwd"], args["model"], args["prompt"]) == ("/tmp/my dir", "big one", "go")


def test_options_may_come_before_the_positionals():
    args = parse_args(SPAWN_LIKE, "--model sonnet --cwd /w fixer do it")
    assert args == {"name": "fixer", "model": "sonnet", "cwd": "/w", "prompt": "do it"}


def test_options_after_the_rest_begins_belong_to_the_rest():
    args = parse_args(SPAWN_LIKE, "fixer do it --model sonnet")
    assert args["model"] is None
    assert args["prompt"] == "do it --model sonnet"


def test_repeated_option_last_one_wins():
    assert parse_args(SPAWN_LIKE, "a --model x --model y go")["model"] == "y"


def test_unknown_option_names_the_known_ones():
    with pytest.raises(UsageError, match=r"unknown option --bogus \(options: --model, --cwd\)"):
        parse_args(SPAWN_LIKE, "fixer --bogus 1 go")
    with pytest.raises(UsageError, match=r"unknown option --bogus \(options: none\)"):
        parse_args(LOGS_LIKE, "--bogus")
    with pytest.raises(UsageError, match="unknown option --bogus"):
        parse_args(LOGS_LIKE, "--bogus=3")


@pytest.mark.parametrize("text", ["fixer --model", "fixer --model   ", "fixer --model --cwd /x go",
                                  "--cwd"])
def test_option_without_value(text):
    with pytest.raises(UsageError, match=r"--(model|cwd) needs a value: --(model M|cwd DIR)"):
        parse_args(SPAWN_LIKE, text)


def test_option_with_empty_equals_value_is_an_error_not_the_next_word():
    """Regression: `--model= go` used to take `go` as the model and then miss the prompt."""
    with pytest.raises(UsageError, match=r"--model needs a value"):
        parse_args(SPAWN_LIKE, "fixer --model= go")


def test_lone_double_dash_is_a_plain_word():
    assert parse_args(SPAWN_LIKE, "fixer -- go")["prompt"] == "-- go"


# -- the Rest --------------------------------------------------------------------------------------


def test_rest_is_verbatim_quotes_newlines_and_inner_spacing_kept():
    prompt = 'fix "the  tests"\n  then run \'ruff\'\n\n--model x  and\ttabs \\n'
    args = parse_args(SPAWN_LIKE, f"fixer {prompt}")
    assert args["prompt"] == prompt


def test_rest_starting_with_a_quote_keeps_the_quotes():
    assert parse_args(SPAWN_LIKE, 'a "hello world"')["prompt"] == '"hello world"'


def test_rest_may_contain_unbalanced_quotes():
    assert parse_args(SPAWN_LIKE, "a don't stop 'me now")["prompt"] == "don't stop 'me now"
    assert parse_args(SPAWN_LIKE, 'a "oops')["prompt"] == '"oops'


def test_rest_surrounding_whitespace_is_trimmed():
    assert parse_args(SPAWN_LIKE, "a \n\n  go on  \n")["prompt"] == "go on"


def test_rest_after_options_and_newline():
    args = parse_args(SPAWN_LIKE, "a --model m\nline one\nline two")
    assert args["model"] == "m"
    assert args["prompt"] == "line one\nline two"


def test_missing_rest():
    with pytest.raises(UsageError, match=r"missing <prompt> \(what to do\)"):
        parse_args(SPAWN_LIKE, "fixer --model m")


def test_optional_rest():
    params = (Arg("a", "a"), Rest("more", "more", required=False))
    assert parse_args(params, "x") == {"a": "x", "more": None}


# -- extras and integers ------------------------------------------------------------------------


def test_extra_argument():
    with pytest.raises(UsageError, match=r"unexpected extra argument 'three'"):
        parse_args(LOGS_LIKE, "one 2 three")
    with pytest.raises(UsageError, match=r"unexpected extra argument 'x'"):
        parse_args((), "x")


@pytest.mark.parametrize("raw", ["ten", "1.5", "5x", "''"])
def test_integer_argument_must_be_a_whole_number(raw):
    with pytest.raises(UsageError, match=r"<n> must be a whole number"):
        parse_args(LOGS_LIKE, f"a {raw}")


@pytest.mark.parametrize("raw", ["0", "-1", "501", "99999999999999999999"])
def test_integer_argument_out_of_range(raw):
    with pytest.raises(UsageError, match=r"<n> must be between 1 and 500, got"):
        parse_args(LOGS_LIKE, f"a {raw}")


@pytest.mark.parametrize("raw,value", [("1", 1), ("500", 500), ('"42"', 42), ("+7", 7)])
def test_integer_argument_bounds_are_inclusive(raw, value):
    assert parse_args(LOGS_LIKE, f"a {raw}")["n"] == value


# -- usage lines and command splitting ---------------------------------------------------------


def test_usage_line_shows_required_optional_options_and_rest():
    assert usage_line("spawn", SPAWN_LIKE) == "/spawn <name> [--model M] [--cwd DIR] <prompt>"
    assert usage_line("logs", LOGS_LIKE) == "/logs <agent> [n]"
    assert usage_line("agents", ()) == "/agents"


@pytest.mark.parametrize(
    "text,expected",
    [
        ("/agents", ("agents", "")),
        ("  /agents  ", ("agents", "")),
        ("/agents all", ("agents", "all")),
        ("/agents@mybot all", ("agents", "all")),
        ("/AGENTS@MyBot", ("agents", "")),
        ("/ask a  two  spaces", ("ask", "a  two  spaces")),
        ("/ask\na hello", ("ask", "a hello")),
        ("/ask a\nline 1\nline 2", ("ask", "a\nline 1\nline 2")),
        ("/ask\tagent hi", ("ask", "agent hi")),
        ("/agents\tall", ("agents", "all")),
        ("", ("", "")),
        ("/", ("", "")),
    ],
)
def test_split_command(text, expected):
    assert split_command(text) == expected


def test_reply_helpers():
    err = Reply.error("what went wrong", "how to fix it")
    assert not err.ok
    assert err.blocks == (Text("what went wrong", "error"), Text("how to fix it"))
    assert err.plain() == "what went wrong\nhow to fix it"
    assert Reply.error("only what").blocks == (Text("only what", "error"),)
    ok = Reply.text("a", "b", style="code")
    assert ok.ok and ok.blocks == (Text("a", "code"), Text("b", "code"))
