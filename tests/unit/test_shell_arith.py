"""Arithmetic and name-evaluating contexts: bash evaluates a variable's value there, and an array
subscript in it runs $(...). Each must ask (or deny what is visible inside) unless provably
harmless; plus git options that make read-only commands run programs, and coproc."""

from __future__ import annotations

import pytest

from supervisor.guard.policy import Action, Decision, Policy
from supervisor.guard.shell import canonical
from supervisor.guard.shell.arith import evaluate, harmless

CWD = "/work/repo"
POLICY = Policy.load(None)


def bash(command: str) -> Decision:
    return POLICY.decide("worker", "Bash", {"command": command}, CWD)


HIDDEN = "x='a[$(git push --force origin main)]'; "

# (line, words the reason must hold): the construct is named, not just "needs approval"
ASKED = [
    # the reported hole: echo/cd/ls are allowed, the arithmetic is not
    (HIDDEN + "echo $[x]", "arithmetic expansion $[x]"),
    ("cd $[y]", "arithmetic expansion $[y]"),
    ("ls $[z]", "arithmetic expansion $[z]"),
    ('echo "$[x]"', "arithmetic expansion $[x]"),
    (HIDDEN + "echo $((x))", "arithmetic expansion $((x))"),
    ("echo $(( x + 1 ))", "arithmetic expansion"),
    ("ls ${x:-$((y))}", "arithmetic expansion $((y))"),
    ("cat <<E\n$[x]\nE", "arithmetic expansion $[x]"),
    (HIDDEN + "((x)) && ls", "arithmetic command ((x))"),
    ("for ((i=0; i<n; i++)); do ls; done", "arithmetic command"),
    ("let x", "let evaluates x"),
    ("let 'y=x+1'", "let evaluates"),
    (HIDDEN + "[[ $x -eq 1 ]] && ls", "[[ -eq ]] evaluates"),
    ("[[ x -lt 1 ]] && ls", "[[ -lt ]] evaluates x"),
    ("[[ -v 'a[$(git push)]' ]]", "[[ -v a[$(git push)]"),
    ("test -v 'a[$(git push)]'", "test -v"),
    ("[ -v 'a[$(git push)]' ]", "[ -v"),
    ("declare -i n=x", "declare -i"),
    ("typeset -i n", "typeset -i"),
    ("local -n r=x", "local -n"),
    ("declare 'a[$(git push)]=1'", "evaluates an array subscript"),
    ("declare -a arr='([$(git push)]=1)'", "may assign array elements"),
    ("v='([$(git push)]=1)'; declare -a arr=$v", "may assign array elements"),
    ("declare $opts x=1", "cannot tell what declare"),
    ("a[x]=1; ls", "array subscript in a[x]=1"),
    ("a[$i]+=1; ls", "array subscript"),
    ("a=([x]=1); ls", "array subscript [x]"),
    ("echo ${a[x]}", "array subscript in ${a[x]}"),
    ("echo ${x:y:z}", "substring offset in ${x:y:z}"),
    ("echo ${@:x}", "substring offset"),
    ("echo ${!x}", "indirect expansion ${!x}"),
    ("echo ${x@P}", "prompt expansion ${x@P}"),
    ("printf -v 'a[$(git push)]' x", "printf -v a[$(git push)]"),
    ("printf -v\"$n\" %s x", "printf -v"),
    ("read 'a[$(git push)]'", "read a[$(git push)]"),
    ("read -a \"$n\"", "read ${n}"),
    ("mapfile 'a[$(git push)]' < f", "mapfile"),
    ("mapfile -C 'git push' -c 1 a < f", "mapfile -C git push runs a callback"),
    ("unset 'a[$(git push)]'", "unset a[$(git push)]"),
    ("unset $name", "unset ${name}"),
    ("eval 'echo $[x]'", "arithmetic expansion $[x]"),
    ("bash -c 'ls $((x))'", "arithmetic expansion $((x))"),
    ("echo `echo $[x]`", "arithmetic expansion $[x]"),
]


@pytest.mark.parametrize(("command", "named"), ASKED)
def test_arithmetic_and_subscripts_ask_and_say_why(command: str, named: str) -> None:
    decision = bash(command)
    assert decision.action is Action.ASK, decision
    assert named in decision.reason, decision


@pytest.mark.parametrize("command", [
    "echo $(( $(git push --force) ))",
    "echo $[ `git push --force` ]",
    "(( $(git push --force) ))",
    "echo $(( x[$(git push --force)] ))",
    "a[$(git push --force)]=1",
    "a=([$(git push --force)]=1)",
    "[[ $(git push --force) -eq 1 ]]",
    "declare -i n=$(git push --force)",
    "coproc git push --force",
    "coproc { git push --force; }",
    "coproc NAME { git push --force; }",
    "coproc ( git push --force )",
])
def test_a_command_visible_inside_is_still_judged(command: str) -> None:
    decision = bash(command)
    assert decision.action is Action.DENY, decision
    assert "force-push" in decision.reason


