"""Managed project memory: one `MEMORY.md` per project (a registered repository, or a working
directory), kept in the data directory where agents cannot reach it.

The file has two regions. Above the sentinel, the curated region: the operator's (`/memory
edit`), never rewritten by Switchboard, byte for byte. Below it, the managed region: one line per
finished turn (what the agent reported, or the first line of its answer), newest last, trimmed
to `memory_managed_bytes` (down to three quarters of it once over); what is trimmed is
appended to `ARCHIVE.md` first, which `/memory search` reads too. Every write holds the
project's lock (an flock on its `.lock`, so threads and processes queue alike) and replaces
the file atomically (a temporary file, fsync, rename), so a reader sees the old file or the new
one, never a torn one.

Each agent started on the project gets a slice of it (the curated region, then the newest
managed lines that fit) of at most `memory_slice_bytes`, appended to its system prompt through a
file (supervisor/agents/cli_launch.py), never on its command line.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

SENTINEL = b"<!-- switchboard: the managed region starts here; above is yours -->"
_SPLIT = b"\n" + SENTINEL + b"\n"
HEADER = "# Project memory"
_SLUG = re.compile(r"[^A-Za-z0-9._-]+")
ENTRY_CHARS = 300


@dataclass(frozen=True, slots=True)
class Memory:
    """One project's memory as read: `curated` exactly as stored, `managed` its lines."""

    project: str
    curated: bytes
    managed: tuple[str, ...]


def project_key(project: str) -> str:
    """The directory name of a project's memory: readable and unique (a hash of the name)."""
    digest = hashlib.sha256(project.encode()).hexdigest()[:12]
    tail = _SLUG.sub("_", project.rsplit("/", 1)[-1] or project)[:40].strip("._") or "project"
    return f"{tail}-{digest}"


def split(data: bytes) -> tuple[bytes, bytes]:
    """(curated, managed) of a file's bytes. The last sentinel line is ours (managed lines
    never hold it), so a curated region that quotes it is still the operator's, whole."""
    at = data.rfind(_SPLIT)
    if at < 0:
        return data, b""
    return data[:at], data[at + len(_SPLIT):]


def join(curated: bytes, managed: list[str]) -> bytes:
    body = "".join(f"{line}\n" for line in managed).encode()
    return curated + _SPLIT + body


def entry_line(at: float, agent: str, text: str) -> str:
    """One managed line: when, who, what, on one line, no sentinel, bounded."""
    flat = " ".join(text.replace(SENTINEL.decode(), "").split())[:ENTRY_CHARS]
    stamp = time.strftime("%Y-%m-%d %H:%M", time.gmtime(at))
    return f"- {stamp} {agent}: {flat}"


def _fit(text: str, budget: int) -> str:
    """`text` cut to at most `budget` UTF-8 bytes, on a character boundary."""
    raw = text.encode()
    if len(raw) <= budget:
        return text
    return raw[:max(0, budget)].decode(errors="ignore")


def slice_of(memory: Memory, budget: int) -> str:
    """What an agent is given: a header, the curated region (cut if it alone is too big), then
    the newest managed lines that fit, in order. Never more than `budget` bytes."""
    if not memory.curated.strip() and not memory.managed:
        return ""  # nothing to give: no flag, no file
    head = f"{HEADER} ({memory.project}): notes kept across agents; the newest last.\n"
    if len(head.encode()) >= budget:
        return _fit(head, budget)
    curated = memory.curated.decode(errors="replace").strip()
    out = head + (_fit(curated + "\n", budget - len(head.encode()) - 1) + "\n"
                  if curated else "")
    out = _fit(out, budget)
    room = budget - len(out.encode())
    lines: list[str] = []
    for line in reversed(memory.managed):
        size = len(line.encode()) + 1
        if size > room:
            break
        lines.append(line)
        room -= size
    return out + "".join(f"{line}\n" for line in reversed(lines))


