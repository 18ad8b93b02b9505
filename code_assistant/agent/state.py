"""The values a run's parts hand each other — an answer, what became of its edits, the reproduction test, what
every attempt starts from — the usage it counts, and the result it ends with (the stop rules are in decide.py, the
reasons in stop.py)."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from code_assistant.agent.candidates import CandidateOutcome
from code_assistant.agent.stop import Stop
from code_assistant.model.chat import Usage

if TYPE_CHECKING:
    from code_assistant.edit.edits import EditOperation, EditResult
    from code_assistant.edit.leftovers import Leftover
    from code_assistant.edit.takeback import FileOutcome
    from code_assistant.index.indexer import RepoIndex
    from code_assistant.model.chat import ChatModel
    from code_assistant.verify.runner import TestResult


@dataclass(frozen=True)
class Answer:
    """What one ask of the model came to: its edits, every answer it took (a re-ask's too, for the no-progress rule),
    or why the run must stop instead (`stop`: the budget spent, the run cancelled, an answer unparsable twice);
    `why` without `stop`: why a sample of the plan could not be read (the next sample is asked, not a re-ask);
    `unapplied`: an edit found, as the answer streamed, not to apply (the answer was stopped there): the iteration's
    edits come to that failure, as they would have had the answer come whole."""

    ops: list[EditOperation] = field(default_factory=list)
    said: tuple[str, ...] = ()
    stop: Stop | None = None
    why: str = ""
    unapplied: EditResult | None = None

    @property
    def edits(self) -> bool:
        """The answer held edits, applicable or not."""
        return bool(self.ops) or self.unapplied is not None


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
    """What became of one answer's edits. `guardrails`: each check of the guardrails on the way, in order, True where
    they refused the whole answer (none: it held no edit; two: a syntax repair's too); `quit`: the person stopped the
    run at review; `stopped`: an answer asked for on the way (a syntax repair, an answer asked again) that ends the
    run instead."""

    results: list[EditResult] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    patch_lines: int = 0
    whole_batch_refused: bool = False
    guardrails: tuple[bool, ...] = ()
    quit: bool = False
    stopped: Answer | None = None

    @property
    def wrote(self) -> bool:
        return any(r.ok for r in self.results)


class UsageMeter:
    """The model usage a run counts against --max-tokens and --max-cost and reports: the sum over its models (best
    of N adds each attempt's model to the run's meter) of what each used since it joined (a session's model has
    answered earlier tasks). Thread-safe: attempts run in parallel."""

    def __init__(self, *models: ChatModel) -> None:
        self._models = [(model, replace(model.usage)) for model in models]
        self._lock = threading.Lock()

    def add(self, model: ChatModel) -> None:
        with self._lock:
            self._models.append((model, replace(model.usage)))

    def total(self) -> Usage:
        with self._lock:
            models = list(self._models)
        total = Usage()
        for model, start in models:
            total = total + (model.usage - start)
        return total


@dataclass
class Prepared:
    """What every attempt starts from: the index, the baseline run, and the reproduction test if there is one."""

    index: RepoIndex
    baseline: TestResult
    reproduction: Reproduction | None = None
    stopped: Answer | None = None  # an answer of the reproduction step that ends the run instead


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
    best_iteration: int | None = None  # a run rolled back: its tested iteration closest to green (None: none tested)
    best_tests: str = ""  # how that iteration's tests went ("1 failed (test_total), 5 passed")
    best_patch: str | None = None  # that iteration's change, kept as a patch beside the run log (None: not kept)
