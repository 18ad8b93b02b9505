"""Pure search/replace matching: find where a model's search text lives in a file and splice in the replacement.

First the plain case: a search text found exactly once in the file, as a substring, is applied there whatever the
line boundaries. Then line-based strategies, strictest first: exact, whitespace (line endings / trailing spaces), indent
(uniform shift, tabs<->spaces); the same three again accepting a first search line that starts mid-line and a last one
that stops mid-line; elision (`...` lines), intraline (spacing between tokens), fuzzy (unique, very close, same words).
A search that matches in several places is refused, never applied to the first hit. Lines the model kept unchanged
between search and replace are copied from the file byte for byte; only the lines it changed come from the model, and
a blank line keeps the whitespace it was written with.
"""
from __future__ import annotations

import difflib
import logging
import os
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

logger = logging.getLogger(__name__)

Transform = Callable[[str], str]
FUZZY_THRESHOLD = 0.95
MAX_SNIPPET_LINES = 12
_TOKEN_RE = re.compile(r"\w+|[^\w\s]")
_WORD_RE = re.compile(r"\w+")
_PREFIX_MARKS = ("@", "#", "//", "/*", "*", "#[")
_ELISION_RE = re.compile(r"^\s*(\.\.\.|…|(#|//|/\*)\s*(\.\.\.|…).*)\s*$")


@dataclass
class MatchOutcome:
    """New content and the strategy that produced it, or a refusal whose message is written for the model."""

    ok: bool
    content: str = ""
    strategy: str | None = None
    message: str = ""
    line: int | None = None  # 1-based first line of the matched region

    def __bool__(self) -> bool:
        return self.ok


class _Hit(NamedTuple):
    """Where a search matched (0-based first line) and how to re-indent the model's changed lines there.

    `head` is the file's text before the search on its first line when the search starts mid-line, `tail` the text
    after it on its last line when it stops mid-line; both are kept around the replacement.
    """

    start: int
    transform: Transform
    head: str | None = None
    tail: str | None = None


def _identity(line: str) -> str:
    return line


def dominant_newline(content: str) -> str:
    crlf = content.count("\r\n")
    return "\r\n" if crlf and crlf >= content.count("\n") - crlf else "\n"


def split_lines(text: str) -> tuple[list[str], list[str]]:
    """Bodies and line endings ("\\r\\n", "\\n" or "" for a last line without one); joins back byte for byte."""
    bodies: list[str] = []
    eols: list[str] = []
    parts = text.split("\n")
    for i, part in enumerate(parts):
        if i == len(parts) - 1:
            if part:
                bodies.append(part)
                eols.append("")
        elif part.endswith("\r"):
            bodies.append(part[:-1])
            eols.append("\r\n")
        else:
            bodies.append(part)
            eols.append("\n")
    return bodies, eols


def _model_lines(text: str) -> list[str]:
    text = text.replace("\r\n", "\n")
    if not text:
        return []
    lines = text.split("\n")
    return lines[:-1] if text.endswith("\n") else lines


