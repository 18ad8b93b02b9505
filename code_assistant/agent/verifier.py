"""Running the tests for a run: the whole suite, and once it is green the reproduction test too (run alone when the
test command can be narrowed to its files)."""
from __future__ import annotations

from collections.abc import Callable

from code_assistant.agent.state import Reproduction
from code_assistant.settings import Settings
from code_assistant.verify.runner import TestResult, TestRunner
from code_assistant.verify.select import narrow


class Verifier:
    def __init__(self, settings: Settings, runner: TestRunner, *, say: Callable[[str], None]) -> None:
        self.settings, self.runner, self.say = settings, runner, say

    def baseline(self) -> TestResult:
        return self.runner.run()

    def test(self, reproduction: Reproduction | None) -> TestResult:
        """The whole suite; once it is green, the reproduction test (if there is one) must pass too."""
        suite = self.runner.run()
        if suite.passed and reproduction is not None and reproduction.reproduced:
            return self._reproduction_after(reproduction, suite)
        return suite

    def run_alone(self, paths: list[str]) -> TestResult:
        """These test files alone when the test command can be narrowed to them, else the suite."""
        command = narrow(self.settings.test_command, paths)
        return (self.runner.with_command(command) if command else self.runner).run()

    def _reproduction_after(self, reproduction: Reproduction, suite: TestResult) -> TestResult:
        """With the suite green, the reproduction test must pass too (run alone: the suite may not collect it)."""
        alone = self.run_alone(reproduction.paths)
        reproduction.passes_after = alone.passed
        if alone.passed:
            return suite
        self.say(f"[The reproduction test still fails: {alone.summary()}]")
        return alone
