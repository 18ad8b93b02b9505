"""The .env files settings are read from. The current directory's is the user's own when it lies outside the
repository. The repository's (at its root) is the repository's: its tests can write it, and a plan could, so where
the key goes (its OPENAI_BASE_URL) is used only once a person approved it (settings.py), and a .env written while
the assistant worked on the repository (by a plan allowed to, or by a test: its hash is recorded when the workspace
closes) is never read for settings."""
from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

from dotenv import dotenv_values

logger = logging.getLogger(__name__)

FILE = ".env"
RECORD = "env-files.json"  # in the repository's state: the hashes of the .env files found, and of those written


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
    written = found in _written(state_dir)
    if written:  # said when it was found written (Workspace.close), and again should its server be needed
        logger.info("the repository's .env was written while the assistant worked on it: it is not read for settings")
    return RepoEnv(path, _read(path), found, written=written)


def _record(state_dir: Path) -> dict[str, set[str]]:
    """The hashes of the .env files found when work on the repository began (`seen`) and of those written while it
    went on (`written`)."""
    try:
        data = json.loads((state_dir / RECORD).read_text(encoding="utf-8"))
        return {kind: {str(h) for h in data.get(kind, [])} for kind in ("seen", "written")}
    except FileNotFoundError:
        pass
    except (OSError, ValueError, TypeError, AttributeError) as exc:
        logger.warning("%s cannot be read (%s)", state_dir / RECORD, exc)
    return {"seen": set(), "written": set()}


def _written(state_dir: Path) -> set[str]:
    return _record(state_dir)["written"]


def _save(state_dir: Path, record: dict[str, set[str]]) -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    tmp = state_dir / (RECORD + ".tmp")
    tmp.write_text(json.dumps({kind: sorted(hashes) for kind, hashes in record.items()}), encoding="utf-8")
    tmp.replace(state_dir / RECORD)


def work_begins(repo: Path, state_dir: Path) -> str | None:
    """Work on the repository begins (a workspace opens): its .env's hash (None: it has none), noted as one found
    there, unless a run wrote it."""
    now = file_digest(repo / FILE)
    if now is not None:
        record = _record(state_dir)
        if now not in record["seen"] | record["written"]:
            record["seen"].add(now)
            _save(state_dir, record)
    return now


def work_ends(repo: Path, state_dir: Path, before: str | None) -> bool:
    """The work is done: a .env that differs from `before` (its hash when the work began) was written meanwhile, by
    a plan or a test, and its hash is recorded so that it is never read for settings — unless it is one found there
    before (undo and recover put back what the user had). True when one was recorded."""
    now = file_digest(repo / FILE)
    if now is None or now == before:
        return False
    record = _record(state_dir)
    if now in record["seen"] - record["written"]:
        return False
    record["written"].add(now)
    _save(state_dir, record)
    return True
