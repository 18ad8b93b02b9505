"""Split a file into chunks that make sense alone (`chunk_file`), or reduce it to its signatures (`skeleton`).

Rules, in order:
- One chunk per function, method or class, never cut when it fits `max_tokens` (header included).
- A definition too big for one chunk that has nested definitions (a large class, a Rust impl) is split by those:
  each nested definition is chunked by these same rules, and the definition's own lines (its header, class-level
  statements) form chunks of their own, labelled with the definition's qualname and kind.
- A definition too big for one chunk with nothing nested is split into consecutive line windows, cut preferably at
  a blank line, else at a line no deeper than the body's indentation (a statement boundary), else where the budget
  runs out. Every window carries the same header, which includes the definition's own signature.
- Small neighbours are merged up to the budget: loose module/class-level lines (imports, constants) and tiny
  definitions (at most a quarter of the budget). A merged chunk with several definitions is labelled with the
  enclosing definition (None/"module" at the top level).
- Files with no definitions (no grammar and no regex match, or config files) become line windows ("window");
  Markdown is chunked by heading ("section"), plain text by paragraph windows.
Each chunk's text starts with a header: `# file: pkg/calc.py` and one `# in: <signature>` line per enclosing
definition (`//` instead of `#` for C-like languages). Blank lines at chunk edges are left out; every other line
of the file belongs to exactly one chunk.
"""
from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import accumulate

from code_assistant.parse.code_model import ParsedFile, Symbol
from code_assistant.parse.code_parser import parse_source

logger = logging.getLogger(__name__)

_HASH_COMMENT = {"python", "ruby", "shell", "yaml", "toml", "ini", "markdown", "text", None}
_HEADING_RX = re.compile(r"^#{1,6}\s+\S")
_BLOCKISH = {"class", "struct", "interface", "enum", "trait", "module", "type", "impl"}
_HEAD_RX = re.compile(r"^(package|import|from|use|mod|#include|require|using|namespace)\b")


@dataclass(frozen=True)
class Chunk:
    path: str
    start_line: int
    end_line: int
    symbol: str | None  # qualname of the definition the chunk covers, None for module-level code
    kind: str  # class | function | method | ... | module | window | section
    text: str  # header + code


@dataclass
class _Node:
    symbol: Symbol | None
    start: int
    end: int
    children: list[_Node] = field(default_factory=list)


