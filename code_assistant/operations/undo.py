"""`undo`: take back the last run that left changes (after recovering an interrupted one) by the ownership rule: its
lines go, what anyone else wrote since stays; a file that cannot be separated refuses the whole undo (UndoError, exit
2). A run committed with --commit is reverted with git while its commit is HEAD."""
from __future__ import annotations

from typing import TYPE_CHECKING

from code_assistant.operations.options import UndoOptions
from code_assistant.operations.outcomes import UndoOutcome

if TYPE_CHECKING:
    from code_assistant.workspace import Workspace


def execute(ws: Workspace, options: UndoOptions) -> UndoOutcome:
    from code_assistant.agent.memory import Note
    from code_assistant.edit.history import undo_last

    with ws.holding():
        undone = undo_last(ws.settings.repo, ws.settings.repo_state_dir)
    files = [o.path for o in undone.outcomes]
    ws.memory.remember(Note(task="/undo", result=f"the last task's change was taken back ({', '.join(files)})"), [])
    ws.memory.changed = [p for p in ws.memory.changed if p not in files]
    ws.save_memory()
    return UndoOutcome(undone=undone)
