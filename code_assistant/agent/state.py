"""What a run knows as it goes — one typed state shared by the parts it is built from — and what it ends with (the
stop reasons are in stop.py)."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from code_assistant.agent.candidates import CandidateOutcome
from code_assistant.agent.stop import Stop
from code_assistant.model.chat import Usage

if TYPE_CHECKING:
    from code_assistant.edit.edits import EditResult
    from code_assistant.edit.leftovers import Leftover
    from code_assistant.edit.preview import Preview
    from code_assistant.edit.takeback import FileOutcome
    from code_assistant.index.indexer import RepoIndex
    from code_assistant.model.chat import ChatModel
    from code_assistant.model.trajectory import Step
    from code_assistant.verify.runner import TestResult


@dataclass(frozen=True)
class Ending:
    """How a run ended, before its outcome is made of it (Agent.end, the one place): the change kept, or taken back
    out; `preview`: a dry run's, nothing having been written."""

    reason: Stop
    message: str = ""
    kept: bool = False
    verified: bool = False  # a test that failed before the change passes now
    verification: str = ""  # which test shows it, or why none does
    preview: Preview | None = None


class StopRun(Exception):
    """Raised where a part must stop the run (the budget spent, the user quitting at review): the run ends with its
    change taken back out."""

    def __init__(self, reason: Stop, message: str = "") -> None:
        super().__init__(message or reason)
        self.reason, self.message = reason, message


@dataclass
class Reproduction:
    """The test written to capture the task: its files and its failing run before any fix (None: not reproduced)."""

    paths: list[str]
    failed: TestResult | None
    passes_after: bool = False
    note: str = ""
    after: TestResult | None = None  # its run once the suite was green

    @property
    def reproduced(self) -> bool:
        return bool(self.paths) and self.failed is not None

    def summary(self) -> str:
        if not self.reproduced:
            return f"not reproduced ({self.note})" if self.note else "not reproduced"
        after = "passes after the fix" if self.passes_after else "does not pass yet"
        return f"{', '.join(self.paths)}: failed before the fix, {after}"


@dataclass
class Applied:
    """What became of one answer's edits."""

    results: list[EditResult] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    patch_lines: int = 0
    whole_batch_refused: bool = False

    @property
    def wrote(self) -> bool:
        return any(r.ok for r in self.results)


@dataclass
class RunState:
    """One run's (or one best-of-N attempt's) state, shared by its parts; no other run reads or writes it."""

    step: Step  # the step being built: the answers of the last request, then its edits and test run
    step_written: bool = False  # the step is in the run log already
    candidate: int | None = None  # best of N: which attempt this is (None: the run in the repository)
    iteration: int = 0
    answers: list[str] = field(default_factory=list)  # every answer of the run (a repeated one is no progress)
    refused_in_a_row: int = 0
    failures: frozenset[tuple[str, str]] | None = None  # how the tests failed at the last test run (no progress: again)
    reproduction: Reproduction | None = None
    repo_index: RepoIndex | None = None  # the index of the repository: what the model may ask to read
    tests_failed: list[str] = field(default_factory=list)  # at the last test run
    started: float | None = None  # time.time() before its first test run: what changed in the tree since


class UsageMeter:
    """The model usage a run counts against --max-tokens and --max-cost and reports: the sum over its models (best
    of N adds each attempt's model to the run's meter). Thread-safe: attempts run in parallel."""

    def __init__(self, *models: ChatModel) -> None:
        self._models = list(models)
        self._lock = threading.Lock()

    def add(self, model: ChatModel) -> None:
        with self._lock:
            self._models.append(model)

    def total(self) -> Usage:
        with self._lock:
            models = list(self._models)
        total = Usage()
        for model in models:
            total = total + model.usage
        return total


@dataclass
class Prepared:
    """What every attempt starts from: the index, the baseline run, and the reproduction test if there is one."""

    index: RepoIndex
    baseline: TestResult
    reproduction: Reproduction | None = None


@dataclass
class RunResult:
    success: bool
    stop_reason: Stop
    iterations: int
    files_modified: list[str]
    rolled_back: bool
    diff: str = ""
    message: str = ""
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = None
    log_path: str | None = None
    reproduction: str | None = None  # what became of the reproduction test, in words (None: there was none)
    candidates: list[CandidateOutcome] = field(default_factory=list)  # best of N: one per attempt
    taken_back: list[FileOutcome] = field(default_factory=list)  # a rollback: what became of each file it touched
    left_behind: list[Leftover] = field(default_factory=list)  # a rollback: what else changed in the tree, left there
    tests_failed: list[str] = field(default_factory=list)  # the tests failing at the last test run
    verified: bool = False  # a test that failed before the change passes now
    verification: str = ""  # which test shows it, or why none does
    tool_calls: int = 0  # the calls the model made to look around
