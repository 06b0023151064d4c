"""deploy/.env.example names every environment variable a setting is read from, and nothing else;
it is what deploy/ci/env_example.py writes from the settings model and docs/configuration.md."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

from supervisor.config import Settings
from supervisor.config_sources import key_of

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "deploy" / ".env.example"


def test_every_environment_variable_is_in_the_example_and_nothing_else():
    named = set(re.findall(r"^(?:# )?([A-Z][A-Z0-9_]+)=", EXAMPLE.read_text(), re.M))
    wanted = {v for f in Settings.model_fields.values() for v in key_of(f).variables}
    assert named == wanted, (f"missing: {sorted(wanted - named)}; unknown: {sorted(named - wanted)}"
                             "; run: python deploy/ci/env_example.py")


def test_the_example_is_what_the_generator_writes():
    render = runpy.run_path(str(ROOT / "deploy" / "ci" / "env_example.py"))["render"]
    assert EXAMPLE.read_text() == render(), "stale: run python deploy/ci/env_example.py"


def test_every_line_is_described():
    lines = EXAMPLE.read_text().splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^(?:# )?[A-Z][A-Z0-9_]+=", line):
            assert lines[i - 1].startswith("# ") and len(lines[i - 1]) > 4, line
