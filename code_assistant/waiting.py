"""Waits a person should see move: the seam the floors below the console report a wait through without knowing who
shows it. A wait is started with a few words ('Baseline tests'), told what is known so far as it goes ('12 tests
done'), and ended; its one-line result is said after it by whoever waited. The console draws it as a live line on
a terminal and as a plain line every ten seconds otherwise (console/status.py); --json and code without a person to
show it to use SILENT."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol


class Wait(Protocol):
    def tick(self, detail: str) -> None:
        """What is known so far, in a few words; the time spent is the Status's to count."""

    def ended(self) -> None:
        """The wait is over (its line goes; the result is said by the one who waited)."""


class Status(Protocol):
    def started(self, what: str) -> Wait:
        """A wait begins; several may be on at once (best of N's attempts, each in its thread)."""


class _Silent:
    def started(self, what: str) -> Wait:
        return self

    def tick(self, detail: str) -> None:
        pass

    def ended(self) -> None:
        pass


SILENT: Status = _Silent()


@contextmanager
def waiting(status: Status, what: str) -> Iterator[Wait]:
    """A wait for the length of the block, ended however the block ends (Ctrl-C included)."""
    wait = status.started(what)
    try:
        yield wait
    finally:
        wait.ended()


class Prefixed:
    """Another status's waits, each named with a prefix (best of N: 'Candidate 2: Testing')."""

    def __init__(self, status: Status, prefix: str) -> None:
        self.status, self.prefix = status, prefix

    def started(self, what: str) -> Wait:
        return self.status.started(f"{self.prefix}{what}")


def counting_files(wait: Wait) -> Callable[[int, int], None]:
    """An index update's progress (files stored, files to store) as a wait's words."""
    return lambda done, total: wait.tick(f"{done} of {total} changed files")
