"""The policy's reading of a line against what real bash runs when given it.

Every line of CORPUS is (a) checked with `bash -n`: a line bash cannot parse must not be allowed;
(b) run by real bash, with an empty environment (what `env -i` gives), in a throw-away directory,
with PATH holding only stub programs that record their name and arguments and do nothing else
(sh and bash stubs record, then hand over to the real bash so that nested code runs too); if the
default policy allows the line, every program a stub recorded must be one the policy allows on
its own. A line that was allowed and made git push, touch or rm run is a hole.

Lines run as whoever runs the tests, so they must stay harmless: relative paths only (the guard
below refuses absolute paths other than /dev/null, '..' and kill), and no network.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from supervisor.guard.policy import Action, Policy

BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="needs bash")
POLICY = Policy.load(None)
TIMEOUT_S = 5.0
STUBS = (
    "git", "rm", "curl", "wget", "touch", "push", "ls", "cat", "head", "tail", "wc", "grep",
    "which", "whoami", "uname", "basename", "dirname", "realpath", "env", "sudo", "xargs", "find",
    "python", "python3", "make", "tee", "cp", "mv", "ln", "sed", "chmod", "mkdir", "date",
    "sleep", "terraform", "gh", "nohup", "timeout", "nice", "id", "echo", "printf", "true",
)
SHELLS = ("sh", "bash")
HIDE = "x='a[$(touch pwned)]'; "  # a value that runs touch when evaluated as arithmetic

CORPUS = [
    # -- arithmetic contexts: the value of x is evaluated, its subscript runs $(...)
    "x='a[$(git push --force origin main)]'; echo $[x]",
    "y='a[$(touch pwned)]'; cd $[y]",
    "z='a[$(rm -rf important)]'; ls $[z]",
    HIDE + "echo $((x))",
    HIDE + 'echo "$[x + 1]"',
    HIDE + "(( x )); ls",
    HIDE + "let x; ls",
    HIDE + "[[ $x -eq 1 ]]; ls",
    HIDE + "[[ x -lt 1 ]]; ls",
    HIDE + "echo ${a[x]}",
    HIDE + "y=abc; echo ${y:x}",
    HIDE + "set -- a b; echo ${@:x}",
    HIDE + "echo ${!x}",
    HIDE + "a[x]=1; ls",
    HIDE + "a=([x]=1); ls",
    HIDE + "a=(); a[$x]=1; ls",
    HIDE + "declare -i n=x; ls",
    HIDE + "declare -i n; n=x; ls",
    HIDE + "for ((i=x; 0; )); do :; done; ls",
    HIDE + "cat <<E\n$[x]\nE",
    "x='$(touch pwned)'; echo ${x@P}",
    "[[ -v 'a[$(touch pwned)]' ]]; ls",
    "test -v 'a[$(touch pwned)]'; ls",
    "[ -v 'a[$(touch pwned)]' ]; ls",
    "printf -v 'a[$(touch pwned)]' x; ls",
    "read 'a[$(touch pwned)]' <<< hi; ls",
    "a=(1); unset 'a[$(touch pwned)]'; ls",
    "declare -a arr='([$(touch pwned)]=1)'; ls",
    "v='([$(touch pwned)]=1)'; declare -a arr=$v; ls",
    "declare 'a[$(touch pwned)]=1'; ls",
    "f() { local 'a[$(touch pwned)]=1'; }; f; ls",
    "declare -n r='a[$(touch pwned)]'; echo $r",
    "mapfile -C 'touch pwned' -c 1 a <<< x; ls",
    "echo $(( $(touch pwned) ))",
    "echo $((touch pwned) )",
    "echo $((touch pwned))",
    "echo $((1+2)) $[2*3]",
    "(( 1 < 2 )) && ls",
    # -- quoting and spelling of the program
    "g''it push --force",
    "\\git push --force",
    "$'\\x67it' push --force",
    "$'\\154\\163' -la",
    '"l"s -la',
    "l\\s",
    "{git,push,--force}",
    "echo {a,b}{c,d}",
    "t=tou; $t'ch' pwned",
    "a=(ls -la); \"${a[@]}\"",
    "x=(touch pwned); ${x[@]}",
    # -- substitutions, here-strings, here-documents, process substitution
    "cat <<< \"$(touch pwned)\"",
    "cat <(touch pwned)",
    "echo >(touch pwned)",
    "x=$(touch pwned)",
    "echo \"$(touch pwned)\"",
    "echo `touch pwned`",
    "ls $(touch pwned)",
    ": ${x:=$(touch pwned)}",
    "echo ${x:-$(touch pwned)}",
    "cat <<EOF\n$(touch pwned)\nEOF",
    "cat <<'EOF'\n$(touch pwned)\nEOF",
    "[[ -n $(touch pwned) ]]",
    # -- eval, shells, wrappers
    "eval 'touch pwned'",
    "eval \"$(echo touch pwned)\"",
    "x='touch pwned'; eval $x",
    "bash -c 'touch pwned'",
    "sh -c 'ls -la'",
    "bash <<< 'touch pwned'",
    "echo touch pwned | sh",
    "command -p touch pwned",
    "command ls",
    "\\command touch pwned",
    "builtin echo hi",
    "env touch pwned",
    "sudo touch pwned",
    "nohup touch pwned",
    "timeout 1 touch pwned",
    "exec touch pwned",
    "exec ls",
    "ls | xargs touch",
    "find . -exec touch pwned \\;",
    "coproc touch pwned",
    "coproc { touch pwned; }",
    "coproc ls",
    "time ls",
    "! ls",
    # -- aliases, traps, start-up variables, functions named like builtins and programs
    "shopt -s expand_aliases\nalias ls='touch pwned'\nls",
    "alias ls='touch pwned'; ls",
    "trap 'touch pwned' EXIT; ls",
    "trap 'touch pwned' DEBUG; ls",
    "PROMPT_COMMAND='touch pwned'; ls",
    "PS4='$(touch pwned)'; set -x; ls",
    "echo 'touch pwned' > evil.sh; BASH_ENV=./evil.sh bash -c ls",
    "BASH_ENV=README bash -c ls",
    "echo() { touch pwned; }; echo hi",
    "ls() { touch pwned; }; ls",
    "cd() { touch pwned; }; cd x",
    "command_not_found_handle() { touch pwned; }; nosuchprogram",
    "enable -n echo; echo hi",
    "hash -p ./README ls; ls",
    # -- IFS, exec and descriptors
    "IFS=x; y=touchxpwned; $y",
    "IFS=,; set -- touch,pwned; $*",
    "exec 3>out; echo hi >&3",
    "exec 3<&0; ls",
    "ls 3>&1 1>&2 2>&3",
    "echo hi > /dev/null",
    # -- plain read-only lines: allowed, and what they run is allowed
    "ls -la",
    "cat README | head -1",
    "cd sub && ls",
    "git status",
    "git log --oneline -3",
    "git log -p --ext-diff",
    "g=git; $g status",
    "a=ls; $a",
    "(ls)",
    "{ ls; }",
    "if ls; then touch pwned; fi",
    "case x in x) touch pwned;; esac",
    "while false; do :; done; ls",
    "echo hi; exit; touch pwned",
    "ls & wait",
    "ls *",
    "echo ~",
    "echo $'a\\nb'",
    # -- lines bash cannot parse
    'echo "unterminated',
    "if true; then ls",
    "ls )",
    "echo $(",
    "case x in",
    "echo $((1)+(2))",
    "((1)+(2))",
]

_UNSAFE = re.compile(r"(?<![\w.])/(?!dev/null)|\.\.|\bkill\b")


def test_corpus_lines_are_safe_to_run() -> None:
    bad = [line for line in CORPUS if _UNSAFE.search(line)]
    assert not bad, f"lines that may reach outside their directory: {bad}"


def write_stubs(bin_dir: Path) -> None:
    # -p: the stub itself ignores BASH_ENV and exported functions (a line setting BASH_ENV
    # would otherwise recurse through every stub); the real bash behind sh/bash does not.
    record = ('#!{bash} -p\nn=${{0##*/}}\nprintf \'%s\\0\' "$n" "$@" > '
              '"$SWB_LOG/$n.$$.$RANDOM$RANDOM"\n')
    for name in STUBS + SHELLS:
        text = record.format(bash=BASH)
        if name in SHELLS:
            text += f'exec {shlex.quote(str(BASH))} "$@"\n'
        path = bin_dir / name
        path.write_text(text)
        path.chmod(0o755)


@pytest.fixture(scope="module")
def stubs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    bin_dir = tmp_path_factory.mktemp("stub-bin")
    write_stubs(bin_dir)
    return bin_dir


def _run(line: str, cwd: Path, bin_dir: Path, log: Path) -> None:
    env = {"PATH": str(bin_dir), "HOME": str(cwd), "SWB_LOG": str(log)}  # env -i, then these
    proc = subprocess.Popen([str(BASH), "--norc", "--noprofile", "-c", line], cwd=cwd, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + TIMEOUT_S
    try:
        proc.wait(timeout=TIMEOUT_S)
        settle = min(deadline, time.monotonic() + 0.5)
        while time.monotonic() < settle:
            os.killpg(proc.pid, 0)  # background children (coproc, >( ), &) may still run
            time.sleep(0.01)
    except (subprocess.TimeoutExpired, ProcessLookupError):
        pass
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def _recorded(log: Path) -> list[list[str]]:
    calls = []
    for f in sorted(log.iterdir()):
        parts = f.read_bytes().decode("utf-8", "replace").split("\0")
        calls.append(parts[:-1] if parts and parts[-1] == "" else parts)
    return calls


@pytest.mark.parametrize("line", CORPUS, ids=[f"{i:03d}" for i in range(len(CORPUS))])
def test_what_bash_runs_for_an_allowed_line_is_allowed(line: str, stubs: Path,
                                                        tmp_path: Path) -> None:
    work, log = tmp_path / "work", tmp_path / "log"
    work.mkdir()
    log.mkdir()
    (work / "README").write_text("hello\n")
    (work / "sub").mkdir()
    decision = POLICY.decide("worker", "Bash", {"command": line}, str(work))
    parses = subprocess.run([str(BASH), "-n", "-c", line], env={}, capture_output=True,
                            timeout=TIMEOUT_S).returncode == 0
    if not parses:
        assert decision.action is not Action.ALLOW, ("bash cannot parse it", decision)
        return
    _run(line, work, stubs, log)
    if decision.action is not Action.ALLOW:
        return
    # command -p and the like reach the system's programs, past the stubs
    assert not (work / "pwned").exists(), f"allowed {line!r}, and something created 'pwned'"
    for call in _recorded(log):
        text = shlex.join(call)
        alone = POLICY.decide("worker", "Bash", {"command": text}, str(work))
        assert alone.action is Action.ALLOW, (
            f"allowed {line!r}, and bash ran {text!r}, which the policy does not allow: {alone}")
