"""The places an answer cites — `path:line` and `path:start-end` — read from its text, so that the door can name those
that are not in the repository. A citation's path has an extension (`calc.py:4`, `src/app.ts:10-14`); a URL's host
and port, a time of day, are not citations."""
from __future__ import annotations

import re
from dataclasses import dataclass

_CITATION = re.compile(r"(?<![\w./:@-])"  # not inside a URL, an address or a longer path
                       r"((?:\.{0,2}/)?(?:[\w.-]+/)*[\w.-]*\w\.[A-Za-z][A-Za-z0-9]*)"  # a path with an extension
                       r":(\d+)(?:-(\d+))?(?!\w)")  # :line or :start-end (a :column after it is left alone)


@dataclass(frozen=True)
class Citation:
    path: str
    start: int
    end: int

    def __str__(self) -> str:
        return f"{self.path}:{self.start}" + (f"-{self.end}" if self.end != self.start else "")


def citations(text: str) -> list[Citation]:
    """Every citation in the text, once each, in the order they first appear."""
    found = (Citation(m.group(1), int(m.group(2)), int(m.group(3) or m.group(2))) for m in _CITATION.finditer(text))
    return list(dict.fromkeys(found))
