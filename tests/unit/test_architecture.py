"""The import-linter contracts in pyproject.toml hold: imports point bot -> commands ->
supervisor -> store, and commands and front ends reach the supervisor only through
supervisor.api (the composition root and the entry point excepted, by name). And no module
reads a private attribute of another object: collaborators get public methods or narrow
protocols (the pool's runners through the fleet registry, supervisor/agents/fleet.py)."""

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


def _contracts() -> list[dict[str, object]]:
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return list(config["tool"]["importlinter"]["contracts"])


def _parts() -> set[str]:
    """Every top-level module and package of supervisor/."""
    top = ROOT / "supervisor"
    return {p.stem for p in top.glob("*.py") if p.stem != "__init__"} | {
        p.name for p in top.iterdir() if (p / "__init__.py").is_file()}


def test_every_part_of_the_supervisor_is_in_a_layer():
    [layers] = [c for c in _contracts() if c.get("containers") == ["supervisor"]]
    named = {part.strip() for layer in layers["layers"]  # type: ignore[union-attr]
             for part in str(layer).replace("|", ":").split(":")}
    assert _parts() - named == set(), "add it to the layers contract in pyproject.toml"
    assert named - _parts() == set()


def test_the_front_ends_whitelist_names_every_other_part():
    """bot and commands may import supervisor.api and the vocabulary it names; every other
    part of supervisor/ is forbidden to them by name, so a new part is forbidden until it is
    placed on purpose."""
    [whitelist] = [c for c in _contracts() if c["name"].startswith(  # type: ignore[union-attr]
        "Commands and front ends reach the supervisor only through")]
    forbidden = {str(m).removeprefix("supervisor.") for m in whitelist["forbidden_modules"]
                 if str(m).startswith("supervisor.")}  # type: ignore[union-attr]
    vocabulary = {"api", "config", "config_sources", "config_types", "clock", "errors", "events",
                  "service", "names", "redact", "sanitize", "heap"}
    assert _parts() - vocabulary == forbidden


def test_no_module_outside_the_tests_is_over_600_lines():
    long = [f"{path.relative_to(ROOT)}: {n}"
            for package in ("bot", "commands", "supervisor", "store", "bench", "deploy")
            for path in sorted((ROOT / package).rglob("*.py"))
            if (n := len(path.read_text().splitlines())) > 600]
    assert long == [], "split these (docs/architecture.md says where each part belongs)"
