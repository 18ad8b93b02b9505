"""The repository owner's instructions for agents: `AGENTS.md` (the root's, and those in the directories of the files
a request shows, nearest last), else `CLAUDE.md`, `CONVENTIONS.md` or `.github/copilot-instructions.md`. Their text
goes into the system part of every request within a budget (a longer text is cut, and says so), read through the read
gate (never a link out of the tree) and redacted like any file; they never override the tool's own rules."""
from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath

from code_assistant import redact, tokens
from code_assistant.gate import Gate
from code_assistant.model import prompts

logger = logging.getLogger(__name__)

NESTED = "AGENTS.md"
FALLBACKS = ("CLAUDE.md", "CONVENTIONS.md", ".github/copilot-instructions.md")
SHARE = 10  # at most a tenth of the context budget
MAX_BYTES = 256 * 1024  # a file larger than this is read only this far


@dataclass(frozen=True)
class Instructions:
    """The instruction files found, each (repository-relative path, text as sent), root first, nearest last."""

    files: tuple[tuple[str, str], ...]
    cut: bool = False

    def text(self) -> str:
        body = "\n\n".join(f"## {path}\n{text.strip()}" for path, text in self.files)
        note = "\n\n(The instructions were cut here to fit the request.)" if self.cut else ""
        return prompts.INSTRUCTIONS.render(names=", ".join(p for p, _ in self.files), text=body + note)

    def describe(self) -> str:
        """For the header: `AGENTS.md, 42 lines` (and more files, and `cut` when it was)."""
        lines = sum(len(text.splitlines()) for _, text in self.files)
        names = ", ".join(p for p, _ in self.files)
        return f"{names}, {lines} lines" + (" (cut to fit)" if self.cut else "")


def _read(gate: Gate, rel: str) -> str | None:
    read = gate.text(rel, max_bytes=MAX_BYTES, head=True)
    if read is None:
        return None
    text, found = redact.redact(read)
    if found:
        logger.info("redacted %d secret(s) from %s", found, rel)
    return text if text.strip() else None


def exist(gate: Gate, indexed: Iterable[str] = ()) -> bool:
    """Whether the repository has any instruction file: the root's or a fallback, or an AGENTS.md among the
    repository's indexed files."""
    return any(gate.admits(rel) for rel in (NESTED, *FALLBACKS)) or any(
        PurePosixPath(path).name == NESTED for path in indexed)


def _nested(paths: Iterable[str]) -> list[str]:
    """AGENTS.md of every directory on the way to the given files (below the root), nearest last."""
    dirs: list[str] = []
    for path in paths:
        parents = list(reversed(PurePosixPath(path).parents))[1:]  # from the top, without "."
        for parent in parents:
            rel = f"{parent.as_posix()}/{NESTED}"
            if rel not in dirs:
                dirs.append(rel)
    return sorted(dirs, key=lambda d: d.count("/"))


def find(gate: Gate, budget: int, shown: Iterable[str] = ()) -> Instructions | None:
    """The instructions for a request that shows the files `shown`, within `budget` tokens (None: there are none).
    The root's AGENTS.md, else the first fallback that exists; then the AGENTS.md of the shown files' directories."""
    root = next(((rel, text) for rel in (NESTED, *FALLBACKS) if (text := _read(gate, rel))), None)
    found = ([root] if root else []) + [(rel, text) for rel in _nested(shown) if (text := _read(gate, rel))]
    if not found or budget <= 0:
        return None
    kept: list[tuple[str, str]] = []
    used, cut = 0, False
    for rel, text in found:
        size = tokens.count_tokens(text)
        if used + size <= budget:
            kept.append((rel, text))
            used += size
            continue
        room = budget - used
        if room > 20:
            kept.append((rel, _head(text, room)))
        cut = True
        break
    return Instructions(files=tuple(kept), cut=cut) if kept else None


def _head(text: str, budget: int) -> str:
    """The first lines of `text` that fit in `budget` tokens."""
    lines, used = [], 0
    for line in text.splitlines(keepends=True):
        size = tokens.count_tokens(line)
        if used + size > budget:
            break
        lines.append(line)
        used += size
    return "".join(lines)

