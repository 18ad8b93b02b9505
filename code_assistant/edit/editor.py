"""The disk side of editing: safe paths, journaled backups outside the repository, atomic writes, rollback, recovery.

Every model path goes through `resolve_repo_path` once, as its edit arrives; the resolved path is what the rest works
on. Before the first write of a file in a run, the original is copied into the state dir and a JSON-lines journal entry
is fsync'ed; before every write, the bytes it will leave are announced the same way; only then is the file written (temp
file + os.replace). The editor knows what it last left in each file: an edit of a file somebody else changed since
is made only when it fits around their change (beside.py: it applies to the file as it is now and touches none of
their lines), on top of what it found there, which is journaled first; any other is a ChangedOutsideError. `rollback`
and `recover` take out only the run's own change (takeback.py), so what the user wrote meanwhile stays. The journal,
atomic writes and the repository lock live in `journal.py`; finished runs are kept for undo (history.py).
"""
from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from code_assistant.edit import history
from code_assistant.edit.beside import (
    Outside,
    edit_text,
    file_bytes,
    file_text,
    gone,
    looks_binary,
    misfit,
    outside,
)
from code_assistant.edit.edits import (
    ACTIONS,
    Action,
    EditOperation,
    EditResult,
    PathError,
    repo_relative,
    resolve_repo_path,
)
from code_assistant.edit.journal import (
    Closed,
    FileMoved,
    FileRecord,
    Journal,
    JournalEntry,
    Op,
    atomic_write,
    default_state_dir,
    fsync_dir,
    inside,
    read_state,
    remove_if,
)
from code_assistant.edit.ownership import Fate, run_alone, take_back_stretches
from code_assistant.edit.takeback import FileOutcome, take_out
from code_assistant.edit.unified import unified_diff
from code_assistant.errors import AssistantError
from code_assistant.gate import Refusal, secret_file
from code_assistant.parse import code_parser

logger = logging.getLogger(__name__)

WRITE_ATTEMPTS = 3  # an edit whose file keeps changing under it between read and write is given up after this


class ChangedOutsideError(AssistantError):
    """A file the run wrote was changed by somebody else since, and the run cannot go on beside them (the answer's
    edit would touch their change, or the file was deleted or replaced): it must not write over what the model never
    saw. `paths`: the files, repository-relative."""

    def __init__(self, paths: list[str]) -> None:
        names = ", ".join(paths)
        super().__init__(f"{names} {'was' if len(paths) == 1 else 'were'} changed outside the assistant during the run",
                         exit_code=1)
        self.paths = paths


def _syntax_problem(path: Path, source: str) -> str | None:
    try:
        problem = code_parser.syntax_problem(str(path), source)
    except Exception:  # a parser failure must never stop an edit
        logger.debug("syntax check failed for %s", path, exc_info=True)
        return None
    return f"line {problem.line}: {problem.message}" if problem else None


def numbered(results: list[EditResult]) -> list[EditResult]:
    """A batch's results, each failure named by its place and the edits before it that were made (the model is
    told not to send those again)."""
    for n, result in enumerate(results):
        if result.ok:
            continue
        result.message = f"edit {n + 1} failed: {result.message}"
        if applied := [i + 1 for i, r in enumerate(results[:n]) if r.ok]:
            word = "edit" if len(applied) == 1 else "edits"
            result.message += f"\n{word.capitalize()} {_and_list(applied)} already applied; do not resend them."
    return results


def link_deletion(repo: Path, op: EditOperation) -> EditResult | None:
    """A delete of a symlink is refused (the link would go, or its target): the refusal, else None."""
    if op.action == Action.DELETE and (repo / op.file_path.strip()).is_symlink():
        return EditResult.failed(op.file_path, op.action, f"{op.file_path} is a symlink; deleting links is refused")
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _and_list(numbers: list[int]) -> str:
    names = [str(n) for n in numbers]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


