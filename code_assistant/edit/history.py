"""The runs that can be taken back: finished runs keep their journals (each touched file's original and what the run
left), the last MAX_RUNS per repository within MAX_BYTES, oldest pruned first. `undo_last` takes back the newest by
the ownership rule, all or nothing: when a file can no longer be separated from what was written since, nothing is
changed and the file is named. A committed run (--commit) is reverted with git while its commit is still HEAD."""
from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from code_assistant import vcs
from code_assistant.edit.journal import Closed, Journal, JournalEntry, Op
from code_assistant.edit.ownership import Fate
from code_assistant.edit.takeback import FileOutcome, take_backs, take_out
from code_assistant.errors import AssistantError

logger = logging.getLogger(__name__)

MAX_RUNS = 20  # finished runs kept for undo, per repository
MAX_BYTES = 256 * 1024 * 1024  # and at most this much of their backups: a few huge files do not fill the disk


class UndoError(AssistantError):
    """Nothing to undo, or the last run cannot be taken back without touching what was written since."""


@dataclass
class Undone:
    """What an undo did: the run it took back (and the task it was asked), each file's outcome, or the commit it
    reverted."""

    run: str
    task: str = ""
    outcomes: list[FileOutcome] = field(default_factory=list)
    reverted: str | None = None  # the run's commit, reverted by a new commit (git revert)
    revert_commit: str | None = None


def _runs(state_dir: Path) -> list[Journal]:
    runs = state_dir / "runs"
    journals = [Journal(d) for d in runs.iterdir() if (d / "journal.jsonl").is_file()] if runs.is_dir() else []
    return sorted(journals, key=_started, reverse=True)


def _started(journal: Journal) -> tuple[float, str]:
    begin = journal.begin()
    return (begin.time or 0.0) if begin else 0.0, journal.run_dir.name


def kept_runs(state_dir: Path, repo: Path, session: str | None = None) -> list[Journal]:
    """Finished runs of this repository that changed something and can still be undone, newest first (`session`:
    only that session's)."""
    repo = repo.resolve()
    kept = []
    for journal in _runs(state_dir):
        begin = journal.begin()
        if begin is None or begin.repo != str(repo) or journal.closed() != Closed.FINISHED:
            continue
        if session is not None and begin.session != session:
            continue
        if journal.files():
            kept.append(journal)
    return kept


def prune(state_dir: Path, keep: int = MAX_RUNS, max_bytes: int = MAX_BYTES) -> int:
    """Drop finished runs beyond the last `keep` or past `max_bytes` in all, oldest first; runs closed any other way
    have nothing left to give and go too. Returns how many run directories were removed."""
    removed, total, count = 0, 0, 0
    for journal in _runs(state_dir):
        ending = journal.closed()
        if ending is None:
            continue  # unfinished: a live run, or one for recovery
        if ending == Closed.FINISHED and journal.files():
            size = journal.size()
            if count < keep and total + size <= max_bytes:
                count, total = count + 1, total + size
                continue
        shutil.rmtree(journal.run_dir, ignore_errors=True)
        removed += 1
    return removed


def undo_last(repo: Path, state_dir: Path, session: str | None = None) -> Undone:
    """Take back the newest finished run (`session`: the newest of that session's)."""
    repo = repo.resolve()
    runs = kept_runs(state_dir, repo, session)
    if not runs:
        whose = "this session" if session is not None else "the assistant"
        raise UndoError(f"nothing to undo: no finished run of {whose} left changes in {repo}")
    journal = runs[0]
    task = (journal.begin() or JournalEntry(op=Op.BEGIN)).task or ""
    commit = next((e.commit for e in reversed(journal.entries()) if e.op == Op.COMMITTED and e.commit), None)
    if commit:
        return _revert(repo, journal, commit, task)
    decisions = take_backs(repo, journal)
    stuck = [(record.path, d.why) for record, d in decisions if d.fate == Fate.CONFLICT]
    if stuck:
        names = "; ".join(f"{path} ({why})" for path, why in stuck)
        raise UndoError(f"cannot undo the last run: {names}; nothing was changed")
    outcomes = take_out(repo, journal)
    journal.close(Closed.UNDONE)
    shutil.rmtree(journal.run_dir, ignore_errors=True)
    return Undone(run=journal.run_dir.name, task=task, outcomes=outcomes)


def _revert(repo: Path, journal: Journal, commit: str, task: str) -> Undone:
    head = vcs.try_git(repo, "rev-parse", "HEAD")
    if head is None or head.strip() != commit:
        raise UndoError(f"the last run's commit {commit[:12]} is no longer HEAD; revert it with git "
                        f"(git revert {commit[:12]}); nothing was changed")
    revert_commit = vcs.revert(repo, commit)
    journal.close(Closed.UNDONE)
    shutil.rmtree(journal.run_dir, ignore_errors=True)
    return Undone(run=journal.run_dir.name, task=task, reverted=commit, revert_commit=revert_commit)
