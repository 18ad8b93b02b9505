"""Crash-safe bookkeeping for edits: the per-run journal with its backups, atomic writes, the repo lock.

Before the first write of a file in a run, the original is copied into the state dir and a JSON-lines journal entry
is fsync'ed; before every write, the bytes it will leave (their sha256 and a copy) are announced the same way; only
then is the file written (temp file + os.replace). When the run writes on top of a change somebody else made to a file
it wrote, what it found there is journaled first (`found`), and its writes from there on are a new stretch. So the
journal always knows, for each file, what was there before the run, what the run left there and what somebody else
left in between: takeback.py turns that into a rollback, a recovery or an undo that takes out the run's change and
nothing else.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from pathlib import Path
from types import TracebackType

from code_assistant.errors import AssistantError
from code_assistant.settings import cache_home, repo_id

logger = logging.getLogger(__name__)

JOURNAL_VERSION = 3  # 2: every write announced with the sha256 and a copy of the bytes it leaves; 3: `found`
TMP_MARK = ".ca-tmp-"


class RepoLockedError(AssistantError):
    """Another run holds the repository lock."""


def held_by(pid: str, session: bool, repo: Path) -> str:
    """What another run is told while this repository is held."""
    if session:
        return f"a session (pid {pid}) holds {repo} until it ends; leave it (Ctrl-D) or wait for it"
    return f"another run (pid {pid}) is already working on {repo}; wait for it to finish"


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


class FileMoved(Exception):
    """The file changed between being read and being replaced (somebody else wrote it): nothing was written."""


ANY = object()  # atomic_write's `expect` when whatever the file holds may be replaced


def atomic_write(path: Path, data: bytes, mode: int | None = None, *, expect: bytes | None | object = ANY) -> None:
    """Write via a temp file in the same directory, fsync, os.replace; keep `mode` (new files follow the umask).
    `expect`: what the file must still hold at the moment it is replaced (None: that it does not exist), else
    FileMoved and nothing is written; what is left between that look and the replace is microseconds."""
    tmp = path.parent / f".{path.name}{TMP_MARK}{uuid.uuid4().hex[:8]}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        if expect is None:
            _create(tmp, path)
        else:
            if expect is not ANY and read_state(path) != expect:
                raise FileMoved(str(path))
            os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def _create(tmp: Path, path: Path) -> None:
    """tmp becomes path only if no file is there: a hard link fails when one is (where links work)."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise FileMoved(str(path)) from None
    except OSError:  # a filesystem without hard links: look, then replace
        if path.exists():
            raise FileMoved(str(path)) from None
        os.replace(tmp, path)
        return
    tmp.unlink()


def remove_if(path: Path, expect: bytes) -> None:
    """Delete the file if it still holds `expect`, else FileMoved."""
    if read_state(path) != expect:
        raise FileMoved(str(path))
    path.unlink()


class Op(StrEnum):
    """The kinds of journal line."""

    BEGIN = "begin"  # v, repo, pid, time, originals: where a conflicting file's original is saved; task (its first
    #                  line) and session (the session's id; none: a one-shot run), for undo to say and to choose
    MODIFIED = "modified"  # path, backup: the original's copy under the run's directory, mode
    CREATED = "created"  # path, dirs: the parent directories the write created, outermost first
    DELETED = "deleted"  # as modified; written by version 1 only, still read
    WROTE = "wrote"  # path, sha (of the bytes about to be left) and blob (their copy), or absent: the file removed
    FOUND = "found"  # path, sha and blob: what somebody else left in a file the run wrote, which it writes on top of
    COMMITTED = "committed"  # commit: the run's change was committed (--commit); an undo reverts it with git
    DONE = "done"  # how (a Closed value), time


class Closed(StrEnum):
    """How a run's journal was closed. Only a finished run's journal keeps its backups (for undo)."""

    FINISHED = "finished"
    ROLLED_BACK = "rolled_back"
    RECOVERED = "recovered"
    UNDONE = "undone"


