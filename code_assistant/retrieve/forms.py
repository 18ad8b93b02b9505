"""The forms a file takes in a context: whole, a skeleton keeping the definitions that matter, an excerpt of only
those, an outline of its definitions, or its first lines - each rendered with its path, and chosen within a room of
tokens building no more than needed."""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from code_assistant import tokens
from code_assistant.index.indexer import IndexedFile, RepoIndex
from code_assistant.parse.chunker import excerpt, skeleton
from code_assistant.parse.code_parser import parse_source

OUTLINE_MAX_TOKENS = 1500
FULL_SLACK = 64         # a rendered file is its indexed text and a header; the seam may merge a token or two
MIN_HEAD_LINES = 5       # a head shows at least this many lines, or the file is not shown that way


class FileForm(StrEnum):
    """How much of a file a context shows."""

    FULL = "full"
    SKELETON = "skeleton"  # imports and definition headers, bodies elided but for the definitions that matter
    EXCERPT = "excerpt"  # the definitions that matter, whole, and nothing else (`⋮` for what is left out)
    OUTLINE = "outline"  # a line per definition, with its line number
    HEAD = "head"  # the first lines: a paired test, a file without definitions


@dataclass
class ContextFile:
    path: str
    mode: FileForm
    text: str
    tokens: int


def head_form(path: str, text: str, room: int) -> ContextFile | None:
    """The file's first lines, as many as fit in room with a last line saying how many follow (a test file too long
    to show whole still shows its imports, its fixtures and how its first tests are written); None when not even
    MIN_HEAD_LINES fit."""
    fence = "````" if "```" in text else "```"
    lines = text.splitlines()
    low, high = 0, len(lines)
    while low < high:  # the most lines that fit
        mid = (low + high + 1) // 2
        if _head(path, lines, mid, fence).tokens <= room:
            low = mid
        else:
            high = mid - 1
    return _head(path, lines, low, fence) if low >= MIN_HEAD_LINES else None


def _head(path: str, lines: list[str], n: int, fence: str) -> ContextFile:
    text = "\n".join([f"### {path} (head)", fence, *lines[:n], f"⋮ ({len(lines) - n} more lines)", fence])
    return ContextFile(path=path, mode=FileForm.HEAD, text=text, tokens=tokens.count_tokens(text))


def pair_form(path: str, text: str, keep: set[str], numbered: bool, index: RepoIndex,
              room: int) -> ContextFile | None:
    """A paired test's richest form in room - whole, skeleton (fitting_form: parsed only when it can fit),
    outline, else its head - building no more than needed."""
    form = fitting_form(path, text, keep, numbered, index, room)
    outline = None if form else _outline(path, index.files.get(path))
    if form is None and outline is not None and outline.tokens <= room:
        form = outline
    return form or head_form(path, numbered_text(text) if numbered else text, room)


