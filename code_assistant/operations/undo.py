"""`undo`: take back the last run that left changes (after recovering an interrupted one) by the ownership rule: its
lines go, what anyone else wrote since stays; a file that cannot be separated refuses the whole undo (UndoError, exit
2). A run committed with --commit is reverted with git while its commit is HEAD. In a session, the session's own last
task (another session's, or a one-shot run's, is not its to take back)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from code_assistant.operations.options import UndoOptions
from code_assistant.operations.outcomes import UndoOutcome

if TYPE_CHECKING:
    from code_assistant.workspace import Workspace


def execute(ws: Workspace, options: UndoOptions) -> UndoOutcome:
    from code_assistant.edit.history import undo_last

    with ws.holding():
        undone = undo_last(ws.settings.repo, ws.settings.repo_state_dir, session=ws.session)
    ws.remember_undone(undone.task, [o.path for o in undone.outcomes])
    return UndoOutcome(undone=undone)
