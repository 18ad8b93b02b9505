"""`add` and `drop`: the files pinned into every task's context (paths or globs inside the repository; what the read
gate refuses — outside it, in .git, a secret — or what is missing is refused with the reason)."""
from __future__ import annotations

import fnmatch
import glob
from collections.abc import Iterable
from typing import TYPE_CHECKING

from code_assistant.gate import Gate, Refusal, Refused
from code_assistant.operations.options import PinOptions
from code_assistant.operations.outcomes import PinsOutcome

if TYPE_CHECKING:
    from code_assistant.workspace import Workspace


def execute(ws: Workspace, options: PinOptions) -> PinsOutcome:
    memory = ws.memory
    added, refused = expand(Gate.of(ws.settings), options.add)
    memory.pins = [p for p in dict.fromkeys([*memory.pins, *added])
                   if not any(fnmatch.fnmatch(p, word) for word in options.drop)]
    ws.save_memory()
    return PinsOutcome(pinned=list(memory.pins), added=added, refused=refused)


def expand(gate: Gate, words: Iterable[str]) -> tuple[list[str], list[str]]:
    """Paths and globs to repository-relative files the read gate admits, and what was refused with the reason (a
    directory a glob matches is passed over)."""
    added: list[str] = []
    refused: list[str] = []
    for word in words:
        matches = sorted(glob.glob(word, root_dir=gate.root, recursive=True)) if glob.has_magic(word) else [word]
        if not matches:
            refused.append(f"{word}: no file matches")
        for match in matches:
            try:
                added.append(gate.admit(match))
            except Refused as exc:
                if not (exc.reason == Refusal.DIRECTORY and glob.has_magic(word)):
                    refused.append(str(exc))
    return added, refused
