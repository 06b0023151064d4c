"""Each guard of an operator's /ask has one place (issue 24), checked in the source so a second
copy cannot creep back: one sanitiser, one rate limiter, one halt check and one prompt-length
check on the /ask path. tests/integration/test_guards_once.py shows the same in behaviour."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("bot", "commands", "supervisor", "store")


def sources() -> dict[str, ast.Module]:
    return {str(p.relative_to(ROOT)): ast.parse(p.read_text())
            for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def calls_of(tree: ast.AST, name: str) -> list[ast.Call]:
    """Calls of `name(...)` or `x.name(...)`."""
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and (
        (isinstance(n.func, ast.Name) and n.func.id == name)
        or (isinstance(n.func, ast.Attribute) and n.func.attr == name))]


def method(tree: ast.Module, cls: str, name: str) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name == name:
                    return item
    raise AssertionError(f"{cls}.{name} not found")


def test_one_sanitiser_module_and_only_it_makes_clean_text():
    assert not (ROOT / "bot" / "kit" / "sanitize.py").exists()
    makers = {path for path, tree in sources().items() if calls_of(tree, "CleanText")}
    assert makers == {"supervisor/sanitize.py"}


def test_one_rate_limiter():
    """The API's command rate and the pool's message and spawn rates are one limiter, on the
    supervisor's clock."""
    makers = {path for path, tree in sources().items() if calls_of(tree, "RateLimiter")}
    assert makers == {"supervisor/core.py"}


def test_the_ask_path_checks_the_kill_switch_once_in_the_pools_admission():
    trees = sources()
    api_ask = method(trees["supervisor/api/__init__.py"], "SupervisorAPI", "ask")
    pool_ask = method(trees["supervisor/agents/pool.py"], "AgentPool", "ask")
    admit = method(trees["supervisor/agents/runner.py"], "AgentRunner", "admit")
    submit = method(trees["supervisor/agents/runner.py"], "AgentRunner", "submit")
    assert not calls_of(api_ask, "_not_halted") and not calls_of(api_ask, "check")
    assert not calls_of(admit, "check") and not calls_of(submit, "check")
    first = pool_ask.body[1]  # after the docstring: before anything is looked up or counted
    assert isinstance(first, ast.Expr) and ast.unparse(first) == "self.killswitch.check()"


def test_the_prompt_limit_is_read_where_messages_are_stored_and_where_agents_are_made():
    readers = {path for path, tree in sources().items()
               if any(isinstance(n, ast.Attribute) and n.attr == "max_prompt_chars"
                      for n in ast.walk(tree))}
    assert readers == {"supervisor/bus/core.py", "supervisor/agents/pool.py"}


def test_the_dispatcher_keeps_no_length_check_of_its_own():
    tree = sources()["commands/dispatcher.py"]
    dispatch = method(tree, "Dispatcher", "dispatch")
    compared = [ast.unparse(n) for n in ast.walk(dispatch) if isinstance(n, ast.Compare)]
    assert not [c for c in compared if "len(" in c], compared  # the bound is clean's
    assert calls_of(dispatch, "clean")
