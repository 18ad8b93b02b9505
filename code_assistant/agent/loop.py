"""The loop: index → baseline → (reproduction test) → plan → apply → test → (fix → apply → test)* → an Ending, made
into the run's outcome in one place (Agent.end: the change kept, or rolled back). Each step is done by one of the
run's parts (parts.py); best_of.py runs several attempts of the same loop."""
from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable

from code_assistant.agent.exchange import context_line
from code_assistant.agent.feedback import edit_feedback, failure_signature
from code_assistant.agent.memory import Memory
from code_assistant.agent.parts import build_parts
from code_assistant.agent.reproduction import reproduce
from code_assistant.agent.requests import FixRequest, FollowUp, PlanRequest
from code_assistant.agent.review import Review
from code_assistant.agent.state import Applied, Ending, Prepared, Reproduction, RunResult, StopRun
from code_assistant.agent.stop import Stop
from code_assistant.agent.waiting import SILENT, Status, counting_files, waiting
from code_assistant.answers.plan import PlanParseError
from code_assistant.edit.editor import ChangedOutsideError, FileEditor
from code_assistant.edit.edits import EditOperation
from code_assistant.edit.leftovers import changed_since
from code_assistant.index.indexer import Indexer, RepoIndex
from code_assistant.model import prompts
from code_assistant.model.chat import ChatModel, ModelError, Usage
from code_assistant.model.trajectory import Trajectory
from code_assistant.settings import Settings
from code_assistant.tools.box import ToolsFor
from code_assistant.verify.passes import seen_passing
from code_assistant.verify.runner import TestResult, TestRunner, TestsNotRunError

logger = logging.getLogger(__name__)


NO_CHANGE = "no change: the model proposed none"


def verification(baseline: TestResult, result: TestResult, reproduction: Reproduction | None,
                 asked: bool | None) -> tuple[bool, str]:
    """Whether a test shows the task done — one that failed before the change is seen passing now, by its id in the
    output (the reproduction test's, or the baseline's failing tests) — and, in words, which one, or why there is
    none. A green exit alone proves nothing: the command may no longer run the test (a rewritten Makefile recipe)."""
    unseen: list[str] = []
    if reproduction is not None and reproduction.reproduced and reproduction.passes_after:
        assert reproduction.failed is not None
        ids = [i for i in reproduction.failed.failed_ids if i.startswith(tuple(reproduction.paths))] \
            or reproduction.failed.failed_ids
        after = reproduction.after.passes if reproduction.after is not None else frozenset()
        unseen = [i for i in ids if not seen_passing(i, after)]
        if ids and not unseen:
            return True, f"{', '.join(reproduction.paths)} failed before, passes now"
        unseen = unseen or [f"the tests of {', '.join(reproduction.paths)}"]
    if baseline.failed_ids:
        names = baseline.failed_ids
        unseen += [i for i in names if not seen_passing(i, result.passes)]
        if not unseen:
            return True, f"{_some(names)} failed before, pass{'es' if len(names) == 1 else ''} now"
    if unseen:
        why = "" if result.passes else " (it names no passing test at all)"
        return False, f"the output does not show {_some(unseen)} passing now{why}"
    if not baseline.passed and result.passed:
        return False, "the test command failed before and passes now, but its output names no test that failed"
    if reproduction is not None and not reproduction.reproduced:
        return False, f"the reproduction test was not kept ({reproduction.note or 'none was written'})"
    if asked is False:
        return False, "--no-reproduce, and the tests passed before the change too"
    return False, "the tests passed before the change too"