@dataclass(frozen=True)
class JournalEntry:
    """One line of a journal (see Op for the fields each kind has)."""

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
    sha: str | None = None
    blob: str | None = None
    absent: bool | None = None
    originals: str | None = None
    commit: str | None = None
    task: str | None = None
    session: str | None = None

    def to_json(self) -> str:
        """The line written: only the fields this kind of entry has (the on-disk format of JOURNAL_VERSION)."""
        data = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()
                if v is not None and v != "" and (k != "dirs" or self.op == Op.CREATED)}
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


def sha256(data: bytes | None) -> str:
    return "absent" if data is None else hashlib.sha256(data).hexdigest()


def read_state(path: Path) -> bytes | None:
    """A file's bytes, None when there is no file (a directory in its place reads as absent too)."""
    try:
        return path.read_bytes()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None


@dataclass
class Stretch:
    """The run's writes to one file from one starting point: `start`, what the file held when the stretch began (the
    original's copy, or what somebody else had left there when the run wrote on top of it), and `wrote`, the states
    the run announced since, oldest first. Each is a blob path relative to the run's directory, or None: absent."""

    start: str | None
    wrote: list[str | None] = field(default_factory=list)


@dataclass
class FileRecord:
    """One file as a journal knows it: its first entry (what it was before the run) and the run's stretches of
    writes, oldest first; more than one when the run wrote on top of somebody else's change."""

    path: str
    first: JournalEntry
    stretches: list[Stretch]

    @property
    def wrote(self) -> list[str | None]:
        """Every state the run announced, oldest first."""
        return [blob for stretch in self.stretches for blob in stretch.wrote]


