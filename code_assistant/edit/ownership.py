"""Whose bytes are these? The rule that takes the assistant's change out of one file and nothing else, pure.

A rollback, a recovery and an undo each know three states of a file: what it held before the run (`original`), what
the run left in it (`left`: every state the run announced, oldest first) and what it holds now (`current`; None is
an absent file). When the file still holds what the run left, nobody else touched it: the original comes back. When
it holds something else, another hand changed it since, and only the run's own change is taken out (a three-way
merge: base what the run left, one side the file now, the other the original); where both changed the same lines the
file is left as it is and the caller saves the original beside it.

A run that wrote on top of somebody else's change in a file it had written (their change did not touch its edit)
wrote that file in stretches, each starting from what it found there: the stretches are taken out newest first, each
by the same rule, so what was written between them stays.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from code_assistant.edit.merge3 import merge3


class Fate(StrEnum):
    """What taking a run's change out did to one file."""

    RESTORED = "restored"  # the file is as it was before the run, byte for byte
    MERGED = "merged"  # the run's change taken out, the other hand's edits kept
    KEPT = "kept"  # left as it is: what is in it now is the other hand's (a file the run created or deleted)
    CONFLICT = "conflict"  # the run's and the other hand's edits overlap: left as it is, the original saved apart


@dataclass(frozen=True)
class TakeBack:
    """The decision for one file: `data` is what it must hold afterwards (None: absent), `write` whether that means
    touching it at all, `why` in words for the user."""

    fate: Fate
    data: bytes | None
    write: bool
    why: str


def take_back(original: bytes | None, left: Sequence[bytes | None], current: bytes | None) -> TakeBack:
    """`left`: the states the run announced for the file, oldest first; the last is what it left (a crash between
    announcing a write and making it leaves the one before it in the file, so any of them counts as the run's)."""
    if not left or current in left:
        return TakeBack(fate=Fate.RESTORED, data=original, write=current != original, why="as it was before the run")
    if current == original:
        return TakeBack(fate=Fate.RESTORED, data=original, write=False, why="already as it was before the run")
    if left[-1] == original:
        return TakeBack(fate=Fate.KEPT, data=current, write=False,
                        why="not changed by the run; changed since by someone else")
    if original is None:
        if current is None:
            return TakeBack(fate=Fate.RESTORED, data=None, write=False, why="created by the run and deleted since")
        return TakeBack(fate=Fate.KEPT, data=current, write=False,
                        why="created by the run and changed since by someone else")
    if left[-1] is None:
        return TakeBack(fate=Fate.KEPT, data=current, write=False,
                        why="deleted by the run and created again since by someone else")
    if current is None:
        return TakeBack(fate=Fate.CONFLICT, data=None, write=False,
                        why="changed by the run and deleted since by someone else")
    for base in reversed([state for state in left[-2:] if state is not None]):
        merge = merge3(base, current, original)
        if merge.clean and merge.data == original:
            return TakeBack(fate=Fate.RESTORED, data=original, write=current != original,
                            why="as it was before the run")
        if merge.clean:
            return TakeBack(fate=Fate.MERGED, data=merge.data, write=merge.data != current,
                            why="changed since by someone else: the run's lines taken out, the other edits kept")
    return TakeBack(fate=Fate.CONFLICT, data=current, write=False,
                    why="the run and someone else changed the same lines: left as it is now")


Stretches = Sequence[tuple[bytes | None, Sequence[bytes | None]]]  # (what a stretch started from, the states it left)


def take_back_stretches(stretches: Stretches, current: bytes | None) -> TakeBack:
    """take_back for a file the run wrote in stretches (oldest first; the first starts from the original): each
    stretch taken out of what the one after it gave back, newest first. Where one cannot be, the file is left as it
    is (a conflict)."""
    if len(stretches) == 1:
        return take_back(stretches[0][0], stretches[0][1], current)
    data = current
    for start, left in reversed(stretches):
        decision = take_back(start, left, data)
        if decision.fate == Fate.CONFLICT:
            return TakeBack(fate=Fate.CONFLICT, data=current, write=False, why=decision.why)
        data = decision.data
    original = stretches[0][0]
    if data == original:
        return TakeBack(fate=Fate.RESTORED, data=original, write=current != original, why="as it was before the run")
    if decision.fate == Fate.KEPT and data == current:
        return decision
    return TakeBack(fate=Fate.MERGED, data=data, write=data != current,
                    why="changed during the run by someone else: the run's lines taken out, the other edits kept")


def run_alone(stretches: Stretches) -> bytes | None:
    """What the file would hold had the run written it alone: each later stretch's change made on the run's own
    result before it (a three-way merge: what the stretch started from, what it left, the run's own result). Where
    that cannot be told apart, what the run left."""
    own = stretches[0][1][-1] if stretches[0][1] else stretches[0][0]
    for start, left in stretches[1:]:
        last = left[-1] if left else start
        merge = merge3(start, last, own) if start is not None and last is not None and own is not None else None
        own = merge.data if merge is not None and merge.clean else last
    return own
