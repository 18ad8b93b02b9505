"""replace_symbol / insert_after_symbol: locate one definition with the parser and splice new code there."""
from __future__ import annotations

import difflib
import os

from code_assistant.edit.edits import Action
from code_assistant.edit.lines import MatchOutcome, dominant_newline, leading, splice, split_lines
from code_assistant.parse import code_parser

_PREFIX_MARKS = ("@", "#", "//", "/*", "*", "#[")  # decorators and comments the parser counts into a definition


def _reindent(code: str, indent: str) -> list[str]:
    """The code's lines moved from their common indentation to `indent`; blank lines keep their whitespace."""
    lines = code.replace("\r\n", "\n").split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    common = os.path.commonprefix([leading(line) for line in lines if line.strip()])
    return [indent + line[len(common):] if line.strip() else line for line in lines]


def apply_symbol_edit(path: str, content: str, qualname: str, new_code: str, action: Action) -> MatchOutcome:
    """replace_symbol / insert_after_symbol: locate one definition with code_parser and splice `new_code` there."""
    if action not in (Action.REPLACE_SYMBOL, Action.INSERT_AFTER_SYMBOL):
        return MatchOutcome(ok=False, message=f"unknown symbol action {str(action)!r}")
    if not new_code.strip():
        return MatchOutcome(ok=False, message=f"{action} needs the new definition in 'content'.")
    parsed = code_parser.parse_source(path, content)
    found = code_parser.find_symbols(parsed, qualname)
    if len(found) != 1:
        if found:
            where = ", ".join(f"{s.qualname} ({s.kind}) at lines {s.start_line}-{s.end_line}" for s in found)
            return MatchOutcome(ok=False, message=f"symbol {qualname!r} is defined {len(found)} times: {where}. "
                                                  "Use a search/replace edit with surrounding lines instead.")
        names = [s.qualname for s in parsed.symbols]
        close = difflib.get_close_matches(qualname, names, n=5, cutoff=0.5)
        close += [n for n in names if n.split(".")[-1] == qualname.split(".")[-1] and n not in close]
        hint = f" Did you mean: {', '.join(close[:5])}?" if close else f" Symbols in the file: {', '.join(names[:20])}."
        return MatchOutcome(ok=False, message=f"symbol {qualname!r} not found in {path}.{hint}")
    symbol = found[0]
    bodies, eols = split_lines(content)
    newline = dominant_newline(content)
    first, end = symbol.start_line - 1, min(symbol.end_line, len(bodies))
    start = first
    while start < end - 1 and (not bodies[start].strip() or bodies[start].lstrip().startswith(_PREFIX_MARKS)):
        start += 1  # the parser counts decorators and attached comments in; find the definition line itself
    indent = leading(bodies[start])
    new_lines = _reindent(new_code, indent)
    if action == Action.REPLACE_SYMBOL:
        if new_lines[0].lstrip().startswith(_PREFIX_MARKS):
            start = first  # the new code brings its own decorators / comments
        new = [(line, newline) for line in new_lines]
        return MatchOutcome(ok=True, content=splice(bodies, eols, start, end, new), strategy="symbol", line=start + 1)
    gap = 2 if not indent and path.endswith((".py", ".pyi")) else 1
    new = [("", newline)] * gap + [(line, newline) for line in new_lines]
    after = [(bodies[end - 1], eols[end - 1] or newline)]
    return MatchOutcome(ok=True, content=splice(bodies, eols, end - 1, end, after + new), strategy="symbol",
                        line=end + 1)
