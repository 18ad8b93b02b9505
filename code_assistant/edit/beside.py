"""Does an answer still fit a file somebody else changed since the model was shown it? Pure.

The run writes a file, the model answers from what it was shown, and meanwhile the user saves the same file. Their
change is kept, and the answer is applied around it when it does not touch it: each edit applies to the file as it is
now, and what it makes of it is what a three-way merge of the two changes makes (theirs and the edit's, each on lines
of its own, with an unchanged line between them). A create or a delete would write over their change; a file they
deleted, or replaced wholesale, is no longer the file the model answered about.
"""
from __future__ import annotations

import codecs
from collections.abc import Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher

from code_assistant.edit.edits import Action, EditOperation
from code_assistant.edit.lines import MatchOutcome
from code_assistant.edit.matching import apply_search_replace
from code_assistant.edit.merge3 import merge3, split_lines
from code_assistant.edit.symbol_edit import apply_symbol_edit

KEPT_SHARE = 0.5  # a file that keeps fewer than this share of the lines the run left in it was replaced wholesale


def file_text(data: bytes) -> tuple[str, bool]:
    """A file's bytes as text (undecodable bytes kept as surrogates), and whether a UTF-8 BOM was set aside."""
    bom = data.startswith(codecs.BOM_UTF8)
    return data[len(codecs.BOM_UTF8) if bom else 0:].decode("utf-8", errors="surrogateescape"), bom


def looks_binary(data: bytes) -> bool:
    """A file text edits do not touch: a NUL byte in its first 8 KiB."""
    return b"\x00" in data[:8192]


def file_bytes(text: str, bom: bool) -> bytes:
    return (codecs.BOM_UTF8 if bom else b"") + text.encode("utf-8", errors="surrogateescape")


def edit_text(op: EditOperation, rel: str, text: str) -> MatchOutcome:
    """What a search/replace or symbol edit makes of a file's text (a refusal's message is written for the model)."""
    if op.action == Action.MODIFY:
        return apply_search_replace(text, op.search, op.replace)
    if not op.symbol:
        return MatchOutcome(ok=False, message=f"{op.action} needs 'symbol' (the qualified name, e.g. Class.method)")
    return apply_symbol_edit(rel, text, op.symbol, op.content or op.replace, op.action)


def _edited(op: EditOperation, rel: str, data: bytes) -> bytes | None:
    """The file's bytes after a search/replace or symbol edit; None when the edit does not apply."""
    text, bom = file_text(data)
    outcome = edit_text(op, rel, text)
    return file_bytes(outcome.content, bom) if outcome.ok else None


def gone(left: bytes | None, now: bytes | None) -> str | None:
    """Why a file the run left as `left` and that holds `now` can no longer be worked on beside whoever changed it
    (None: it can)."""
    if now is None:
        return "deleted by someone else"
    if left is None:
        return "deleted by the run and created again by someone else"
    lines = split_lines(left)
    matcher = SequenceMatcher(None, lines, split_lines(now), autojunk=False)
    if sum(block.size for block in matcher.get_matching_blocks()) < KEPT_SHARE * len(lines):
        return "replaced wholesale by someone else"
    return None


def misfit(op: EditOperation, rel: str, left: bytes, now: bytes) -> str | None:
    """Why an edit written against `left` does not fit the file as it is `now`, in words for the model (None: it
    fits: applied to `now` it keeps the other change and makes its own)."""
    if op.action == Action.CREATE:
        return "it writes the whole file, over the user's change"
    if op.action == Action.DELETE:
        return "it deletes the file, and the user's change with it"
    if op.action == Action.READ:
        return None
    mine, theirs = _edited(op, rel, left), _edited(op, rel, now)
    if mine is None:
        return None if theirs is None else "it matches only what the user wrote, not the file you were shown"
    if theirs is None:
        what = "its search text" if op.action == Action.MODIFY else f"the symbol {op.symbol}"
        return f"{what} no longer matches the file exactly once"
    merged = merge3(left, now, mine)
    if not merged.clean or merged.data != theirs:
        return "it changes lines the user changed, or lines right next to them"
    return None


@dataclass(frozen=True)
class Outside:
    """The files a run wrote that somebody else changed since, as they bear on one answer: `gone`, those that can no
    longer be worked on (path -> why); `overlaps`, those an edit of the answer does not fit as they are now (path ->
    which edit and why); `around`, those the answer edits and fits; `now`, what each changed file holds now."""

    now: dict[str, bytes | None] = field(default_factory=dict)
    gone: dict[str, str] = field(default_factory=dict)
    overlaps: dict[str, str] = field(default_factory=dict)
    around: list[str] = field(default_factory=list)

    @property
    def changed(self) -> list[str]:
        return list(self.now)


def outside(files: dict[str, tuple[bytes | None, bytes | None]],
            ops: Sequence[tuple[str | None, EditOperation]]) -> Outside:
    """`files`: for each file the run wrote that was changed since, (what the run left in it, what it holds now);
    `ops`: the answer's edits in order, each with its repository path (None: a path refused anyway). Each changed
    file's edits are tried in turn on both texts, as the editor would make them."""
    gone_ = {rel: why for rel, (left, now) in files.items() if (why := gone(left, now))}
    texts = {rel: (left, now) for rel, (left, now) in files.items()
             if rel not in gone_ and left is not None and now is not None}
    overlaps: dict[str, str] = {}
    for number, (rel, op) in enumerate(ops, 1):
        if rel not in texts or rel in overlaps:
            continue
        left, now = texts[rel]
        why = misfit(op, rel, left, now)
        if why:
            overlaps[rel] = f"edit {number} ({op.action}): {why}"
        elif op.action != Action.READ:
            mine, theirs = _edited(op, rel, left), _edited(op, rel, now)
            texts[rel] = (left if mine is None else mine, now if theirs is None else theirs)
    edited = dict.fromkeys(rel for rel, _ in ops if rel is not None)
    return Outside(now={rel: now for rel, (_, now) in files.items()}, gone=gone_, overlaps=overlaps,
                   around=[rel for rel in edited if rel in texts and rel not in overlaps])
