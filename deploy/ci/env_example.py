"""Write deploy/.env.example from the settings model and docs/configuration.md: every setting
that has an environment variable, commented out at its default, with its one-line description.

    python deploy/ci/env_example.py          (tests/unit/test_env_example.py checks the result)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from supervisor.config import Settings  # noqa: E402
from supervisor.config_sources import key_of  # noqa: E402

HEADER = """\
# Switchboard's settings as environment variables, for `docker compose` (env_file: .env) or any
# other way of running the image. Copy to deploy/.env and fill in what you use; everything
# commented out keeps its default. Full descriptions: docs/configuration.md.
# Never commit the filled-in copy: it holds the chat tokens and the API key.
"""
# Shown uncommented: what a container deployment nearly always sets.
ESSENTIAL = ("ANTHROPIC_API_KEY", "TELEGRAM_BOT_TOKEN", "TELEGRAM_ADMIN_IDS")


def rows() -> dict[str, tuple[str, str]]:
    """setting name -> (default as documented, what it does), from docs/configuration.md."""
    out = {}
    for line in (ROOT / "docs" / "configuration.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and (m := re.fullmatch(r"`([a-z_0-9]+)`", cells[0])):
            plain = [re.sub(r"\[([^]]+)\]\([^)]+\)", r"\1", c).replace("`", "") for c in cells]
            out[m.group(1)] = (plain[4], plain[5])
    return out


def render() -> str:
    docs = rows()
    lines = [HEADER]
    for name, field in Settings.model_fields.items():
        env = key_of(field).env
        if not env:
            continue
        default, what = docs.get(name, ("", ""))
        lines.append(f"# {what} (default: {default})" if default and default != "—"
                     else f"# {what}")
        lines.append(f"{env}=" if env in ESSENTIAL else f"# {env}=")
        for other in key_of(field).also_env:  # a platform's own name, read when env is unset
            lines.append(f"# The same, under the name a platform sets (read when {env} is unset)")
            lines.append(f"# {other}=")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    (ROOT / "deploy" / ".env.example").write_text(render())
