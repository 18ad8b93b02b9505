"""The one unified-diff writer: the --review/--dry-run preview and the final diff print a change the same way."""
from __future__ import annotations

import difflib

NO_NEWLINE = "\\ No newline at end of file\n"


def unified_diff(old: str | None, new: str | None, path: str) -> str:
    """A git-style diff of one file; None on one side is a created or deleted file. A last line without a newline
    is marked as git marks it, so a change to the final newline is visible."""
    old_name = f"a/{path}" if old is not None else "/dev/null"
    new_name = f"b/{path}" if new is not None else "/dev/null"
    lines = difflib.unified_diff((old or "").splitlines(keepends=True), (new or "").splitlines(keepends=True),
                                 old_name, new_name)
    return "".join(line if line.endswith("\n") else line + "\n" + NO_NEWLINE for line in lines)
