"""Pure search/replace matching: find where a model's search text lives in a file and splice in the replacement.

First the plain case: a search text found exactly once in the file, as a substring, is applied there whatever the
line boundaries. Then line-based strategies, strictest first: exact, whitespace (line endings / trailing spaces), indent
(uniform shift, tabs<->spaces); the same three again accepting a first search line that starts mid-line and a last one
that stops mid-line; elision (`...` or `⋮` lines, or none after a definition's header line kept as it was),
intraline (spacing between tokens), fuzzy (unique, very close, same words);
last, a one-line text holding `\\n` read as the lines it means (a small model's JSON escaped twice).
A search that matches in several places is refused, never applied to the first hit. Lines the model kept unchanged
between search and replace are copied from the file byte for byte; only the lines it changed come from the model, and
a blank line keeps the whitespace it was written with.
"""
from __future__ import annotations

import difflib
import functools
import logging
import re
from collections.abc import Callable
from dataclasses import replace as replace_field
from typing import NamedTuple

from code_assistant.edit.lines import (
    MatchOutcome,
    Transform,
    dominant_newline,
    identity,
    indent_transform,
    leading,
    model_lines,
    splice,
    split_lines,
)
from code_assistant.edit.mismatch import closest_lines, symbol_hint

logger = logging.getLogger(__name__)

FUZZY_THRESHOLD = 0.95
_TOKEN_RE = re.compile(r"\w+|[^\w\s]")
_WORD_RE = re.compile(r"\w+")
_ESCAPES = {"\\n": "\n", "\\t": "\t", '\\"': '"', "\\\\": "\\"}
_ESCAPES_RE = re.compile(r'\\[nt"\\]')
_ELISION_RE = re.compile(r"^\s*(\.\.\.|…|⋮.*|(#|//|/\*)\s*(\.\.\.|…).*)\s*$")  # ⋮: a skeleton's, an excerpt's
# a definition's first line: a class above one of its methods in an excerpt, the lines between left out
_HEADER_RE = re.compile(r"^\s*(?:export\s+)?(?:pub\s+)?(?:async\s+)?"
                        r"(?:class|def|function|func|fn|impl|struct|interface)\b")


class _Hit(NamedTuple):
    """Where a search matched (0-based first line) and how to re-indent the model's changed lines there.

    `head` is the file's text before the search on its first line when the search starts mid-line, `tail` the text
    after it on its last line when it stops mid-line; both are kept around the replacement.
    """

    start: int
    transform: Transform
    head: str | None = None
    tail: str | None = None


def _tokens(line: str) -> tuple[str, ...]:
    return tuple(_TOKEN_RE.findall(line))


