"""The import-linter contracts in pyproject.toml hold: imports point bot -> commands ->
supervisor -> store, and commands and front ends reach the supervisor only through
supervisor.api (the composition root and the entry point excepted, by name)."""

from __future__ import annotations

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
