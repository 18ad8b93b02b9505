"""What else changed in the tree while a run went on: files its test runs wrote (a 2 GB dump, a cache, a build
directory), or somebody else did, that the assistant did not write. A rollback takes back the assistant's own writes
only; it says what else is there instead of claiming the tree is as it was, and deletes none of it."""
from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

MAX_LISTED = 10  # the largest ones are named; the rest counted


@dataclass(frozen=True)
class Leftover:
    path: str  # repository-relative
    size: int  # bytes

    def describe(self) -> str:
        return f"{self.path} ({human_size(self.size)})"


def human_size(size: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} bytes"


def changed_since(root: Path, since: float, skip: Iterable[Path] = (), written: Iterable[str] = ()) -> list[Leftover]:
    """Files (and links, not followed) under `root` modified at or after `since` (a time.time()), largest first;
    .git, the paths in `skip` (the assistant's own index and state) and the repository-relative paths in `written`
    left out."""
    root = root.resolve()
    skipped = {p.resolve() for p in skip} | {root / ".git"}
    mine = set(written)
    found: list[Leftover] = []
    folders = [root]
    while folders:
        try:
            entries = list(os.scandir(folders.pop()))
        except OSError:
            continue
        for entry in entries:
            path = Path(entry.path)
            if path in skipped:
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    folders.append(path)
                    continue
                stat = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            rel = path.relative_to(root).as_posix()
            if stat.st_mtime >= since and rel not in mine:
                found.append(Leftover(rel, stat.st_size))
    return sorted(found, key=lambda left: (-left.size, left.path))


def describe(leftovers: list[Leftover]) -> list[str]:
    """Lines for a person: the largest first, the rest counted."""
    total = human_size(sum(left.size for left in leftovers))
    lines = [(f"Not taken back: {len(leftovers)} file(s), {total} in all, written in the tree during the run by the "
              "tests (or by someone else), not by the assistant; remove what you do not want:")]
    lines += [f"  - {left.describe()}" for left in leftovers[:MAX_LISTED]]
    if len(leftovers) > MAX_LISTED:
        lines.append(f"  - … and {len(leftovers) - MAX_LISTED} more")
    return lines
