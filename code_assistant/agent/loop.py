"""The loop: index → baseline → (reproduction test) → plan → apply → test → (fix → apply → test)* → finish or roll
back. Each step is done by one of the run's parts (parts.py); best_of.py runs several attempts of the same loop."""
from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable

from code_assistant.agent.feedback import edit_feedback, failure_signature
from code_assistant.agent.memory import Memory
from code_assistant.agent.parts import build_parts
from code_assistant.agent.reproduction import reproduce
from code_assistant.agent.requests import FixRequest, FollowUp, PlanRequest
from code_assistant.agent.review import Review
from code_assistant.agent.state import Applied, Prepared, Reproduction, RunResult, StopRun
from code_assistant.agent.stop import Stop
from code_assistant.answers.plan import PlanParseError
from code_assistant.edit.editor import ChangedOutsideError, FileEditor
from code_assistant.edit.operations import EditOperation
from code_assistant.index.indexer import Indexer, RepoIndex
from code_assistant.model import prompts
from code_assistant.model.chat import ChatModel, ModelError, Usage
from code_assistant.model.trajectory import Trajectory
from code_assistant.settings import Settings
from code_assistant.verify.runner import TestResult, TestRunner, TestsNotRunError

logger = logging.getLogger(__name__)


NO_CHANGE = "no change: the model proposed none"


def verification(baseline: TestResult, result: TestResult, reproduction: Reproduction | None,
                 asked: bool | None) -> tuple[bool, str]:
    """Whether a test shows the task done — one that failed before the change and passes now (the reproduction
    test, or the baseline's failing tests) — and, in words, which one, or why there is none."""
    if reproduction is not None and reproduction.reproduced and reproduction.passes_after:
        return True, f"{', '.join(reproduction.paths)} failed before, passes now"
    if baseline.failed_ids:
        names = baseline.failed_ids
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        return True, f"{shown} failed before, pass{'es' if len(names) == 1 else ''} now"
    if not baseline.passed and result.passed:
        return True, "the test command failed before, passes now"
    if reproduction is not None and not reproduction.reproduced:
        return False, f"the reproduction test was not kept ({reproduction.note or 'none was written'})"
    if asked is False:
        return False, "--no-reproduce, and the tests passed before the change too"
    return False, "the tests passed before the change too"


