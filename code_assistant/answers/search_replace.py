"""SEARCH/REPLACE blocks, as models trained on aider's edit format write them, read into edit operations. Pure.

    calc.py
    ```python
    <<<<<<< SEARCH
    def add(a, b):
        return a - b
    =======
    def add(a, b):
        return a + b
    >>>>>>> REPLACE
    ```

The file's path is on the nearest line above the block that is not a fence (above the fence, or just inside it; in
its own fence; in bold or backticks; after a "#"), or on the head line itself in place of SEARCH (`<<<<<<< calc.py`,
as a small model writes it); a block without one belongs to the file of the block before it,
or, the first, to the one file its SEARCH lines are in when the caller can say (`owner`: the files the model was
shown); else it is refused.
A block that lost its `<<<<<<< SEARCH` line (a small model sends a fence, the path, `=======` and a whole definition)
is read by parse_headless: the lines before the divider are the SEARCH text, or, none, the definition after it
replaces the one of its name in that file. An empty SEARCH creates the file, or, as aider reads it, adds the new
lines at the end of a file that exists. Markers take 5 to 9 characters, as
aider's do; the older ORIGINAL/UPDATED words are read too. The blocks become "modify", "create" and
"replace_symbol" operations, which go through the same matcher, guardrails and journal as JSON edits.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from code_assistant.edit.edits import Action, EditOperation
from code_assistant.edit.matching import cannot_match

# the markers in any case: Qwen2.5-Coder-1.5B closed a block with `>>>>>>> replace`
_HEAD_RE = re.compile(r"^[ \t]*<{5,9} ?(?:SEARCH|ORIGINAL)\b.*$", re.IGNORECASE)
# a head that names its file where SEARCH goes (`<<<<<<< pager/paging.py`): Qwen2.5-Coder-1.5B writes it so
_NAMED_HEAD_RE = re.compile(r"^[ \t]*<{5,9} ?(\S+(?:[ \t]+\([a-z]+\))?)[ \t]*$")
# the form a context's heading gives a file (`### parse.py (excerpt)`), copied after the path
_FORM_RE = re.compile(r"[ \t]+\((?:full|skeleton|excerpt|outline|head)\)[ \t]*$")
_DIVIDER_RE = re.compile(r"^[ \t]*={5,9}[ \t]*$")
_TAIL_RE = re.compile(r"^[ \t]*>{5,9} ?(?:REPLACE|UPDATED)\b.*$", re.IGNORECASE)
_FENCE_RE = re.compile(r"^[ \t]*(```+|~~~+)(.*)$")
_LABEL_RE = re.compile(r"^(?:#+|\*+|-|(?:file(?:name)?|path)\s*:)\s*", re.IGNORECASE)
_QUOTED_RE = re.compile(r"`([^`\s]+)`")
NAME_LOOKBACK = 8  # lines above a block searched for its file's path (blank and fence lines among them)
_BARE_NAMES = {"Makefile", "Dockerfile", "Justfile", "Rakefile", "Gemfile", "Procfile", "LICENSE", "Jenkinsfile"}


# the name a definition's first line defines: def/class (Python), function (JavaScript), func (Go), fn (Rust)
_DEFINES_RE = re.compile(r"^[ \t]*(?:export\s+)?(?:pub(?:\([\w:]+\))?\s+)?(?:async\s+)?(?:def|class|function|func|fn)"
                         r"\s+(?:\([^)]*\)\s*)?([A-Za-z_$][\w$]*)")


class BlockError(ValueError):
    """The blocks cannot be read; the message is written for the model."""


def _head(line: str) -> tuple[bool, str | None]:
    """Whether the line opens a block, and the path it names when it is `<<<<<<< PATH` rather than `SEARCH`."""
    if _HEAD_RE.match(line):
        return True, None
    named = _NAMED_HEAD_RE.match(line)
    path = _clean(named.group(1)) if named else None
    return path is not None, path


def _is_head(line: str) -> bool:
    return _head(line)[0]


def has_blocks(text: str) -> bool:
    return any(_is_head(line) for line in text.splitlines())


def _path_like(name: str) -> bool:
    return bool(name) and len(name) < 256 and not re.search(r"\s", name) and (
        "." in name or "/" in name or name in _BARE_NAMES) and not name.startswith(("<", "=", ">"))


def _clean(line: str) -> str | None:
    """The path a line names, or None: `calc.py`, **calc.py**, # calc.py, File: calc.py, calc.py:, <calc.py> (the
    format's own placeholder, `<the path ...>`, copied with its brackets), calc.py (excerpt) (a context heading's)."""
    text = _FORM_RE.sub("", _LABEL_RE.sub("", line.strip()).strip())
    text = text.strip("*`'\"<>").rstrip(":").strip("*`'\"<>")
    if _path_like(text):
        return text
    quoted = [q for q in _QUOTED_RE.findall(line) if _path_like(q.rstrip(":"))]
    return quoted[-1].rstrip(":") if len(set(quoted)) == 1 else None


def _name_above(lines: list[str], head: int) -> str | None:
    """The path on the nearest lines above `head`, fences skipped (a fence's info string may name it too)."""
    for line in reversed(lines[max(0, head - NAME_LOOKBACK):head]):
        if not line.strip():
            continue
        fence = _FENCE_RE.match(line)
        if fence:
            info = fence.group(2).strip()
            named = _clean(re.split(r"[\s:]", info, maxsplit=1)[-1]) if info else None
            if named:
                return named
            continue
        if _is_head(line) or _DIVIDER_RE.match(line) or _TAIL_RE.match(line):
            return None  # the end of the block before: this block has no name of its own
        return _clean(line)
    return None


def parse_blocks(text: str, owner: Callable[[str], str | None] | None = None) -> list[EditOperation]:
    """Every SEARCH/REPLACE block of the answer, in order, as edit operations. Raises BlockError. `owner`: for a
    block that names no file (a small model leaves the name out), the one file its SEARCH lines are in, or None."""
    lines = text.splitlines(keepends=True)
    bare = [line.rstrip("\r\n") for line in lines]
    ops: list[EditOperation] = []
    current: str | None = None
    i = 0
    while i < len(lines):
        is_head, named = _head(bare[i])
        if not is_head:
            i += 1
            continue
        number = len(ops) + 1
        current = named or _name_above(bare, i) or current or _owning(owner, lines, i)
        if current is None:
            raise BlockError(f"SEARCH/REPLACE block {number} names no file: put the file's path alone on the line "
                             f"before `<<<<<<< SEARCH`")
        divider = _next(bare, i + 1, _DIVIDER_RE, number, current, "=======")
        tail = _next(bare, divider + 1, _TAIL_RE, number, current, ">>>>>>> REPLACE")
        search, replace = "".join(lines[i + 1:divider]), "".join(lines[divider + 1:tail])
        if search.strip():
            ops.append(EditOperation(file_path=current, search=search, replace=replace, action=Action.MODIFY))
        else:
            ops.append(EditOperation(file_path=current, action=Action.CREATE, content=replace,
                                     description="an empty SEARCH", append=True))
        i = tail + 1
    return ops


def _owning(owner: Callable[[str], str | None] | None, lines: list[str], head: int) -> str | None:
    """The file that alone holds the SEARCH lines of the block at `head` (None: no owner asked, an empty or unclosed
    SEARCH, or not exactly one file)."""
    if owner is None:
        return None
    end = next((j for j in range(head + 1, len(lines)) if _DIVIDER_RE.match(lines[j].rstrip("\r\n"))), None)
    search = "".join(lines[head + 1:end]) if end is not None else ""
    return owner(search) if search.strip() else None


def _next(bare: list[str], start: int, marker: re.Pattern[str], number: int, path: str, name: str) -> int:
    """The line of the block's next marker; another block starting first, or none at all, is an error."""
    for j in range(start, len(bare)):
        if marker.match(bare[j]):
            return j
        if _is_head(bare[j]) or (marker is _DIVIDER_RE and _TAIL_RE.match(bare[j])):
            break
    raise BlockError(f"SEARCH/REPLACE block {number} ({path}) is not closed: expected `{name}`. Send every block "
                     f"whole: `<<<<<<< SEARCH`, the lines, `=======`, the new lines, `>>>>>>> REPLACE`")


@dataclass(frozen=True)
class SearchSoFar:
    """A block's SEARCH text as far as a streamed answer has written it: its whole lines only."""

    number: int  # the block's number in the answer, from 1
    path: str | None  # its file, as the block names it (None: not named, or a file an earlier block changes)
    lines: list[str]
    closed: bool  # its `=======` has come: the SEARCH text is whole


def searches_so_far(text: str) -> list[SearchSoFar]:
    """The SEARCH text of every block a partial answer has opened, in its whole lines (the line still being written
    is left out). A block's file is the one it names, as parse_blocks reads it; a block for a file an earlier block
    of the answer edits has none (its text may be what that edit writes)."""
    end = text.rfind("\n")
    bare = text[:end].splitlines() if end >= 0 else []
    found: list[SearchSoFar] = []
    current: str | None = None
    edited: set[str] = set()
    i = 0
    while i < len(bare):
        is_head, named = _head(bare[i])
        if not is_head:
            i += 1
            continue
        current = named or _name_above(bare, i) or current
        j = i + 1
        while j < len(bare) and not (_DIVIDER_RE.match(bare[j]) or _is_head(bare[j]) or _TAIL_RE.match(bare[j])):
            j += 1
        closed = j < len(bare) and bool(_DIVIDER_RE.match(bare[j]))
        path = current if current not in edited else None
        found.append(SearchSoFar(number=len(found) + 1, path=path, lines=bare[i + 1:j], closed=closed))
        edited.update([current] if current else [])
        i = j + 1 if closed else j
    return found


@dataclass(frozen=True)
class Unmatched:
    """A block whose SEARCH text, as far as it goes, matches nowhere in its file."""

    number: int
    path: str
    why: str

    def __str__(self) -> str:
        return f"block {self.number} ({self.path}): {self.why}"


class SearchWatch:
    """An answer's blocks read as it is streamed, line by line: why they can no longer all apply, whatever the
    answer goes on to write — a block's SEARCH text, as far as it goes, matches nowhere in its file (`read`: a file's
    text by the block's path; None, a file not to judge: missing, or not one of the repository's). Only what the
    matcher itself would refuse (matching.cannot_match); a whole SEARCH text is judged once."""

    def __init__(self, read: Callable[[str], str | None]) -> None:
        self._read = read
        self._files: dict[str, str | None] = {}
        self._judged: set[int] = set()  # blocks whose whole SEARCH text matches

    def __call__(self, text: str) -> Unmatched | None:
        for search in searches_so_far(text):
            if search.number in self._judged or search.path is None or not search.lines:
                continue
            if search.path not in self._files:
                self._files[search.path] = self._read(search.path)
            content = self._files[search.path]
            if content is None:
                continue
            if (why := cannot_match(content, search.lines, closed=search.closed)) is not None:
                return Unmatched(search.number, search.path, why)
            if search.closed:
                self._judged.add(search.number)
        return None


def has_headless(text: str) -> bool:
    """A block without its `<<<<<<< SEARCH` line: no head marker anywhere, exactly one `=======` line."""
    bare = text.splitlines()
    return not has_blocks(text) and sum(1 for line in bare if _DIVIDER_RE.match(line)) == 1


def parse_headless(text: str, owner: Callable[[str], str | None] | None = None) -> list[EditOperation]:
    """The one block of an answer that lost its `<<<<<<< SEARCH` line: the path on the block's first line (inside
    its fence) or above it, the SEARCH lines up to `=======`, the new lines up to `>>>>>>> REPLACE` or the closing
    fence. No SEARCH lines: the new lines must start a definition, which replaces the one of that name in the file
    (replace_symbol); a block that names no file belongs to the one file `owner` finds that definition's first line
    in (Qwen2.5-Coder-1.5B sent pager's fix as a fence, `=======` and the definition, no path). Raises BlockError."""
    lines = text.splitlines(keepends=True)
    bare = [line.rstrip("\r\n") for line in lines]
    divider = next(i for i, line in enumerate(bare) if _DIVIDER_RE.match(line))
    fence = next((i for i in range(divider - 1, -1, -1) if _FENCE_RE.match(bare[i])), None)
    start = fence + 1 if fence is not None else 0
    first = next((i for i in range(start, divider) if bare[i].strip()), None)
    path = _clean(bare[first]) if first is not None else None
    if path is not None:
        start = first + 1
    elif fence is not None:
        path = _name_above(bare, fence)
    elif first is not None:  # no fence: the path is the line right above the divider's block
        start = divider
        path = _clean(bare[first]) if first == divider - 1 else None
    end = next((j for j in range(divider + 1, len(bare)) if _TAIL_RE.match(bare[j]) or _FENCE_RE.match(bare[j])),
               len(bare))
    head = next((line for line in bare[divider + 1:end] if line.strip()), "")
    if path is None and owner is not None and first is None and _DEFINES_RE.match(head):
        path = owner(head.rstrip() + "\n")  # the file that holds this definition's first line as it is
    if path is None:
        raise BlockError("the answer's block names no file and has no `<<<<<<< SEARCH` line: send each change as "
                         "the file's path, then `<<<<<<< SEARCH`, the lines, `=======`, the new lines, "
                         "`>>>>>>> REPLACE`")
    search, replace = "".join(lines[start:divider]), "".join(lines[divider + 1:end])
    if search.strip():
        return [EditOperation(file_path=path, search=search, replace=replace, action=Action.MODIFY)]
    defined = _DEFINES_RE.match(head)
    if defined is None:
        raise BlockError(f"the answer's block for {path} has no `<<<<<<< SEARCH` line and no lines to search for: "
                         f"send `<<<<<<< SEARCH`, the lines copied from {path}, `=======`, the new lines, "
                         f"`>>>>>>> REPLACE`")
    return [EditOperation(file_path=path, action=Action.REPLACE_SYMBOL, symbol=defined.group(1), content=replace,
                          description="a whole definition after `=======`, no SEARCH line")]
