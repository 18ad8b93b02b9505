"""`add` and `drop`: the files pinned into every task's context (paths or globs inside the repository; anything
outside it, in .git, or missing is refused with the reason)."""
from __future__ import annotations

import fnmatch
import glob
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from code_assistant.operations.options import PinOptions
from code_assistant.operations.outcomes import PinsOutcome

if TYPE_CHECKING:
    from code_assistant.workspace import Workspace


def execute(ws: Workspace, options: PinOptions) -> PinsOutcome:
    memory = ws.memory
    added, refused = expand(ws.settings.repo, options.add)
    memory.pins = [p for p in dict.fromkeys([*memory.pins, *added])
                   if not any(fnmatch.fnmatch(p, word) for word in options.drop)]
    ws.save_memory()
    return PinsOutcome(pinned=list(memory.pins), added=added, refused=refused)


def expand(repo: Path, words: Iterable[str]) -> tuple[list[str], list[str]]:
    """Paths and globs to repository-relative files, and what was refused with the reason."""
    from code_assistant.edit.operations import PathError, resolve_repo_path

    added: list[str] = []
    refused: list[str] = []
    for word in words:
        matches = sorted(glob.glob(word, root_dir=repo, recursive=True)) if glob.has_magic(word) else [word]
        if not matches:
            refused.append(f"{word}: no file matches")
        for match in matches:
            try:
                path = resolve_repo_path(repo, match)
            except PathError as exc:
                refused.append(str(exc))
                continue
            if path.is_file():
                added.append(path.relative_to(repo.resolve()).as_posix())
            elif not glob.has_magic(word):
                refused.append(f"{word}: no such file in the repository")
    return added, refused