class _Costs:
    """Token cost of any line span in O(1): per-line counts summed (a slight over-estimate: conservative)."""

    def __init__(self, lines: list[str], count_tokens: Callable[[str], int] | None) -> None:
        self.count = count_tokens or (lambda text: len(text) // 3 + 1)
        if count_tokens is None:
            per_line = [len(line) + 1 for line in lines]
        else:  # a file repeats many lines (blank ones, closing brackets, `return`): each is counted once
            counted = {line: count_tokens(line + "\n") for line in dict.fromkeys(lines)}
            per_line = [counted[line] for line in lines]
        self.prefix = [0, *accumulate(per_line)]
        self.chars = count_tokens is None

    def span(self, lo: int, hi: int) -> int:
        total = self.prefix[hi] - self.prefix[lo - 1] if hi >= lo else 0
        return total // 3 + 1 if self.chars else total


class _Chunker:
    def __init__(self, path: str, language: str | None, lines: list[str], max_tokens: int,
                 count_tokens: Callable[[str], int] | None) -> None:
        self.path, self.lines, self.max_tokens = path, lines, max_tokens
        self.costs = _Costs(lines, count_tokens)
        self.comment = "#" if language in _HASH_COMMENT else "//"
        self.chunks: list[Chunk] = []

    def header(self, context: list[str]) -> str:
        return "".join([f"{self.comment} file: {self.path}\n", *(f"{self.comment} in: {sig}\n" for sig in context)])

    def trim(self, lo: int, hi: int) -> tuple[int, int]:
        while lo <= hi and not self.lines[lo - 1].strip():
            lo += 1
        while hi >= lo and not self.lines[hi - 1].strip():
            hi -= 1
        return lo, hi

    def emit(self, lo: int, hi: int, context: list[str], symbol: str | None, kind: str) -> None:
        lo, hi = self.trim(lo, hi)
        if lo <= hi:
            text = self.header(context) + "\n".join(self.lines[lo - 1:hi]) + "\n"
            self.chunks.append(Chunk(path=self.path, start_line=lo, end_line=hi, symbol=symbol, kind=kind, text=text))

    def fits(self, lo: int, hi: int, context: list[str]) -> bool:
        return self.costs.span(lo, hi) + self.costs.count(self.header(context)) <= self.max_tokens

    def windows(self, lo: int, hi: int, context: list[str], symbol: str | None, kind: str) -> None:
        lo, hi = self.trim(lo, hi)
        budget = max(self.max_tokens - self.costs.count(self.header(context)), self.max_tokens // 4, 1)
        body = [self.lines[r - 1] for r in range(lo + 1, hi + 1) if self.lines[r - 1].strip()]
        base = min((len(t) - len(t.lstrip()) for t in body), default=0)
        start = lo
        while start <= hi:
            start, _ = self.trim(start, hi)
            if start > hi:
                break
            end, blank_cut, stmt_cut = start, 0, 0
            for row in range(start, hi + 1):
                if row > start and self.costs.span(start, row) > budget:
                    break
                end = row
                nxt = self.lines[row] if row < len(self.lines) else ""
                if not nxt.strip():
                    blank_cut = row
                elif len(nxt) - len(nxt.lstrip()) <= base and not nxt.lstrip().startswith((")", "]", "}")):
                    stmt_cut = row
            if end < hi:
                half = start + (end - start) // 2
                end = blank_cut if blank_cut >= half else stmt_cut if stmt_cut >= half else end
            self.emit(start, end, context, symbol, kind)
            start = end + 1

    def region(self, node: _Node, context: list[str]) -> None:
        """Chunk the lines of `node` (the whole file, or a definition too big for one chunk)."""
        sym = node.symbol
        inner = context + [sym.signature] if sym else context
        own_symbol, own_kind = (sym.qualname, sym.kind) if sym else (None, "module")
        tiny = self.max_tokens // 4
        group: list[tuple[int, int, Symbol | None]] = []

        def flush() -> None:
            if not group:
                return
            defs = [s for _, _, s in group if s is not None]
            symbol, kind = (defs[0].qualname, defs[0].kind) if len(defs) == 1 else (own_symbol, own_kind)
            self.emit(group[0][0], group[-1][1], context if group[0][0] == node.start else inner, symbol, kind)
            group.clear()

        def add(lo: int, hi: int, symbol: Symbol | None) -> bool:
            ctx = context if (group[0][0] if group else lo) == node.start else inner
            if group and not self.fits(group[0][0], hi, ctx):
                flush()
                ctx = context if lo == node.start else inner
            if not self.fits(lo, hi, ctx):
                return False
            group.append((lo, hi, symbol))
            return True

        pos = node.start
        for child in [*node.children, None]:
            lo, hi = self.trim(pos, child.start - 1 if child else node.end)
            if lo <= hi and not add(lo, hi, None):
                flush()
                self.windows(lo, hi, context if lo == node.start else inner, own_symbol, own_kind)
            if child is None:
                break
            pos = child.end + 1
            child_sym = child.symbol
            assert child_sym is not None
            if self.fits(child.start, child.end, inner):
                if self.costs.span(child.start, child.end) <= tiny and add(child.start, child.end, child_sym):
                    continue
                flush()
                self.emit(child.start, child.end, inner, child_sym.qualname, child_sym.kind)
            elif child.children:
                flush()
                self.region(child, inner)
            else:
                flush()
                self.windows(child.start, child.end, inner + [child_sym.signature], child_sym.qualname, child_sym.kind)
        flush()


def _tree(symbols: list[Symbol], n_lines: int) -> _Node:
    """Nest definitions by line containment; a range overlapping its predecessor is clipped to follow it."""
    root = _Node(symbol=None, start=1, end=n_lines)
    stack = [root]
    for sym in sorted(symbols, key=lambda s: (s.start_line, -s.end_line)):
        start, end = sym.start_line, min(sym.end_line, n_lines)
        while len(stack) > 1 and stack[-1].end < start:
            stack.pop()
        parent = stack[-1]
        if parent.children and parent.children[-1].end >= start:
            start = parent.children[-1].end + 1
        end = min(end, parent.end)
        if start > end:
            continue
        node = _Node(symbol=sym, start=start, end=end)
        parent.children.append(node)
        stack.append(node)
    return root


def _markdown(chunker: _Chunker, language: str | None) -> None:
    lines = chunker.lines
    starts = [i for i, line in enumerate(lines, 1) if language == "markdown" and _HEADING_RX.match(line)]
    if not starts or starts[0] != 1:
        starts.insert(0, 1)
    sections = [(lo, (starts[k + 1] - 1 if k + 1 < len(starts) else len(lines))) for k, lo in enumerate(starts)]
    group: list[tuple[int, int]] = []

    def title(row: int) -> str | None:
        return lines[row - 1].strip() if _HEADING_RX.match(lines[row - 1]) else None

    def flush() -> None:
        if group:
            chunker.emit(group[0][0], group[-1][1], [], title(group[0][0]), "section")
            group.clear()

    for lo, hi in sections:
        if group and chunker.fits(group[0][0], hi, []):
            group.append((lo, hi))
            continue
        flush()
        if chunker.fits(lo, hi, []):
            group.append((lo, hi))
        else:
            heading = title(lo)
            chunker.windows(lo, hi, [heading] if heading else [], heading, "section" if heading else "window")
    flush()


def chunk_file(path: str, source: str, parsed: ParsedFile | None = None, *, max_tokens: int = 256,
               count_tokens: Callable[[str], int] | None = None) -> list[Chunk]:
    """Chunks covering every non-blank line of `source`, in file order (see the module docstring for the rules)."""
    if parsed is None:
        parsed = parse_source(path, source)
    lines = source.splitlines()
    chunker = _Chunker(path, parsed.language, lines, max_tokens, count_tokens)
    if not lines:
        return []
    if parsed.language in ("markdown", "text"):
        _markdown(chunker, parsed.language)
    elif not parsed.symbols:
        chunker.windows(1, len(lines), [], None, "window")
    else:
        chunker.region(_tree(parsed.symbols, len(lines)), [])
    return chunker.chunks


def skeleton(path: str, source: str, parsed: ParsedFile | None = None, keep: set[str] | None = None) -> str:
    """The file reduced to imports and definition headers; bodies become `... <comment> lines a-b`, other
    elided stretches a `⋮` line. Definitions whose qualname is in `keep` (and their children) stay whole.
    Class-like bodies keep their own statements (fields) when there are at most 25 such lines."""
    if parsed is None:
        parsed = parse_source(path, source)
    keep = keep or set()
    lines = source.splitlines()
    visible = [False] * (len(lines) + 2)
    body_of = [0] * (len(lines) + 2)  # row -> start row of the body run it belongs to (for the marker)
    for imp in parsed.imports:
        depth, row = 0, imp.line
        while 0 < row <= len(lines):
            visible[row] = True
            depth += sum(lines[row - 1].count(c) for c in "([{") - sum(lines[row - 1].count(c) for c in ")]}")
            if depth <= 0:
                break
            row += 1
    for row, text in enumerate(lines, 1):
        if _HEAD_RX.match(text) or (text.rstrip() == ")" and row > 1 and visible[row - 1]):
            visible[row] = True
    kept: list[tuple[int, int]] = []
    symbols = sorted(parsed.symbols, key=lambda s: (s.start_line, -s.end_line))
    for position, sym in enumerate(symbols):
        if any(a <= sym.start_line and sym.end_line <= b for a, b in kept):
            continue
        for row in range(sym.start_line, sym.end_line + 1):
            visible[row] = True
            body_of[row] = 0
        if sym.qualname in keep:
            kept.append((sym.start_line, sym.end_line))
            continue
        first, last = parsed.bodies.get((sym.qualname, sym.start_line), (0, -1))
        if sym.kind in _BLOCKISH:
            covered = bytearray(last - first + 2 if last >= first else 1)  # rows of the body inside a child
            for child in symbols[position + 1:]:  # sorted by start: the children come right after
                if child.start_line > sym.end_line:
                    break
                if sym.start_line < child.start_line and child.end_line <= sym.end_line:
                    lo, hi = max(child.start_line, first), min(child.end_line, last)
                    if lo <= hi:
                        covered[lo - first:hi - first + 1] = b"\x01" * (hi - lo + 1)
            if (last - first + 1) - sum(covered) <= 25:  # own statements (fields) stay when few
                continue
        for row in range(first, last + 1):
            visible[row] = False
            body_of[row] = first
    comment = "#" if parsed.language in ("python", "ruby", "shell", "yaml", "toml", None) else "//"
    out: list[str] = []
    row = 1
    while row <= len(lines):
        if visible[row]:
            out.append(lines[row - 1])
            row += 1
            continue
        end = row
        while end + 1 <= len(lines) and not visible[end + 1] and body_of[end + 1] == body_of[row]:
            end += 1
        text = [lines[r - 1] for r in range(row, end + 1) if lines[r - 1].strip()]
        if not text:
            out.append("")
        elif body_of[row]:
            indent = text[0][: len(text[0]) - len(text[0].lstrip())]
            out.append(f"{indent}...  {comment} lines {row}-{end}")
        elif not out or out[-1] != "⋮":
            out.append("⋮")
        row = end + 1
    return "\n".join(out) + "\n"


def excerpt(path: str, source: str, parsed: ParsedFile | None = None, keep: set[str] | None = None) -> str | None:
    """Only the definitions whose qualname is in `keep`, whole, in file order, each under the header lines of the
    definitions around it (a method under its class's); every stretch left out is one `⋮` line. None when `keep`
    names no definition of the file. Cheaper than a skeleton, which shows every header: what a small budget can
    hold of a long file when the definitions that matter are known."""
    if parsed is None:
        parsed = parse_source(path, source)
    kept = [s for s in parsed.symbols if s.qualname in (keep or set())]
    if not kept:
        return None
    lines = source.splitlines()
    by_name = {s.qualname: s for s in parsed.symbols}
    visible = [False] * (len(lines) + 2)
    for sym in kept:
        for row in range(sym.start_line, min(sym.end_line, len(lines)) + 1):
            visible[row] = True
        parent = by_name.get(sym.parent) if sym.parent else None
        while parent is not None:  # the enclosing definitions' header lines, up to where their body starts
            head_end = parsed.bodies.get((parent.qualname, parent.start_line), (parent.start_line + 1, 0))[0] - 1
            for row in range(parent.start_line, max(parent.start_line, min(head_end, sym.start_line - 1)) + 1):
                visible[row] = True
            parent = by_name.get(parent.parent) if parent.parent else None
    out: list[str] = []
    for row in range(1, len(lines) + 1):
        if visible[row]:
            out.append(lines[row - 1])
        elif not out or out[-1] != "⋮":
            out.append("⋮")
    return "\n".join(out) + "\n"
