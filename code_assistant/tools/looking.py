"""The four tools that only look: `search` (the project's own ranking for free text, each file with its best lines),
`grep` (a regular expression over the visible files), `read` (numbered lines of one file) and `symbol` (where a name
is defined and where it is used). Each answers in `path:line: text` lines, capped, and says what it left out."""
from __future__ import annotations

import bisect
import itertools
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pathspec
import regex  # re's syntax, and a timeout: a pattern that backtracks without end is stopped, not waited for

from code_assistant import redact
from code_assistant.index.indexer import RepoIndex
from code_assistant.index.lexical import tokenize
from code_assistant.parse.code_model import named_by
from code_assistant.retrieve.ranking import rank
from code_assistant.tools import Result, Tool, ToolError
from code_assistant.tools.files import RepoView
from code_assistant.tools.specs import GREP, GREP_LINES, READ, READ_LINES, SEARCH, SYMBOL

READ_CHARS = 24_000  # characters a read shows (400 long lines would be ~27,000 tokens): it stops at a line's end
SEARCH_LINES = 3  # best lines per file
SYMBOL_DEFINITIONS, SYMBOL_REFERENCES = 40, 40  # definitions and references a symbol lookup shows
LINE_CHARS = 240  # a shown line longer than this is cut
GREP_SECONDS = 10.0  # a grep (or a symbol's references) stops after this long, even inside one file, and says so


def _cut(line: str) -> str:
    line = line.rstrip("\r\n")
    return line if len(line) <= LINE_CHARS else line[:LINE_CHARS] + " […]"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


@dataclass
class Looking:
    """The four tools over one repository: its visible files, and its index, brought up to date when asked for, as far
    as a look for the given text needs (a big tree's first index: that text's files first, the rest in the background;
    a completion running in the background is not waited for: what is stored answers, said to be partial)."""

    view: RepoView
    index: Callable[[str | None], RepoIndex]

    def tools(self) -> list[Tool]:
        return [Tool(SEARCH, self.search), Tool(GREP, self.grep), Tool(READ, self.read), Tool(SYMBOL, self.symbol)]

    # ----- search ---------------------------------------------------------------------------------------------------
    def search(self, arguments: dict[str, Any]) -> Result:
        given = SEARCH.given(arguments)
        query, k = given.text("query"), given.number("k")
        index = self.index(query)
        ranking = rank(index, query, limit=k, embed_budget=0)  # vectors already made; a call must be quick
        terms = set(tokenize(query))
        blocks = []
        for ranked in ranking.files[:k]:
            text = self.view.text(ranked.path) if ranked.path in set(self.view.files()) else None
            if text is None:
                continue
            best = _best_lines(text, terms)
            why = f"  ({', '.join(ranked.reasons[:3])})" if ranked.reasons else ""
            blocks.append("\n".join([f"{ranked.path}{why}", *(f"{ranked.path}:{n}: {_cut(line)}" for n, line in best)]))
        partial = _partial(index)
        if not blocks:
            return Result(text=f"no file matches {query!r}" + partial, summary=f'search: "{query}" → no files')
        return Result(text="\n\n".join(blocks) + partial,
                      summary=f'search: "{query}" → {_plural(len(blocks), "file")}')

    # ----- grep -----------------------------------------------------------------------------------------------------
    def grep(self, arguments: dict[str, Any]) -> Result:
        given = GREP.given(arguments)
        pattern, glob = given.text("pattern"), given.text("path_glob")
        try:
            compiled = regex.compile(pattern, regex.MULTILINE)
        except (regex.error, ValueError, OverflowError) as exc:
            raise ToolError(f"not a valid regular expression ({exc})") from None
        shown: list[str] = []
        total, files = 0, set()
        scan = Scan(self.view, compiled, glob)
        for path, number, line in scan:
            total += 1
            files.add(path)
            if len(shown) < GREP_LINES:
                shown.append(f"{path}:{number}: {_cut(line)}")
        where, stopped = (f" in {glob}" if glob else ""), scan.stopped
        if not total:
            text = f"no match for {pattern!r}{where}" + (f" ({stopped})" if stopped else "")
            return Result(text=text, summary=f'grep: "{pattern}" → no match')
        more = total - len(shown)
        tail = [f"({more} more matching lines not shown: narrow the pattern or the path_glob)"] if more else []
        tail += [f"(stopped early: {stopped})"] if stopped else []
        return Result(text="\n".join([*shown, *tail]),
                      summary=f'grep: "{pattern}" → {_plural(total, "line")} in {_plural(len(files), "file")}')

    # ----- read -----------------------------------------------------------------------------------------------------
    def read(self, arguments: dict[str, Any]) -> Result:
        given = READ.given(arguments)
        rel = self.view.resolve(given.text("path"))
        lines = self.view.read(rel).splitlines()
        total = len(lines)
        start = given.number("start")
        if total and start > total:
            raise ToolError(f"{rel} has {total} lines; start={start} is past its end")
        end = given.optional_number("end", low=start)
        last = min(total, end or start + READ_LINES - 1, start + READ_LINES - 1)
        body, size = [], 0
        for n in range(start, last + 1):
            shown = f"{n:>5}  {_cut(lines[n - 1])}"
            size += len(shown) + 1
            if size > READ_CHARS and body:
                last = n - 1
                break
            body.append(shown)
        head = f"{rel}: lines {start}-{last} of {total}" if total else f"{rel}: empty"
        more = [f"(lines {last + 1}-{total} not shown: read with start={last + 1})"] if last < total else []
        return Result(text="\n".join([head, *body, *more]),
                      summary=f"read: {rel} lines {start}-{last} of {total}" if total else f"read: {rel} (empty)")

    # ----- symbol ---------------------------------------------------------------------------------------------------
    def symbol(self, arguments: dict[str, Any]) -> Result:
        name = SYMBOL.given(arguments).text("name").strip()
        short = name.split(".")[-1].split("::")[-1]
        if not re.fullmatch(r"[A-Za-z_$][\w$]*", short):
            raise ToolError(f"{name!r} is not a name (give an identifier such as max_age or Cookie.max_age)")
        index = self.index(short)
        dotted = name.replace("::", ".")  # Rust's Type::method is the index's Type.method
        definitions: list[tuple[str, int]] = []
        defined_at: set[tuple[str, int]] = set()  # every definition of the short name: none of them is a reference
        lines = []
        for path in sorted(index.defining({short}).get(short.lower(), set())):
            for symbol in index.files[path].symbols if path in index.files else []:
                qualname = symbol.qualname
                if qualname.split(".")[-1] != short:
                    continue
                defined_at.add((path, symbol.start))
                if named_by(qualname, dotted):
                    definitions.append((path, symbol.start))
                    if len(lines) < SYMBOL_DEFINITIONS:
                        lines.append(f"{path}:{symbol.start}: {_cut(symbol.signature or f'{symbol.kind} {qualname}')}")
        if len(definitions) > len(lines):
            lines.append(f"({len(definitions) - len(lines)} more definitions not shown: give the qualified name, "
                         "e.g. Class.method)")
        word = regex.compile(rf"(?<![\w$]){regex.escape(short)}(?![\w$])")
        references, total = [], 0
        scan = Scan(self.view, word)
        for path, number, line in scan:
            if (path, number) in defined_at:
                continue
            total += 1
            if len(references) < SYMBOL_REFERENCES:
                references.append(f"{path}:{number}: {_cut(line).strip()}")
        text = ["Definitions:", *(lines or ["(none in the index)"]), "References:", *(references or ["(none)"])]
        if total > len(references):
            text.append(f"({total - len(references)} more references not shown: grep narrows them)")
        if scan.stopped:
            text.append(f"(stopped early: {scan.stopped})")
        return Result(text="\n".join(text) + _partial(index),
                      summary=f"symbol: {name} → {_plural(len(definitions), 'definition')}, "
                              f"{_plural(total, 'reference')}")


