"""Files into and out of an agent's workspace: what the operator sends an agent lands under
`attachments/` with a safe name and becomes its next turn; what leaves a workspace (the agents'
`send_file`, the operator's `/file`) is read only from inside it.

Every step is done as root in a directory the (untrusted) agent writes, so nothing is reached
by a path: the workspace is opened once, and each name below it is opened relative to its
parent with O_NOFOLLOW, so a symbolic link or `..` the agent planted leads nowhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
import stat
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from supervisor.api.views import Actor, AgentView, agent_view
from supervisor.errors import FileRefused, SupervisorError
from supervisor.sanitize import clean, clean_text

if TYPE_CHECKING:
    from claude_agent_sdk import SdkMcpTool

    from store import Store
    from supervisor.agents.pool import AgentPool
    from supervisor.agents.runner import AgentRunner
    from supervisor.config import Settings
    from supervisor.guard.escalations import Escalations

ATTACHMENTS = "attachments"
KEEP_SENT_S = 7 * 86400  # how long a sent file is kept for the front ends
SENT_FILE = "send_file"  # the tool_name of a notice that carries a file (its ref_id: the file)
NAME_MAX = 120  # characters of a stored name, its extension kept
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
               ".gif": "image/gif", ".webp": "image/webp"}


@dataclass(frozen=True, slots=True)
class Attached:
    """A file the operator sent, as stored: `path` relative to the agent's workspace."""

    agent: AgentView
    path: str
    full_path: str
    size: int
    kind: str  # photo | document
    ahead: int  # messages (and a running turn) before the turn that announces it


@dataclass(frozen=True, slots=True)
class SentFile:
    """A file sent out of a workspace to every front end (as a notice carrying it)."""

    agent: AgentView
    name: str
    size: int
    notice_id: str


@dataclass(frozen=True, slots=True)
class WorkspaceFile:
    """A file read out of an agent's workspace, whole."""

    agent: AgentView
    path: str  # as asked, relative to the workspace
    name: str  # its file name
    data: bytes


def _size(n: int) -> str:
    return f"{n:,} bytes" if n < 10_000 else f"{n / 1000:,.0f} KB" if n < 10_000_000 \
        else f"{n / 1_000_000:,.1f} MB"


def too_big(n: int, limit: int, setting: str) -> FileRefused:
    return FileRefused(f"That file is too big: {_size(n)}, and the limit is {_size(limit)}.",
                       f"Send a smaller file (compress it or split it); an admin can raise "
                       f"`{setting}` in the settings.")


