"""The repository as a model may look at it: the files git tracks, or would track (not ignored), in any language —
never a secret (`.env`, keys, credential files), a symlink, a vendored or dependency directory's file, anything under
.git, or the assistant's own index and state. A path the model names and a file's text both pass the read gate."""
from __future__ import annotations

import time
from pathlib import Path

from code_assistant import redact
from code_assistant.gate import Gate, Refusal, Refused
from code_assistant.index.repo_files import visible_files
from code_assistant.tools import ToolError

LIST_TTL_S = 2.0  # the file list is listed again after this long (the model's own plan may add files between steps)


class RepoView:
    def __init__(self, repo: Path, exclude: list[Path] | None = None) -> None:
        """`exclude`: the assistant's own directories (its index and state), never shown."""
        self.gate = Gate(repo, tuple(exclude or ()))
        self.repo = self.gate.root
        self._files: list[str] = []
        self._listed_at = float("-inf")

    def files(self) -> list[str]:
        """The visible files, repository-relative, sorted."""
        if time.monotonic() - self._listed_at > LIST_TTL_S:
            self._files = visible_files(self.repo, list(self.gate.private))
            self._listed_at = time.monotonic()
        return self._files

    def resolve(self, path: str) -> str:
        """A path the model names, as a visible file's repository-relative path; else a ToolError saying why."""
        raw = (path or "").strip().removeprefix("./")
        try:
            rel = self.gate.admit(raw)
        except Refused as exc:
            if exc.reason == Refusal.DIRECTORY:
                rel = self.gate.place(raw).relative_to(self.repo).as_posix()
                raise ToolError(f"{rel} is a directory; grep with path_glob=\"{rel}/**\" lists what is in it") from None
            raise ToolError(str(exc)) from None
        if rel not in set(self.files()):
            raise ToolError(f"{rel} is not shown (ignored by git, a symlink, vendored, or the assistant's own)")
        return rel

    def read(self, rel: str) -> str:
        """A visible file's text; else a ToolError saying why (binary, too large, a secret by what it holds)."""
        try:
            return redact.mask_key_blocks(self.gate.read(rel))
        except Refused as exc:
            raise ToolError(str(exc)) from None

    def text(self, rel: str) -> str | None:
        """A visible file's text, a private key's block in it masked line by line (None: the read gate refused it, or
        it is binary or too large to show)."""
        text = self.gate.text(rel)
        return None if text is None else redact.mask_key_blocks(text)

    def scanned(self, rel: str) -> str | None:
        """A visible file's text for a scan to look through, what it holds not judged yet: before a line of it is
        shown, `shows` must say it may be (None: refused by its place or name, binary or too large)."""
        return self.gate.text(rel, judge=False)

    def shows(self, rel: str, text: str) -> bool:
        """Whether a file read by `scanned` may be shown (no secret by what it holds)."""
        return self.gate.shows(rel, text)
