"""Recording a run: each step appended to the trajectory once its tests ran, the final record, and the RunResult
with the run's usage and cost."""
from __future__ import annotations

from collections.abc import Callable

from code_assistant.agent.state import Applied, RunResult, RunState
from code_assistant.agent.stop import Stop
from code_assistant.edit.leftovers import Leftover
from code_assistant.edit.takeback import FileOutcome
from code_assistant.model.chat import Usage
from code_assistant.model.trajectory import Step, StepKind, Trajectory
from code_assistant.settings import Settings
from code_assistant.tools.box import Toolbox
from code_assistant.verify.runner import TestResult


class Recorder:
    """`usage`: what the run reports (best of N: every attempt's model; an attempt: its own)."""

    def __init__(self, settings: Settings, model_name: str, state: RunState, *, usage: Callable[[], Usage],
                 trajectory: Trajectory | None = None, sandbox: dict[str, object] | None = None,
                 tools: Toolbox | None = None) -> None:
        """sandbox: what the test command runs in (Sandbox.record()), for the final record; tools: the model's, whose
        calls the result counts."""
        self.settings, self.model_name, self.state = settings, model_name, state
        self.usage, self.trajectory, self.sandbox, self.tools = usage, trajectory, sandbox, tools

    def record(self, applied: Applied, result: TestResult | None) -> None:
        """The current step, complete with its edits and its test run (None: the tests were not run), into the run
        log."""
        step = self.state.step
        step.step = self.state.iteration
        step.files = list(dict.fromkeys(r.file_path for r in applied.results if r.ok))
        step.patch_lines = applied.patch_lines
        step.edits_failed = sum(1 for r in applied.results if not r.ok) + len(applied.refused)
        if result is not None:
            step.test_exit_code = result.exit_code
            step.tests_failed = self.state.tests_failed = result.failed_ids
            step.tests_passed = result.passed_count
            step.timed_out = result.timed_out
            step.duration_s = round(step.duration_s + result.duration_s, 3)
        self.state.step_written = True
        if self.trajectory:
            self.trajectory.append(step)

    def baseline(self, result: TestResult) -> None:
        """The baseline run, output and all, into the run log: written when the run stops there."""
        if self.trajectory:
            self.trajectory.append(Step(kind=StepKind.BASELINE, step=0, model=self.model_name, candidate=self.state.candidate,
                                        test_exit_code=result.exit_code, tests_failed=result.failed_ids,
                                        tests_passed=result.passed_count, timed_out=result.timed_out,
                                        duration_s=round(result.duration_s, 3), test_output=result.output))

    def result(self, *, success: bool, reason: Stop, files: list[str], rolled_back: bool, diff: str = "",
               message: str = "", iterations: int | None = None,
               taken_back: list[FileOutcome] | None = None, verified: bool = False,
               verification: str = "", left_behind: list[Leftover] | None = None) -> RunResult:
        reproduction = self.state.reproduction
        return RunResult(success=success, stop_reason=reason,
                         iterations=self.state.iteration if iterations is None else iterations, files_modified=files,
                         rolled_back=rolled_back, diff=diff, message=message, usage=self.usage(), cost_usd=self.cost(),
                         log_path=str(self.trajectory.path) if self.trajectory else None,
                         reproduction=reproduction.summary() if reproduction is not None else None,
                         taken_back=taken_back or [], left_behind=left_behind or [],
                         tests_failed=list(self.state.tests_failed),
                         verified=verified, verification=verification,
                         tool_calls=self.tools.count if self.tools else 0)

    def flush(self) -> None:
        """The current step into the run log if it holds answers not written yet (an answer whose edits were never
        tested: a reproduction not kept, a read, a syntax repair, the last answer of a run that stopped): every
        answer is recorded, in order, with its kind."""
        if self.state.step.answers and not self.state.step_written:
            self.state.step_written = True
            if self.trajectory:
                self.trajectory.append(self.state.step)

    def close(self, outcome: RunResult | None, files: list[str]) -> None:
        """The final record (a crash too: `outcome` None), after the last step's answers if they were not written."""
        self.flush()
        if not self.trajectory:
            return
        usage, state, reproduction = self.usage(), self.state, self.state.reproduction
        final = Step(kind=StepKind.FINAL, step=state.iteration, model=self.model_name,
                     prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
                     reasoning_tokens=usage.reasoning_tokens, cost_usd=self.cost(),
                     files=outcome.files_modified if outcome else files,
                     stop_reason=outcome.stop_reason if outcome else Stop.CRASHED, candidate=state.candidate,
                     reproduction=reproduction.summary() if reproduction is not None else None,
                     sandbox=self.sandbox)
        self.trajectory.append(final)

    def cost(self) -> float | None:
        return self.usage().cost(self.model_name, self.settings.base_url)