def image_suffix(data: bytes) -> str | None:
    """The suffix an image's first bytes say it has (a photo arrives without a name)."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return ".png"
    if data.startswith(b"\xff\xd8\xff"):
        return ".jpg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return ".gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return ".webp"
    return None


def safe_name(sent: str, kind: str) -> str:
    """The name a sent file is stored under. A name that tries to leave the directory (a path
    separator, `..`, a NUL or control character) is refused, not repaired: the operator learns
    that what they sent was odd. Anything else unusual becomes `_`."""
    name = unicodedata.normalize("NFKC", sent or "").strip()
    if not name:
        return "photo.jpg" if kind == "photo" else "file"
    if ("/" in name or "\\" in name or name in (".", "..") or name.startswith("..")
            or any(unicodedata.category(c) == "Cc" for c in name)):
        raise FileRefused(f"The file name {clean(sent).text[:80]!r} is a path, not a name, so "
                          "the file was not stored.",
                          "Rename the file to a plain name (letters, digits, dots, dashes) and "
                          "send it again.")
    name = _UNSAFE.sub("_", name).lstrip(".") or "file"
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem:
        return name[:NAME_MAX]
    ext = ext[:16]
    return f"{stem[:NAME_MAX - len(ext) - 1]}.{ext}"


def _open_workspace(root: Path) -> int:
    try:
        return os.open(root, _DIR_FLAGS)
    except OSError as exc:
        raise FileRefused(f"The agent's workspace {root} cannot be opened ({exc.strerror}).",
                          "Check the directory still exists and is a directory.") from exc


def store_attachment(root: Path, name: str, data: bytes) -> str:
    """Write `data` as `attachments/<name>` under `root` without following anything the agent
    planted, never over an existing file (`name-1.ext`, `name-2.ext` ...). The file and the
    directory belong to the workspace's owner, as the agent's own files do. Returns the
    relative path."""
    top = _open_workspace(root)
    try:
        owner = os.fstat(top)
        with contextlib.suppress(FileExistsError):
            os.mkdir(ATTACHMENTS, 0o755, dir_fd=top)
            if os.geteuid() == 0:
                os.chown(ATTACHMENTS, owner.st_uid, owner.st_gid, dir_fd=top,
                         follow_symlinks=False)
        try:
            folder = os.open(ATTACHMENTS, _DIR_FLAGS, dir_fd=top)
        except OSError as exc:  # a file or a link planted where the directory goes
            raise FileRefused(f"{ATTACHMENTS}/ in the agent's workspace is not a directory "
                              "(the agent may have put something else there).",
                              f"Ask the agent to remove {ATTACHMENTS} and send the file "
                              "again.") from exc
    finally:
        os.close(top)
    try:
        stem, dot, ext = name.rpartition(".")
        if not dot:
            stem, ext = name, ""
        for n in range(10_000):
            candidate = name if n == 0 else f"{stem}-{n}{dot}{ext}"
            try:
                fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                             | os.O_CLOEXEC, 0o644, dir_fd=folder)
            except FileExistsError:
                continue
            break
        else:
            raise FileRefused(f"{ATTACHMENTS}/ already holds 10,000 files named like {name}.",
                              "Ask the agent to clear its attachments.")
        try:
            os.fchmod(fd, 0o644)
            if os.geteuid() == 0:
                os.fchown(fd, owner.st_uid, owner.st_gid)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        return f"{ATTACHMENTS}/{candidate}"
    finally:
        os.close(folder)


def _relative(root: Path, path: str) -> PurePosixPath:
    """`path` (relative to the workspace, or absolute inside it) as parts below it; refused
    when it leaves it."""
    given = PurePosixPath(path.strip())
    if given.is_absolute():
        try:
            given = given.relative_to(PurePosixPath(root))
        except ValueError:
            raise FileRefused(f"{path} is outside the agent's workspace ({root}).",
                              "Give a path inside the workspace, relative to it.") from None
    if not given.parts or ".." in given.parts or str(given) == ".":
        raise FileRefused(f"{path!r} is not a file inside the agent's workspace ('..' may "
                          "not be used).", "Give a path inside the workspace, relative to it.")
    return given


def read_workspace_file(root: Path, path: str, limit: int, setting: str) -> tuple[str, bytes]:
    """The file at `path` inside `root`, opened one name at a time with O_NOFOLLOW: a path
    through a symbolic link (in or out), `..` or outside the workspace is refused, so is
    anything but a regular file and anything over `limit` bytes."""
    rel = _relative(root, path)
    fd = _open_workspace(root)
    try:
        for part in rel.parts[:-1]:
            try:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                raise _unreadable(path, part, exc) from exc
            os.close(fd)
            fd = nxt
        try:
            f = os.open(rel.parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                        dir_fd=fd)
        except OSError as exc:
            raise _unreadable(path, rel.parts[-1], exc) from exc
    finally:
        os.close(fd)
    try:
        st = os.fstat(f)
        if not stat.S_ISREG(st.st_mode):
            raise FileRefused(f"{path} is not a regular file.", "Give the path of a file.")
        if st.st_size > limit:
            raise too_big(st.st_size, limit, setting)
        chunks, got = [], 0
        while got <= limit:
            chunk = os.read(f, min(1 << 20, limit + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        if got > limit:  # it grew while we read
            raise too_big(got, limit, setting)
        return rel.name, b"".join(chunks)
    finally:
        os.close(f)


def _unreadable(path: str, part: str, exc: OSError) -> FileRefused:
    if exc.errno in (40, 20):  # ELOOP: a symbolic link; ENOTDIR: a link or file on the way
        return FileRefused(f"{path} goes through a symbolic link ({part}); files are sent only "
                           "from inside the workspace, and links are not followed.",
                           "Copy the file into the workspace and send the copy.")
    if exc.errno == 2:
        return FileRefused(f"There is no file {path} in the agent's workspace.",
                           "Check the path (relative to the workspace).")
    return FileRefused(f"{path} cannot be read ({exc.strerror}).", "")


def announce(attached: str, full: str, kind: str, sent_name: str, size: int,
             mime: str | None, by: str, caption: str) -> str:
    """The text of the turn that tells the agent about a file it was sent."""
    what = "a photo" if kind == "photo" else "a file"
    shown = f" ({sent_name})" if sent_name and sent_name != PurePosixPath(attached).name else ""
    typ = f", {mime}" if mime else ""
    lines = [f"[Switchboard] {by} sent you {what}{shown}: it is saved in your workspace as "
             f"{attached} ({_size(size)}{typ}; full path {full})."]
    if kind == "photo" or PurePosixPath(attached).suffix.lower() in IMAGE_TYPES:
        lines.append("It is an image: open it with the Read tool to see it.")
    if caption.strip():
        lines.append(f"With it they wrote:\n{caption.strip()}")
    return "\n".join(lines)


class FilesAPI:
    """`api.files`: files sent to agents (`attach`) and read out of workspaces (`read`)."""

    def __init__(self, pool: AgentPool, settings: Settings, not_halted: Callable[[], None],
                 store: Store, escalations: Escalations) -> None:
        self._pool = pool
        self.settings = settings
        self._not_halted = not_halted
        self._store = store
        self._escalations = escalations
        pool.tool_makers["files"] = self.tools

    @property
    def attachment_max_bytes(self) -> int:
        return self.settings.attachment_max_bytes

    async def attach(self, ref: str, sent_name: str, data: bytes, *, by: Actor,
                     kind: str = "document", mime: str | None = None,
                     caption: str = "") -> Attached:
        """Store a file the operator sent in the agent's workspace and queue the turn that
        tells the agent where it is and what it is."""
        self._not_halted()
        r = await self._pool.fleet.get(ref)
        r.admit()  # killed, resume failed, over budget: refused before anything is written
        limit = self.settings.attachment_max_bytes
        if len(data) > limit:
            raise too_big(len(data), limit, "attachment_max_bytes")
        if not data:
            raise FileRefused("That file is empty, so there is nothing to store.",
                              "Send the file again.")
        name = safe_name(sent_name, kind)
        sniffed = image_suffix(data) if kind == "photo" else None
        if sniffed and PurePosixPath(name).suffix.lower() != sniffed:
            name = str(PurePosixPath(name).with_suffix(sniffed))
        root = Path(r.cwd)
        rel = await asyncio.to_thread(store_attachment, root, name, data)
        text = announce(rel, str(root / rel), kind, clean(sent_name).text[:120], len(data),
                        clean(mime or "").text[:80] or None, by.name, caption)
        runner, ahead = await self._pool.ask(r.id, clean_text(text))
        return Attached(agent_view(runner), rel, str(root / rel), len(data), kind, ahead)

    async def read(self, ref: str, path: str) -> WorkspaceFile:
        """A file of the agent's workspace, for the operator (/file) or its own send_file."""
        r = await self._pool.fleet.get(ref)
        name, data = await asyncio.to_thread(read_workspace_file, Path(r.cwd), path,
                                             self.settings.send_file_max_bytes,
                                             "send_file_max_bytes")
        return WorkspaceFile(agent_view(r), path, name, data)

    async def send(self, ref: str, path: str, caption: str = "") -> SentFile:
        """An agent's `send_file`: the file, read safely out of its own workspace, kept in the
        store and pushed to every front end as a notice that carries it."""
        self._not_halted()
        wf = await self.read(ref, path)
        file_id = secrets.token_hex(8)
        # Kept for a front end that is down, for a week; older ones go as new ones come (a
        # notice whose file is gone still says how to fetch it again with /file).
        await self._store.results.prune_files(time.time() - KEEP_SENT_S)
        await self._store.results.put_file(file_id, wf.agent.id, wf.name, wf.data)
        note = clean(caption).text.strip()[:1000]
        body = (f"{note}\n" if note else "") + (
            f"{_size(len(wf.data))} from {wf.agent.name}'s workspace ({wf.path}); fetch it "
            f"again with /file {wf.agent.name} {wf.path}")
        row = await self._escalations.notify(
            wf.agent.id, clean_text(f"📎 {wf.agent.name} sent {wf.name}"), clean_text(body),
            file_id, tool_name=SENT_FILE)
        return SentFile(wf.agent, wf.name, len(wf.data), row.id)

    async def outgoing(self, file_id: str) -> tuple[str, bytes] | None:
        """A sent file by its id (a notice's ref_id): its name and bytes."""
        row = await self._store.results.file(file_id)
        return (row.name, row.content) if row is not None else None

    def tools(self, runner: AgentRunner) -> list[SdkMcpTool[Any]]:
        """The agent's `send_file`, bound to it: only its own workspace is ever read."""
        from claude_agent_sdk import tool  # noqa: PLC0415 - the API loads without the SDK

        async def send_file(args: dict[str, Any]) -> dict[str, Any]:
            try:
                sent = await self.send(runner.id, str(args.get("path") or ""),
                                       str(args.get("caption") or ""))
            except SupervisorError as exc:
                text = f"error: {exc.what}" + (f" {exc.fix}" if exc.fix else "")
                return {"content": [{"type": "text", "text": text}], "is_error": True}
            return {"content": [{"type": "text", "text": (
                f"Sent {sent.name} ({_size(sent.size)}) to the operator on every front end.")}]}

        limit = _size(self.settings.send_file_max_bytes)
        return [tool(
            SENT_FILE,
            "Send a file from your workspace to the operator (it reaches every chat they use, "
            "as a file). `path`: relative to your workspace, or absolute inside it; symbolic "
            f"links are not followed. At most {limit}. `caption`: one line on what it is.",
            {"type": "object", "properties": {"path": {"type": "string"},
                                              "caption": {"type": "string"}},
             "required": ["path"]})(send_file)]


__all__ = ["ATTACHMENTS", "SENT_FILE", "Attached", "FilesAPI", "SentFile", "WorkspaceFile",
           "announce",
           "read_workspace_file", "safe_name", "store_attachment"]