class FileEditor:
    """Applies model edits to one repository, journaling originals so the run can be rolled back byte for byte."""

    def __init__(self, repo_path: str | Path, state_dir: str | Path | None = None,
                 forbidden: Iterable[Path] = (), *, originals: Path | None = None, history: bool = True,
                 task: str | None = None, session: str | None = None) -> None:
        """`originals`: where a file's original is saved when the user's and the run's edits overlap at a rollback
        (beside the run's log); `history`: keep a finished run's journal for undo (not for scratch copies); `task`
        and `session`: what the run was asked and the session it belongs to (undo names the one, chooses by the
        other)."""
        self.task, self.session = task, session
        self.repo = Path(repo_path).resolve()
        self.state_dir = Path(state_dir).resolve() if state_dir else default_state_dir(self.repo)
        if inside(self.state_dir, self.repo):
            raise PathError(Refusal.PRIVATE, f"state dir {self.state_dir} is inside the repository; backups must live outside it")
        self.forbidden = [Path(f).resolve() for f in forbidden] + [self.state_dir]
        self.originals, self.history = originals, history
        self._journal: Journal | None = None
        self._touched: dict[str, JournalEntry] = {}  # rel path -> its first journal entry
        self._left: dict[str, bytes | None] = {}  # rel path -> what the run last left in it (None: absent)
        self.last_run: Journal | None = None  # the journal of the last finished run (kept for undo)

    # ---- public API -------------------------------------------------------------------------------------------
    def apply_edit(self, op: EditOperation) -> EditResult:
        try:
            path = resolve_repo_path(self.repo, op.file_path, self.forbidden)
        except PathError as exc:
            return EditResult.failed(op.file_path, op.action, str(exc))
        rel = path.relative_to(self.repo).as_posix()
        if link := link_deletion(self.repo, op):
            return link
        try:
            for _ in range(WRITE_ATTEMPTS):
                try:
                    return self._apply(op, path, rel)
                except FileMoved:  # written by somebody else between our read and our write: read it again
                    logger.info("%s changed while it was being edited; reading it again", rel)
            raise ChangedOutsideError([rel])
        except PathError as exc:
            return EditResult.failed(rel, op.action, str(exc))
        except OSError as exc:
            logger.warning("edit of %s failed: %s", rel, exc)
            return EditResult.failed(rel, op.action, f"could not write {rel}: {exc.strerror or exc}")

    def apply_edits(self, ops: list[EditOperation]) -> list[EditResult]:
        return numbered([self.apply_edit(op) for op in ops])

    def broken(self) -> dict[str, str]:
        """Files the run left unparsable that parsed before it (or that it created): path -> "line N: message". A
        file the run wrote around somebody else's change counts only when their side, the run's change taken out,
        still parses: a line they are half-way through typing is theirs to finish, never the model's to repair."""
        problems = {}
        around = self._around()
        for rel, entry in self._touched.items():
            left = self._left.get(rel)
            if left is None:
                continue
            problem = _syntax_problem(self.repo / rel, file_text(left)[0])
            if problem is None:
                continue
            before = None if entry.op == Op.CREATED else self._backup_bytes(entry)
            if before is not None and _syntax_problem(self.repo / rel, file_text(before)[0]) is not None:
                continue
            if rel in around and not self._theirs_parse(around[rel], left):
                logger.info("%s does not parse, but neither does it without the run's change: not the run's", rel)
                continue
            problems[rel] = problem
        return problems

    def _around(self) -> dict[str, FileRecord]:
        """The files the run wrote around somebody else's change (more than one stretch), by path."""
        files = self._journal.files() if self._journal is not None else []
        return {record.path: record for record in files if len(record.stretches) > 1}

    def _theirs_parse(self, record: FileRecord, left: bytes) -> bool:
        """Whether the other side of a file the run wrote around somebody else's change (what the run left, its
        change taken out) parses."""
        assert self._journal is not None
        theirs = take_back_stretches(self._journal.stretches(record), left)
        return theirs.fate != Fate.CONFLICT and theirs.data is not None and \
            _syntax_problem(self.repo / record.path, file_text(theirs.data)[0]) is None

    def changed_outside(self) -> list[str]:
        """Files this run wrote that no longer hold what it left in them: somebody else changed them since."""
        return self.outside([]).changed

    def outside(self, ops: list[EditOperation]) -> Outside:
        """The files this run wrote that somebody else changed since, and whether the answer's edits (`ops`) fit
        them as they are now (beside.outside); nothing is written."""
        files = {rel: (left, now) for rel, left in self._left.items()
                 if (now := read_state(self.repo / rel)) != left}
        return outside(files, [(repo_relative(self.repo, op.file_path, self.forbidden), op) for op in ops]) \
            if files else Outside()


    def rollback(self) -> list[FileOutcome]:
        """Take the run's change out of every file it touched; what somebody else wrote meanwhile stays."""
        if self._journal is None:
            return []
        outcomes = take_out(self.repo, self._journal)
        self._journal.close(Closed.ROLLED_BACK)
        shutil.rmtree(self._journal.run_dir, ignore_errors=True)
        self._journal, self._touched, self._left = None, {}, {}
        logger.info("rolled back %d file(s)", len(outcomes))
        return outcomes

    def finish(self) -> None:
        """The run's change stays: its journal is kept for undo (with `history`), else dropped."""
        journal, self.last_run = self._journal, None
        if journal is not None:
            journal.close(Closed.FINISHED)
            if self.history:
                self.last_run = journal
                history.prune(self.state_dir)
            else:
                shutil.rmtree(journal.run_dir, ignore_errors=True)
        self._journal, self._touched, self._left = None, {}, {}

    def record_commit(self, commit: str) -> None:
        """The last finished run was committed (--commit): an undo reverts that commit."""
        if self.last_run is not None:
            self.last_run.append(JournalEntry(op=Op.COMMITTED, commit=commit))

    @property
    def modified_files(self) -> list[str]:
        return list(self._touched)

    def diff(self) -> str:
        """The run's own change: each file before the run against what the run left in it (edits somebody else
        made meanwhile are not the run's and are not shown: a file written on top of theirs shows what the run
        would have left alone, ownership.run_alone)."""
        chunks: list[str] = []
        around = self._around()
        for rel, entry in self._touched.items():
            before = None if entry.op == Op.CREATED else self._backup_bytes(entry)
            after = self._left.get(rel, before)
            if rel in around and self._journal is not None:
                after = run_alone(self._journal.stretches(around[rel]))
            if before == after:
                continue
            chunks.append(unified_diff(None if before is None else file_text(before)[0],
                                       None if after is None else file_text(after)[0], rel))
        return "".join(chunks)

    @staticmethod
    def recover(repo_path: str | Path, state_dir: str | Path | None = None) -> list[FileOutcome] | None:
        """Take out what interrupted runs (killed, crashed) left, by the ownership rule; None when there were none."""
        root = Path(repo_path).resolve()
        runs = (Path(state_dir) if state_dir else default_state_dir(root)) / "runs"
        outcomes: list[FileOutcome] = []
        found = False
        for run_dir in sorted(runs.iterdir(), reverse=True) if runs.is_dir() else []:
            journal = Journal(run_dir)
            if not journal.path.is_file():
                continue
            ending = journal.closed()
            if ending == Closed.FINISHED:
                continue  # kept for undo
            if ending is not None:
                shutil.rmtree(run_dir, ignore_errors=True)  # closed: nothing to restore, tidy it away
                continue
            begin = journal.begin()
            pid = (begin.pid or 0) if begin else 0
            if pid and pid != os.getpid() and _alive(pid):
                logger.warning("run %s belongs to live process %d; not recovering it", run_dir, pid)
                continue
            found = True
            logger.warning("recovering an unfinished run from %s", run_dir)
            outcomes += take_out(root, journal)
            journal.close(Closed.RECOVERED)
            shutil.rmtree(run_dir, ignore_errors=True)
        return outcomes if found else None

    # ---- internals --------------------------------------------------------------------------------------------
    def _apply(self, op: EditOperation, path: Path, rel: str) -> EditResult:
        action = op.action
        if action not in ACTIONS:
            return EditResult.failed(rel, action, f"unknown action {str(action)!r}; use one of {', '.join(ACTIONS)}")
        if path.exists() and not path.is_file():
            return EditResult.failed(rel, action, f"{rel} is a directory, not a file")
        old = read_state(path)
        exists = old is not None
        if rel in self._left and old != self._left[rel]:
            self._beside(op, rel, old)
        if action == Action.DELETE:
            if old is None:
                return EditResult.failed(rel, action, f"cannot delete {rel}: it does not exist")
            self._claim(path, rel, None, old)
            remove_if(path, old)
            fsync_dir(path.parent)
            self._left[rel] = None
            return EditResult(ok=True, file_path=rel, action=action, message=f"deleted {rel}")
        if action == Action.MODIFY and not exists and not op.search.strip() and not (op.content or op.replace):
            return EditResult.failed(rel, action, f"{rel} does not exist, and this edit holds no text to write into "
                                                  "it. Check the path, or use action 'create' with the file's full "
                                                  "content to make a new file.")
        if action == Action.CREATE or (action == Action.MODIFY and not exists and not op.search.strip()):
            if exists and op.append and not op.overwrite:
                base = file_text(old)[0]
                added = op.content if op.content is not None else op.replace
                return self._write(path, rel, action, old, base + ("\n" if base and not base.endswith("\n") else "")
                                   + added, "append")
            if exists and not op.overwrite:
                return EditResult.failed(rel, action, f"{rel} already exists. To change it, send a search/replace "
                                                      "edit; to replace it entirely, create with overwrite=true.")
            new_text = op.content if op.content is not None else op.replace
            return self._write(path, rel, action, old, new_text, "exact")
        if old is None:
            return EditResult.failed(rel, action, f"{rel} does not exist. Check the path, or use action 'create' "
                                                  "with the full content to make a new file.")
        if looks_binary(old):
            return EditResult.failed(rel, action, f"{rel} looks binary; it cannot be edited with text edits")
        if action != Action.MODIFY and not op.symbol:
            return EditResult.failed(rel, action, f"{action} needs 'symbol' (the qualified name, e.g. Class.method)")
        text = file_text(old)[0]
        outcome = edit_text(op, rel, text)
        if not outcome.ok:  # its closest lines are shown to the model: never a secret file's
            return EditResult.failed(rel, action, f"{rel}: {outcome.message}" if not secret_file(rel, text) else
                                     f"{rel}: the edit does not match; the file may hold secrets, so none of its "
                                     "lines are shown")
        return self._write(path, rel, action, old, outcome.content, outcome.strategy)

    def _write(self, path: Path, rel: str, action: str, old: bytes | None, new_text: str,
               strategy: str | None) -> EditResult:
        old_text, bom = file_text(old) if old is not None else ("", False)
        new = file_bytes(new_text, bom)
        if old is not None and new == old:
            return EditResult.failed(rel, action, f"{rel}: this edit changes nothing (its new text is what the file "
                                                  "already holds); send only edits that change the file", strategy)
        broke = None
        if old is not None and _syntax_problem(path, old_text) is None:
            broke = _syntax_problem(path, new_text)
        elif old is None:
            broke = _syntax_problem(path, new_text)
        mode = path.stat().st_mode & 0o7777 if path.exists() else None
        self._claim(path, rel, new, old)
        atomic_write(path, new, mode, expect=old)
        self._left[rel] = new
        message = f"{'created' if old is None else 'edited'} {rel}" + (f" ({strategy} match)" if old else "")
        if broke:
            message += f"; the file no longer parses: {broke}"
        return EditResult(ok=True, file_path=rel, action=action, message=message, strategy=strategy,
                          syntax_error=broke)

    def _beside(self, op: EditOperation, rel: str, now: bytes | None) -> None:
        """A file the run wrote holds `now`, not what the run left there: somebody else changed it. The edit goes
        ahead only when it fits around their change; else ChangedOutsideError."""
        left = self._left[rel]
        why = gone(left, now)
        if why is None:
            assert left is not None and now is not None  # gone() names a missing side
            why = misfit(op, rel, left, now)
        if why:
            logger.info("%s changed outside the run: %s", rel, why)
            raise ChangedOutsideError([rel])
        logger.info("%s changed outside the run; the edit fits around that change", rel)

    def _claim(self, path: Path, rel: str, data: bytes | None, old: bytes | None) -> None:
        """Before the run writes `data` into a file (None: deletes it), having read `old` from it: its original is
        journaled (first write), or, when `old` is not what the run last left there (somebody else's change, which
        `_beside` found this edit fits around), `old` is journaled as found; then the new bytes are announced. The
        write itself checks `old` once more (FileMoved)."""
        if rel in self._left and old != self._left[rel]:
            assert self._journal is not None and old is not None
            self._journal.found(rel, old)
            self._left[rel] = old
        self._remember(path, rel, old)
        assert self._journal is not None
        self._journal.announce(rel, data)

    def _remember(self, path: Path, rel: str, old: bytes | None) -> None:
        """Journal the original of a file (`old`, as read) before its first write in this run (creating missing
        parent dirs). A file journaled whose first write did not happen (it changed under it) is journaled again."""
        if rel in self._touched:
            entry = self._touched[rel]
            if rel not in self._left:
                if (entry.op == Op.CREATED) != (old is None):
                    raise ChangedOutsideError([rel])
                if old is not None:
                    assert self._journal is not None
                    self._journal.backup(old, int(Path(str(entry.backup)).name))
            if not path.parent.is_dir():
                path.parent.mkdir(parents=True, exist_ok=True)
            return
        if self._journal is None:
            self._journal = Journal.start(self.state_dir, self.repo, self.originals, task=self.task,
                                          session=self.session)
        if old is not None:
            backup = self._journal.backup(old, len(self._touched))
            entry = JournalEntry(op=Op.MODIFIED, path=rel, backup=str(backup.relative_to(self._journal.run_dir)),
                                 mode=path.stat().st_mode & 0o7777)
        else:
            missing = [p for p in reversed(path.parents) if inside(p, self.repo) and not p.exists()]
            entry = JournalEntry(op=Op.CREATED, path=rel,
                                 dirs=tuple(p.relative_to(self.repo).as_posix() for p in missing))
        self._journal.append(entry)
        self._touched[rel] = entry
        for dir_ in entry.dirs:  # made one by one under the path resolved once (apply_edit), each checked as made
            made = self.repo / dir_
            made.mkdir(exist_ok=True)
            if made.resolve() != made:  # swapped for a symlink meanwhile: what follows would be written elsewhere
                raise PathError(Refusal.OUTSIDE, f"path {rel!r} refused: {dir_} became a symlink while its directories were made")

    def _backup_bytes(self, entry: JournalEntry) -> bytes:
        assert self._journal is not None
        return (self._journal.run_dir / str(entry.backup)).read_bytes()

