"""The GCS emulator (gcp-storage-emulator) as a process tests can stop and start again.

Objects are kept in a data directory, so a stopped emulator started again on the same port
still has them (a container replaced while the bucket lives on). `client()` is the real
google-cloud-storage client pointed at it with anonymous credentials.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Emulator:
    def __init__(self, data_dir: Path | None = None, port: int | None = None) -> None:
        self.port = port or _free_port()
        self.data_dir = data_dir or Path(tempfile.mkdtemp(prefix="sbgcs"))
        self.host = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 20.0) -> None:
        exe = Path(sys.executable).with_name("gcp-storage-emulator")
        self.proc = subprocess.Popen(
            [str(exe), "--data-dir", str(self.data_dir), "start", "--host", "127.0.0.1",
             "--port", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"the GCS emulator did not start on port {self.port}")

    def stop(self) -> None:
        """Killed, as a network that goes away would be: no orderly goodbye."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None

    def client(self) -> Any:
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        os.environ["STORAGE_EMULATOR_HOST"] = self.host
        return storage.Client(project="test", credentials=AnonymousCredentials())

    def bucket(self, name: str) -> Any:
        client = self.client()
        bucket = client.bucket(name)
        if not bucket.exists():
            bucket = client.create_bucket(name)
        return bucket
