"""The import-linter contracts in pyproject.toml hold: imports point bot -> commands ->
supervisor -> store, and commands and front ends reach the supervisor only through
supervisor.api (the composition root and the entry point excepted, by name). And no module
reads a private attribute of another object: collaborators get public methods or narrow
protocols (the pool's runners through the fleet registry, supervisor/fleet.py)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_contracts_are_kept():
    exe = Path(sys.executable).with_name("lint-imports")
    out = subprocess.run([str(exe), "--no-cache", "--no-logo", str(ROOT / "pyproject.toml")],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 broken" in out.stdout, out.stdout


# Underscored names that are public API: os._exit, namedtuple's _make.
PUBLIC_UNDERSCORED = {"_exit", "_make"}


def private_reads(source: str) -> list[tuple[int, str]]:
    """`x._name` where x is not self or cls (nor a fresh instance of the same class,
    `type(self)(...)._name`)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or \
                node.attr.startswith("__") or node.attr in PUBLIC_UNDERSCORED:
            continue
        value = node.value
        if isinstance(value, ast.Name) and value.id in ("self", "cls"):
            continue
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Call) and \
                ast.unparse(value.func) == "type(self)":
            continue
        found.append((node.lineno, ast.unparse(node)))
    return found


def test_the_check_finds_what_it_should():
    assert private_reads("self._pool._runners.get(x)") == [(1, "self._pool._runners")]
    assert private_reads("pool._require_running()") == [(1, "pool._require_running")]
    assert private_reads("self._a; cls._b; os._exit(0); T._make(r)") == []


def test_no_module_reads_another_objects_private_attributes():
    offenders = [f"{path.relative_to(ROOT)}:{line}: {expr}"
                 for package in ("bot", "commands", "supervisor", "store")
                 for path in sorted((ROOT / package).rglob("*.py"))
                 for line, expr in private_reads(path.read_text())]
    assert offenders == [], "\n".join(offenders)
