"""Crash-safe bookkeeping for edits: the per-run journal with its backups, replay, atomic writes, the repo lock.

Before the first write of a file in a run, the original is copied into the state dir and a JSON-lines journal entry
is fsync'ed; only then is the file written (temp file + os.replace). Replaying a journal backwards restores every
touched file byte for byte.
"""
from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import shutil
import time
import uuid
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from types import TracebackType

from code_assistant.errors import AssistantError
from code_assistant.settings import cache_home, repo_id

logger = logging.getLogger(__name__)

JOURNAL_VERSION = 1
TMP_MARK = ".ca-tmp-"


class RepoLockedError(AssistantError):
    """Another run holds the repository lock."""


def default_state_dir(repo: Path) -> Path:
    return cache_home() / "state" / repo_id(repo)


def inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, mode: int | None = None) -> None:
    """Write via a temp file in the same directory, fsync, os.replace; keep `mode` (new files follow the umask)."""
    tmp = path.parent / f".{path.name}{TMP_MARK}{uuid.uuid4().hex[:8]}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


@dataclass(frozen=True)
class JournalEntry:
    """One line of a journal. `op`: "begin" (with `v`, `repo`, `pid`, `time`), "modified" (`path`, `backup`: the
    original's copy under the run's directory, `mode`), "created" (`path`, `dirs`: the parent directories the write
    created, outermost first), "done" (`how`, `time`); "deleted" (as modified) is replayed but no longer written."""

    op: str
    path: str = ""
    backup: str | None = None
    mode: int | None = None
    dirs: tuple[str, ...] = ()
    v: int | None = None
    repo: str | None = None
    pid: int | None = None
    time: float | None = None
    how: str | None = None

    def to_json(self) -> str:
        """The line written: only the fields this kind of entry has (the on-disk format of JOURNAL_VERSION)."""
        data = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()
                if v is not None and v != "" and (k != "dirs" or self.op == "created")}
        return json.dumps(data)

    @classmethod
    def from_json(cls, line: str) -> JournalEntry:
        data = json.loads(line)
        if not isinstance(data, dict) or not isinstance(data.get("op"), str):
            raise ValueError("not a journal entry")
        known = {f.name for f in fields(cls)}
        data = {k: v for k, v in data.items() if k in known}
        if "dirs" in data:
            data["dirs"] = tuple(str(d) for d in data["dirs"])
        return cls(**data)


class Journal:
    """One run's append-only JSON-lines journal plus its backups, in state_dir/runs/<run id>/."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.path = run_dir / "journal.jsonl"
        self.backups = run_dir / "backups"

    @classmethod
    def start(cls, state_dir: Path, repo: Path) -> Journal:
        run_dir = state_dir / "runs" / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        (run_dir / "backups").mkdir(parents=True)
        journal = cls(run_dir)
        journal.append(JournalEntry("begin", v=JOURNAL_VERSION, repo=str(repo), pid=os.getpid(), time=time.time()))
        return journal

    def append(self, entry: JournalEntry) -> None:
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(entry.to_json() + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def entries(self) -> list[JournalEntry]:
        entries = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                entries.append(JournalEntry.from_json(line))
            except (ValueError, TypeError):  # JSONDecodeError is a ValueError
                logger.warning("skipping a torn journal line in %s", self.path)
        return entries

    def backup(self, source: Path, index: int) -> Path:
        dest = self.backups / f"{index:05d}"
        shutil.copyfile(source, dest)
        with open(dest, "rb") as handle:
            os.fsync(handle.fileno())
        fsync_dir(self.backups)
        return dest

    def close(self, how: str) -> None:
        self.append(JournalEntry("done", how=how, time=time.time()))
        shutil.rmtree(self.backups, ignore_errors=True)


def replay(root: Path, journal: Journal) -> list[str]:
    """Undo every entry of a journal, newest first; returns the repo-relative paths restored or removed."""
    touched: list[str] = []
    for entry in reversed(journal.entries()):
        op, rel = entry.op, entry.path
        if op not in ("modified", "created", "deleted"):
            continue
        target = root / rel
        if not inside(target.resolve(), root.resolve()):
            logger.error("journal entry points outside the repository, skipped: %s", rel)
            continue
        for stray in target.parent.glob(f".{target.name}{TMP_MARK}*") if target.parent.is_dir() else []:
            stray.unlink(missing_ok=True)
        if op == "created":
            target.unlink(missing_ok=True)
            for dir_ in reversed(entry.dirs):
                try:
                    (root / dir_).rmdir()
                except OSError as exc:
                    if exc.errno not in (errno.ENOENT, errno.ENOTEMPTY):
                        raise
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            data = (journal.run_dir / str(entry.backup)).read_bytes()
            atomic_write(target, data, entry.mode)
        touched.append(rel)
    return list(dict.fromkeys(touched))


class RepoLock:
    """One run per repository: an exclusive, non-blocking flock on a file in the state dir."""

    def __init__(self, repo_path: str | Path, state_dir: str | Path | None = None) -> None:
        self.repo = Path(repo_path).resolve()
        self.path = (Path(state_dir) if state_dir else default_state_dir(self.repo)) / "lock"
        self._fd: int | None = None

    def __enter__(self) -> RepoLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            other = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise RepoLockedError(f"another run (pid {other}) is already working on {self.repo}; "
                                  "wait for it to finish") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
