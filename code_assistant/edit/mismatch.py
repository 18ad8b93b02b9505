"""Why a search text did not match, written for the model: the closest region of the file with line numbers and the
first line that differs, named precisely (missing leading spaces, a line cut before its end, a tab against spaces)."""
from __future__ import annotations

import difflib
import re
from collections import Counter

from code_assistant.edit.lines import leading

MAX_SNIPPET_LINES = 12
_CALLED_RE = re.compile(r"\b([A-Za-z_]\w*)\s*\(")  # `page_slice(` of a test's `assert page_slice(items, 1, 3) == ...`
_TOP_DEFINITION_RE = re.compile(r"(?:async\s+)?(?:def|class|func|function|fn)\s+([A-Za-z_]\w*)")


def _numbered(bodies: list[str], start: int, end: int) -> str:
    end = min(end, start + MAX_SNIPPET_LINES, len(bodies))
    return "\n".join(f"{i + 1:>5} | {bodies[i]}" for i in range(start, end))


def closest_lines(bodies: list[str], search: list[str]) -> str:
    """The file region most like the search text, with line numbers, and the first line that differs."""
    if not bodies or not search:
        return ""
    want = [s.strip() for s in search]
    m = min(len(search), len(bodies))
    where: dict[str, list[int]] = {}
    for j, w in enumerate(want):
        if w:
            where.setdefault(w, []).append(j)
    votes: Counter[int] = Counter()
    for i, b in enumerate(bodies):
        for j in where.get(b.strip(), ()):
            votes[max(0, min(len(bodies) - m, i - j))] += 1
    if not votes:  # no line in common: anchor on lines like the first non-blank search line
        first = next((j for j, w in enumerate(want) if w), 0)
        stripped = [b.strip() for b in bodies]
        for close in difflib.get_close_matches(want[first], stripped, n=3, cutoff=0.4):
            votes[max(0, min(len(bodies) - m, stripped.index(close) - first))] += 1
    text = "\n".join(want)
    best, best_score = 0, -1.0
    for i, _ in votes.most_common(5):
        score = difflib.SequenceMatcher(None, "\n".join(b.strip() for b in bodies[i: i + m]), text).ratio()
        if score > best_score:
            best, best_score = i, score
    detail = _first_difference(bodies[best: best + m], search[:m], best)
    return f"{detail}Closest lines in the file (lines {best + 1}-{best + m}):\n{_numbered(bodies, best, best + m)}"


def _first_difference(window: list[str], search: list[str], start: int) -> str:
    """Why the search does not match this window, naming the line and the difference (never 'X differs from X')."""
    last = len(search) - 1
    for j, (have, want) in enumerate(zip(window, search)):
        h, w = have.strip(), want.strip()
        if h == w or (last and w and ((j == 0 and h.endswith(w)) or (j == last and h.startswith(w)))):
            continue  # same text, or a cut that matching accepts at the ends of the search
        return _differs(j, start, want, have)
    shifts = Counter(_width(f) - _width(s) for f, s in zip(window, search) if f.strip() and s.strip())
    usual = shifts.most_common(1)[0][0] if shifts else 0
    for j, (have, want) in enumerate(zip(window, search)):
        if have.strip() and want.strip() and _width(have) - _width(want) != usual:
            return (f"The text matches but the indentation does not shift by the same amount on every line. Line "
                    f"{j + 1} of your search text (file line {start + j + 1}): {describe_difference(want, have)} "
                    "Copy each line's indentation from the file.\n")
    for j, (have, want) in enumerate(zip(window, search)):
        if have != want:
            return _differs(j, start, want, have)
    return ""


def _width(line: str) -> int:
    return len(leading(line).expandtabs(4))


def _differs(j: int, start: int, want: str, have: str) -> str:
    return (f"Line {j + 1} of your search text differs from file line {start + j + 1}: "
            f"{describe_difference(want, have)}\n")


def describe_difference(yours: str, file_line: str) -> str:
    """One sentence naming how a search line differs from a file line, with repr() where whitespace is the cause."""
    mine, theirs = yours.strip(), file_line.strip()
    if mine == theirs:
        lead_y, lead_f = leading(yours), leading(file_line)
        if lead_y != lead_f:
            if ("\t" in lead_y) != ("\t" in lead_f):
                return f"it is indented with {lead_y!r} where the file has {lead_f!r} (tabs against spaces)."
            if lead_f.startswith(lead_y):
                return f"it is missing {len(lead_f) - len(lead_y)} leading spaces (the file has {lead_f!r})."
            if lead_y.startswith(lead_f):
                return f"it has {len(lead_y) - len(lead_f)} leading spaces too many (the file has {lead_f!r})."
            return f"it is indented with {lead_y!r} where the file has {lead_f!r}."
        trail_y, trail_f = yours[len(yours.rstrip()):], file_line[len(file_line.rstrip()):]
        return f"it ends with the whitespace {trail_y!r} where the file has {trail_f!r}."
    if mine and theirs.startswith(mine):
        return f"your line is cut before {theirs[len(mine):]!r} (the file's line is {file_line!r})."
    if mine and theirs.endswith(mine):
        return f"your line starts in the middle of the file's line, after {theirs[: len(theirs) - len(mine)]!r}."
    at = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b), min(len(mine), len(theirs)))
    if "".join(mine.split()) == "".join(theirs.split()):
        return f"the spacing inside the line differs: yours {yours!r}, the file's {file_line!r}."
    return (f"yours {yours!r}, the file's {file_line!r} (they part at character {at + 1}: "
            f"{mine[at:at + 12]!r} against {theirs[at:at + 12]!r}).")


def symbol_hint(bodies: list[str], search: list[str]) -> str:
    """When no line of the search text is in the file but it calls a function the file defines at its top level (a
    test's assertion copied as search text, the mistake small models make), the way to change that function with
    nothing to copy; "" otherwise."""
    lines = {b.strip() for b in bodies}
    if any(w.strip() in lines for w in search if w.strip()):
        return ""
    defined = {m.group(1) for b in bodies if (m := _TOP_DEFINITION_RE.match(b))}
    called = [name for w in search for name in _CALLED_RE.findall(w) if name in defined]
    if not called:
        return ""
    return (f"\nNo line of your search text is in this file (copied from a test?). To change {called[0]}, send "
            f'{{"action": "replace_symbol", "symbol": "{called[0]}", "content": "<the whole new definition>"}}: '
            "nothing has to be copied.")
