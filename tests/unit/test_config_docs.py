"""docs/configuration.md's table of settings matches the Settings model, and its example loads."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, get_args

import annotated_types
import pytest
from pydantic.fields import FieldInfo

from supervisor.config import Settings
from supervisor.config_sources import choices_of, key_of, kind_of

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
COLUMNS = ["Setting", "Environment variable", "TOML key", "Type", "Default", "What it does"]
NONE = "—"


def table() -> dict[str, dict[str, str]]:
    lines = DOC.read_text().splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("| Setting |"))
    assert [c.strip() for c in lines[head].strip("|").split("|")] == COLUMNS
    rows: dict[str, dict[str, str]] = {}
    for line in lines[head + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        assert len(cells) == len(COLUMNS), line
        row = dict(zip(COLUMNS, cells, strict=True))
        name = spans(row["Setting"])[0]
        assert name not in rows, f"{name} is documented twice"
        rows[name] = row
    return rows


def spans(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


ROWS = table()


def test_every_setting_is_documented_and_nothing_else():
    assert set(ROWS) == set(Settings.model_fields)


@pytest.mark.parametrize("name", sorted(Settings.model_fields))
def test_the_variable_and_the_toml_keys(name):
    key, row = key_of(Settings.model_fields[name]), ROWS[name]
    # A setting's own variable first, then the others it reads (http_port: PORT).
    assert row["Environment variable"] == (", ".join(f"`{v}`" for v in key.variables)
                                           if key.variables else NONE)
    documented = {s.strip("[]") for s in spans(row["TOML key"])}
    assert documented == {k for k in (key.toml, key.flat) if k}
    if key.toml:  # the canonical key comes first, the older flat name in brackets after it
        assert spans(row["TOML key"])[0].strip("[]") == key.toml
    else:
        assert row["TOML key"] == NONE


@pytest.mark.parametrize("name", sorted(Settings.model_fields))
def test_the_type(name):
    field, cell = Settings.model_fields[name], ROWS[name]["Type"]
    kind = kind_of(field)
    assert kind is not None, f"{name} has no Kind"
    assert cell.startswith(kind.name), (cell, kind.name)
    if choices_of(field):
        assert spans(cell) == list(choices_of(field))
    assert bounds(field) in cell


def bounds(field: FieldInfo) -> str:
    """The range a number must be in, as the Type column writes it ("" when none)."""
    ge = gt = le = None
    stack: list[Any] = [*field.metadata, field.annotation]
    while stack:
        item = stack.pop()
        if isinstance(item, FieldInfo):
            stack.extend(item.metadata)
        elif isinstance(item, annotated_types.Ge):
            ge = item.ge
        elif isinstance(item, annotated_types.Gt):
            gt = item.gt
        elif isinstance(item, annotated_types.Le):
            le = item.le
        stack.extend(get_args(item))
    low = f"{ge:g}" if ge is not None else None
    if le is not None:
        return f"{low}-{le:g}"
    if low is not None:
        return f"≥ {low}"
    return f"> {gt:g}" if gt is not None else ""


@pytest.mark.parametrize("name", sorted(Settings.model_fields))
def test_the_default(name):
    field, cell = Settings.model_fields[name], ROWS[name]["Default"]
    if field.is_required():
        return  # home: worked out by Settings.load from HOME (tested in test_config.py)
    default = field.get_default(call_default_factory=True)
    if default is None:
        assert cell.startswith("unset"), cell
        return
    literal = tomllib.loads(f"v = {spans(cell)[0]}")["v"]
    expected: Any = default
    if isinstance(default, tuple):
        expected = list(default)
    elif isinstance(default, dict):
        expected = dict(default)
    assert literal == expected, (literal, default)
    assert isinstance(literal, bool) == isinstance(default, bool)  # `1` is not `true`


def test_the_example_loads(tmp_path):
    example = re.search(r"## Example\n\n```toml\n(.*?)```", DOC.read_text(), re.S)
    assert example is not None
    (tmp_path / "switchboard.toml").write_text(example.group(1))
    s = Settings.load({"HOME": str(tmp_path), "SWITCHBOARD_HOME": str(tmp_path)})
    assert s.max_agents == 20 and s.gcs_bucket == "my-team-switchboard-ops"
    assert s.telegram_admin_ids == ("111222333",)


def test_the_readme_points_here():
    readme = (DOC.parents[1] / "README.md").read_text()
    section = readme.split("## Configuration\n", 1)[1].split("\n## ", 1)[0]
    assert "(docs/configuration.md)" in section
