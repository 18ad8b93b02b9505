"""The loop: index → baseline → (reproduction test) → plan → apply → test → (fix → apply → test)* → finish or
roll back. The steps it is made of are in steps.py; best_of.py runs several attempts of the same loop."""
from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass

from code_assistant.edit.operations import READ
from code_assistant.edit.plan import PlanParseError
from code_assistant.feedback import edit_feedback, failure_signature
from code_assistant.index.indexer import RepoIndex
from code_assistant.languages import is_test_file
from code_assistant.model import prompts
from code_assistant.model.chat import Message, ModelError
from code_assistant.retrieve.context import Context
from code_assistant.steps import Applied, RunResult, Showing, Steps, Stop, StopRun
from code_assistant.verify.runner import TestResult
from code_assistant.verify.select import narrow

__all__ = ["Agent", "Applied", "Prepared", "Reproduction", "RunResult", "Stop", "StopRun"]

logger = logging.getLogger(__name__)


@dataclass
class Reproduction:
    """The test written to capture the task: its files and its failing run before any fix (None: not reproduced)."""

    paths: list[str]
    failed: TestResult | None
    passes_after: bool = False
    note: str = ""

    @property
    def reproduced(self) -> bool:
        return bool(self.paths) and self.failed is not None

    def summary(self) -> str:
        if not self.reproduced:
            return f"not reproduced ({self.note})" if self.note else "not reproduced"
        after = "passes after the fix" if self.passes_after else "does not pass yet"
        return f"{', '.join(self.paths)}: failed before the fix, {after}"


@dataclass
class Prepared:
    """What every attempt starts from: the index, the baseline run, and the reproduction test if there is one."""

    index: RepoIndex
    baseline: TestResult
    reproduction: Reproduction | None = None


