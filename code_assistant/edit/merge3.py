"""A three-way merge of lines, pure: (base, ours, theirs) -> the merged bytes, or a conflict.

Used to take the assistant's change out of a file somebody else changed since: base is what the run left, ours is
the file as it is now, theirs is the file before the run. Lines end at b"\\n" (a CRLF line keeps its b"\\r"; a last
line without a newline is a line of its own), the way `git merge-file` reads them. The regions are found as diff3
does: lines of base matched in both sides are stable; between stable runs, a region changed on one side only takes
that side, a region changed the same way on both takes it once, anything else is a conflict. Edits on adjacent
lines (no unchanged line between them) conflict, as in git. Bytes with a NUL are binary: merged only when one side
is unchanged or both are equal.
"""
from __future__ import annotations

from dataclasses import dataclass
from difflib import SequenceMatcher


@dataclass(frozen=True)
class Merge:
    """`data`: the merged bytes (None when `conflicts` > 0); `conflicts`: how many regions both sides changed."""

    data: bytes | None
    conflicts: int = 0

    @property
    def clean(self) -> bool:
        return self.conflicts == 0


def split_lines(data: bytes) -> list[bytes]:
    """Lines with their b"\\n" kept; a last line without one is a line too (b"" has no lines)."""
    parts = data.split(b"\n")
    return [part + b"\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def merge3(base: bytes, ours: bytes, theirs: bytes) -> Merge:
    if ours == theirs or theirs == base:
        return Merge(ours)
    if ours == base:
        return Merge(theirs)
    if b"\0" in base or b"\0" in ours or b"\0" in theirs:
        return Merge(None, 1)
    merged: list[bytes] = []
    conflicts = 0
    for o, a, b in _regions(split_lines(base), split_lines(ours), split_lines(theirs)):
        if a == b or b == o:
            merged += a
        elif a == o:
            merged += b
        else:
            conflicts += 1
    return Merge(None, conflicts) if conflicts else Merge(b"".join(merged))


def _matches(base: list[bytes], other: list[bytes]) -> dict[int, int]:
    """base line index -> the index of the same line in `other`, along one longest-match alignment."""
    pairs: dict[int, int] = {}
    for block in SequenceMatcher(None, base, other, autojunk=False).get_matching_blocks():
        for k in range(block.size):
            pairs[block.a + k] = block.b + k
    return pairs


def _regions(o: list[bytes], a: list[bytes], b: list[bytes]) -> list[tuple[list[bytes], list[bytes], list[bytes]]]:
    """The diff3 walk: (base, ours, theirs) slices, stable regions and changed ones in turn."""
    ma, mb = _matches(o, a), _matches(o, b)
    regions: list[tuple[list[bytes], list[bytes], list[bytes]]] = []
    lo = la = lb = 0
    while True:
        i = 0
        while (lo + i < len(o) and la + i < len(a) and lb + i < len(b)
               and ma.get(lo + i) == la + i and mb.get(lo + i) == lb + i):
            i += 1
        if i:
            regions.append((o[lo:lo + i], a[la:la + i], b[lb:lb + i]))
            lo, la, lb = lo + i, la + i, lb + i
            continue
        j = next((j for j in range(lo, len(o)) if j in ma and j in mb), None)
        if j is None:
            if lo < len(o) or la < len(a) or lb < len(b):
                regions.append((o[lo:], a[la:], b[lb:]))
            return regions
        regions.append((o[lo:j], a[la:ma[j]], b[lb:mb[j]]))
        lo, la, lb = j, ma[j], mb[j]
