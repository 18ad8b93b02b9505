"""Unified diffs, as models write them (git's `diff --git` headers, plain `--- a/x` / `+++ b/x`, aider's `@@ ... @@`
hunks without line numbers), read into edit operations. Pure.

Each hunk becomes a search/replace edit: its context and `-` lines are the search text, its context and `+` lines
the replacement, so the hunk is placed by the matcher (exact, then the tolerant strategies) and not by its line
numbers, which models often get wrong. `--- /dev/null` creates the file from the `+` lines; `+++ /dev/null` deletes
it. A blank line inside a hunk whose leading space was lost counts as a blank context line; the hunk ends at a line
that is none of ` `, `-`, `+`, `\\`, blank (prose after it, a closing fence). A rename is refused: it is a create and
a delete, which the model can send as such.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from code_assistant.edit.edits import Action, EditOperation

DEV_NULL = "/dev/null"
_HUNK_RE = re.compile(r"^@@.*@@")
_GIT_HEADER_RE = re.compile(r"^diff --git ")


class DiffError(ValueError):
    """The diff cannot be read; the message is written for the model."""


@dataclass
class _Hunk:
    before: list[str] = field(default_factory=list)
    after: list[str] = field(default_factory=list)
    changed: bool = False
    gap: int = 0  # empty lines (not even a space) at the end so far: blank context, or the gap before prose


@dataclass
class _File:
    old: str
    new: str
    hunks: list[_Hunk] = field(default_factory=list)


def _is_header(lines: list[str], i: int) -> bool:
    return lines[i].startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")


def has_diff(text: str) -> bool:
    lines = text.splitlines()
    return any(_is_header(lines, i) for i in range(len(lines)))


def _path(header: str, prefix: str) -> str:
    """The path of a `--- ` / `+++ ` line: a timestamp after a tab or spaces dropped, git's a/ or b/ taken off."""
    raw = header[4:].split("\t", 1)[0].strip()
    raw = raw.split(" ", 1)[0] if re.search(r"\s\d{4}-\d\d-\d\d", raw) else raw
    raw = raw.strip("\"'")
    if raw == DEV_NULL:
        return raw
    return raw[2:] if raw.startswith(prefix) else raw


def _read_files(lines: list[str]) -> list[_File]:
    files: list[_File] = []
    hunk: _Hunk | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if _is_header(lines, i):
            files.append(_File(_path(line, "a/"), _path(lines[i + 1], "b/")))
            hunk = _Hunk()
            files[-1].hunks.append(hunk)
            i += 2
            continue
        if not files:
            i += 1
            continue
        if _HUNK_RE.match(line):
            hunk = _Hunk()
            files[-1].hunks.append(hunk)
        elif hunk is None or _GIT_HEADER_RE.match(line):
            hunk = None
        elif line.startswith("\\"):
            pass  # "\ No newline at end of file": the matcher keeps the file's own last line ending
        elif line.startswith("-"):
            hunk.before.append(line[1:])
            hunk.changed, hunk.gap = True, 0
        elif line.startswith("+"):
            hunk.after.append(line[1:])
            hunk.changed, hunk.gap = True, 0
        elif line.startswith(" ") or not line.strip():
            hunk.before.append(line[1:])
            hunk.after.append(line[1:])
            hunk.gap = hunk.gap + 1 if not line else 0
        elif hunk.changed or hunk.before:
            hunk = None  # prose or a fence after the hunk: it ends here
        i += 1
    return files


def _trim(hunk: _Hunk) -> _Hunk:
    """Empty lines at the end of a hunk are the gap before prose, not lines the file must have."""
    if hunk.gap:
        del hunk.before[-hunk.gap:], hunk.after[-hunk.gap:]
    return hunk


def _text(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


def parse_diff(text: str) -> list[EditOperation]:
    """Every file of the diff, in order, as edit operations. Raises DiffError."""
    ops: list[EditOperation] = []
    for diff in _read_files(text.splitlines()):
        hunks = [_trim(h) for h in diff.hunks if h.changed]
        if diff.new == DEV_NULL:
            if diff.old == DEV_NULL:
                raise DiffError("a diff goes from /dev/null to /dev/null: name the file in `--- a/path`")
            ops.append(EditOperation(file_path=diff.old, action=Action.DELETE, description="+++ /dev/null"))
            continue
        if diff.old not in (DEV_NULL, diff.new):
            raise DiffError(f"the diff renames {diff.old} to {diff.new}, which cannot be applied: create "
                            f"{diff.new} with the whole content and delete {diff.old}")
        if not hunks:
            raise DiffError(f"the diff for {diff.new} has no changed lines: send hunks starting with `@@` and "
                            f"lines starting with `-` or `+`")
        if diff.old == DEV_NULL:
            if any(h.before for h in hunks):
                raise DiffError(f"the diff creates {diff.new} (from /dev/null), so every line must start with `+`")
            ops.append(EditOperation(file_path=diff.new, action=Action.CREATE,
                                     content="".join(_text(h.after) for h in hunks), description="--- /dev/null"))
            continue
        ops.extend(EditOperation(file_path=diff.new, search=_text(h.before), replace=_text(h.after),
                                 action=Action.MODIFY) for h in hunks)
    return ops