def _some(names: list[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def plan_line(ops: list[EditOperation]) -> str:
    """The plan as it was read: its files and its number of edits (the answer itself streams only with -v)."""
    files = list(dict.fromkeys(op.file_path for op in ops))
    if not files:
        return "[Plan: no changes]"
    edits = f"{len(ops)} edit" + ("" if len(ops) == 1 else "s")
    in_files = f"{len(files)} file" + ("" if len(files) == 1 else "s")
    return f"[Plan: {edits} in {in_files}: {', '.join(files)}]"


class Agent:
    """One run on one working tree. The keyword arguments after `pre_write` are what a best-of-N attempt gets from
    the run it belongs to (parts.build_parts)."""

    def __init__(self, settings: Settings, model: ChatModel, indexer: Indexer, runner: TestRunner,
                 editor: FileEditor, *, say: Callable[[str], None] = lambda line: None,
                 trajectory: Trajectory | None = None, review: Review | None = None,
                 on_token: Callable[[str], None] | None = None, status: Status = SILENT,
                 pre_write: Callable[[list[str]], None] | None = None, candidate: int | None = None,
                 budget: Callable[[], Usage] | None = None, cancelled: threading.Event | None = None,
                 index_lock: contextlib.AbstractContextManager[object] | None = None,
                 memory: Memory | None = None, tools: ToolsFor | None = None, around: bool = True) -> None:
        """`tools`: the model's tools over a working tree (None: it answers from the context alone); an attempt's look
        at the index the run started from, the run's at the index brought up to date."""
        self.settings, self.indexer, self.runner = settings, indexer, runner
        self.tools_for = tools
        toolbox = tools(settings.repo, self._current_index if candidate is None else self._started_index) \
            if tools else None
        self.parts = build_parts(settings, model, runner, editor, say=say, trajectory=trajectory, review=review,
                                 on_token=on_token, status=status, pre_write=pre_write, candidate=candidate,
                                 budget=budget, cancelled=cancelled, index_lock=index_lock, memory=memory,
                                 tools=toolbox, around=around)

    def _current_index(self) -> RepoIndex:
        return self.indexer.update(exclude=[self.settings.state_path])[0]

    def _started_index(self) -> RepoIndex:
        assert self.parts.state.repo_index is not None, "the index is read before the model is asked"
        return self.parts.state.repo_index

    # ----- the loop, top to bottom ------------------------------------------------------------------------
    def run(self, task: str) -> RunResult:
        return self.guarded(lambda: self.attempt(task, self.prepare(task)))

    def prepare(self, task: str) -> Prepared:
        p = self.parts
        p.state.started = time.time()
        index = self.index()
        baseline = p.verifier.baseline()
        p.say(f"[Baseline: {baseline.summary()}]")
        if baseline.not_run is not None:  # no model can help: exit 2, the output kept in the run log
            p.recorder.baseline(baseline)
            raise TestsNotRunError(baseline.not_run)
        wanted = self.settings.reproduce if self.settings.reproduce is not None else baseline.passed
        p.state.reproduction = reproduce(p, index, task, baseline) if wanted and not self.settings.dry_run else None
        return Prepared(index, baseline, p.state.reproduction)

    def attempt(self, task: str, prepared: Prepared) -> Ending:
        """Plan and apply, then test and fix until the run ends: green, or a reason to stop."""
        ops = self.plan(task, prepared)
        if self.settings.dry_run:
            return self.dry_run(ops)
        if not ops and prepared.baseline.passed:
            return Ending(Stop.NO_CHANGES, NO_CHANGE)
        applied = self.apply(ops, is_plan=True)
        ending: Ending | None = None
        while ending is None:
            ending, applied = self.iteration(task, prepared, applied)
        return ending

    def iteration(self, task: str, prepared: Prepared, applied: Applied) -> tuple[Ending | None, Applied]:
        """Test what the last answer changed (or say why it is not worth a test), then ask for the next change and
        apply it; an Ending when the run is over."""
        p, state = self.parts, self.parts.state
        state.iteration += 1
        last = state.iteration >= self.settings.max_iterations
        request: FixRequest | FollowUp
        if untested := self.untested(applied):  # nothing to test, or nothing that should be: back at once
            p.say(f"[Not tested (iteration {state.iteration}): {untested}]")
            p.recorder.record(applied, None)
            if last:
                return Ending(Stop.MAX_ITERATIONS, untested), applied
            request = self.retry_request(applied)
        else:
            p.say(f"[Testing (iteration {state.iteration})...]")
            result = p.verifier.test(prepared.reproduction, prepared.baseline)
            p.recorder.record(applied, result)
            if result.passed:
                p.say(f"[Tests passed on iteration {state.iteration}]")
                return self.green(prepared.baseline, result), applied
            p.say("[Tests failed. Analyzing errors...]")
            if last:
                return Ending(Stop.MAX_ITERATIONS, result.summary()), applied
            previous, state.failures = state.failures, failure_signature(result)
            if previous == state.failures and applied.wrote:
                return Ending(Stop.NO_PROGRESS, "the same tests failed the same way after the last fix"), applied
            request = self.fix_request(prepared.index, task, result, applied)
        if state.refused_in_a_row >= 2:
            return Ending(Stop.REFUSED, "two answers in a row were refused: " + "; ".join(applied.refused)), applied
        ops = p.asker.ask_reading(request) if isinstance(request, FixRequest) else p.asker.ask(request)
        if not ops:
            return Ending(Stop.NO_CHANGES, "the model proposed no further changes" if p.editor.modified_files
                          else NO_CHANGE), applied
        if state.answers[-1] in state.answers[:-1]:
            return Ending(Stop.NO_PROGRESS, "the model repeated an earlier answer"), applied
        return None, self.apply(ops, is_plan=False)

    def guarded(self, body: Callable[[], Ending]) -> RunResult:
        """Run body; whatever way it ends becomes an Ending, and the Ending the run's outcome (end). A model, git or
        internal error is raised again once the run is rolled back, for the door to report."""
        result: RunResult | None = None
        error: BaseException | None = None
        try:
            try:
                ending = body()
            except BaseException as exc:  # noqa: BLE001 - every way a run can stop ends it the same way
                ending, error = ending_of(exc)
            result = self.end(ending)
        finally:
            self.parts.recorder.close(result, self.parts.editor.modified_files)
        if error is not None:
            raise error
        return result

    def end(self, ending: Ending) -> RunResult:
        """The one place a run's outcome is made: a kept change is finished (its journal kept for undo); any other
        ending takes the run's change back out first; a dry run wrote nothing."""
        editor, recorder = self.parts.editor, self.parts.recorder
        files = editor.modified_files
        if ending.preview is not None:
            return recorder.result(success=ending.kept, reason=ending.reason, files=ending.preview.files,
                                   rolled_back=False, diff=ending.preview.diff(), message=ending.message, iterations=0)
        if ending.kept:
            diff = editor.diff()
            editor.finish()
            return recorder.result(success=True, reason=ending.reason, files=files, rolled_back=False, diff=diff,
                                   message=ending.message, verified=ending.verified,
                                   verification=ending.verification)
        taken_back = editor.rollback()
        logger.info("rolled back %d file(s) after %s", len(taken_back), ending.reason)
        started, s = self.parts.state.started, self.settings
        left = changed_since(s.repo, started, [s.index_path, s.state_path], files) if started is not None else []
        return recorder.result(success=False, reason=ending.reason, files=files, rolled_back=bool(taken_back),
                               message=ending.message, taken_back=taken_back, left_behind=left)

    # ----- the steps the loop names -----------------------------------------------------------------------
    def index(self) -> RepoIndex:
        p = self.parts
        p.say(f"[Indexing repository: {self.settings.repo}]")
        with waiting(p.status, "Indexing") as wait:
            index, stats = self.indexer.update(progress=counting_files(wait), exclude=[self.settings.state_path])
        p.say(f"[Indexed: {stats.files} files, {stats.symbols} symbols]")
        p.state.repo_index = index
        return index

    def plan(self, task: str, prepared: Prepared) -> list[EditOperation]:
        """The first request (with the reproduction test's failing run, when there is one) and the model's plan."""
        p, reproduction = self.parts, prepared.reproduction
        p.state.reproduction, p.state.repo_index = reproduction, prepared.index
        reproduced = reproduction if reproduction and reproduction.reproduced else None
        request = PlanRequest(index=prepared.index, task=task, baseline=prepared.baseline,
                              reproduced=reproduced.failed if reproduced else None,
                              reproduction=reproduced.paths if reproduced else ())
        context = p.conversation.open(request)
        p.say(context_line(context))
        p.say("[Planning changes...]")
        ops = p.asker.ask_reading(request)
        p.say(plan_line(ops))
        return ops

    def apply(self, ops: list[EditOperation], *, is_plan: bool) -> Applied:
        """The answer's edits written, and an edit that broke a file's syntax sent back for repair at once."""
        return self.parts.applier.repair_syntax(self.parts.applier.apply(ops, is_plan=is_plan))

    def untested(self, applied: Applied) -> str | None:
        """Why this answer's edits are not worth a test run (None: run the tests). Not when nothing was asked:
        a failing baseline with no change is tested once (it may pass: flaky tests)."""
        if (applied.results or applied.refused) and not applied.wrote:
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
            return FollowUp(prompts.SYNTAX.render(feedback=feedback), prompts.SYNTAX)
        return FollowUp(prompts.UNAPPLIED.render(feedback=feedback), prompts.UNAPPLIED)

    def green(self, baseline: TestResult, result: TestResult) -> Ending:
        """The tests pass: a success when the run changed something (verified or not), or when a failing baseline
        passes now without a change (said so: the tests may be flaky); no change on a green baseline is no success."""
        if not self.parts.editor.modified_files:
            if baseline.passed:
                return Ending(Stop.NO_CHANGES, NO_CHANGE)
            return Ending(Stop.NO_CHANGES, "the tests pass now without any change: they may be flaky", kept=True,
                          verification="no change was made")
        verified, why = verification(baseline, result, self.parts.state.reproduction, self.settings.reproduce)
        return Ending(Stop.PASSED, kept=True, verified=verified, verification=why)

    def fix_request(self, index: RepoIndex, task: str, result: TestResult, applied: Applied) -> FixRequest:
        """After the conversation so far: the failures, what became of the last edits, the files involved."""
        p = self.parts
        return FixRequest(index=index, task=task, result=result,
                          feedback=edit_feedback(applied.results, applied.refused),
                          modified=p.editor.modified_files, iteration=p.state.iteration)

    def dry_run(self, ops: list[EditOperation]) -> Ending:
        p = self.parts
        preview = p.applier.preview(ops)
        failed = [r.message for r in preview.results if not r.ok]
        for message in failed:
            p.say(f"[Edit would fail: {message.splitlines()[0]}]")
        return Ending(Stop.DRY_RUN, "dry run: nothing was written", kept=not failed, preview=preview)


def ending_of(exc: BaseException) -> tuple[Ending, BaseException | None]:
    """How an exception ends a run, and the error to raise again once it is rolled back (None: none, the Ending
    says it all)."""
    match exc:
        case StopRun():
            return Ending(exc.reason, exc.message), None
        case KeyboardInterrupt():
            return Ending(Stop.INTERRUPTED, "interrupted"), None
        case PlanParseError():
            return Ending(Stop.MODEL_ERROR, str(exc)), None
        case ChangedOutsideError():
            return Ending(Stop.CHANGED_OUTSIDE, str(exc)), None
        case ModelError():
            return Ending(Stop.MODEL_ERROR, str(exc)), exc
        case TestsNotRunError():
            return Ending(Stop.TESTS_NOT_RUN, str(exc)), exc
        case _:
            return Ending(Stop.ERROR, str(exc)), exc
