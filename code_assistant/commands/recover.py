"""`recover` and `undo`: take an interrupted run's change out of the repository; take back the last finished run.
Both by the ownership rule (edit/takeback.py): what anyone else wrote since stays."""
from __future__ import annotations

import json
from dataclasses import dataclass

from code_assistant import console
from code_assistant.commands import parts
from code_assistant.errors import EXIT_OK
from code_assistant.settings import Settings


@dataclass(frozen=True)
class RecoverOptions:
    pass


@dataclass(frozen=True)
class UndoOptions:
    json: bool = False


def recover(settings: Settings, options: RecoverOptions) -> int:
    from code_assistant.edit.journal import RepoLock

    with RepoLock(settings.repo, settings.repo_state_dir):
        if parts.recover_interrupted(settings, console.say) is None:
            console.say("[Recover: nothing to restore]")
    return EXIT_OK


def undo(settings: Settings, options: UndoOptions) -> int:
    """Take back the last run that left changes (after recovering an interrupted one): its lines go, what anyone
    else wrote since stays; a file that cannot be separated refuses the whole undo (history.UndoError, exit 2)."""
    from code_assistant.edit.history import undo_last
    from code_assistant.edit.journal import RepoLock

    say = console.quiet if options.json else console.say
    with RepoLock(settings.repo, settings.repo_state_dir):
        parts.recover_interrupted(settings, say)
        undone = undo_last(settings.repo, settings.repo_state_dir)
    if options.json:
        print(json.dumps({"success": True, "undone": undone.run, "taken_back": console.taken_back_json(undone.outcomes),
                          "reverted_commit": undone.reverted, "revert_commit": undone.revert_commit}))
    elif undone.reverted:
        console.say(f"[Undo: the run's commit {undone.reverted[:12]} reverted by a new commit {undone.revert_commit}]")
    else:
        console.say(f"[Undo: took back run {undone.run}]")
        console.taken_back(undone.outcomes, "taken back")
    return EXIT_OK
