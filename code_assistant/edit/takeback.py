"""Taking a run's change out of the repository, file by file, by the ownership rule (ownership.py): the disk side
of a rollback, a recovery and an undo. What the run left is put back to what was there before; what somebody else
wrote since stays; where both wrote the same lines the file stays as it is and the original is saved apart."""
from __future__ import annotations

import errno
import logging
from dataclasses import dataclass
from pathlib import Path

from code_assistant.edit.journal import (
    TMP_MARK,
    FileMoved,
    FileRecord,
    Journal,
    Op,
    atomic_write,
    inside,
    read_state,
    remove_if,
)
from code_assistant.edit.ownership import Fate, TakeBack, take_back_stretches
from code_assistant.interrupts import shielded

logger = logging.getLogger(__name__)

WRITE_ATTEMPTS = 5  # a file that keeps changing while it is put back is left as it is after this many looks


@dataclass(frozen=True)
class FileOutcome:
    """What taking the run's change out did to one file; `original`: where its original was saved (a conflict)."""

    path: str
    fate: Fate
    why: str
    original: str | None = None

    def describe(self) -> str:
        saved = f"; the file before the run is saved as {self.original}" if self.original else ""
        return f"{self.path}: {self.fate} ({self.why}{saved})"


def exactly_as_before(outcomes: list[FileOutcome]) -> bool:
    return all(o.fate == Fate.RESTORED for o in outcomes)


def take_backs(root: Path, journal: Journal) -> list[tuple[FileRecord, TakeBack]]:
    """What taking the run out would do to each file it touched, in the order it touched them; nothing written."""
    decisions = []
    for record in journal.files():
        target = root / record.path
        if not inside(target.resolve(), root.resolve()):
            logger.error("journal entry points outside the repository, skipped: %s", record.path)
            continue
        decisions.append((record, take_back_stretches(journal.stretches(record), read_state(target))))
    return decisions


def originals_dir(journal: Journal) -> Path:
    """Where a conflicting file's original goes: beside the run's log when the run named it, else in the state
    directory (the run's own directory goes when its journal is closed)."""
    begin = journal.begin()
    if begin is not None and begin.originals:
        return Path(begin.originals)
    return journal.run_dir.parent.parent / "originals" / journal.run_dir.name


def take_out(root: Path, journal: Journal) -> list[FileOutcome]:
    """Take the run out of every file it touched, newest first; no ending signal cuts this short. Each file is
    decided on as it is at that moment, and written only if it still is (else decided on again)."""
    with shielded():
        outcomes = [_apply(root, journal, record) for record, _ in reversed(take_backs(root, journal))]
    return list(reversed(outcomes))


def _apply(root: Path, journal: Journal, record: FileRecord) -> FileOutcome:
    target = root / record.path
    for stray in target.parent.glob(f".{target.name}{TMP_MARK}*") if target.parent.is_dir() else []:
        stray.unlink(missing_ok=True)
    original, stretches = journal.original(record), journal.stretches(record)
    for _ in range(WRITE_ATTEMPTS):
        current = read_state(target)
        decision = take_back_stretches(stretches, current)
        try:
            _write(target, record, decision, current)
            break
        except FileMoved:  # somebody wrote it between our look and our write: look again
            logger.info("%s changed while it was being put back; deciding again", record.path)
    else:
        decision = TakeBack(fate=Fate.CONFLICT, data=current, write=False,
                            why="it kept changing while it was being put back")
    if record.first.op == Op.CREATED and not target.exists():
        for dir_ in reversed(record.first.dirs):
            try:
                (root / dir_).rmdir()
            except OSError as exc:
                if exc.errno not in (errno.ENOENT, errno.ENOTEMPTY):
                    raise
    saved = None
    if decision.fate == Fate.CONFLICT:
        if original is not None:
            copy = originals_dir(journal) / record.path
            copy.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(copy, original)
            saved = str(copy)
    return FileOutcome(path=record.path, fate=decision.fate, why=decision.why, original=saved)


def _write(target: Path, record: FileRecord, decision: TakeBack, current: bytes | None) -> None:
    """The decision onto disk, only if the file still holds `current` (FileMoved otherwise)."""
    if not decision.write:
        return
    if decision.data is None:
        if current is not None:
            remove_if(target, current)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    mode = target.stat().st_mode & 0o7777 if target.exists() else record.first.mode
    atomic_write(target, decision.data, mode, expect=current)
