"""`diff`: what the assistant changed that is still in effect — in a session, every task of the session (a resumed one
too) not taken back; from the command line, the last run that `undo` would take back — each file from before the
first of those runs to what the last of them left."""
from __future__ import annotations

from typing import TYPE_CHECKING

from code_assistant.operations.options import DiffOptions
from code_assistant.operations.outcomes import DiffOutcome, InEffect

if TYPE_CHECKING:
    from code_assistant.edit.journal import Journal
    from code_assistant.workspace import Workspace


def execute(ws: Workspace, options: DiffOptions) -> DiffOutcome:
    from code_assistant.edit.history import kept_runs

    kept = kept_runs(ws.settings.repo_state_dir, ws.settings.repo, ws.session)  # newest first
    runs, scope = (kept, "this session") if ws.session is not None else (kept[:1], "the last run")
    tasks = [InEffect(task=_asked(run), files=[record.path for record in run.files()]) for run in runs]
    return DiffOutcome(diff=changes(list(reversed(runs))), scope=scope, tasks=tasks)


def _asked(run: Journal) -> str:
    begin = run.begin()
    return begin.task if begin is not None and begin.task else f"run {run.run_dir.name}"


def changes(runs: list[Journal]) -> str:
    """Each file the runs (oldest first) touched, from before the first of them to what the last of them left."""
    from code_assistant.edit.ownership import run_alone
    from code_assistant.edit.unified import unified_diff

    before: dict[str, bytes | None] = {}
    after: dict[str, bytes | None] = {}
    for journal in runs:
        for record in journal.files():
            before.setdefault(record.path, journal.original(record))
            after[record.path] = run_alone(journal.stretches(record))  # the assistant's, not a line written beside it
    chunks = []
    for path, old in before.items():
        new = after[path]
        if old != new:
            chunks.append(unified_diff(None if old is None else old.decode("utf-8", "replace"),
                                       None if new is None else new.decode("utf-8", "replace"), path))
    return "".join(chunks)
