"""Best of N: where candidate attempts run (scratch copies, never the user's tree) and which one wins.

The winner passes everything (the tests and, when there is one, the reproduction test), then has the smallest
change; a tie goes to the change most candidates agree on (diffs compared without line numbers and whitespace).
"""
from __future__ import annotations

import logging
import re
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from code_assistant.agent.stop import Stop

logger = logging.getLogger(__name__)

_HUNK_RE = re.compile(r"^@@ .* @@")


@dataclass
class CandidateOutcome:
    """One attempt's result, as the summary table and the choice need it."""

    number: int
    passed: bool  # the tests are green and the reproduction test (if any) passes
    stop_reason: Stop
    iterations: int = 0
    changed_lines: int = 0
    tokens: int = 0
    cost_usd: float | None = None
    diff: str = ""
    files: dict[str, bytes | None] = field(default_factory=dict)  # final bytes per changed path; None: deleted
    message: str = ""
    started_s: float = 0.0  # when the attempt began, from the start of all attempts
    seconds: float = 0.0  # how long it ran
    chosen: bool = False  # the attempt applied to the repository


def changed_lines(diff: str) -> int:
    """Added plus removed lines of a unified diff."""
    return sum(1 for line in diff.splitlines()
               if line.startswith(("+", "-")) and not line.startswith(("+++", "---")))


def normalized(diff: str) -> str:
    """A diff's substance: its files and changed lines, without hunk positions, context or whitespace."""
    lines = []
    for line in diff.splitlines():
        if line.startswith(("---", "+++")):
            lines.append(line.split("\t")[0])
        elif line.startswith(("+", "-")) and not _HUNK_RE.match(line):
            lines.append(line[0] + "".join(line[1:].split()))
    return "\n".join(lines)


def choose(outcomes: Iterable[CandidateOutcome]) -> CandidateOutcome | None:
    """The winner, or None when no candidate passed with a change."""
    outcomes = list(outcomes)
    passing = [o for o in outcomes if o.passed and o.files]
    if not passing:
        return None
    votes = Counter(normalized(o.diff) for o in passing)
    return min(passing, key=lambda o: (o.changed_lines, -votes[normalized(o.diff)], o.number))


class ScratchCopy:
    """A copy of the repository's working tree (uncommitted and untracked files included, `.git` and the
    assistant's own directories left out) in a temporary directory that is removed on exit, whatever happens."""

    def __init__(self, repo: Path, exclude: Iterable[Path] = (), prefix: str = "ca-candidate-") -> None:
        self.repo = repo.resolve()
        self.exclude = [Path(p).resolve() for p in exclude]
        self.prefix = prefix
        self.root: Path | None = None

    def __enter__(self) -> Path:
        self.root = Path(tempfile.mkdtemp(prefix=self.prefix))
        target = self.root / self.repo.name

        def ignore(directory: str, names: list[str]) -> set[str]:
            here = Path(directory)
            return {n for n in names if n == ".git" or (here / n).resolve() in self.exclude}

        shutil.copytree(self.repo, target, symlinks=True, ignore=ignore)
        return target

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.remove()

    def remove(self) -> None:
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

