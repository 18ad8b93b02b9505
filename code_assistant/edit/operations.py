"""What the model asks for and what came of it: edit operations, their results, and the one rule that turns a
model-given path into a path inside the repository."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from code_assistant.edit.journal import inside

ACTIONS = ("modify", "create", "delete", "replace_symbol", "insert_after_symbol")
READ = "read"  # not an edit: the model asks to see a file in full before it changes it
PLAN_ACTIONS = (*ACTIONS, READ)


class PathError(ValueError):
    """A path the model gave that may not be touched; the message is written for the model."""


@dataclass
class EditOperation:
    file_path: str
    search: str = ""
    replace: str = ""
    action: str = "modify"  # "modify" | "create" | "delete" | "replace_symbol" | "insert_after_symbol" | "read"
    content: str | None = None  # full content for create; for symbol actions, the new definition
    description: str = ""
    symbol: str | None = None  # qualname for symbol actions
    overwrite: bool = False  # create over an existing file only when True


@dataclass
class EditResult:
    ok: bool
    file_path: str
    action: str
    message: str  # on failure: written for the model (why, closest real lines, what to do)
    strategy: str | None = None  # "exact", "whitespace", "indent", "elision", "intraline", "fuzzy", "symbol"
    syntax_error: str | None = None  # "line N: msg" when the edit broke a file that parsed before

    def __bool__(self) -> bool:
        return self.ok


def resolve_repo_path(repo: Path, user_path: str, forbidden: Iterable[Path] = ()) -> Path:
    """The only way a model-given path becomes a filesystem path: resolved, inside the repo, not .git, not forbidden."""
    root = Path(repo).resolve()
    raw = (user_path or "").strip()
    if not raw or "\x00" in raw:
        raise PathError(f"invalid file path {user_path!r}: give a path relative to the repository root")
    if raw.startswith(("/", "~")) or Path(raw).is_absolute():
        hint = ""
        try:
            hint = f" (did you mean {Path(raw).resolve().relative_to(root).as_posix()!r}?)"
        except ValueError:
            pass
        raise PathError(f"absolute path {raw!r} refused: use a path relative to the repository root{hint}")
    parts = Path(raw).parts
    if ".." in parts:
        raise PathError(f"path {raw!r} refused: '..' may not be used; give a path inside the repository")
    if any(p.lower() == ".git" for p in parts):
        raise PathError(f"path {raw!r} refused: files under .git/ are never edited")
    target = (root / raw).resolve()
    if not inside(target, root) or target == root:
        raise PathError(f"path {raw!r} refused: it resolves (through a symlink) outside the repository")
    if any(p.lower() == ".git" for p in target.relative_to(root).parts):
        raise PathError(f"path {raw!r} refused: it resolves into .git/, which is never edited")
    for dir_ in forbidden:
        if inside(target, Path(dir_).resolve()):
            raise PathError(f"path {raw!r} refused: it is inside the assistant's own data directory")
    return target
