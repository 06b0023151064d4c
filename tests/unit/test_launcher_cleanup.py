"""The unsandboxed launcher (a subreaper around the CLI): it ends every orphan the CLI left,
woken by child exits; and it starts the CLI at the lower priority agent_nice asks for."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from supervisor import launcher

CLI = f"""#!{sys.executable} -S
import os, subprocess, sys
out = sys.argv[-1]
# Orphans in sessions of their own: a sleep, and a sh waiting on a sleep of its own (orphaned
# only once the launcher has killed the sh).
subprocess.Popen(["sh", "-c", "sleep 1000 & echo $! > " + out + ".inner; wait"],
                 start_new_session=True)
sleeper = subprocess.Popen(["sleep", "1000"], start_new_session=True)
with open("/proc/self/autogroup") as fh:
    group = fh.read().split()[-1]
with open(out + ".tmp", "w") as fh:
    fh.write("%d %s %d" % (os.getpriority(os.PRIO_PROCESS, 0), group, sleeper.pid))
os.rename(out + ".tmp", out)
while not os.path.exists(out + ".inner"):
    pass
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except OSError:
        return False
    return raw[raw.rfind(b")") + 2:][:1] not in (b"Z", b"X")


def test_the_launcher_ends_every_orphan_and_lowers_the_priority(tmp_path: Path) -> None:
    cli = tmp_path / "cli"
    cli.write_text(CLI)
    cli.chmod(0o755)
    out = tmp_path / "out"
    env = {launcher.CLI_VAR: str(cli), launcher.NICE_VAR: "5", launcher.KEYS_VAR: "PATH",
           "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-S", "-E", launcher.__file__, str(out)], env=env,
                          timeout=20, capture_output=True)
    took = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    nice, group, sleeper = out.read_text().split()
    with open("/proc/self/autogroup") as fh:
        # Empty when this session never called setsid() (a container's init): the root group,
        # which weighs as nice 0; the launcher reads it the same way.
        mine = int((fh.read().split() or ["0"])[-1])
    assert int(nice) == min(19, os.getpriority(os.PRIO_PROCESS, 0) + 5)
    assert int(group) == min(19, mine + 5)
    inner = int((tmp_path / "out.inner").read_text())
    assert not _alive(int(sleeper))
    assert not _alive(inner)  # the grandchild of an orphan: reparented to the launcher, killed
    left = [line for line in subprocess.run(["ps", "-eo", "pid,args"], capture_output=True,
                                            text=True).stdout.splitlines()
            if str(tmp_path) in line]
    assert not left, left
    assert took < 10, took
