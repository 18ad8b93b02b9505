"""What the model asks for and what came of it: edit operations and their results; a model-given path becomes a path
inside the repository by the read gate's rule (gate.py), the one for reads and edits alike."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from code_assistant.gate import Gate, Refused


class Action(StrEnum):
    """What a change asks for; the value is what a plan's "action" says."""

    MODIFY = "modify"
    CREATE = "create"
    DELETE = "delete"
    REPLACE_SYMBOL = "replace_symbol"
    INSERT_AFTER_SYMBOL = "insert_after_symbol"
    READ = "read"  # not an edit: the model asks to see a file in full before it changes it


ACTIONS = tuple(a for a in Action if a is not Action.READ)  # the edits
PLAN_ACTIONS = tuple(Action)  # what a plan may ask for


PathError = Refused  # a path the model gave that may not be touched; the message is written for the model


@dataclass
class EditOperation:
    file_path: str
    search: str = ""
    replace: str = ""
    action: Action = Action.MODIFY
    content: str | None = None  # full content for create; for symbol actions, the new definition
    description: str = ""
    symbol: str | None = None  # qualname for symbol actions
    overwrite: bool = False  # create over an existing file only when True
    append: bool = False  # create over an existing file: the content added at its end (an empty SEARCH, as aider)


@dataclass
class EditResult:
    ok: bool
    file_path: str
    action: str  # the operation's Action (or the unknown action it named)
    message: str  # on failure: written for the model (why, closest real lines, what to do)
    strategy: str | None = None  # "exact", "whitespace", "indent", "elision", "intraline", "fuzzy", "symbol"
    syntax_error: str | None = None  # "line N: msg" when the edit broke a file that parsed before

    def __bool__(self) -> bool:
        return self.ok

    @classmethod
    def failed(cls, file_path: str, action: str, message: str, strategy: str | None = None) -> EditResult:
        return cls(ok=False, file_path=file_path, action=action, message=message, strategy=strategy)


def resolve_repo_path(repo: Path, user_path: str, forbidden: Iterable[Path] = ()) -> Path:
    """The only way a model-given path becomes a filesystem path for an edit: the read gate's `place` (resolved,
    inside the repo, not .git, not `forbidden`: the assistant's own directories); else PathError."""
    return Gate(repo, tuple(forbidden)).place(user_path or "")


def repo_relative(repo: Path, user_path: str, forbidden: Iterable[Path] = ()) -> str | None:
    """A model's path as the repository-relative path it resolves to ('./a.py' and a symlink to a.py are 'a.py'),
    or None when resolve_repo_path refuses it."""
    root = Path(repo).resolve()
    try:
        return resolve_repo_path(root, user_path, forbidden).relative_to(root).as_posix()
    except (PathError, ValueError):
        return None
