"""Running the tests for a run: the whole suite, and once it is green the reproduction test too (run alone when the
test command can be narrowed to its files)."""
from __future__ import annotations

from collections.abc import Callable

from code_assistant.agent.state import Reproduction
from code_assistant.edit.preview import Limits
from code_assistant.verify.counting import ticking
from code_assistant.verify.runner import TestResult, TestRunner, fewer_tests
from code_assistant.verify.select import narrow
from code_assistant.waiting import SILENT, Status, waiting


def run_tests(runner: TestRunner, status: Status, what: str) -> TestResult:
    """One run of the test command, waited for in words (`what`) with the tests done so far counted."""
    with waiting(status, what) as wait:
        return runner.run(on_output=ticking(wait.tick))


class Verifier:
    """`limits`: the test command (narrowed to a reproduction test's files) and whether the tests may be edited (then
    fewer tests run is no refusal)."""

    def __init__(self, runner: TestRunner, limits: Limits, *, say: Callable[[str], None],
                 status: Status = SILENT) -> None:
        self.runner, self.limits, self.say, self.status = runner, limits, say, status

    def baseline(self) -> TestResult:
        return run_tests(self.runner, self.status, "Baseline tests")

    def test(self, reproduction: Reproduction | None, baseline: TestResult | None = None) -> TestResult:
        """The whole suite; once it is green, the reproduction test (if there is one) must pass too. Green with
        fewer tests run than the baseline is not green (unless test edits are allowed)."""
        suite = run_tests(self.runner, self.status, "Testing")
        if baseline is not None and not self.limits.allow_test_edits:
            suite = fewer_tests(baseline, suite)
            if suite.lost:
                self.say(f"[The tests pass, but {suite.lost} that ran before the change did not run now "
                         f"({baseline.ran} before, {suite.ran} now)]")
        if suite.passed and reproduction is not None and reproduction.reproduced:
            return self._reproduction_after(reproduction, suite)
        return suite

    def run_alone(self, paths: list[str]) -> TestResult:
        """These test files alone when the test command can be narrowed to them, else the suite."""
        command = narrow(self.limits.test_command, paths)
        return run_tests(self.runner.with_command(command) if command else self.runner, self.status,
                         "Reproduction test")

    def _reproduction_after(self, reproduction: Reproduction, suite: TestResult) -> TestResult:
        """With the suite green, the reproduction test must pass too (run alone: the suite may not collect it)."""
        alone = self.run_alone(reproduction.paths)
        reproduction.passes_after, reproduction.after = alone.passed, alone
        if alone.passed:
            return suite
        self.say(f"[The reproduction test still fails: {alone.summary()}]")
        return alone