class ProjectMemory:
    """Every project's memory under `root` (the data directory's `memory/`)."""

    def __init__(self, root: Path, managed_bytes: int, slice_bytes: int, *,
                 now: Callable[[], float] = time.time) -> None:
        self.root = root
        self.managed_bytes = managed_bytes
        self.slice_bytes = slice_bytes
        self.now = now

    def _dir(self, project: str) -> Path:
        d = self.root / project_key(project)
        if not d.is_dir():
            d.mkdir(parents=True, exist_ok=True, mode=0o700)
            (d / "PROJECT").write_text(project + "\n")
        return d

    @contextlib.contextmanager
    def _locked(self, project: str) -> Iterator[Path]:
        d = self._dir(project)
        fd = os.open(d / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield d
        finally:
            os.close(fd)  # closing the descriptor lets the lock go

    @staticmethod
    def _replace(path: Path, data: bytes) -> None:
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{id(data)}.new")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)

    def read(self, project: str) -> Memory:
        """The memory as it is now (no lock needed: every write replaces the file whole)."""
        path = self.root / project_key(project) / "MEMORY.md"
        data = _bytes_of(path)
        curated, managed = split(data)
        return Memory(project, curated, tuple(managed.decode(errors="replace").splitlines()))

    def checkpoint(self, project: str, agent: str, text: str) -> list[str]:
        """Add one managed line for a finished turn; trim the oldest lines to the byte budget,
        archiving them first. Returns the lines trimmed."""
        line = entry_line(self.now(), agent, text)
        with self._locked(project) as d:
            path = d / "MEMORY.md"
            data = _bytes_of(path)
            curated, managed_raw = split(data)
            managed = [*managed_raw.decode(errors="replace").splitlines(), line]
            trimmed: list[str] = []
            size = sum(len(m.encode()) + 1 for m in managed)
            # Over the budget: down to three quarters of it, so the archive (and its fsync) is
            # written once in many turns, not at every one.
            floor = self.managed_bytes * 3 // 4 if size > self.managed_bytes else size
            while managed and size > floor:
                gone = managed.pop(0)
                size -= len(gone.encode()) + 1
                trimmed.append(gone)
            if trimmed:  # archived before it leaves the file: a crash between keeps both
                with open(d / "ARCHIVE.md", "ab") as archive:
                    archive.write("".join(f"{t}\n" for t in trimmed).encode())
                    archive.flush()
                    os.fsync(archive.fileno())
            self._replace(path, join(curated, managed))
            return trimmed

    def edit(self, project: str, curated: bytes) -> None:
        """Replace the curated region (the operator's), keeping the managed one."""
        with self._locked(project) as d:
            path = d / "MEMORY.md"
            data = _bytes_of(path)
            _, managed = split(data)
            self._replace(path, curated + _SPLIT + managed)

    def slice(self, project: str) -> str:
        return slice_of(self.read(project), self.slice_bytes)

    def search(self, project: str, query: str, limit: int = 50) -> list[str]:
        """Lines of the archive and the managed region holding `query` (any case), oldest
        first, at most `limit` (the newest of them)."""
        words = query.lower().split()
        try:
            archived = (self.root / project_key(project) / "ARCHIVE.md").read_text(
                errors="replace").splitlines()
        except FileNotFoundError:
            archived = []
        lines = [*archived, *self.read(project).managed]
        hits = [line for line in lines if all(w in line.lower() for w in words)]
        return hits[-limit:]

    def projects(self) -> list[str]:
        """Every project that has a memory."""
        if not self.root.is_dir():
            return []
        out = []
        for d in sorted(self.root.iterdir()):
            with contextlib.suppress(OSError):
                out.append((d / "PROJECT").read_text().strip())
        return out


class AgentMemory:
    """The memory of the project each agent works on: its repository's (`repo:<name>`), or
    its working directory's (`dir:<path>`) when the operator gave one; an agent in a fresh
    workspace of its own has none."""

    def __init__(self, memory: ProjectMemory, repo_of: Callable[[str], str | None],
                 workspaces: Path) -> None:
        self.memory = memory
        self.repo_of = repo_of
        self.workspaces = workspaces.resolve()

    def project_of(self, agent_id: str, cwd: str) -> str | None:
        repo = self.repo_of(agent_id)
        if repo:
            return f"repo:{repo}"
        path = Path(cwd).resolve()
        return None if path.is_relative_to(self.workspaces) else f"dir:{path}"

    def slice(self, agent_id: str, cwd: str) -> str:
        project = self.project_of(agent_id, cwd)
        return self.memory.slice(project) if project else ""

    async def checkpoint(self, agent_id: str, cwd: str, name: str, text: str) -> None:
        project = self.project_of(agent_id, cwd)
        if project and text.strip():
            await asyncio.to_thread(self.memory.checkpoint, project, name, text)


__all__ = ["HEADER", "SENTINEL", "AgentMemory", "Memory", "ProjectMemory", "entry_line", "join",
           "project_key", "slice_of", "split"]


def _bytes_of(path: Path) -> bytes:
    """The file's bytes; a memory not written yet is empty."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""
