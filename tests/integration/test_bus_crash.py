"""The bus across a SIGKILL of the supervisor: an acknowledged /ask is never lost. The supervisor
is a real `switchboard run` subprocess on the fake CLI, driven through its console."""

from __future__ import annotations

import os
import signal

import pytest

from tests.subproc import Supervisor, write_config

pytestmark = [pytest.mark.timeout(120)]


def test_acknowledged_ask_survives_sigkill_and_is_delivered_after_restart(short_home):
    home = short_home / "sb"
    write_config(home, fake=True)
    sup = Supervisor(home)
    try:
        sup.expect("Switchboard console")
        sup.send("/spawn w SLEEP 60")
        sup.expect("[w] starting → working")
        sup.send("/ask w after the crash")
        sup.expect("after 1 queued")  # acknowledged: stored before the reply
        os.kill(sup.proc.pid, signal.SIGKILL)
        sup.proc.wait(10)
    finally:
        sup.close()
    sup2 = Supervisor(home)
    try:
        sup2.expect("Switchboard console")
        # Both come back as one turn: the one whose turn was cut (second attempt), then the
        # acknowledged /ask, in order.
        line = sup2.expect("after the crash", 60)
        sup2.expect("[w] ✓ turn finished", 30)
        assert "SLEEP 60" in "\n".join(sup2.seen) and 'attempt="2"' in "\n".join(sup2.seen)
        assert line
        sup2.send("/quit")
        sup2.proc.wait(30)
    finally:
        sup2.close()
