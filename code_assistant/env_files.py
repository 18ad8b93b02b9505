"""The .env files settings are read from. The current directory's is the user's own when it lies outside the
repository. The repository's (at its root) is the repository's: its tests can write it, and a plan could, so where
the key goes (its OPENAI_BASE_URL) is used only once a person approved it (settings.py), and a .env written while
the assistant worked on the repository (by a plan allowed to, or by a test: its hash is recorded when the workspace
closes, or, when the process was killed before it could, when the next one finds its work left open) is never read
for settings."""
from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from dotenv import dotenv_values

logger = logging.getLogger(__name__)

FILE = ".env"
RECORD = "env-files.json"  # in the repository's state: the hashes of the .env files found, and of those written, and
#                            the work still open: each process's .env hash when its work began


@dataclass(frozen=True)
class RepoEnv:
    """The repository's .env as it is now."""

    path: Path
    values: dict[str, str] = field(default_factory=dict)
    digest: str | None = None  # its content's hash (None: there is none)
    written: bool = False  # written while the assistant worked on the repository: not read for settings

    @property
    def settings(self) -> dict[str, str]:
        """What it sets, as far as it may be read."""
        return {} if self.written else self.values


def _read(path: Path) -> dict[str, str]:
    return {k: v for k, v in dotenv_values(path).items() if v is not None}


def file_digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
    except OSError:
        return None


def own_values(repo: Path, cwd: Path) -> dict[str, str]:
    """The current directory's .env, when the directory lies outside the repository (inside it, a .env is the
    repository's, and only the one at its root is read)."""
    if cwd.resolve().is_relative_to(repo.resolve()) or not (cwd / FILE).is_file():
        return {}
    return _read(cwd / FILE)


def repo_env(repo: Path, state_dir: Path) -> RepoEnv:
    path = repo / FILE
    found = file_digest(path)
    if found is None:
        return RepoEnv(path)
    record = _record(state_dir)
    written = found in record.written or _changed_under_open_work(record, found)
    if written:  # said when it was found written (Workspace.close), and again should its server be needed
        logger.info("the repository's .env was written while the assistant worked on it: it is not read for settings")
    return RepoEnv(path, _read(path), found, written=written)


@dataclass
class _Record:
    seen: set[str] = field(default_factory=set)  # the .env hashes found when work on the repository began
    written: set[str] = field(default_factory=set)  # those written while it went on
    open: dict[str, str | None] = field(default_factory=dict)  # process -> its .env hash when its work began

    def wrote(self, now: str | None, before: str | None) -> bool:
        """Whether a .env whose hash is `now` was written by work that began with `before` (not one found there
        before it: undo and recover put back what the user had)."""
        return now is not None and now != before and now not in self.seen - self.written


def _record(state_dir: Path) -> _Record:
    try:
        data = json.loads((state_dir / RECORD).read_text(encoding="utf-8"))
        opened = data.get("open") or {}
        return _Record(seen={str(h) for h in data.get("seen", [])}, written={str(h) for h in data.get("written", [])},
                       open={str(k): (str(v) if v else None) for k, v in opened.items()})
    except FileNotFoundError:
        pass
    except (OSError, ValueError, TypeError, AttributeError) as exc:
        logger.warning("%s cannot be read (%s)", state_dir / RECORD, exc)
    return _Record()


def _save(state_dir: Path, record: _Record) -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    tmp = state_dir / f"{RECORD}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps({"seen": sorted(record.seen), "written": sorted(record.written), "open": record.open}),
                   encoding="utf-8")
    tmp.replace(state_dir / RECORD)


def process_key(pid: int) -> str | None:
    """A process as it is known while it lives: its pid and its start time (a pid alone is reused); None when it is
    gone. Where there is no /proc, its pid alone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
        return f"{pid}:{stat.rsplit(')', 1)[1].split()[19]}"  # field 22, starttime
    except (OSError, IndexError):
        pass
    if Path("/proc/self").exists():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except OSError:
        pass
    return str(pid)


def _alive(key: str) -> bool:
    pid = key.split(":", 1)[0]
    return pid.isdigit() and process_key(int(pid)) == key


def _changed_under_open_work(record: _Record, now: str | None, *, gone_only: bool = False) -> bool:
    """Whether the .env whose hash is `now` was written under work still open (another process's, going on or left
    open by a process that was killed; `gone_only`: the latter only)."""
    return any(record.wrote(now, before) for key, before in record.open.items() if not (gone_only and _alive(key)))


def work_begins(repo: Path, state_dir: Path) -> str | None:
    """Work on the repository begins (a workspace opens): its .env's hash (None: it has none), noted as one found
    there, unless a run wrote it — one that was killed before its work ended too (its .env hash is recorded as
    written then). The work is noted open until work_ends."""
    now = file_digest(repo / FILE)
    record = _record(state_dir)
    if _changed_under_open_work(record, now, gone_only=True):
        record.written.add(now or "")
        logger.info("the repository's .env was written by a run that was killed: it is not read for settings")
    record.open = {key: before for key, before in record.open.items() if _alive(key)}
    if now is not None and now not in record.seen | record.written and not _changed_under_open_work(record, now):
        record.seen.add(now)  # the user's, unless work going on elsewhere changed it
    if me := process_key(os.getpid()):
        record.open[me] = now
    _save(state_dir, record)
    return now


def work_ends(repo: Path, state_dir: Path, before: str | None) -> bool:
    """The work is done: a .env that differs from `before` (its hash when the work began) was written meanwhile, by
    a plan or a test, and its hash is recorded so that it is never read for settings — unless it is one found there
    before (undo and recover put back what the user had). True when one was recorded."""
    now = file_digest(repo / FILE)
    record = _record(state_dir)
    record.open.pop(process_key(os.getpid()) or "", None)
    wrote = record.wrote(now, before)
    if wrote:
        record.written.add(now or "")
    _save(state_dir, record)
    return wrote
