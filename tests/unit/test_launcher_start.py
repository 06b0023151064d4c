"""What an agent's start waits for in the launcher (two interpreter starts of it): it runs
precompiled, imports only built-in modules, and hands bwrap exactly the argv and the
allowlisted environment the supervisor built."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from supervisor import launcher
from supervisor.process.agent import install_launcher, launcher_files

# What made every start slower: `signal` imports `enum`, `json` imports `re`, and ctypes.
HEAVY = {"enum", "re", "json", "signal", "ctypes", "functools", "collections"}

FAKE_BWRAP = f"""#!{sys.executable} -S
import json, os, sys
with open(os.environ["OUT"], "w") as fh:
    json.dump({{"argv": sys.argv, "env": dict(os.environ), "sid": os.getsid(0),
               "pid": os.getpid()}}, fh)
"""


def test_the_installed_launcher_is_precompiled_and_imports_only_builtins(tmp_path: Path) -> None:
    """Regression: the launcher was a 380-line script (compiled at each of its two starts per
    agent) whose `import signal` and `import json` loaded enum and re: about 40 ms of CPU per
    spawn against 25 now."""
    stub = install_launcher(tmp_path)
    assert launcher_files(stub)[1].is_file()
    assert len(stub.read_bytes()) < 400  # the stub only loads the compiled code
    assert os.access(stub, os.X_OK)
    done = subprocess.run([sys.executable, "-S", "-E", "-X", "importtime", str(stub)],
                          env={}, capture_output=True, text=True, timeout=20)
    assert done.returncode == 2
    assert f"{launcher.CLI_VAR} is not set" in done.stderr  # the launcher's own code ran
    imported = {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines()
                if line.startswith("import time:") and "|" in line}
    assert "_signal" in imported or "marshal" in imported, done.stderr
    assert not imported & HEAVY, sorted(imported & HEAVY)


def test_bwrap_gets_the_exact_argv_and_only_the_allowlisted_environment(tmp_path: Path) -> None:
    """The outer stage decodes bwrap's argv from the environment byte for byte (spaces,
    newlines, quotes, '=', bytes that are not UTF-8), appends the sandbox's init (this
    launcher again) and the CLI's arguments, and execs it in a session of its own with nothing
    of the environment but the allowlist."""
    stub = install_launcher(tmp_path / "run")
    bwrap = tmp_path / "bwrap"
    bwrap.write_text(FAKE_BWRAP)
    bwrap.chmod(0o755)
    odd = ["--bind", "/a b/c\nd", "/x'y\"z", "--setenv", "K", "v=1", os.fsdecode(b"/caf\xe9")]
    out = tmp_path / "out.json"
    env = {
        launcher.CLI_VAR: "/bin/true",
        launcher.SANDBOX_VAR: launcher.encode_argv([str(bwrap), *odd]),
        launcher.KEYS_VAR: "OUT,ALLOWED",
        launcher.PARENT_VAR: str(os.getpid()),
        launcher.TAG_VAR: "inst/agent",
        "OUT": str(out),
        "ALLOWED": "yes",
        "TELEGRAM_BOT_TOKEN": "not-for-agents",
    }
    done = subprocess.run([str(stub), "--verbose", "a b"], env=env, capture_output=True,
                          timeout=20)
    assert done.returncode == 0, done.stderr
    seen = json.loads(out.read_text())
    python = os.path.realpath(sys.executable)
    assert seen["argv"][1:] == [*odd, "--", python, "-S", "-E", str(stub), "--verbose", "a b"]
    assert seen["sid"] == seen["pid"]  # out of the supervisor's session and process group
    assert "TELEGRAM_BOT_TOKEN" not in seen["env"]
    assert launcher.SANDBOX_VAR not in seen["env"] and launcher.PARENT_VAR not in seen["env"]
    assert seen["env"]["ALLOWED"] == "yes"
    assert seen["env"][launcher.STAGE_VAR] == "inner"
    assert seen["env"][launcher.TAG_VAR] == "inst/agent"
