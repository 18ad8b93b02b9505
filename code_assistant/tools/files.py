"""The repository as a model may look at it: the files git tracks, or would track (not ignored), in any language —
never a secret (`.env`, keys, credential files), a symlink, a vendored or dependency directory's file, anything under
.git, or the assistant's own index and state. One rule for a path the model names, and one reader of a file's text."""
from __future__ import annotations

import time
from pathlib import Path, PurePosixPath

from code_assistant import languages, redact
from code_assistant.edit.operations import PathError, resolve_repo_path
from code_assistant.index.repo_files import visible_files
from code_assistant.tools import ToolError

MAX_READ_BYTES = 2 * 1024 * 1024  # a file larger than this is not shown (a data dump, a bundle)
LIST_TTL_S = 2.0  # the file list is listed again after this long (the model's own plan may add files between steps)


class RepoView:
    def __init__(self, repo: Path, exclude: list[Path] | None = None) -> None:
        self.repo = repo.resolve()
        self.exclude = [p.resolve() for p in exclude or []]
        self._files: list[str] = []
        self._listed_at = float("-inf")

    def files(self) -> list[str]:
        """The visible files, repository-relative, sorted."""
        if time.monotonic() - self._listed_at > LIST_TTL_S:
            self._files = visible_files(self.repo, self.exclude)
            self._listed_at = time.monotonic()
        return self._files

    def resolve(self, path: str) -> str:
        """A path the model names, as a visible file's repository-relative path; else a ToolError saying why."""
        raw = (path or "").strip().removeprefix("./")
        if any(part.lower() == ".git" for part in PurePosixPath(raw).parts):
            raise ToolError(f"{raw}: files under .git/ are not shown")
        try:
            target = resolve_repo_path(self.repo, raw, self.exclude)
        except PathError as exc:
            raise ToolError(str(exc)) from None
        rel = target.relative_to(self.repo).as_posix()
        if languages.is_secret_path(rel):
            raise ToolError(f"{rel}: a file that may hold secrets is never shown")
        if target.is_dir():
            raise ToolError(f"{rel} is a directory; grep with path_glob=\"{rel}/**\" lists what is in it")
        if rel not in set(self.files()):
            if not target.exists():
                raise ToolError(f"{rel}: no such file in the repository")
            raise ToolError(f"{rel} is not shown (ignored by git, a symlink, vendored, or the assistant's own)")
        return rel

    def text(self, rel: str) -> str | None:
        """A visible file's text, a private key's block in it masked line by line (None: binary or too large)."""
        try:
            data = (self.repo / rel).read_bytes()
        except OSError:
            return None
        if len(data) > MAX_READ_BYTES or b"\0" in data[:8192]:
            return None
        return redact.mask_key_blocks(data.decode("utf-8", errors="replace"))