class Agent(Steps):
    # ----- the loop, top to bottom ------------------------------------------------------------------------
    def run(self, task: str) -> RunResult:
        return self.guarded(lambda: self.attempt(task, self.prepare(task)))

    def prepare(self, task: str) -> Prepared:
        index = self.index()
        baseline = self.runner.run()
        self.say(f"[Baseline: {baseline.summary()}]")
        wanted = self.settings.reproduce if self.settings.reproduce is not None else baseline.passed
        self.reproduction = self.reproduce(index, task, baseline) if wanted and not self.settings.dry_run else None
        return Prepared(index, baseline, self.reproduction)

    def attempt(self, task: str, prepared: Prepared) -> RunResult:
        index, baseline, reproduction = prepared.index, prepared.baseline, prepared.reproduction
        self.reproduction, self.repo_index = reproduction, index
        failed_first = reproduction.failed if reproduction and reproduction.reproduced else None
        repro_paths = reproduction.paths if reproduction and reproduction.reproduced else None

        def plan(asked: list[str] | None = None) -> tuple[list[Message], Context]:
            return self.requests.plan(index, task, baseline, failed_first, repro_paths, asked)
        messages, context = plan()
        self.say(f"[Context: {len(context.files)} relevant files selected]")
        self.say("[Planning changes...]")
        ops = self.ask_reading(lambda asked: plan(asked)[0], prompts.PLAN.version, messages)
        self.say(f"[Plan: {len({op.file_path for op in ops})} file(s) to change]")
        if self.settings.dry_run:
            return self.dry_run(ops)
        applied = self.repair_syntax(self.apply(ops, is_plan=True))
        previous: frozenset[tuple[str, str]] | None = None
        for self.iteration in range(1, self.settings.max_iterations + 1):
            self.say(f"[Testing (iteration {self.iteration})...]")
            result = self.test(reproduction)
            self.record(applied, result)
            if result.passed:
                self.say(f"[Tests passed on iteration {self.iteration}]")
                return self.finish(Stop.PASSED if self.editor.modified_files else Stop.NO_CHANGES)
            self.say("[Tests failed. Analyzing errors...]")
            signature = failure_signature(result)
            if self.iteration == self.settings.max_iterations:
                raise StopRun(Stop.MAX_ITERATIONS, result.summary())
            if self.refused_in_a_row >= 2:
                raise StopRun(Stop.REFUSED, "two answers in a row were refused: " + "; ".join(applied.refused))
            if previous == signature and applied.wrote:
                raise StopRun(Stop.NO_PROGRESS, "the same tests failed the same way after the last fix")
            previous = signature
            ops = self.ask_reading(self.fix_request(index, task, result, applied), prompts.FIX.version)
            if not ops:
                raise StopRun(Stop.NO_CHANGES, "the model proposed no further changes")
            if self.answers[-1] in self.answers[:-1]:
                raise StopRun(Stop.NO_PROGRESS, "the model repeated an earlier answer")
            applied = self.repair_syntax(self.apply(ops, is_plan=False))
        raise StopRun(Stop.MAX_ITERATIONS)

    def guarded(self, body: Callable[[], RunResult]) -> RunResult:
        """Run body; every way it can stop becomes a RunResult, and every way but success rolls back first."""
        outcome: RunResult | None = None
        try:
            outcome = body()
            return outcome
        except StopRun as stop:
            outcome = self.give_up(stop.reason, stop.message)
            return outcome
        except KeyboardInterrupt:
            outcome = self.give_up(Stop.INTERRUPTED, "interrupted")
            return outcome
        except PlanParseError as exc:
            outcome = self.give_up(Stop.MODEL_ERROR, str(exc))
            return outcome
        except BaseException as exc:  # a model, git or internal error: roll back, then let the CLI report it
            outcome = self.give_up(Stop.MODEL_ERROR if isinstance(exc, ModelError) else "error", str(exc))
            raise
        finally:
            self.close_log(outcome)

    # ----- the reproduction test --------------------------------------------------------------------------
    def reproduce(self, index: RepoIndex, task: str, baseline: TestResult) -> Reproduction:
        """Ask for a test that captures the task and run it alone: it must fail now. One that passes at once goes
        back to the model once; if it passes again it is removed and the run goes on without it."""
        self.say("[Reproducing: asking for a test that fails before any fix]")
        paths: list[str] = []
        ops = self.ask_reading(lambda asked: self.requests.reproduce(index, task, baseline, asked),
                               prompts.REPRODUCE.version)
        for attempt in range(2):
            tests = [op for op in ops if is_test_file(op.file_path)]
            for op in ops:
                if op not in tests:
                    self.say(f"[Refused: {op.file_path} is not a test file; the reproduction step writes tests only]")
            applied = self.apply(tests, is_plan=True)
            paths = list(dict.fromkeys([*paths, *(r.file_path for r in applied.results if r.ok)]))
            if not paths:
                break
            alone = self.run_alone(paths)
            self.record(applied, alone)
            if not alone.passed:
                self.say(f"[Reproduced: {', '.join(paths)} fails before any fix ({alone.summary()})]")
                return Reproduction(paths, alone)
            if attempt == 0:
                self.say("[The reproduction test passes on the current code; asking once more]")
                request = prompts.REPRODUCE_AGAIN.render(output=alone.output[-3000:] or alone.summary())
                rebuild = functools.partial(self.requests.follow_up, self.messages, request)
                ops = [op for op in self.ask(rebuild(), rebuild, prompts.REPRODUCE.version)
                       if op.action != READ]  # a follow-up's reads are not answered
        note = "the test passed before any fix" if paths else "no test was written"
        if paths:
            self.editor.rollback()  # nothing else is applied yet: this takes exactly the test back out
        self.say(f"[Not reproduced: {note}; going on without a reproduction test]")
        return Reproduction([], None, note=note)

    def run_alone(self, paths: list[str]) -> TestResult:
        """The reproduction test's files alone when the test command can be narrowed to them, else the suite."""
        command = narrow(self.settings.test_command, paths)
        return (self.runner.with_command(command) if command else self.runner).run()

    def test(self, reproduction: Reproduction | None) -> TestResult:
        """The whole suite; once it is green, the reproduction test (if there is one) must pass too."""
        suite = self.runner.run()
        if suite.passed and reproduction is not None and reproduction.reproduced:
            return self.reproduction_after(reproduction, suite)
        return suite

    def reproduction_after(self, reproduction: Reproduction, suite: TestResult) -> TestResult:
        """With the suite green, the reproduction test must pass too (run alone: the suite may not collect it)."""
        alone = self.run_alone(reproduction.paths)
        reproduction.passes_after = alone.passed
        if alone.passed:
            return suite
        self.say(f"[The reproduction test still fails: {alone.summary()}]")
        return alone

    # ----- requests ---------------------------------------------------------------------------------------
    def fix_request(self, index: RepoIndex, task: str, result: TestResult, applied: Applied) -> Showing:
        """How to build the fix request (the conversation so far, the failures, the files involved, and the files
        the model asked to read)."""
        history = self.messages

        def build(asked: list[str]) -> list[Message]:
            return self.requests.fix(index, task, result, edit_feedback(applied.results, applied.refused), history,
                                     self.editor.modified_files, self.iteration, asked)
        return build

