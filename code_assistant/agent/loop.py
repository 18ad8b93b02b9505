"""The loop: index → baseline → (reproduction test) → plan → apply → test → (fix → apply → test)* → an Ending, made
into the run's outcome in one place (Run.end: the change kept, or rolled back). The run keeps its own values — the
iteration, the last failures, every answer — and asks decide.py at each point whether to stop; each step is done by
one of its parts (parts.py), built from the kit the workspace gave it. best_of.py runs several attempts of the same
loop."""
from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable

from code_assistant.agent.asker import SAMPLE_TEMPERATURE
from code_assistant.agent.decide import Ending, Facts, Point, decide
from code_assistant.agent.exchange import context_line
from code_assistant.agent.feedback import edit_feedback, failure_signature
from code_assistant.agent.fix_target import FixTarget, copied_example, failing_now
from code_assistant.agent.kit import Kit, LoopConfig
from code_assistant.agent.parts import build_parts
from code_assistant.agent.progress import best, counts, iteration_line
from code_assistant.agent.reproduction import UNREADABLE, reproduce
from code_assistant.agent.requests import FixRequest, FollowUp, PlanRequest, Request
from code_assistant.agent.state import Answer, Applied, Prepared, Reproduction, RunResult
from code_assistant.edit.edits import Action, EditOperation
from code_assistant.edit.leftovers import changed_since
from code_assistant.edit.preview import Preview
from code_assistant.index.indexer import RepoIndex
from code_assistant.languages import is_test_file
from code_assistant.model import prompts
from code_assistant.model.chat import Usage
from code_assistant.verify.outputs import NotRunCause
from code_assistant.verify.runner import TestResult, TestsNotRunError

logger = logging.getLogger(__name__)

SAMPLE_TRIES = 3  # asks of one sampled iteration while the samples repeat an earlier answer or hold no change
SAMPLE_SEEDS = 1000  # the seeds of each attempt of best of N: attempt k samples with seeds k*1000+1, k*1000+2, ...


def plan_line(answer: Answer) -> str:
    """The plan as it was read: its files and its number of edits (the answer itself streams only with -v), or where
    it was stopped as it came."""
    if answer.unapplied is not None:
        return f"[Stopped as it came, its edit cannot apply: {answer.unapplied.message}]"
    ops = answer.ops
    files = list(dict.fromkeys(op.file_path for op in ops))
    if not files:
        return "[Plan: no changes]"
    edits = f"{len(ops)} edit" + ("" if len(ops) == 1 else "s")
    in_files = f"{len(files)} file" + ("" if len(files) == 1 else "s")
    return f"[Plan: {edits} in {in_files}: {', '.join(files)}]"