class Journal:
    """One run's append-only JSON-lines journal plus its backups, in state_dir/runs/<run id>/."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.path = run_dir / "journal.jsonl"
        self.backups = run_dir / "backups"

    @classmethod
    def start(cls, state_dir: Path, repo: Path, originals: Path | None = None, *, task: str | None = None,
              session: str | None = None) -> Journal:
        run_dir = state_dir / "runs" / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        (run_dir / "backups").mkdir(parents=True)
        journal = cls(run_dir)
        journal.append(JournalEntry(op=Op.BEGIN, v=JOURNAL_VERSION, repo=str(repo), pid=os.getpid(), time=time.time(),
                                    originals=str(originals) if originals else None,
                                    task=task.strip().splitlines()[0][:200] if task and task.strip() else None,
                                    session=session))
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

    def begin(self) -> JournalEntry | None:
        entries = self.entries()
        return entries[0] if entries and entries[0].op == Op.BEGIN else None

    def closed(self) -> str | None:
        return next((e.how for e in reversed(self.entries()) if e.op == Op.DONE), None)

    def backup(self, data: bytes, index: int) -> Path:
        """The original of a file, as the bytes the run read (written again, whole, if the file changed before the
        run's first write to it succeeded)."""
        dest = self.backups / f"{index:05d}"
        atomic_write(dest, data)
        return dest

    def announce(self, rel: str, data: bytes | None) -> None:
        """Before the run writes (or, data None, deletes) a file: a copy of the bytes it is about to leave, and a
        line saying so, both on disk first: whatever happens next, the journal knows what the run put there."""
        if data is None:
            self.append(JournalEntry(op=Op.WROTE, path=rel, absent=True))
            return
        digest, blob = self._keep(data)
        self.append(JournalEntry(op=Op.WROTE, path=rel, sha=digest, blob=blob))

    def found(self, rel: str, data: bytes) -> None:
        """Before the run writes on top of what somebody else left in a file it wrote: a copy of those bytes, and a
        line saying so. Taking the run out later takes out its writes before and after them, not their change."""
        digest, blob = self._keep(data)
        self.append(JournalEntry(op=Op.FOUND, path=rel, sha=digest, blob=blob))

    def _keep(self, data: bytes) -> tuple[str, str]:
        """A copy of `data` on disk (once per content): its sha256 and its path relative to the run's directory."""
        digest = sha256(data)
        blob = self.backups / f"left-{digest}"
        if not blob.exists():
            tmp = blob.with_name(blob.name + TMP_MARK)
            tmp.write_bytes(data)
            _fsync_file(tmp)
            os.replace(tmp, blob)
            fsync_dir(self.backups)
        return digest, str(blob.relative_to(self.run_dir))

    def files(self) -> list[FileRecord]:
        """Every file the run touched, in the order it first touched them. A version 2 journal with no write of a
        file yet (a crash between its backup and its write) says the run left it as it was; a stretch found with no
        write after it (a crash, or an edit that did not apply) is no stretch. A finished run knows only the last
        state of each stretch (close() dropped the ones before)."""
        entries = self.entries()
        version = entries[0].v if entries and entries[0].op == Op.BEGIN else None
        finished = any(e.op == Op.DONE and e.how == Closed.FINISHED for e in entries)
        records: dict[str, FileRecord] = {}
        for entry in entries:
            if entry.op in (Op.MODIFIED, Op.CREATED, Op.DELETED) and entry.path not in records:
                records[entry.path] = FileRecord(entry.path, entry, [Stretch(entry.backup)])
            elif entry.op == Op.FOUND and entry.path in records:
                stretches = records[entry.path].stretches
                if len(stretches) > 1 and not stretches[-1].wrote:
                    stretches.pop()
                stretches.append(Stretch(entry.blob))
            elif entry.op == Op.WROTE and entry.path in records:
                records[entry.path].stretches[-1].wrote.append(None if entry.absent else entry.blob)
        for record in records.values():
            first, last = record.stretches[0], record.stretches[-1]
            if len(record.stretches) > 1 and not last.wrote:
                record.stretches.pop()
            if not first.wrote and (version or 1) >= 2:
                first.wrote.append(first.start)  # the original's copy (None: it did not exist)
            for stretch in record.stretches if finished else []:
                del stretch.wrote[:-1]
        return list(records.values())

    def original(self, record: FileRecord) -> bytes | None:
        return None if record.first.op == Op.CREATED else (self.run_dir / str(record.first.backup)).read_bytes()

    def states(self, record: FileRecord) -> list[bytes | None]:
        """Every state the run announced for the file, oldest first (the last is what it left there)."""
        return [self._read(blob) for blob in record.wrote]

    def stretches(self, record: FileRecord) -> list[tuple[bytes | None, list[bytes | None]]]:
        """Each stretch of the run's writes to the file, oldest first: what it started from, and the states the run
        announced in it."""
        return [(self._read(s.start), [self._read(blob) for blob in s.wrote]) for s in record.stretches]

    def _read(self, blob: str | None) -> bytes | None:
        return None if blob is None else (self.run_dir / blob).read_bytes()

    def close(self, how: Closed) -> None:
        """The last line. A finished run keeps each file's original and final state (an undo needs both); any
        other ending drops its backups."""
        self.append(JournalEntry(op=Op.DONE, how=how, time=time.time()))
        if how != Closed.FINISHED:
            shutil.rmtree(self.backups, ignore_errors=True)
            return
        keep = {str(blob) for r in self.files() for s in r.stretches for blob in (s.start, *s.wrote[-1:])}
        for blob in self.backups.iterdir() if self.backups.is_dir() else []:
            if str(blob.relative_to(self.run_dir)) not in keep:
                blob.unlink(missing_ok=True)

    def size(self) -> int:
        return sum(p.stat().st_size for p in self.run_dir.rglob("*") if p.is_file())


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


class RepoLock:
    """One run (or one session) per repository: an exclusive, non-blocking flock on a file in the state dir, which
    names the holder's pid, and `session` when a session holds it for its whole length."""

    def __init__(self, repo_path: str | Path, state_dir: str | Path | None = None, *, session: bool = False,
                 wait: Callable[[str], None] | None = None) -> None:
        """`wait`: when another holds the repository, wait for it (told with this, once) instead of refusing."""
        self.repo = Path(repo_path).resolve()
        self.path = (Path(state_dir) if state_dir else default_state_dir(self.repo)) / "lock"
        self.session, self.wait = session, wait
        self._fd: int | None = None

    def __enter__(self) -> RepoLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").split()
            held = held_by(holder[0] if holder else "unknown", "session" in holder[1:], self.repo)
            if self.wait is None:
                os.close(fd)
                raise RepoLockedError(held) from None
            self.wait(f"[Waiting: {held.split(';')[0]}; Ctrl-C stops waiting]")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)  # a signal ends the wait (KeyboardInterrupt)
            except BaseException:
                os.close(fd)
                raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, (f"{os.getpid()}\n" + ("session\n" if self.session else "")).encode(), 0)
        self._fd = fd
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