class Agent:
    """One run on one working tree. The keyword arguments after `pre_write` are what a best-of-N attempt gets from
    the run it belongs to (parts.build_parts)."""

    def __init__(self, settings: Settings, model: ChatModel, indexer: Indexer, runner: TestRunner,
                 editor: FileEditor, *, say: Callable[[str], None] = lambda line: None,
                 trajectory: Trajectory | None = None, review: Review | None = None,
                 on_token: Callable[[str], None] | None = None,
                 index_progress: Callable[[int, int], None] | None = None,
                 pre_write: Callable[[list[str]], None] | None = None, candidate: int | None = None,
                 budget: Callable[[], Usage] | None = None, stop: threading.Event | None = None,
                 index_lock: contextlib.AbstractContextManager[object] | None = None,
                 memory: Memory | None = None) -> None:
        self.settings, self.indexer, self.runner, self.index_progress = settings, indexer, runner, index_progress
        self.parts = build_parts(settings, model, runner, editor, say=say, trajectory=trajectory, review=review,
                                 on_token=on_token, pre_write=pre_write, candidate=candidate, budget=budget,
                                 stop=stop, index_lock=index_lock, memory=memory)

    # ----- the loop, top to bottom ------------------------------------------------------------------------
    def run(self, task: str) -> RunResult:
        return self.guarded(lambda: self.attempt(task, self.prepare(task)))

    def prepare(self, task: str) -> Prepared:
        p = self.parts
        index = self.index()
        baseline = p.verifier.baseline()
        p.say(f"[Baseline: {baseline.summary()}]")
        if baseline.not_run is not None:  # no model can help: exit 2, the output kept in the run log
            p.recorder.baseline(baseline)
            raise TestsNotRunError(baseline.not_run)
        wanted = self.settings.reproduce if self.settings.reproduce is not None else baseline.passed
        p.state.reproduction = reproduce(p, index, task, baseline) if wanted and not self.settings.dry_run else None
        return Prepared(index, baseline, p.state.reproduction)

    def attempt(self, task: str, prepared: Prepared) -> RunResult:
        p, state, settings = self.parts, self.parts.state, self.settings
        index, baseline, reproduction = prepared.index, prepared.baseline, prepared.reproduction
        state.reproduction, state.repo_index = reproduction, index
        reproduced = reproduction if reproduction and reproduction.reproduced else None
        plan = PlanRequest(index=index, task=task, baseline=baseline,
                           reproduced=reproduced.failed if reproduced else None,
                           reproduction=reproduced.paths if reproduced else ())
        messages, context = p.requests.plan(index, task, baseline, plan.reproduced, list(plan.reproduction))
        p.say(f"[Context: {len(context.files)} relevant files selected]")
        p.say("[Planning changes...]")
        ops = p.asker.ask_reading(plan, first=messages)
        p.say(f"[Plan: {len({op.file_path for op in ops})} file(s) to change]")
        if settings.dry_run:
            return self.dry_run(ops)
        if not ops and baseline.passed:
            raise StopRun(Stop.NO_CHANGES, NO_CHANGE)
        applied = p.applier.repair_syntax(p.applier.apply(ops, is_plan=True))
        previous: frozenset[tuple[str, str]] | None = None
        for state.iteration in range(1, settings.max_iterations + 1):
            untested = self.untested(applied)
            if untested:  # nothing to test, or nothing that should be: the answer goes back at once
                p.say(f"[Not tested (iteration {state.iteration}): {untested}]")
                p.recorder.record(applied, None)
                if state.iteration == settings.max_iterations:
                    raise StopRun(Stop.MAX_ITERATIONS, untested)
                request: FixRequest | FollowUp = self.retry_request(applied)
            else:
                p.say(f"[Testing (iteration {state.iteration})...]")
                result = p.verifier.test(reproduction)
                p.recorder.record(applied, result)
                if result.passed:
                    p.say(f"[Tests passed on iteration {state.iteration}]")
                    return self.green(baseline, result)
                p.say("[Tests failed. Analyzing errors...]")
                signature = failure_signature(result)
                if state.iteration == settings.max_iterations:
                    raise StopRun(Stop.MAX_ITERATIONS, result.summary())
                if previous == signature and applied.wrote:
                    raise StopRun(Stop.NO_PROGRESS, "the same tests failed the same way after the last fix")
                previous = signature
                request = self.fix_request(index, task, result, applied)
            if state.refused_in_a_row >= 2:
                raise StopRun(Stop.REFUSED, "two answers in a row were refused: " + "; ".join(applied.refused))
            ops = p.asker.ask_reading(request) if isinstance(request, FixRequest) else p.asker.ask(request)
            if not ops:
                raise StopRun(Stop.NO_CHANGES, "the model proposed no further changes" if p.editor.modified_files
                              else NO_CHANGE)
            if state.answers[-1] in state.answers[:-1]:
                raise StopRun(Stop.NO_PROGRESS, "the model repeated an earlier answer")
            applied = p.applier.repair_syntax(p.applier.apply(ops, is_plan=False))
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
        except ChangedOutsideError as exc:
            outcome = self.give_up(Stop.CHANGED_OUTSIDE, str(exc))
            return outcome
        except BaseException as exc:  # a model, git or internal error: roll back, then let the CLI report it
            reason = (Stop.MODEL_ERROR if isinstance(exc, ModelError) else
                      Stop.TESTS_NOT_RUN if isinstance(exc, TestsNotRunError) else Stop.ERROR)
            outcome = self.give_up(reason, str(exc))
            raise
        finally:
            self.parts.recorder.close(outcome, self.parts.editor.modified_files)

    # ----- the steps the loop names -----------------------------------------------------------------------
    def index(self) -> RepoIndex:
        p = self.parts
        p.say(f"[Indexing repository: {self.settings.repo}]")
        index, stats = self.indexer.update(progress=self.index_progress, exclude=[self.settings.state_path])
        p.say(f"[Indexed: {stats.files} files, {stats.symbols} symbols]")
        p.state.repo_index = index
        return index

    def untested(self, applied: Applied) -> str | None:
        """Why this answer's edits are not worth a test run (None: run the tests). Not when nothing was asked:
        a failing baseline with no change is tested once (it may pass: flaky tests)."""
        if applied.results or applied.refused:
            if not applied.wrote:
                return "none of the answer's edits could be applied"
        broken = self.parts.editor.broken()
        if broken:
            return "; ".join(f"{path} does not parse ({problem})" for path, problem in broken.items())
        return None

    def retry_request(self, applied: Applied) -> FollowUp:
        """The answer's failures straight back to the model, the tests not run: edits that did not apply, or files
        left unparsable."""
        feedback = edit_feedback(applied.results, applied.refused)
        broken = self.parts.editor.broken()
        if broken:
            feedback += "".join(f"{path} does not parse: {problem}\n" for path, problem in broken.items())
            return FollowUp(self.parts.state.messages, prompts.SYNTAX.render(feedback=feedback), prompts.SYNTAX)
        return FollowUp(self.parts.state.messages, prompts.UNAPPLIED.render(feedback=feedback), prompts.UNAPPLIED)

    def green(self, baseline: TestResult, result: TestResult) -> RunResult:
        """The tests pass: a success when the run changed something (verified or not), or when a failing baseline
        passes now without a change (said so: the tests may be flaky); no change on a green baseline is no success."""
        if not self.parts.editor.modified_files:
            if baseline.passed:
                raise StopRun(Stop.NO_CHANGES, NO_CHANGE)
            return self.finish(Stop.NO_CHANGES, message="the tests pass now without any change: they may be flaky",
                               verification="no change was made")
        verified, why = verification(baseline, result, self.parts.state.reproduction, self.settings.reproduce)
        return self.finish(Stop.PASSED, verified=verified, verification=why)

    def fix_request(self, index: RepoIndex, task: str, result: TestResult, applied: Applied) -> FixRequest:
        """The conversation so far, the failures, what became of the last edits, the files involved."""
        p = self.parts
        return FixRequest(index=index, task=task, result=result,
                          feedback=edit_feedback(applied.results, applied.refused), history=p.state.messages,
                          modified=p.editor.modified_files, iteration=p.state.iteration)

    def dry_run(self, ops: list[EditOperation]) -> RunResult:
        p = self.parts
        preview = p.applier.preview(ops)
        failed = [r.message for r in preview.results if not r.ok]
        for message in failed:
            p.say(f"[Edit would fail: {message.splitlines()[0]}]")
        return RunResult(success=not failed, stop_reason=Stop.DRY_RUN, iterations=0, files_modified=preview.files,
                         rolled_back=False, diff=preview.diff(), message="dry run: nothing was written",
                         usage=p.meter.total(), cost_usd=p.recorder.cost())

    def finish(self, reason: Stop, *, message: str = "", verified: bool = False, verification: str = "") -> RunResult:
        editor = self.parts.editor
        diff, files = editor.diff(), editor.modified_files
        editor.finish()
        return self.parts.recorder.result(True, reason, files, rolled_back=False, diff=diff, message=message,
                                          verified=verified, verification=verification)

    def give_up(self, reason: Stop, message: str) -> RunResult:
        editor = self.parts.editor
        files = editor.modified_files
        taken_back = editor.rollback()
        logger.info("rolled back %d file(s) after %s", len(taken_back), reason)
        return self.parts.recorder.result(False, reason, files, rolled_back=bool(taken_back), message=message,
                                          taken_back=taken_back)
