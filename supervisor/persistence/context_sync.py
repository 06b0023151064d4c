"""The shared-context directory (Markdown notes every agent may read and write) to and from
the remote, incrementally.

Each file's content is stored once under `context/files/<sha256>`; `context/manifest.json`
({"generation", "files": {path: sha256}}) is written last, so a sync cut short leaves the
previous manifest, and with it a complete earlier set of files. Only regular files are read
(never through a symbolic link an agent planted: it could point at the supervisor's own
secrets), each up to MAX_FILE_BYTES; anything else is skipped and logged. A restore writes only
paths inside the directory.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from supervisor.persistence.remote import Remote
from supervisor.persistence.remote import read_manifest as remote_manifest

logger = logging.getLogger(__name__)

MANIFEST = "context/manifest.json"
FILES = "context/files/"
MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_FILES = 2000


@dataclass(frozen=True, slots=True)
class Synced:
    generation: int
    files: int
    uploaded: int  # contents that were new to the remote


def _read_regular(path: Path) -> bytes | None:
    """The file's bytes if it is a regular file of ours to read; never follows a link."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE_BYTES:
            return None
        chunks = []
        while chunk := os.read(fd, 1024 * 1024):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def scan(root: Path) -> dict[str, bytes]:
    """Relative path -> content for every file worth syncing under `root`."""
    out: dict[str, bytes] = {}
    if not root.is_dir():
        return out
    for base, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = [d for d in dirs if not (Path(base) / d).is_symlink()]
        for name in files:
            p = Path(base) / name
            data = _read_regular(p)
            rel = p.relative_to(root).as_posix()
            if data is None:
                logger.warning("context file skipped (not a regular file, or over %d bytes) "
                               "path=%s", MAX_FILE_BYTES, rel)
                continue
            out[rel] = data
            if len(out) >= MAX_FILES:
                logger.warning("context directory holds over %d files: the rest not synced",
                               MAX_FILES)
                return out
    return out


def digest_of(files: dict[str, bytes]) -> dict[str, str]:
    return {rel: hashlib.sha256(data).hexdigest() for rel, data in files.items()}


def read_manifest(remote: Remote) -> dict[str, Any] | None:
    return remote_manifest(remote, MANIFEST, lambda m: isinstance(m.get("files"), dict),
                           "context manifest")


def upload(remote: Remote, root: Path, generation: int,
           last: dict[str, str] | None) -> tuple[Synced | None, dict[str, str]]:
    """Sync `root` up if it changed since `last` (path -> sha256 as last uploaded). Returns
    (what was done or None if nothing changed, the digest now)."""
    files = scan(root)
    now = digest_of(files)
    if last is not None and now == last:
        return None, now
    known = set(remote.list(FILES))
    uploaded = 0
    for rel, sha in now.items():
        if FILES + sha not in known:
            remote.put_bytes(FILES + sha, files[rel])
            known.add(FILES + sha)
            uploaded += 1
    remote.put_bytes(MANIFEST, json.dumps({"generation": generation, "files": now}).encode())
    # Contents no manifest names any more: the previous manifest's are kept until the next
    # sync, so a reader holding it still finds its files.
    wanted = set(now.values()) | set((last or {}).values())
    for obj in known:
        if obj[len(FILES):] not in wanted:
            remote.delete(obj)
    return Synced(generation, len(now), uploaded), now


def restore(remote: Remote, root: Path) -> int:
    """Write the manifest's files into `root` (created); returns how many. A file whose
    content does not match its checksum is skipped and logged, never written."""
    manifest = read_manifest(remote)
    if manifest is None:
        return 0
    root.mkdir(parents=True, exist_ok=True)
    top = root.resolve()
    written = 0
    for rel, sha in dict(manifest["files"]).items():
        dest = (top / str(rel)).resolve()
        if not str(dest).startswith(str(top) + os.sep):
            logger.error("context path outside the directory refused path=%s", rel)
            continue
        data = remote.get_bytes(FILES + str(sha))
        if data is None or hashlib.sha256(data).hexdigest() != sha:
            logger.error("context file refused (missing or checksum mismatch) path=%s", rel)
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.restore")
        tmp.write_bytes(data)
        os.replace(tmp, dest)
        written += 1
    return written