_KEYS: dict[str, Callable[[str], object]] = {
    "exact": identity,
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
        transform: Transform | None = identity
        if strategy in ("indent", "intraline"):
            transform = indent_transform(bodies[start: start + m], search)
        if transform is not None:
            hits.append(_Hit(start=start, transform=transform))
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
        transform = indent_transform(bodies[i: i + m], search)
        if transform is not None:
            hits.append(_Hit(start=i, transform=transform))
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
    lead = leading(file_line) if strategy == "indent" else ""
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
        if strategy == "indent" and key(window[0]) == first and not leading(search[0]) and leading(window[0]):
            head = leading(window[0])  # quoted from after the indentation: that line says nothing about the shift
        tail = None if key(window[-1]) == last else _tail_after(window[-1], search[-1], strategy)
        if (head is None and key(window[0]) != first) or (tail is None and key(window[-1]) != last):
            continue
        if head is None and tail is None:
            continue  # a whole-line match: the plain strategies own it
        transform: Transform | None = identity
        if strategy == "indent":
            whole = range(1 if head is not None else 0, m - 1 if tail is not None else m)
            transform = indent_transform([window[j] for j in whole], [search[j] for j in whole])
        if transform is not None:
            hits.append(_Hit(start=i, transform=transform, head=head, tail=tail))
    return hits


def _render(window: list[str], window_eols: list[str], search: list[str], replace: list[str],
            transform: Transform, strategy: str, newline: str, head: str | None = None, tail: str | None = None
            ) -> list[tuple[str, str]]:
    """Replacement lines for one matched window: unchanged lines from the file, changed lines from the model."""
    placed: set[int] = set()  # replacement lines already in the file's columns: never re-indented
    if head is not None or tail is not None:
        search, replace, placed = _complete(window, search, replace, transform, strategy, head, tail)
    exact_tail = all(w[len(w.rstrip()):] == s[len(s.rstrip()):] for w, s in zip(window, search))
    key = identity if exact_tail else str.rstrip  # trailing blanks the model got wrong are noise, else intended
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
            lead = leading(model_first)
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


def _ambiguous(starts: list[int]) -> MatchOutcome:
    where = ", ".join(str(s + 1) for s in starts[:10])
    return MatchOutcome(ok=False, message=f"search text found {len(starts)} times, at lines {where} — add "
                                          "surrounding lines to make it unique. Nothing was changed by this edit.")


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
    tightest = {chain[-1].start: chain for chain in chains}  # chains ending at one place: keep the latest start
    chains = list(tightest.values())
    if len(chains) != 1:
        return _ambiguous([c[0].start for c in chains]) if chains else None
    chain = chains[0]
    first = pos = chain[0].start
    new: list[tuple[str, str]] = []
    for (start, transform, _, _), s_seg, r_seg in zip(chain, s_segs, r_segs):
        new.extend((bodies[i], eols[i] or newline) for i in range(pos, start))  # the elided lines, untouched
        end = start + len(s_seg)
        new.extend(_render(bodies[start:end], eols[start:end], s_seg, r_seg, transform, "elision", newline))
        pos = end
    return MatchOutcome(ok=True, content=splice(bodies, eols, first, pos, new), strategy="elision", line=first + 1)


def _under_header(bodies: list[str], eols: list[str], search: list[str], replace: list[str], newline: str
                  ) -> MatchOutcome | None:
    """A search whose first line is the header of a definition holding the rest further down, kept unchanged as the
    replace's first line: an excerpt shows a class's line above one of its methods with the lines between left out,
    and a small model copies the two as if they were neighbours. The rest is looked for inside that definition only
    (a later definition's equal lines are not it) and replaced there."""
    if len(search) < 2 or not replace or search[0].strip() != replace[0].strip() or not _HEADER_RE.match(search[0]):
        return None
    rest = [line for line in search[1:] if not _ELISION_RE.match(line)]
    new = [line for line in replace[1:] if not _ELISION_RE.match(line)]
    if not any(line.strip() for line in rest):
        return None
    hits = [hit for head in _seg_hits(bodies, search[:1], 0)
            for hit in _seg_hits(bodies[:_block_end(bodies, head.start)], rest, head.start + 1)]
    if len(hits) != 1:
        return _ambiguous([h.start for h in hits]) if hits else None
    return _apply_hit(bodies, eols, hits[0], rest, new, "elision", newline)


def _block_end(bodies: list[str], head: int) -> int:
    """The line after the block a header opens: the first line past it indented no deeper than the header, a closing
    brace at the header's depth included."""
    depth = len(leading(bodies[head]))
    for j in range(head + 1, len(bodies)):
        if bodies[j].strip() and len(leading(bodies[j])) <= depth:
            return j + 1 if bodies[j].strip()[0] in "}])" else j
    return len(bodies)


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
        hits = _seg_hits(bodies, seg, chain[-1].start + len(segs[len(chain) - 1]))
        if not hits:
            return None
        chain.append(hits[0])
    return chain


def apply_search_replace(content: str, search: str, replace: str) -> MatchOutcome:
    """Apply one search/replace block to `content`; refuse (with a reason for the model) rather than guess."""
    newline = dominant_newline(content)
    search_lines = model_lines(search)
    replace_lines = model_lines(replace)
    if not search.strip():
        if content.strip():
            return MatchOutcome(ok=False, message="empty search text on a file that is not empty. Give search text "
                                                  "copied from the file, or use action 'create' with overwrite=true to "
                                                  "replace the whole file.")
        return MatchOutcome(ok=True, content=replace.replace("\r\n", "\n").replace("\n", newline), strategy="exact",
                            line=1)
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
    for elided in (_elision, _under_header):
        if (outcome := elided(bodies, eols, search_lines, replace_lines, newline)) is not None:
            return outcome
    for strategy in ("intraline", "fuzzy"):
        hits = _find(bodies, search_lines, strategy) if strategy != "fuzzy" else _fuzzy_find(bodies, search_lines)
        if len(hits) > 1:
            return _ambiguous([h.start for h in hits])
        if hits:
            return _apply_hit(bodies, eols, hits[0], search_lines, replace_lines, strategy, newline)
    if (unescaped := _unescaped(search, replace)) is not None:
        outcome = apply_search_replace(content, *unescaped)
        if outcome.ok:
            return replace_field(outcome, strategy=f"unescaped_{outcome.strategy}")
    return MatchOutcome(ok=False, message=f"search text not found. {closest_lines(bodies, search_lines)}\n"
                                          "Copy the search text exactly from the file (same indentation and spacing) "
                                          "and resend only this edit." + symbol_hint(bodies, search_lines))


def cannot_match(content: str, search: list[str], *, closed: bool) -> str | None:
    """Why a SEARCH text, as far as a streamed answer has written it (`search`: its whole lines; `closed`: all of
    them), can match nowhere in `content` whatever comes after it; None while it still may. Whole, it is what
    apply_search_replace refuses, with the replacement the same text (the most any replacement lets it match: an
    elision needs as many in the replacement). Open, its lines between the first (which may start mid-line) and the
    last so far (which may stop mid-line), cut at elision lines, are runs whose words are those of no run of the
    file's lines: every strategy, fuzzy included, matches a run of lines only to one with the same words line for
    line. Neither says any of the file's lines."""
    if closed:
        text = "\n".join(search) + "\n"
        outcome = apply_search_replace(content, text, text)
        if outcome.ok:
            return None
        return "its SEARCH text is in more than one place of the file" \
            if outcome.message.startswith("search text found") else "its SEARCH text is not in the file"
    if any("\\n" in line for line in search):
        return None  # a text whose lines are written as `\\n` may be read as those lines (_unescaped)
    file_words, starts = _line_words(content)
    run: list[tuple[str, ...]] = []
    for number, line in enumerate([*search[1:-1], "..."], start=2):
        if not _ELISION_RE.match(line):
            run.append(tuple(_WORD_RE.findall(line)))
            continue
        if run and not _occurs(run, file_words, starts):
            return _broken_at(run, number - len(run), file_words, starts)
        run = []
    return None


def _broken_at(run: list[tuple[str, ...]], first: int, lines: list[tuple[str, ...]],
               starts: dict[tuple[str, ...], list[int]]) -> str:
    """Where a run of SEARCH lines (its first, the SEARCH text's line `first`) stops being a run of the file's."""
    kept = next(k for k in range(1, len(run) + 1) if not _occurs(run[:k], lines, starts)) - 1
    if kept == 0:
        return f"line {first} of its SEARCH text is in no line of the file"
    follows = f"line {first}" if kept == 1 else f"its lines {first}-{first + kept - 1}"
    return f"line {first + kept} of its SEARCH text follows {follows} nowhere in the file"


@functools.lru_cache(maxsize=4)
def _line_words(content: str) -> tuple[list[tuple[str, ...]], dict[tuple[str, ...], list[int]]]:
    """Each line's words, and where each line's words are: what a streamed SEARCH text is checked against at each of
    its lines."""
    file_words = [tuple(_WORD_RE.findall(line)) for line in split_lines(content)[0]]
    starts: dict[tuple[str, ...], list[int]] = {}
    for i, words in enumerate(file_words):
        starts.setdefault(words, []).append(i)
    return file_words, starts


def _occurs(run: list[tuple[str, ...]], lines: list[tuple[str, ...]], starts: dict[tuple[str, ...], list[int]]
            ) -> bool:
    """The run of lines' words is that of a run of the file's lines (`starts`: where each line's words are)."""
    return any(lines[i:i + len(run)] == run for i in starts.get(run[0], []))


def _unescaped(search: str, replace: str) -> tuple[str, str] | None:
    """A search text of one line holding `\\n` — its lines written with JSON's escapes escaped once more, as small
    models do ('def add(a, b):\\n    return a - b') — read as the lines it means, and a one-line replacement with
    it (None: not such a text). Tried only when the text as written is found nowhere."""
    if "\n" in search.strip("\n") or "\\n" not in search:
        return None
    again = [_ESCAPES_RE.sub(lambda m: _ESCAPES[m.group(0)], text) if "\n" not in text.strip("\n") else text
             for text in (search, replace)]
    return again[0], again[1]


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
    return MatchOutcome(ok=True, content=content[:at] + new_text + content[at + len(search):], strategy="exact",
                        line=content.count("\n", 0, at) + 1)


def _apply_hit(bodies: list[str], eols: list[str], hit: _Hit, search: list[str],
               replace: list[str], strategy: str, newline: str) -> MatchOutcome:
    start, end = hit.start, hit.start + len(search)
    new = _render(bodies[start:end], eols[start:end], search, replace, hit.transform, strategy, newline, hit.head,
                  hit.tail)
    logger.debug("search matched at line %d by %s", start + 1, strategy)
    return MatchOutcome(ok=True, content=splice(bodies, eols, start, end, new), strategy=strategy, line=start + 1)
