"""Escalation round trip with 1,000,000 stored notices vs the same on an empty database, in process
(no CLI: open -> delivered to a front end -> answered), goal within 1.2x: the outbox follows an
indexed delivery cursor, never a scan of history. The suite's entry for
`bench/escalation_roundtrip.py --in-process N` (100,000 under BENCH_SMOKE=1)."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

SUITE = {"timeout_s": 900}

if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    from os import environ
    n = "100000" if environ.get("BENCH_SMOKE") == "1" else "1000000"
    sys.argv = [str(here / "escalation_roundtrip.py"), "--in-process", n]
    runpy.run_path(sys.argv[0], run_name="__main__")