class Run:
    """One run on one working tree, from its kit. `run_usage` (the whole run's usage, which the budget caps), `cancelled` and
    `index_lock` (the index the attempts share): what a best-of-N attempt gets from the run it belongs to."""

    def __init__(self, kit: Kit, config: LoopConfig, *, run_usage: Callable[[], Usage] | None = None,
                 cancelled: threading.Event | None = None,
                 index_lock: contextlib.AbstractContextManager[object] | None = None) -> None:
        self.kit, self.config = kit, config
        self.iteration = 0
        self.failures: frozenset[tuple[str, str]] | None = None  # how the tests failed at the last test run
        self.answers: list[str] = []  # every answer of the run (a repeated one is no progress)
        self.refused_in_a_row = 0  # answers the guardrails refused whole, one after the other
        self.started: float | None = None  # time.time() before its first test run: what changed in the tree since
        self.index: RepoIndex | None = None  # the repository's index: what the model may ask to read
        self.reproduction: Reproduction | None = None
        self.target, self.task = FixTarget(allowed=config.limits.allow_test_edits), ""  # where a fix goes, what for
        self.baseline: TestResult | None = None
        self.tested: list[tuple[int, TestResult]] = []  # every test run of an iteration, with its iteration
        self.changes: dict[int, str] = {}  # each tested iteration's change, as a diff (a rollback keeps the best's)
        self.samples = 0  # the plan's samples asked so far (FixBy.SAMPLES)
        attempt = kit.candidate is not None  # an attempt's tools look at the index the run started from
        self.parts = build_parts(kit, config, ask=self.ask, iteration=lambda: self.iteration, index=lambda: self.index,
                                 tools_index=self._started_index if attempt else kit.current_index, run_usage=run_usage,
                                 cancelled=cancelled, index_lock=index_lock)

    def _started_index(self) -> RepoIndex:
        assert self.index is not None, "the index is read before the model is asked"
        return self.index

    @property
    def say(self) -> Callable[[str], None]:
        return self.kit.display.say

    # ----- the loop, top to bottom ------------------------------------------------------------------------
    def run(self, task: str) -> RunResult:
        return self.finish(lambda: self.attempt(task, self.prepare(task)))

    def prepare(self, task: str) -> Prepared:
        """The index, the baseline, and the reproduction test when one is wanted: what every attempt starts from."""
        p = self.parts
        self.started = time.time()
        self.index = index = self.kit.index()
        baseline = p.verifier.baseline()
        first = no_tests_found(baseline) and not any(is_test_file(path) for path in index.files)  # none yet
        if first and self.config.reproduce is not False:  # the reproduction step writes the first
            self.say(f"[Baseline: no tests yet ({baseline.not_run.line if baseline.not_run else baseline.summary()}): "
                     f"the first one is written before the fix]")
        else:
            self.say(f"[Baseline: {baseline.summary()}]")
            if baseline.not_run is not None:  # no model can help: exit 2, the output kept in the run log
                p.recorder.baseline(baseline)
                raise TestsNotRunError(baseline.not_run)
        wanted = first or (self.config.reproduce if self.config.reproduce is not None else baseline.passed)
        if self.config.reproduce is False or not wanted or self.config.dry_run:
            return Prepared(index=index, baseline=baseline)
        got = reproduce(p, self.kit.editor, ask=self.ask, say=self.say, index=index, task=task, baseline=baseline,
                        first=first)
        if isinstance(got, Answer):
            return Prepared(index=index, baseline=baseline, stopped=got)
        self.reproduction = got
        return Prepared(index=index, baseline=baseline, reproduction=got)

    def attempt(self, task: str, prepared: Prepared) -> Ending:
        """Plan and apply, then test and fix until decide() says the run is over: green, or a reason to stop."""
        self.index, self.reproduction = prepared.index, prepared.reproduction
        self.task, self.baseline = task, prepared.baseline
        editor, config = self.kit.editor, self.config
        sampling = config.sampling
        answer = prepared.stopped or self.plan(task, prepared)
        preview = self.preview(answer.ops) if config.dry_run and answer.stop is None else None
        if ending := decide(Facts(point=Point.PLANNED, answer=answer, baseline=prepared.baseline, preview=preview)):
            return ending
        applied = self.apply(answer, is_plan=True)
        while not (ending := decide(Facts(point=Point.APPLIED, applied=applied))):
            self.iteration += 1
            result, untested = self.test(applied, prepared)
            failures = failure_signature(result) if result is not None and not result.passed else None
            if ending := decide(Facts(
                    point=Point.TESTED, applied=applied, baseline=prepared.baseline, result=result, untested=untested,
                    iteration=self.iteration, max_iterations=config.max_iterations,
                    changed=bool(editor.modified_files), same_failures=failures is not None and failures == self.failures,
                    refused_in_a_row=self.refused_in_a_row, reproduction=prepared.reproduction,
                    reproduce=config.reproduce, sampling=sampling)):
                return ending
            self.failures = failures if failures is not None else self.failures
            answer = self.sample(task, prepared) if sampling else \
                self.ask(self.next_request(task, prepared, applied, result))
            if ending := decide(Facts(point=Point.ANSWERED, answer=answer, changed=bool(editor.modified_files),
                                      repeated=self.repeated(), sampling=sampling)):
                return ending
            applied = self.apply(answer, is_plan=sampling)
        return ending

    def finish(self, body: Callable[[], Ending]) -> RunResult:
        """Run body; its Ending, or the failure from outside that stopped it, becomes the run's outcome (end). A
        model, git or internal error is raised again once the run is rolled back, for the door to report."""
        result: RunResult | None = None
        error: BaseException | None = None
        try:
            try:
                ending = body()
            except BaseException as exc:  # noqa: BLE001 - every way a run can stop ends it the same way
                failed = decide(Facts(point=Point.FAILED, failure=exc))
                assert failed is not None, "a failure always ends the run"
                ending, error = failed, failed.raised
            result = self.end(ending)
        finally:
            self.parts.recorder.close(result, self.kit.editor.modified_files, self.iteration, self.reproduction)
        if error is not None:
            raise error
        return result

    def end(self, ending: Ending) -> RunResult:
        """The one place a run's outcome is made: a kept change is finished (its journal kept for undo); any other
        ending takes the run's change back out first; a dry run wrote nothing."""
        editor, recorder, tree = self.kit.editor, self.parts.recorder, self.kit.tree
        files = editor.modified_files
        said = {"reason": ending.reason, "message": ending.message, "reproduction": self.reproduction}
        if ending.preview is not None:
            return recorder.result(success=ending.kept, files=ending.preview.files, rolled_back=False,
                                   diff=ending.preview.diff(), iterations=0, **said)
        if ending.kept:
            diff = editor.diff()
            editor.finish()
            return recorder.result(success=True, files=files, rolled_back=False, diff=diff, iterations=self.iteration,
                                   verified=ending.verified, verification=ending.verification, **said)
        taken_back = editor.rollback()
        logger.info("rolled back %d file(s) after %s", len(taken_back), ending.reason)
        left = changed_since(tree.root, self.started, tree.kept_out, files) if self.started is not None else []
        closest = best(self.tested)
        patch = recorder.keep_patch(closest[0], self.changes.get(closest[0], "")) if closest else None
        return recorder.result(success=False, files=files, rolled_back=bool(taken_back), iterations=self.iteration,
                               taken_back=taken_back, left_behind=left, best_iteration=closest[0] if closest else None,
                               best_tests=counts(closest[1]) if closest else "", best_patch=patch, **said)

    # ----- the steps the loop names -----------------------------------------------------------------------
    def ask(self, request: Request) -> Answer:
        """The model's answer to a request, its every answer counted (a plan, a fix and a reproduction test may ask
        to read files first; a follow-up may not)."""
        asker = self.parts.asker
        answer = asker.ask(request) if isinstance(request, FollowUp) else asker.ask_reading(request)
        self.answers.extend(answer.said)
        return answer

    def plan(self, task: str, prepared: Prepared) -> Answer:
        """The first request (with the reproduction test's failing run, when there is one) and the model's plan."""
        conversation = self.parts.conversation
        request = self.plan_request(task, prepared, after=self._after_reproduction(prepared.reproduction) or "")
        shown = conversation.open(request)
        if request.after:  # the reproduction step's conversation goes on: its prefix is what the server read last
            self.say(context_line(conversation.last_context, "Context, as shown for the test"))
        else:
            self.say(context_line(shown))
        self.say("[Planning changes...]")
        answer = self.ask(request)
        if answer.stop is None and not answer.ops and answer.why:  # FixBy.SAMPLES: an unreadable plan is sampled
            self.say(f"[The plan could not be read: {answer.why}]")
            return self.sample(task, prepared)
        if answer.stop is None:
            self.say(plan_line(answer))
        return answer

    def plan_request(self, task: str, prepared: Prepared, *, after: str = "", sample: int = 0) -> PlanRequest:
        """The plan's request, with the reproduction test's failing run when there is one; `sample`: its seed."""
        reproduced = prepared.reproduction if prepared.reproduction and prepared.reproduction.reproduced else None
        return PlanRequest(index=prepared.index, task=task, baseline=prepared.baseline,
                           reproduced=reproduced.failed if reproduced else None,
                           reproduction=reproduced.paths if reproduced else (), after=after, sample=sample)

    def sample(self, task: str, prepared: Prepared) -> Answer:
        """FixBy.SAMPLES, after a failed iteration: its change taken back (a reproduction test written before it is
        kept) and the first plan asked again, afresh, at a temperature above 0 with the sample's number as seed — the
        same messages, so a server that keeps the last prompt reads none of them again. A sample that repeats an
        earlier answer, holds no change or cannot be read is followed by the next seed, SAMPLE_TRIES asks in all."""
        self.take_back(prepared)
        answer = Answer()
        for _ in range(SAMPLE_TRIES):
            self.samples += 1
            self.say(f"[Sampling the plan again: sample {self.samples}, at temperature {SAMPLE_TEMPERATURE:g}]")
            seed = (self.kit.candidate or 0) * SAMPLE_SEEDS + self.samples  # best of N: an attempt's seeds its own
            answer = self.ask(self.plan_request(task, prepared, sample=seed))
            if answer.stop is not None or (answer.edits and not self.repeated()):
                break
            self.say("[The sample repeats an earlier answer]" if answer.edits else
                     f"[The sample could not be read: {answer.why}]" if answer.why else "[The sample holds no change]")
        if answer.stop is None:
            self.say(plan_line(answer))
        return answer

    def take_back(self, prepared: Prepared) -> None:
        """The run's change taken out of the files, said; a reproduction test the run wrote before the fix is
        written again (through the journal: a rollback or an undo still takes it out)."""
        editor, root = self.kit.editor, self.kit.tree.root
        kept = {path: (root / path).read_text(encoding="utf-8")
                for path in (prepared.reproduction.paths if prepared.reproduction else []) if (root / path).is_file()}
        taken = editor.rollback()
        if kept:
            editor.apply_edits([EditOperation(file_path=path, action=Action.CREATE, content=text, overwrite=True,
                                              description="the reproduction test, kept")
                                for path, text in kept.items()])
        names = [o.path for o in taken if o.path not in kept]
        if names:
            self.say(f"[Taken back: {', '.join(names)}]")

    def repeated(self) -> bool:
        """The model's last answer is one it gave before in this run."""
        return bool(self.answers) and self.answers[-1] in self.answers[:-1]

    def _after_reproduction(self, reproduction: Reproduction | None) -> str | None:
        """The plan's message in the reproduction step's conversation when that step ran in this loop's conversation
        (an attempt of best-of-N starts its own), its answers could be read, and the two fit the window; else None:
        the plan starts afresh. After unreadable answers it does: Qwen2.5-Coder-1.5B, shown its two broken answers,
        sent the plan the same broken answer twice more (node-ms-invalid-numbers)."""
        conversation = self.parts.conversation
        if reproduction is None or conversation.request is None or reproduction.note == UNREADABLE:
            return None
        return conversation.requests.plan_after(conversation.messages, reproduction.paths if reproduction.reproduced
                                                else (), reproduction.failed, reproduction.note)

    def preview(self, ops: list[EditOperation]) -> Preview:
        """A dry run: the plan applied to a scratch copy, what would fail said."""
        preview = self.parts.applier.preview(ops)
        for result in preview.results:
            if not result.ok:
                self.say(f"[Edit would fail: {result.message.splitlines()[0]}]")
        return preview

    def apply(self, answer: Answer, *, is_plan: bool) -> Applied:
        """The answer's edits written, and an edit that broke a file's syntax sent back for repair at once; an
        answer stopped as it came, its edit that could not apply."""
        if answer.unapplied is not None:
            return Applied(results=[answer.unapplied])
        applier, ops = self.parts.applier, answer.ops
        failing = failing_now(self.baseline, [result for _, result in self.tested], self.reproduction)
        if (off_target := copied_example(ops, self.index) or self.target.refusal(ops, failing, self.task,
                                                                                  self.index)) is not None:
            self.say(f"[Refused: {off_target}]")
            applied = Applied(refused=[off_target], whole_batch_refused=True, guardrails=(True,))
        else:
            applied = applier.repair_syntax(applier.apply(ops, is_plan=is_plan))
        for refused in applied.guardrails:
            self.refused_in_a_row = self.refused_in_a_row + 1 if refused else 0
        return applied

    def test(self, applied: Applied, prepared: Prepared) -> tuple[TestResult | None, str | None]:
        """This iteration's change tested — or, when it is not worth a test run, why not (nothing to test, or
        nothing that should be: back to the model at once)."""
        p, n = self.parts, self.iteration
        if untested := self.untested(applied):
            self.say(f"[Not tested (iteration {n}): {untested}]")
            p.recorder.record(applied, None, n)
            return None, untested
        self.say(f"[Testing (iteration {n})...]")
        result = p.verifier.test(prepared.reproduction, prepared.baseline)
        p.recorder.record(applied, result, n)
        before = self.tested[-1][1] if self.tested else prepared.baseline
        self.tested.append((n, result))
        self.changes[n] = self.kit.editor.diff()
        self.say(f"[Tests passed on iteration {n}]" if result.passed else iteration_line(n, result, before))
        return result, None

    def untested(self, applied: Applied) -> str | None:
        """Why this answer's edits are not worth a test run (None: run the tests). Not when nothing was asked:
        a failing baseline with no change is tested once (it may pass: flaky tests)."""
        if applied.refused and not applied.wrote:
            return "nothing of the answer was written: " + "; ".join(applied.refused)
        if applied.results and not applied.wrote:
            return "none of the answer's edits could be applied"
        broken = self.kit.editor.broken()
        if broken:
            return "; ".join(f"{path} does not parse ({problem})" for path, problem in broken.items())
        return None

    def next_request(self, task: str, prepared: Prepared, applied: Applied,
                     result: TestResult | None) -> FixRequest | FollowUp:
        """After the conversation so far: the failures, what became of the last edits, the files involved; or,
        the tests not run, the answer's failures straight back (edits that did not apply, files left unparsable)."""
        feedback = edit_feedback(applied.results, applied.refused)
        if result is not None:
            return FixRequest(index=prepared.index, task=task, result=result, feedback=feedback,
                              modified=self.kit.editor.modified_files, iteration=self.iteration)
        broken = self.kit.editor.broken()
        if broken:
            feedback += "".join(f"{path} does not parse: {problem}\n" for path, problem in broken.items())
            return FollowUp(text=prompts.SYNTAX.render(feedback=feedback), prompt=prompts.SYNTAX)
        return FollowUp(text=prompts.UNAPPLIED.render(feedback=feedback), prompt=prompts.UNAPPLIED)


def no_tests_found(baseline: TestResult) -> bool:
    """The baseline ran no test because there is none (pytest's exit 5), or ran green with none (go test, cargo test,
    node --test on a tree without tests)."""
    if baseline.not_run is not None:
        return baseline.not_run.cause == NotRunCause.NO_TESTS
    return baseline.passed and not baseline.ran

