"""Tests finished so far, counted from a test command's output as it arrives (the runner's `on_output`), for a
status line: pytest's and unittest's progress characters (`..F.s`, printed as each test ends) or their verbose lines
(`::test_x PASSED`, `test_x (m.C) ... ok`), cargo's `test x ... ok`, go test's `--- PASS:` (go test -v; without it
only failures are named), node's TAP `ok 3 - name`, Jest's and Mocha's `✓ name`. Output in no such form counts
nothing: the line then shows only the time."""
from __future__ import annotations

import re
from collections.abc import Callable

_PROGRESS = re.compile(r"^(?:\S+\.py )?([.FEsxXu]+)(?:\s+\[\s*\d+%\])?\s*$")  # pytest's and unittest's characters
_ONE_A_LINE = re.compile(
    r"::\S+ (?:PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b"  # pytest -v
    r"|\.\.\. (?:ok|FAIL|FAILED|ERROR|skipped|ignored|expected failure|unexpected success)\b"  # unittest -v, cargo
    r"|^\s*--- (?:PASS|FAIL|SKIP): "  # go test
    r"|^\s*(?:not )?ok \d+\b"  # TAP: node's test runner
    r"|^\s*[✓✔✕✗×√] ")  # Jest, Mocha


def count_on(line: str) -> int:
    """How many finished tests one line of output (or the part of it printed so far) reports."""
    if progress := _PROGRESS.match(line):
        return len(progress.group(1))
    return 1 if _ONE_A_LINE.search(line) else 0


class TestCount:
    """A running count over output that arrives in pieces: whole lines counted once, the open line as far as it
    goes (pytest prints a line's characters one test at a time)."""
    __test__ = False

    def __init__(self) -> None:
        self.done = 0  # tests on the finished lines
        self.open = ""  # the line being printed
        self.count = 0

    def add(self, text: str) -> bool:
        """The output that came; whether the count went up."""
        *finished, self.open = (self.open + text).replace("\r\n", "\n").split("\n")
        self.done += sum(count_on(line) for line in finished)
        count = max(self.count, self.done + count_on(self.open))
        went_up, self.count = count > self.count, count
        return went_up


def ticking(tick: Callable[[str], None]) -> Callable[[str], None]:
    """A runner's `on_output` that says the count of tests done so far through `tick` each time it goes up."""
    count = TestCount()

    def on_output(text: str) -> None:
        if count.add(text):
            tick(f"{count.count} test{'' if count.count == 1 else 's'} done")
    return on_output
