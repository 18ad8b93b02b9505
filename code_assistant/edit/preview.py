"""Apply a batch of edits to a scratch copy first: the diff, its size and its test changes, before any real write."""
from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from code_assistant.edit.command_guard import check_test_definition
from code_assistant.edit.editor import FileEditor, link_deletion, numbered
from code_assistant.edit.edits import EditOperation, EditResult, PathError, repo_relative, resolve_repo_path
from code_assistant.edit.guardrails import changed_line_count, check_env_edit, check_test_setup, check_test_weakening
from code_assistant.edit.unified import unified_diff
from code_assistant.languages import is_test_file

if TYPE_CHECKING:
    from code_assistant.settings import Settings

logger = logging.getLogger(__name__)


@dataclass
class FileChange:
    path: str
    before: str | None  # None: the file is created
    after: str | None   # None: the file is deleted


@dataclass
class Preview:
    results: list[EditResult]
    changes: list[FileChange] = field(default_factory=list)

    @property
    def changed_lines(self) -> int:
        return sum(changed_line_count(c.before or "", c.after or "") for c in self.changes)

    @property
    def files(self) -> list[str]:
        return [c.path for c in self.changes]

    def diff(self) -> str:
        return "".join(unified_diff(c.before, c.after, c.path) for c in self.changes)


def preview_edits(repo: Path, ops: list[EditOperation], forbidden: Iterable[Path] = ()) -> Preview:
    """Run the edits through a FileEditor on a scratch copy of the files they name; the repository is untouched.
    Each path is resolved in the repository as the editor resolves it (a symlink inside it leads to its target, so
    the guardrails judge the file that would really change) and refused with the editor's words."""
    repo = repo.resolve()
    forbidden = list(forbidden)
    with tempfile.TemporaryDirectory(prefix="ca-preview-") as scratch_name:
        scratch = Path(scratch_name) / "repo"
        scratch.mkdir()
        editor = FileEditor(scratch, state_dir=Path(scratch_name) / "state", history=False)
        originals: dict[str, str | None] = {}
        results: list[EditResult] = []
        for op in ops:
            try:
                real = resolve_repo_path(repo, op.file_path, forbidden)
            except PathError as exc:
                results.append(EditResult.failed(op.file_path, op.action, str(exc)))
                continue
            if refused := link_deletion(repo, op):
                results.append(refused)
                continue
            rel = real.relative_to(repo).as_posix()
            if rel not in originals:
                originals[rel] = _copied(real, scratch / rel)
            results.append(editor.apply_edit(replace(op, file_path=rel)))
        results = numbered(results)
        changes: list[FileChange] = []
        for rel, before in originals.items():
            path = scratch / rel
            after = path.read_text(encoding="utf-8", errors="surrogateescape") if path.is_file() else None
            if after != before:
                changes.append(FileChange(rel, before, after))
        editor.finish()
    return Preview(results, changes)


def sparing(repo: Path, ops: list[EditOperation], refused: Iterable[str]) -> list[EditOperation]:
    """The edits whose file, resolved as the editor resolves it ('./a.py', a symlink to it), is none of the
    `refused` repository-relative paths (refusals' test files); an edit whose path does not resolve stays, for the
    editor to refuse in its own words."""
    refused = set(refused)
    return [op for op in ops if repo_relative(repo, op.file_path) not in refused]


def _copied(real: Path, target: Path) -> str | None:
    """A file of the repository copied into the scratch tree (its text returned), or, for a file still to be
    created, its folder made there (None)."""
    if real.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(real, target)
        return real.read_text(encoding="utf-8", errors="surrogateescape")
    if real.parent.is_dir():
        target.parent.mkdir(parents=True, exist_ok=True)
    return None


@dataclass(frozen=True)
class Limits:
    """The guardrails of one run (their defaults are the settings' defaults)."""

    max_changed_lines: int  # for a fix
    max_plan_lines: int     # for the first plan
    max_files: int
    allow_test_edits: bool
    test_command: str  # what the files it reads (a Makefile, package.json's scripts) may not be changed to
    allow_env_edits: bool = False

    @classmethod
    def of(cls, settings: Settings) -> Limits:
        """The guardrails the settings name (a run's, and `apply`'s)."""
        s = settings
        return cls(max_changed_lines=s.max_changed_lines, max_plan_lines=s.max_plan_lines, max_files=s.max_files,
                   allow_test_edits=s.allow_test_edits, test_command=s.test_command, allow_env_edits=s.allow_env_edits)

    def over(self, steps: int) -> Limits:
        """The limits of a change made over `steps` answers after the plan, each of which passed these (best of N:
        the winner's whole change, applied at once)."""
        return replace(self, max_plan_lines=self.max_plan_lines + steps * self.max_changed_lines,
                       max_files=self.max_files * (steps + 1))


def refusals(preview: Preview, limits: Limits, *, is_plan: bool) -> tuple[list[str], dict[str, str]]:
    """Why not to write: (reasons that refuse the whole batch, {test or .env file: why its edits are refused})."""
    reasons: list[str] = []
    limit = limits.max_plan_lines if is_plan else limits.max_changed_lines
    if preview.changed_lines > limit:
        reasons.append(f"the change touches {preview.changed_lines} lines, over the limit of {limit} "
                       f"for {'a plan' if is_plan else 'a fix'}; send a smaller, focused change")
    if len(preview.changes) > limits.max_files:
        reasons.append(f"the change touches {len(preview.changes)} files, over the limit of {limits.max_files}; "
                       "change fewer files")
    weakened: dict[str, str] = {}
    if not limits.allow_test_edits:
        for change in preview.changes:
            reason = check_test_weakening(change.path, change.before, change.after) if is_test_file(change.path) \
                else None
            reason = reason or check_test_setup(change.path, change.before, change.after) \
                or check_test_definition(change.path, change.before, change.after, limits.test_command)
            if reason:
                logger.info("refused edit of %s: %s", change.path, reason)
                weakened[change.path] = reason
    if not limits.allow_env_edits:
        weakened.update((change.path, why) for change in preview.changes if (why := check_env_edit(change.path)))
    return reasons, weakened
