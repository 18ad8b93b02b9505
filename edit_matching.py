"""Pure search/replace matching: find where a model's search text lives in a file and splice in the replacement.

Strategies, strictest first: exact, whitespace (line endings / trailing spaces), indent (uniform shift, tabs<->spaces),
elision (`...` lines), intraline (spacing between tokens), fuzzy (unique, very close, same words). A search that
matches in several places is refused, never applied to the first hit. Lines the model kept unchanged between search
and replace are copied from the file byte for byte; only the lines it changed come from the model.
"""
from __future__ import annotations

import difflib
import logging
import re
import textwrap
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

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
            return lambda r: r[len(prefix):] if r.startswith(prefix) else r.lstrip()
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
          ) -> list[tuple[int, Transform]]:
    """Every start line (0-based) in bodies[lo:hi] where `search` matches under `strategy`, with its transform."""
    key = _KEYS[strategy]
    hi = len(bodies) if hi is None else hi
    want = [key(s) for s in search]
    have = [key(b) for b in bodies[lo:hi]]
    m = len(want)
    hits: list[tuple[int, Transform]] = []
    for i in range(len(have) - m + 1):
        if have[i] != want[0] or have[i: i + m] != want:
            continue
        start = lo + i
        transform: Transform | None = _identity
        if strategy in ("indent", "intraline"):
            transform = _indent_transform(bodies[start: start + m], search)
        if transform is not None:
            hits.append((start, transform))
    return hits


def _fuzzy_find(bodies: list[str], search: list[str]) -> list[tuple[int, Transform]]:
    m = len(search)
    if sum(1 for s in search if s.strip()) < 2:
        return []
    want = [s.strip() for s in search]
    want_text = "\n".join(want)
    have = [b.strip() for b in bodies]
    hits: list[tuple[int, Transform]] = []
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
            hits.append((i, transform))
    return hits


def _render(window: list[str], window_eols: list[str], search: list[str], replace: list[str],
            transform: Transform, strategy: str, newline: str) -> list[tuple[str, str]]:
    """Replacement lines for one matched window: unchanged lines from the file, changed lines from the model."""
    exact_tail = all(w[len(w.rstrip()):] == s[len(s.rstrip()):] for w, s in zip(window, search))
    key = _identity if exact_tail else str.rstrip  # trailing blanks the model got wrong are noise, else intended
    matcher = difflib.SequenceMatcher(None, [key(s) for s in search], [key(r) for r in replace], autojunk=False)
    out: list[tuple[str, str]] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            out.extend((window[i], window_eols[i] or newline) for i in range(i1, i2))
        else:
            for line in replace[j1:j2]:
                line = transform(line)
                out.append((line if exact_tail else line.rstrip(), newline))
    return out


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
    detail = ""
    for j in range(m):
        if bodies[best + j].rstrip() != search[j].rstrip():
            detail = (f"Line {j + 1} of your search text {search[j].strip()!r} differs from file line {best + j + 1} "
                      f"{bodies[best + j].strip()!r}.\n")
            break
    return f"{detail}Closest lines in the file (lines {best + 1}-{best + m}):\n{_numbered(bodies, best, best + m)}"


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
    for (start, transform), s_seg, r_seg in zip(chain, s_segs, r_segs):
        new.extend((bodies[i], eols[i] or newline) for i in range(pos, start))  # the elided lines, untouched
        end = start + len(s_seg)
        new.extend(_render(bodies[start:end], eols[start:end], s_seg, r_seg, transform, "elision", newline))
        pos = end
    return MatchOutcome(True, _splice(bodies, eols, first, pos, new), "elision", line=first + 1)


def _seg_hits(bodies: list[str], seg: list[str], lo: int) -> list[tuple[int, Transform]]:
    for strategy in ("exact", "whitespace", "indent"):
        hits = _find(bodies, seg, strategy, lo=lo)
        if hits:
            return hits
    return []


def _chain(bodies: list[str], segs: list[list[str]], first: tuple[int, Transform]
           ) -> list[tuple[int, Transform]] | None:
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
    for strategy in ("exact", "whitespace", "indent"):
        hits = _find(bodies, search_lines, strategy)
        if len(hits) > 1:
            return _ambiguous([h[0] for h in hits])
        if hits:
            return _apply_hit(bodies, eols, hits[0], search_lines, replace_lines, strategy, newline)
    if "\n" not in search.rstrip("\r\n"):
        fragment = search.rstrip("\r\n")
        count = content.count(fragment)
        if count == 1:  # a piece of one line: replace just that piece
            at = content.index(fragment)
            new_text = replace.replace("\r\n", "\n").rstrip("\n").replace("\n", newline)
            return MatchOutcome(True, content[:at] + new_text + content[at + len(fragment):], "exact",
                                line=content.count("\n", 0, at) + 1)
        if count > 1:
            return _ambiguous(sorted({content.count("\n", 0, m.start()) for m in re.finditer(re.escape(fragment),
                                                                                            content)}))
    outcome = _elision(bodies, eols, search_lines, replace_lines, newline)
    if outcome is not None:
        return outcome
    for strategy in ("intraline", "fuzzy"):
        hits = _find(bodies, search_lines, strategy) if strategy != "fuzzy" else _fuzzy_find(bodies, search_lines)
        if len(hits) > 1:
            return _ambiguous([h[0] for h in hits])
        if hits:
            return _apply_hit(bodies, eols, hits[0], search_lines, replace_lines, strategy, newline)
    return MatchOutcome(False, message=f"search text not found. {closest_lines(bodies, search_lines)}\n"
                                       "Copy the search text exactly from the file (same indentation and spacing) "
                                       "and resend only this edit.")


def _apply_hit(bodies: list[str], eols: list[str], hit: tuple[int, Transform], search: list[str],
               replace: list[str], strategy: str, newline: str) -> MatchOutcome:
    start, transform = hit
    end = start + len(search)
    new = _render(bodies[start:end], eols[start:end], search, replace, transform, strategy, newline)
    logger.debug("search matched at line %d by %s", start + 1, strategy)
    return MatchOutcome(True, _splice(bodies, eols, start, end, new), strategy, line=start + 1)


def _reindent(code: str, indent: str) -> list[str]:
    lines = textwrap.dedent(code.replace("\r\n", "\n")).strip("\n").split("\n")
    return [indent + line if line.strip() else "" for line in lines]


def apply_symbol_edit(path: str, content: str, qualname: str, new_code: str, mode: str) -> MatchOutcome:
    """replace_symbol / insert_after_symbol: locate one definition with code_parser and splice `new_code` there."""
    import code_parser  # lazy: the parser pulls in tree-sitter grammars

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