def _outline(path: str, record: IndexedFile | None) -> ContextFile | None:
    """The file's definitions, a line each with its line number, cut to OUTLINE_MAX_TOKENS; None without any."""
    heads = _heads(record)
    if not heads:
        return None
    outline = _form(path, "\n".join(heads), FileForm.OUTLINE)
    while outline.tokens > OUTLINE_MAX_TOKENS and heads:
        heads = heads[: len(heads) * 3 // 4]
        outline = _form(path, "\n".join([*heads, "⋮"]), FileForm.OUTLINE)
    return outline


def _heads(record: IndexedFile | None) -> list[str]:
    return [f"{start:>5}  {sig or qual}" for qual, _kind, start, _end, sig in (record.symbols if record else [])]


def outline_within(path: str, index: RepoIndex, room: int) -> ContextFile | None:
    """The outline of the file's first definitions that fits `room` tokens, saying how many more there are; None
    when not even one fits."""
    heads = every = _heads(index.files.get(path))
    while heads:
        more = [f"    ⋮  ({len(every) - len(heads)} more definitions)"] if len(heads) < len(every) else []
        if (form := _form(path, "\n".join([*heads, *more]), FileForm.OUTLINE)).tokens <= room:
            return form
        heads = heads[: len(heads) * 3 // 4]
    return None


def file_forms(path: str, text: str, keep: set[str], numbered: bool, index: RepoIndex) -> list[ContextFile]:
    """The file whole, as a skeleton, as an excerpt (when `keep` names a definition of it) and as an outline, richest
    first, each only if cheaper than the one before."""
    forms = [_form(path, numbered_text(text) if numbered else text, FileForm.FULL)]
    parsed = parse_source(path, text)
    if parsed.symbols:
        forms.append(_form(path, skeleton(path, text, parsed, keep=keep), FileForm.SKELETON))
        if (cut := excerpt(path, text, parsed, keep)) is not None:
            forms.append(_form(path, cut, FileForm.EXCERPT))
        forms.append(_outline(path, index.files.get(path)) or _form(path, "", FileForm.OUTLINE))
    cheaper = [forms[0]]
    for form in forms[1:]:
        if form.tokens < cheaper[-1].tokens:
            cheaper.append(form)
    return cheaper


def fitting_form(path: str, text: str, keep: set[str], numbered: bool, index: RepoIndex,
                  room: int) -> ContextFile | None:
    """The first form of `file_forms` other than the outline that fits in room, building no more than needed: the
    file is not parsed when it fits whole, nor when even its skeleton's floor does not fit and `keep` names none of
    its definitions (then only an excerpt of those could)."""
    record = index.files.get(path)
    full = None
    if not (record and record.tokens > room + FULL_SLACK):  # its indexed size (a lower bound) rules it out
        full = _form(path, numbered_text(text) if numbered else text, FileForm.FULL)
        if full.tokens <= room:
            return full
    floored = record is not None and _skeleton_floor(record) > room
    if floored and not keep & {qualname for qualname, *_ in record.symbols}:
        return None
    parsed = parse_source(path, text)
    if not parsed.symbols:
        return None
    richer = full.tokens if full is not None else None
    if not floored:
        form = _form(path, skeleton(path, text, parsed, keep=keep), FileForm.SKELETON)
        if form.tokens <= room and (richer is None or form.tokens < richer):
            return form
        richer = min(form.tokens, richer) if richer is not None else form.tokens
    cut = excerpt(path, text, parsed, keep)
    form = _form(path, cut, FileForm.EXCERPT) if cut is not None else None
    return form if form and form.tokens <= room and (richer is None or form.tokens < richer) else None


def _skeleton_floor(record: IndexedFile) -> int:
    """Fewest tokens a skeleton of the file can have: it shows every definition's header lines."""
    per_line: dict[int, int] = {}
    for _qualname, _kind, start, _end, signature in record.symbols:
        per_line[start] = max(per_line.get(start, 0), tokens.min_tokens(signature or ""))
    return sum(per_line.values())


def _form(path: str, text: str, mode: FileForm) -> ContextFile:
    piece = _render_file(path, text, mode)
    return ContextFile(path=path, mode=mode, text=piece, tokens=tokens.count_tokens(piece))


def read_text(index: RepoIndex, path: str) -> str | None:
    """A file's text for a context, through the read gate (None: refused, binary or too large), its line ends
    read as newlines."""
    text = index.gate.text(path)
    return None if text is None else text.replace("\r\n", "\n").replace("\r", "\n")


def numbered_text(text: str) -> str:
    return "\n".join(f"{i:>5}  {line}" for i, line in enumerate(text.splitlines(), start=1))


def _render_file(path: str, text: str, mode: FileForm) -> str:
    fence = "````" if "```" in text else "```"
    label = path if mode == FileForm.FULL else f"{path} ({mode})"
    return f"### {label}\n{fence}\n{text.rstrip()}\n{fence}"
