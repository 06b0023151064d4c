"""The tests' warm `python -m bot.cli` (tests/zygote.py) is the CLI a cold start is: the same
output and exit codes, the child's own environment, stdin and stdout, signals seen as Popen sees
them; and the modules it imports ahead read nothing of the environment at import, so a child
that sets a variable is not served a value the zygote read before it."""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.subproc import Supervisor, write_config
from tests.zygote import Zygote

pytestmark = pytest.mark.timeout(60)
ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("bot", "commands", "supervisor", "store")


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")}
    env["SWITCHBOARD_HOME"] = str(home)
    return env


def _forked(argv: list[str], home: Path) -> tuple[int, str]:
    child = Zygote.get().spawn(argv, _env(home), ROOT)
    child.stdin.close()
    with child.stdout:
        out = child.stdout.read()
    return child.wait(30), out


def _cold(argv: list[str], home: Path) -> tuple[int, str]:
    done = subprocess.run([sys.executable, "-m", "bot.cli", *argv], env=_env(home), cwd=ROOT,
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=60)
    return done.returncode, done.stdout


def test_a_forked_cli_answers_as_a_cold_one(tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "switchboard.toml").write_text("kill_grace_s = 'soon'\n")
    for argv, home in ((["--version"], tmp_path / "a"), (["status"], tmp_path / "fresh"),
                       (["status"], bad), (["stauts"], tmp_path / "a")):
        assert _forked(argv, home) == _cold(argv, home), argv
    code, out = _forked(["status"], bad)  # the child's own SWITCHBOARD_HOME was read
    assert code == 2 and "kill_grace_s" in out


def test_stdin_signals_and_exit_codes_are_the_childs(short_home):
    home = short_home / "sb"
    write_config(home, fake=True)
    sup = Supervisor(home)
    try:
        sup.expect("Switchboard console")
        sup.send("/help")  # its stdin is the test's
        sup.expect("/spawn")
        assert sup.proc.poll() is None
        sup.proc.send_signal(signal.SIGKILL)
        assert sup.proc.wait(30) == -signal.SIGKILL  # as Popen reports a signal
        assert sup.proc.poll() == -signal.SIGKILL
    finally:
        sup.close()
    sup = Supervisor(home, console=False)
    try:
        sup.expect("running headless")
        sup.proc.send_signal(signal.SIGTERM)
        assert sup.proc.wait(30) == 0
    finally:
        sup.close()


def _reads_environment(node: ast.AST) -> bool:
    """`os.environ` or `getenv` in `node`, outside the lambdas it defines (run later). An
    `os.environ.setdefault` is no read: the zygote sets what its imports set in every child
    that does not set it itself, as those imports would."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Lambda) or (
                isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and n.func.attr == "setdefault" and isinstance(n.func.value, ast.Attribute)
                and n.func.value.attr == "environ"):
            continue
        name = n.attr if isinstance(n, ast.Attribute) else n.id if isinstance(n, ast.Name) else ""
        if name in ("environ", "environb", "getenv"):
            return True
        stack += ast.iter_child_nodes(n)
    return False


def _import_time_nodes(tree: ast.Module) -> list[ast.AST]:
    """Every statement run at import: module and class bodies, decorators and defaults, not
    the bodies of functions."""
    out: list[ast.AST] = []
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out += [*node.decorator_list, *node.args.defaults,
                    *[d for d in node.args.kw_defaults if d is not None]]
        elif isinstance(node, ast.ClassDef):
            out += [*node.decorator_list, *node.bases]
            stack += node.body
        elif isinstance(node, (ast.If, ast.Try)):
            stack += [*node.body, *node.orelse, *getattr(node, "finalbody", [])]
            stack += [s for h in getattr(node, "handlers", []) for s in h.body]
            if isinstance(node, ast.If):
                out.append(node.test)
        else:
            out.append(node)
    return out


def test_no_module_the_zygote_imports_reads_the_environment_at_import():
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            found += [f"{path.relative_to(ROOT)}:{n.lineno}" for n in _import_time_nodes(tree)
                      if hasattr(n, "lineno") and _reads_environment(n)]
    assert found == [], f"read the environment at import (a forked supervisor would see the " \
                        f"zygote's value): {found}"