def _leading(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _retab(ws: str, tab_size: int, to_tabs: bool) -> str:
    spaces = len(ws.expandtabs(tab_size))
    return "\t" * (spaces // tab_size) + " " * (spaces % tab_size) if to_tabs else " " * spaces


def _shift(pairs: list[tuple[str, str]]) -> Transform | None:
    """A uniform indentation shift that turns every search indent into the file indent, as a replace-line transform."""
    if all(f == s for f, s in pairs):
        return _identity
    if all(f.endswith(s) for f, s in pairs):
        added = {f[: len(f) - len(s)] for f, s in pairs}
        if len(added) == 1:
            prefix = added.pop()
            return lambda r: prefix + r if r.strip() else r
    if all(s.endswith(f) for f, s in pairs):
        removed = {s[: len(s) - len(f)] for f, s in pairs}
        if len(removed) == 1:
            prefix = removed.pop()
            return lambda r: (r[len(prefix):] if r.startswith(prefix) else r.lstrip()) if r.strip() else r
    return None


def _indent_transform(window: list[str], search: list[str]) -> Transform | None:
    pairs = [(_leading(f), _leading(s)) for f, s in zip(window, search) if f.strip() and s.strip()]
    found = _shift(pairs)
    if found is not None:
        return found
    file_tabs = any("\t" in f for f, _ in pairs)
    search_tabs = any("\t" in s for _, s in pairs)
    if file_tabs == search_tabs:
        return None
    for tab_size in (4, 8, 2):
        converted = [(f, _retab(s, tab_size, file_tabs)) for f, s in pairs]
        shift = _shift(converted)
        if shift is not None:
            def transform(r: str, size: int = tab_size, inner: Transform = shift) -> str:
                ws = _leading(r)
                return inner(_retab(ws, size, file_tabs) + r[len(ws):]) if r.strip() else r
            return transform
    return None


def _tokens(line: str) -> tuple[str, ...]:
    return tuple(_TOKEN_RE.findall(line))


_KEYS: dict[str, Callable[[str], object]] = {
    "exact": _identity,
    "whitespace": str.rstrip,
    "indent": str.strip,
    "intraline": _tokens,
}


def _find(bodies: list[str], search: list[str], strategy: str, lo: int = 0, hi: int | None = None
          ) -> list[_Hit]:
    """Every start line (0-based) in bodies[lo:hi] where `search` matches under `strategy`, with its transform."""
    key = _KEYS[strategy]
    hi = len(bodies) if hi is None else hi
    want = [key(s) for s in search]
    have = [key(b) for b in bodies[lo:hi]]
    m = len(want)
    hits: list[_Hit] = []
    for i in range(len(have) - m + 1):
        if have[i] != want[0] or have[i: i + m] != want:
            continue
        start = lo + i
        transform: Transform | None = _identity
        if strategy in ("indent", "intraline"):
            transform = _indent_transform(bodies[start: start + m], search)
        if transform is not None:
            hits.append(_Hit(start, transform))
    return hits


def _fuzzy_find(bodies: list[str], search: list[str]) -> list[_Hit]:
    m = len(search)
    if sum(1 for s in search if s.strip()) < 2:
        return []
    want = [s.strip() for s in search]
    want_text = "\n".join(want)
    have = [b.strip() for b in bodies]
    hits: list[_Hit] = []
    for i in range(len(have) - m + 1):
        window = have[i: i + m]
        differing = [(w, s) for w, s in zip(window, want) if w != s]
        if len(differing) * 2 > m:
            continue
        if any(_WORD_RE.findall(w) != _WORD_RE.findall(s) for w, s in differing):
            continue  # a different name or number is a different line, not a typo
        if difflib.SequenceMatcher(None, "\n".join(window), want_text, autojunk=False).ratio() < FUZZY_THRESHOLD:
            continue
        transform = _indent_transform(bodies[i: i + m], search)
        if transform is not None:
            hits.append(_Hit(i, transform))
    return hits


def _core(line: str, strategy: str) -> str:
    """The part of a search line that must appear in the file under `strategy`."""
    return line if strategy == "exact" else line.rstrip() if strategy == "whitespace" else line.strip()


def _head_before(file_line: str, search_line: str, strategy: str) -> str | None:
    """The file's text before `search_line` when the file line ends with it (a search starting mid-line)."""
    core = _core(search_line, strategy)
    body = file_line if strategy == "exact" else file_line.rstrip()
    if not core.strip() or not body.endswith(core) or len(body) == len(core):
        return None
    return body[: len(body) - len(core)]


def _tail_after(file_line: str, search_line: str, strategy: str) -> str | None:
    """The file's text after `search_line` when the file line starts with it (a search stopping mid-line)."""
    core = _core(search_line, strategy)
    lead = _leading(file_line) if strategy == "indent" else ""
    if not core.strip() or not file_line.startswith(lead + core) or len(file_line) == len(lead + core):
        return None
    return file_line[len(lead + core):]


def _find_partial(bodies: list[str], search: list[str], strategy: str) -> list[_Hit]:
    """Matches under `strategy` whose first search line is the end of a file line or whose last is the start of one."""
    m = len(search)
    if m < 2:
        return []
    key = _KEYS[strategy]
    inner = [key(s) for s in search[1:-1]]
    first, last = key(search[0]), key(search[-1])
    hits: list[_Hit] = []
    for i in range(len(bodies) - m + 1):
        window = bodies[i: i + m]
        if [key(b) for b in window[1:-1]] != inner:
            continue
        head = None if key(window[0]) == first else _head_before(window[0], search[0], strategy)
        if strategy == "indent" and key(window[0]) == first and not _leading(search[0]) and _leading(window[0]):
            head = _leading(window[0])  # quoted from after the indentation: that line says nothing about the shift
        tail = None if key(window[-1]) == last else _tail_after(window[-1], search[-1], strategy)
        if (head is None and key(window[0]) != first) or (tail is None and key(window[-1]) != last):
            continue
        if head is None and tail is None:
            continue  # a whole-line match: the plain strategies own it
        transform: Transform | None = _identity
        if strategy == "indent":
            whole = range(1 if head is not None else 0, m - 1 if tail is not None else m)
            transform = _indent_transform([window[j] for j in whole], [search[j] for j in whole])
        if transform is not None:
            hits.append(_Hit(i, transform, head, tail))
    return hits


def _render(window: list[str], window_eols: list[str], search: list[str], replace: list[str],
            transform: Transform, strategy: str, newline: str, head: str | None = None, tail: str | None = None
            ) -> list[tuple[str, str]]:
    """Replacement lines for one matched window: unchanged lines from the file, changed lines from the model."""
    placed: set[int] = set()  # replacement lines already in the file's columns: never re-indented
    if head is not None or tail is not None:
        search, replace, placed = _complete(window, search, replace, transform, strategy, head, tail)
    exact_tail = all(w[len(w.rstrip()):] == s[len(s.rstrip()):] for w, s in zip(window, search))
    key = _identity if exact_tail else str.rstrip  # trailing blanks the model got wrong are noise, else intended
    matcher = difflib.SequenceMatcher(None, [key(s) for s in search], [key(r) for r in replace], autojunk=False)
    out: list[tuple[str, str]] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            out.extend((window[i], window_eols[i] or newline) for i in range(i1, i2))
            continue
        for j in range(j1, j2):
            line = replace[j] if j in placed else transform(replace[j])
            keep = exact_tail or not line.strip() or (tail is not None and j == len(replace) - 1)
            out.append((line if keep else line.rstrip(), newline))
    return out


def _complete(window: list[str], search: list[str], replace: list[str], transform: Transform, strategy: str,
              head: str | None, tail: str | None) -> tuple[list[str], list[str], set[int]]:
    """Whole-line search and replacement for a match that starts or stops mid-line: the file's text before the
    search stays before the replacement, the text after it stays after."""
    model_first, model_last = search[0], search[-1]
    search = [window[0] if head is not None else search[0], *search[1:-1],
              window[-1] if tail is not None else search[-1]]
    if not replace:
        return search, [(head or "") + (tail or "")], {0}
    replace = list(replace)
    placed: set[int] = set()
    if head is not None:
        first = replace[0]
        if strategy == "indent":
            lead = _leading(model_first)
            first = first[len(lead):] if first.startswith(lead) else first.lstrip()
        replace[0] = head + first
        placed.add(0)
    if tail is not None:
        last = replace[-1]
        trail = model_last[len(model_last.rstrip()):] if strategy != "exact" else ""
        if trail and last.endswith(trail):
            last = last[: len(last) - len(trail)]
        if len(replace) > 1 or head is None:
            last = transform(last)
        replace[-1] = last + tail
        placed.add(len(replace) - 1)
    return search, replace, placed


def _splice(bodies: list[str], eols: list[str], start: int, end: int, new: list[tuple[str, str]]) -> str:
    eols = list(eols)
    last_eol = eols[end - 1] if end > start else newline_of(eols)
    if new:
        new[-1] = (new[-1][0], last_eol)
    elif last_eol == "" and start > 0:
        eols[start - 1] = ""  # the deleted block ended the file without a newline: keep it that way
    lines = [b + e for b, e in zip(bodies[:start], eols[:start])]
    lines += [b + e for b, e in new]
    lines += [b + e for b, e in zip(bodies[end:], eols[end:])]
    return "".join(lines)


def newline_of(eols: list[str]) -> str:
    return "\r\n" if eols.count("\r\n") > eols.count("\n") else "\n"


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
        return f"Line {j + 1} of your search text differs from file line {start + j + 1}: {describe_difference(want, have)}\n"
    shifts = Counter(len(_leading(f).expandtabs(4)) - len(_leading(s).expandtabs(4))
                     for f, s in zip(window, search) if f.strip() and s.strip())
    usual = shifts.most_common(1)[0][0] if shifts else 0
    for j, (have, want) in enumerate(zip(window, search)):
        if have.strip() and want.strip() and len(_leading(have).expandtabs(4)) - len(_leading(want).expandtabs(4)) != usual:
            return (f"The text matches but the indentation does not shift by the same amount on every line. Line "
                    f"{j + 1} of your search text (file line {start + j + 1}): {describe_difference(want, have)} "
                    "Copy each line's indentation from the file.\n")
    for j, (have, want) in enumerate(zip(window, search)):
        if have != want:
            return f"Line {j + 1} of your search text differs from file line {start + j + 1}: {describe_difference(want, have)}\n"
    return ""


def describe_difference(yours: str, file_line: str) -> str:
    """One sentence naming how a search line differs from a file line, with repr() where whitespace is the cause."""
    mine, theirs = yours.strip(), file_line.strip()
    if mine == theirs:
        lead_y, lead_f = _leading(yours), _leading(file_line)
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


def _ambiguous(starts: list[int]) -> MatchOutcome:
    where = ", ".join(str(s + 1) for s in starts[:10])
    return MatchOutcome(False, message=f"search text found {len(starts)} times, at lines {where} — add surrounding "
                                       "lines to make it unique. Nothing was changed by this edit.")


def _elision(bodies: list[str], eols: list[str], search: list[str], replace: list[str], newline: str
             ) -> MatchOutcome | None:
    s_cuts = [i for i, s in enumerate(search) if _ELISION_RE.match(s)]
    r_cuts = [i for i, r in enumerate(replace) if _ELISION_RE.match(r)]
    if not s_cuts or len(s_cuts) != len(r_cuts):
        return None
    s_segs = [search[a + 1: b] for a, b in zip([-1, *s_cuts], [*s_cuts, len(search)])]
    r_segs = [replace[a + 1: b] for a, b in zip([-1, *r_cuts], [*r_cuts, len(replace)])]
    if any(not any(line.strip() for line in seg) for seg in s_segs):
        return None
    chains = [chain for chain in (_chain(bodies, s_segs, start) for start in _seg_hits(bodies, s_segs[0], 0))
              if chain is not None]
    tightest = {chain[-1][0]: chain for chain in chains}  # chains ending at one place: keep the latest start
    chains = list(tightest.values())
    if len(chains) != 1:
        return _ambiguous([c[0][0] for c in chains]) if chains else None
    chain = chains[0]
    first, pos = chain[0][0], chain[0][0]
    new: list[tuple[str, str]] = []
    for (start, transform, _, _), s_seg, r_seg in zip(chain, s_segs, r_segs):
        new.extend((bodies[i], eols[i] or newline) for i in range(pos, start))  # the elided lines, untouched
        end = start + len(s_seg)
        new.extend(_render(bodies[start:end], eols[start:end], s_seg, r_seg, transform, "elision", newline))
        pos = end
    return MatchOutcome(True, _splice(bodies, eols, first, pos, new), "elision", line=first + 1)


def _seg_hits(bodies: list[str], seg: list[str], lo: int) -> list[_Hit]:
    for strategy in ("exact", "whitespace", "indent"):
        hits = _find(bodies, seg, strategy, lo=lo)
        if hits:
            return hits
    return []


def _chain(bodies: list[str], segs: list[list[str]], first: _Hit
           ) -> list[_Hit] | None:
    """From one hit of the first segment, each next segment at its nearest hit after the previous one."""
    chain = [first]
    for seg in segs[1:]:
        hits = _seg_hits(bodies, seg, chain[-1][0] + len(segs[len(chain) - 1]))
        if not hits:
            return None
        chain.append(hits[0])
    return chain


def apply_search_replace(content: str, search: str, replace: str) -> MatchOutcome:
    """Apply one search/replace block to `content`; refuse (with a reason for the model) rather than guess."""
    newline = dominant_newline(content)
    search_lines = _model_lines(search)
    replace_lines = _model_lines(replace)
    if not search.strip():
        if content.strip():
            return MatchOutcome(False, message="empty search text on a file that is not empty. Give search text "
                                               "copied from the file, or use action 'create' with overwrite=true to "
                                               "replace the whole file.")
        return MatchOutcome(True, replace.replace("\r\n", "\n").replace("\n", newline), "exact", line=1)
    bodies, eols = split_lines(content)
    plain = _plain_substring(content, search, replace, bodies, eols, search_lines, replace_lines)
    if plain is not None:
        return plain
    for strategy in ("exact", "whitespace", "indent"):
        hits = _find(bodies, search_lines, strategy)
        if len(hits) > 1:
            return _ambiguous([h.start for h in hits])
        if hits:
            return _apply_hit(bodies, eols, hits[0], search_lines, replace_lines, strategy, newline)
    for strategy in ("exact", "whitespace", "indent"):
        hits = _find_partial(bodies, search_lines, strategy)
        if len(hits) > 1:
            return _ambiguous([h.start for h in hits])
        if hits:
            return _apply_hit(bodies, eols, hits[0], search_lines, replace_lines, f"{strategy}_partial", newline)
    outcome = _elision(bodies, eols, search_lines, replace_lines, newline)
    if outcome is not None:
        return outcome
    for strategy in ("intraline", "fuzzy"):
        hits = _find(bodies, search_lines, strategy) if strategy != "fuzzy" else _fuzzy_find(bodies, search_lines)
        if len(hits) > 1:
            return _ambiguous([h.start for h in hits])
        if hits:
            return _apply_hit(bodies, eols, hits[0], search_lines, replace_lines, strategy, newline)
    return MatchOutcome(False, message=f"search text not found. {closest_lines(bodies, search_lines)}\n"
                                       "Copy the search text exactly from the file (same indentation and spacing) "
                                       "and resend only this edit.")


def _plain_substring(content: str, search: str, replace: str, bodies: list[str], eols: list[str],
                     search_lines: list[str], replace_lines: list[str]) -> MatchOutcome | None:
    """The plain case: the exact search text occurs once in the file, wherever the line boundaries fall.

    An occurrence covering whole lines goes through the line splice (line endings and a missing final newline kept).
    Several occurrences are ambiguous unless exactly one of them covers whole lines (the others sitting inside longer
    lines). None when the text does not occur as it stands.
    """
    count = content.count(search)
    if count == 0:
        return None
    whole_lines = _find(bodies, search_lines, "exact")
    if len(whole_lines) == 1:  # the one occurrence that covers whole lines (others may sit inside longer lines)
        return _apply_hit(bodies, eols, whole_lines[0], search_lines, replace_lines, "exact", dominant_newline(content))
    if count > 1:
        starts = sorted({content.count("\n", 0, m.start()) for m in re.finditer(re.escape(search), content)})
        return _ambiguous(starts)
    at = content.index(search)
    newline = "\r\n" if "\r\n" in search else "\n" if "\n" in search else dominant_newline(content)
    new_text = replace.replace("\r\n", "\n")
    if new_text and search.endswith("\n") and not new_text.endswith("\n"):
        new_text += "\n"  # the search took the line's end: so does the replacement
    elif not search.endswith("\n") and not search.endswith("\r") and new_text.endswith("\n"):
        new_text = new_text[:-1]  # the model's closing newline, not a new blank line
    new_text = new_text.replace("\n", newline)
    logger.debug("search matched once as a substring at offset %d", at)
    return MatchOutcome(True, content[:at] + new_text + content[at + len(search):], "exact",
                        line=content.count("\n", 0, at) + 1)


def _apply_hit(bodies: list[str], eols: list[str], hit: _Hit, search: list[str],
               replace: list[str], strategy: str, newline: str) -> MatchOutcome:
    start, end = hit.start, hit.start + len(search)
    new = _render(bodies[start:end], eols[start:end], search, replace, hit.transform, strategy, newline, hit.head,
                  hit.tail)
    logger.debug("search matched at line %d by %s", start + 1, strategy)
    return MatchOutcome(True, _splice(bodies, eols, start, end, new), strategy, line=start + 1)


def _reindent(code: str, indent: str) -> list[str]:
    """The code's lines moved from their common indentation to `indent`; blank lines keep their whitespace."""
    lines = code.replace("\r\n", "\n").split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    common = os.path.commonprefix([_leading(line) for line in lines if line.strip()])
    return [indent + line[len(common):] if line.strip() else line for line in lines]


def apply_symbol_edit(path: str, content: str, qualname: str, new_code: str, mode: str) -> MatchOutcome:
    """replace_symbol / insert_after_symbol: locate one definition with code_parser and splice `new_code` there."""
    from code_assistant.parse import code_parser  # lazy: the parser pulls in tree-sitter grammars

    if mode not in ("replace_symbol", "insert_after_symbol"):
        return MatchOutcome(False, message=f"unknown symbol action {mode!r}")
    if not new_code.strip():
        return MatchOutcome(False, message=f"{mode} needs the new definition in 'content'.")
    parsed = code_parser.parse_source(path, content)
    found = code_parser.find_symbols(parsed, qualname)
    if len(found) != 1:
        if found:
            where = ", ".join(f"{s.qualname} ({s.kind}) at lines {s.start_line}-{s.end_line}" for s in found)
            return MatchOutcome(False, message=f"symbol {qualname!r} is defined {len(found)} times: {where}. "
                                               "Use a search/replace edit with surrounding lines instead.")
        names = [s.qualname for s in parsed.symbols]
        close = difflib.get_close_matches(qualname, names, n=5, cutoff=0.5)
        close += [n for n in names if n.split(".")[-1] == qualname.split(".")[-1] and n not in close]
        hint = f" Did you mean: {', '.join(close[:5])}?" if close else f" Symbols in the file: {', '.join(names[:20])}."
        return MatchOutcome(False, message=f"symbol {qualname!r} not found in {path}.{hint}")
    symbol = found[0]
    bodies, eols = split_lines(content)
    newline = dominant_newline(content)
    first, end = symbol.start_line - 1, min(symbol.end_line, len(bodies))
    start = first
    while start < end - 1 and (not bodies[start].strip() or bodies[start].lstrip().startswith(_PREFIX_MARKS)):
        start += 1  # the parser counts decorators and attached comments in; find the definition line itself
    indent = _leading(bodies[start])
    new_lines = _reindent(new_code, indent)
    if mode == "replace_symbol":
        if new_lines[0].lstrip().startswith(_PREFIX_MARKS):
            start = first  # the new code brings its own decorators / comments
        new = [(line, newline) for line in new_lines]
        return MatchOutcome(True, _splice(bodies, eols, start, end, new), "symbol", line=start + 1)
    gap = 2 if not indent and path.endswith((".py", ".pyi")) else 1
    new = [("", newline)] * gap + [(line, newline) for line in new_lines]
    after = [(bodies[end - 1], eols[end - 1] or newline)]
    return MatchOutcome(True, _splice(bodies, eols, end - 1, end, after + new), "symbol", line=end + 1)