@pytest.mark.parametrize("command", [
    "echo $((1+2))",
    "echo $[2*3]",
    'echo "$(( (1 << 4) | 3 ))"',
    "x=$((60*60)); echo $x",
    "(( 1 < 2 )) && ls",
    "a=([0]=x [1]=y); ls",
    "a[2]=v; ls",
    "coproc ls",
    "git log -S'foo' --oneline",
    "git diff --no-ext-diff --stat",
    "git log --no-textconv -p",
    "cd src && ls",
])
def test_harmless_forms_still_decide_as_before(command: str) -> None:
    assert bash(command).action is Action.ALLOW, bash(command)


@pytest.mark.parametrize("command", [
    "export FOO=bar", "declare -x G=git", "local x=1", "read -r line", "unset x",
    "read -p '[y/n] ' ans", "[[ -v HOME ]]", "[[ $# -gt 0 ]]", "test -v 'a[1]'", "let 1+2",
])
def test_plain_builtins_are_not_called_arithmetic(command: str) -> None:
    """They still ask under the default policy (no rule allows them), but not as hazards."""
    assert bash(command).rule == "default", bash(command)


@pytest.mark.parametrize(("expr", "value"), [
    ("1+2", 3), ("2**10", 1024), ("7 / -2", -3), ("-7 % 3", -1), ("2**62*4", 0),
    ("1 ? 2 : 3", 2), ("1,2", 2), ("!0", 1), ("~0", -1), ("1<<3", 8),
    ("16#ff + 0x10 + 010", 279), ("64#_", 63), ("2#101", 5), ("(1+2)*3", 9), ("", 0),
    ("3 > 2 && 0 || 4", 1), ("9223372036854775807 + 1", -9223372036854775808),
])
def test_evaluate_follows_bash(expr: str, value: int) -> None:
    assert evaluate(expr) == value


@pytest.mark.parametrize("expr", ["1/0", "1 %0", "08", "2#2", "(1", "1 +", "1 << 99", "2**-1"])
def test_evaluate_refuses_what_bash_reports_as_an_error(expr: str) -> None:
    assert evaluate(expr) is None


@pytest.mark.parametrize("expr", ["x", "a[1]", "$x", "`x`", "'1'", "1e5", "x=1", "i++"])
def test_names_and_expansions_are_never_harmless(expr: str) -> None:
    assert not harmless(expr)


def test_arithmetic_never_reads_like_a_substitution_of_a_subshell() -> None:
    """$((x) ) runs x; $((x)) runs nothing: equal session keys would let one pass as the other."""
    assert canonical("echo $((echo hi) )") != canonical("echo $(( echo hi ))")
    assert canonical("echo `(echo hi)`") == canonical("echo $( (echo hi) )")
    assert bash("echo $((git push --force) )").action is Action.DENY


GIT_ASKED = [
    ("git log -p --ext-diff", "--ext-diff"),
    ("git diff --ext-diff", "--ext-diff"),
    ("git log --ext", "--ext-diff"),
    ("git show --textconv HEAD", "--textconv"),
    ("git diff --output=/tmp/x", "--output"),
    ("git log -o x", "-o"),
    ("git log -po x", "-o"),
    ("git grep -Ovim x", "-O"),
    ("git --exec-path=/tmp/x status", None),
    ("git -c core.pager=less log", None),
    ("git -p log", None),
]


@pytest.mark.parametrize(("command", "named"), GIT_ASKED)
def test_git_read_commands_ask_when_told_to_run_or_write(command: str, named: str | None) -> None:
    decision = bash(command)
    assert decision.action is Action.ASK, decision
    if named:
        assert named in decision.reason


def test_git_risky_options_ask_even_where_a_policy_allows_git() -> None:
    policy = Policy.from_dict({"rules": [{"tool": "Bash", "command": "git", "action": "allow"}]})
    for command in ("git -c core.pager=evil log", "git --config-env=core.pager=P log",
                    "git --exec-path=/tmp/x status", "git fetch --upload-pack=evil origin",
                    "git submodule foreach 'rm -rf x'", "git rebase -x 'make' main",
                    "git clone -u evil x", "git difftool -t vimdiff", "git init --template=t"):
        decision = policy.decide("a", "Bash", {"command": command}, CWD)
        assert decision.action is Action.ASK, (command, decision)
    assert policy.decide("a", "Bash", {"command": "git log -p"}, CWD).action is Action.ALLOW
