"""Recording a run: the one writer of its steps. A step begins with a request (or best of N's chosen candidate),
takes the answers, tool calls and usage as they come, and is appended to the trajectory once its tests ran (or,
untested, before the next begins); then the final record, and the RunResult with the run's usage and cost."""
from __future__ import annotations

import json
from collections.abc import Callable

from code_assistant.agent.kit import Budget
from code_assistant.agent.state import Applied, Reproduction, RunResult
from code_assistant.agent.stop import Stop
from code_assistant.edit.leftovers import Leftover
from code_assistant.edit.takeback import FileOutcome
from code_assistant.model.chat import ChatModel, ChatResponse, Usage
from code_assistant.model.trajectory import Step, StepKind, Trajectory
from code_assistant.tools.box import Made, Toolbox
from code_assistant.verify.runner import TestResult


class Recorder:
    """`usage`: what the run reports (best of N: every attempt's model; an attempt: its own); `candidate`: which
    attempt this run is (None: the run in the repository)."""

    def __init__(self, model: ChatModel, *, usage: Callable[[], Usage], budget: Budget,
                 trajectory: Trajectory | None = None, sandbox: dict[str, object] | None = None,
                 tools: Toolbox | None = None, candidate: int | None = None) -> None:
        """`budget`: where the model's price is looked up; sandbox: what the test command runs in (Sandbox.record()),
        for the final record; tools: the model's, whose calls the result counts."""
        self.model_name, self.budget = model.name, budget
        self.usage, self.trajectory, self.sandbox, self.tools = usage, trajectory, sandbox, tools
        self.candidate = candidate
        self.step = Step(kind=StepKind.PLAN, step=0, model=model.name)  # the step being built
        self.written = False  # the step is in the run log already
        self.tests_failed: list[str] = []  # at the last test run

    # ----- the step being built ---------------------------------------------------------------------------------
    def begin(self, kind: StepKind, iteration: int, prompt_version: str | None = None,
              candidate: int | None = None) -> None:
        """A new step (the one before written first if it holds answers not written yet)."""
        self.flush()
        self.step = Step(kind=kind, step=iteration, model=self.model_name, prompt_version=prompt_version,
                         candidate=self.candidate if candidate is None else candidate)
        self.written = False

    def answered(self, text: str, response: ChatResponse, *, final: bool = True) -> None:
        """One answer of the step: `text` as the run log keeps it (an answer that asked for native calls, in the
        written form, which --replay reads back); `final`: the answer read as the plan, not one that asked for
        calls."""
        step = self.step
        step.answers.append(text)
        step.reasoning.append(response.reasoning)
        step.wires.append(response.wire)
        if final:
            step.answer = text

    def called(self, made: list[Made]) -> None:
        self.step.tool_calls += [{"name": m.name, "arguments": json.dumps(m.arguments), "summary": m.result.summary,
                                  "result": m.result.text} for m in made]

    def read_as(self, answer_format: str) -> None:
        self.step.answer_format = answer_format

    def used(self, used: Usage, seconds: float) -> None:
        """The step's model usage and time."""
        step = self.step
        step.prompt_tokens, step.completion_tokens = used.prompt_tokens, used.completion_tokens
        step.reasoning_tokens, step.cached_tokens = used.reasoning_tokens, used.cached_tokens
        step.duration_s = round(seconds, 3)
        step.cost_usd = self.budget.cost(used, self.model_name)

    # ----- into the run log ---------------------------------------------------------------------------------------
    def record(self, applied: Applied, result: TestResult | None, iteration: int) -> None:
        """The current step, complete with its edits and its test run (None: the tests were not run), into the run
        log."""
        step = self.step
        step.step = iteration
        step.files = list(dict.fromkeys(r.file_path for r in applied.results if r.ok))
        step.patch_lines = applied.patch_lines
        step.edits_failed = sum(1 for r in applied.results if not r.ok) + len(applied.refused)
        if result is not None:
            step.test_exit_code = result.exit_code
            step.tests_failed = self.tests_failed = result.failed_ids
            step.tests_passed = result.passed_count
            step.timed_out = result.timed_out
            step.duration_s = round(step.duration_s + result.duration_s, 3)
        self.written = True
        if self.trajectory:
            self.trajectory.append(step)

    def baseline(self, result: TestResult) -> None:
        """The baseline run, output and all, into the run log: written when the run stops there."""
        if self.trajectory:
            self.trajectory.append(Step(kind=StepKind.BASELINE, step=0, model=self.model_name,
                                        candidate=self.candidate, test_exit_code=result.exit_code,
                                        tests_failed=result.failed_ids, tests_passed=result.passed_count,
                                        timed_out=result.timed_out, duration_s=round(result.duration_s, 3),
                                        test_output=result.output))

    def flush(self) -> None:
        """The current step into the run log if it holds answers not written yet (an answer whose edits were never
        tested: a reproduction not kept, a read, a syntax repair, the last answer of a run that stopped): every
        answer is recorded, in order, with its kind."""
        if self.step.answers and not self.written:
            self.written = True
            if self.trajectory:
                self.trajectory.append(self.step)

    def result(self, *, success: bool, reason: Stop, files: list[str], rolled_back: bool, iterations: int,
               reproduction: Reproduction | None, diff: str = "", message: str = "",
               taken_back: list[FileOutcome] | None = None, verified: bool = False,
               verification: str = "", left_behind: list[Leftover] | None = None, best_iteration: int | None = None,
               best_tests: str = "", best_patch: str | None = None) -> RunResult:
        return RunResult(success=success, stop_reason=reason, iterations=iterations, files_modified=files,
                         rolled_back=rolled_back, diff=diff, message=message, usage=self.usage(), cost_usd=self.cost(),
                         log_path=str(self.trajectory.path) if self.trajectory else None,
                         reproduction=reproduction.summary() if reproduction is not None else None,
                         taken_back=taken_back or [], left_behind=left_behind or [],
                         tests_failed=list(self.tests_failed), verified=verified, verification=verification,
                         tool_calls=self.tools.count if self.tools else 0, best_iteration=best_iteration,
                         best_tests=best_tests, best_patch=best_patch)

    def keep_patch(self, iteration: int, diff: str) -> str | None:
        """A rolled-back iteration's change kept beside the run log as a patch (`git apply` brings it back); None
        without a run log or a change."""
        if not self.trajectory or not diff:
            return None
        path = self.trajectory.path.with_name(f"{self.trajectory.path.stem}.iteration-{iteration}.patch")
        try:
            path.write_text(diff, encoding="utf-8")
        except OSError:
            return None
        return str(path)

    def close(self, outcome: RunResult | None, files: list[str], iteration: int,
              reproduction: Reproduction | None) -> None:
        """The final record (a crash too: `outcome` None), after the last step's answers if they were not written."""
        self.flush()
        if not self.trajectory:
            return
        usage = self.usage()
        final = Step(kind=StepKind.FINAL, step=iteration, model=self.model_name,
                     prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
                     reasoning_tokens=usage.reasoning_tokens, cached_tokens=usage.cached_tokens,
                     cost_usd=self.cost(),
                     files=outcome.files_modified if outcome else files,
                     stop_reason=outcome.stop_reason if outcome else Stop.CRASHED, candidate=self.candidate,
                     reproduction=reproduction.summary() if reproduction is not None else None,
                     sandbox=self.sandbox)
        self.trajectory.append(final)

    def cost(self) -> float | None:
        return self.budget.cost(self.usage(), self.model_name)