def _partial(index: RepoIndex) -> str:
    """What an answer from the index says while a big tree's files are still being indexed ("" once all are)."""
    if not index.pending:
        return ""
    return (f"\n({_plural(index.pending, 'file')} of the repository are not indexed yet (being indexed in the "
            "background): this answer may miss them; grep reads every file)")


class Scan:
    """The lines of the visible files (those matching `glob`) where `pattern` finds a match (a match that spans lines
    counts for the line it starts on), in path order, each line once. A scan that runs past GREP_SECONDS stops, inside
    a file too (a pattern that backtracks without end), and `stopped` says where."""

    def __init__(self, view: RepoView, pattern: regex.Pattern[str], glob: str = "") -> None:
        self.view, self.pattern = view, pattern
        self.spec = pathspec.PathSpec.from_lines("gitignore", [glob]) if glob else None
        self.stopped = ""

    def __iter__(self) -> Iterator[tuple[str, int, str]]:
        deadline = time.monotonic() + GREP_SECONDS
        late = f"the search took over {GREP_SECONDS:g} s"
        for path in self.view.files():
            if self.spec is not None and not self.spec.match_file(path):
                continue
            if time.monotonic() > deadline:
                self.stopped = f"{late}; files from {path} on were not read"
                return
            text = self.view.scanned(path)
            if text is None:
                continue
            lines: list[str] = []
            starts: list[int] = []  # where each line begins, as read numbers them (str.splitlines)
            seen = 0
            try:
                for match in self.pattern.finditer(text, timeout=max(deadline - time.monotonic(), 0.001)):
                    if not starts:
                        if not self.view.shows(path, text):  # judged where it matters: a file with a match
                            break
                        lines = text.splitlines(keepends=True)
                        starts = list(itertools.accumulate((len(line) for line in lines[:-1]), initial=0))
                        shown = redact.mask_key_blocks(text).splitlines(keepends=True)
                        shown = shown if len(shown) == len(lines) else lines  # numbered as read numbers them
                    number = bisect.bisect_right(starts, match.start())  # 1-based
                    if number > seen and number <= len(lines):
                        seen = number
                        yield path, number, shown[number - 1]
                    if time.monotonic() > deadline:
                        raise TimeoutError
            except TimeoutError:
                self.stopped = f"{late}; stopped in {path}" + (f" after line {seen}" if seen else "")
                return


def _best_lines(text: str, terms: set[str]) -> list[tuple[int, str]]:
    """A file's SEARCH_LINES lines that hold the most of the query's terms, in the file's order."""
    if not terms:
        return []
    scored = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        hits = len(terms.intersection(tokenize(line[:2000])))  # a minified line: its start is enough
        if hits:
            scored.append((hits, -number, line))
    best = sorted(scored, reverse=True)[:SEARCH_LINES]
    return sorted(((-negative, line) for _, negative, line in best))
