"""The steps a run is made of, for the loop in agent.py: index, ask the model (an unusable answer once more),
apply edits through preview, guardrails and review, repair a broken syntax, record each step, finish or roll back."""
from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from code_assistant.edit.editor import FileEditor
from code_assistant.edit.operations import READ, EditOperation, EditResult, PathError, resolve_repo_path
from code_assistant.edit.plan import PlanParseError, parse_plan
from code_assistant.edit.preview import Limits, preview_edits, refusals
from code_assistant.feedback import edit_feedback
from code_assistant.index.indexer import Indexer, RepoIndex
from code_assistant.messages import Requests
from code_assistant.model import prompts
from code_assistant.model.chat import ChatModel, ChatResponse, ContextOverflow, Message, Usage
from code_assistant.model.prices import estimate_cost
from code_assistant.model.trajectory import Step, Trajectory
from code_assistant.settings import Settings
from code_assistant.verify.runner import TestResult, TestRunner

logger = logging.getLogger(__name__)

Say = Callable[[str], None]
Review = Callable[[str], tuple[str, str]]  # diff -> ("y" | "n" | "q", reason)
Build = Callable[[], list[Message]]  # builds a request again, after the server named a smaller window
Showing = Callable[[list[str]], list[Message]]  # builds a request with the files the model asked to read shown first
READ_ROUNDS = 1  # answers per request that may ask to read files; after that, "read" changes are ignored


class Stop:
    PASSED = "passed"
    MAX_ITERATIONS = "max_iterations"
    NO_PROGRESS = "no_progress"
    COST_CAP = "cost_cap"
    NO_CHANGES = "no_changes"
    INTERRUPTED = "interrupted"
    REFUSED = "refused"
    MODEL_ERROR = "model_error"
    DRY_RUN = "dry_run"
    NO_CANDIDATE = "no_candidate_passed"  # best of N: no attempt passed


class StopRun(Exception):
    def __init__(self, reason: str, message: str = "") -> None:
        super().__init__(message or reason)
        self.reason, self.message = reason, message


@dataclass
class Applied:
    results: list[EditResult] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    patch_lines: int = 0
    whole_batch_refused: bool = False

    @property
    def wrote(self) -> bool:
        return any(r.ok for r in self.results)


@dataclass
class RunResult:
    success: bool
    stop_reason: str
    iterations: int
    files_modified: list[str]
    rolled_back: bool
    diff: str = ""
    message: str = ""
    usage: dict[str, int] = field(default_factory=dict)
    cost_usd: float | None = None
    log_path: str | None = None
    reproduction: str | None = None  # what became of the reproduction test, in words (None: there was none)
    candidates: list[dict[str, object]] = field(default_factory=list)  # best of N: one row per attempt


class Steps:
    """What the loop does at each step; the loop itself (and its order) is Agent.run."""

    def __init__(self, settings: Settings, model: ChatModel, indexer: Indexer, runner: TestRunner,
                 editor: FileEditor, *, say: Say = lambda line: None, trajectory: Trajectory | None = None,
                 review: Review | None = None, on_token: Callable[[str], None] | None = None,
                 index_progress: Callable[[int, int], None] | None = None,
                 pre_write: Callable[[list[str]], None] | None = None) -> None:
        self.settings, self.model, self.indexer, self.runner, self.editor = settings, model, indexer, runner, editor
        self.say, self.trajectory, self.review, self.on_token = say, trajectory, review, on_token
        self.index_progress, self.pre_write = index_progress, pre_write
        self.limits = Limits(settings.max_changed_lines, settings.max_plan_lines, settings.max_files,
                             settings.allow_test_edits)
        self.requests = Requests(settings, model.window)
        self.messages: list[Message] = []
        self.answers: list[str] = []
        self.iteration = 0
        self.refused_in_a_row = 0
        self.candidate: int | None = None  # best of N: which attempt this is (None: the run itself)
        self.reproduction: Any = None  # agent.Reproduction, once the run has tried to write one
        self.repo_index: RepoIndex | None = None  # what the model may ask to read
        self.step = Step(kind="plan", step=0, model=model.name)

    # ----- steps ------------------------------------------------------------------------------------------
    def index(self) -> RepoIndex:
        self.say(f"[Indexing repository: {self.settings.repo}]")
        index, stats = self.indexer.update(progress=self.index_progress, exclude=[self.settings.state_path])
        self.say(f"[Indexed: {stats.files} files, {stats.symbols} symbols]")
        self.repo_index = index
        return index

    def ask(self, messages: list[Message], rebuild: Build, prompt_version: str) -> list[EditOperation]:
        """One chat call; an unusable answer is sent back once with the parse error."""
        kind = {prompts.PLAN.version: "plan", prompts.REPRODUCE.version: "reproduce"}.get(prompt_version, "fix")
        if self.step.answers and self.step.test_exit_code is None:  # a syntax repair joins the step it repairs
            kind = self.step.kind
        self.step = Step(kind=kind, step=self.iteration, model=self.model.name, prompt_version=prompt_version,
                         candidate=self.candidate)
        started = time.perf_counter()
        self.messages = messages
        try:
            for attempt in range(2):
                before = (self.model.usage.prompt_tokens, self.model.usage.completion_tokens)
                response = self.complete(rebuild)
                self.step.prompt_tokens += self.model.usage.prompt_tokens - before[0]
                self.step.completion_tokens += self.model.usage.completion_tokens - before[1]
                self.step.answers.append(response.text)
                self.step.answer = response.text
                self.messages.append({"role": "assistant", "content": response.text})
                self.answers.append(response.text)
                self.check_budget()
                try:
                    return parse_plan(response.text)
                except PlanParseError as exc:
                    error = str(exc) if not response.cut_off else (
                        f"it was cut off at the limit for an answer ({response.completion_tokens} tokens), so its "
                        f"JSON is incomplete; send fewer or shorter changes")
                    if attempt == 1:
                        raise PlanParseError(f"the model's answer could not be parsed twice: {error}") from exc
                    logger.warning("unparsable answer (%s); asking again", error)
                    unfitted = [*self.messages, {"role": "user", "content": prompts.REASK.render(error=error)}]
                    self.messages = self.requests.fitted(unfitted)
                    rebuild = functools.partial(self.requests.fitted, unfitted)  # the re-ask, fitted again
            raise AssertionError("unreachable")
        finally:
            self.step.duration_s = round(time.perf_counter() - started, 3)
            self.step.cost_usd = estimate_cost(self.model.name, self.step.prompt_tokens, self.step.completion_tokens,
                                               self.settings.base_url)

    def ask_reading(self, build: Showing, prompt_version: str, first: list[Message] | None = None
                    ) -> list[EditOperation]:
        """ask(); an answer with "read" changes gets the same request again with those files shown first, a note
        saying so (and which could not be shown), and nothing else from it applied — READ_ROUNDS times per request.
        Reads of nothing readable, next to other changes, are dropped and the changes go on. `first`: the request
        already built."""
        shown: list[str] = []
        note = ""
        for round_ in range(READ_ROUNDS + 1):
            rebuild = functools.partial(self._noted, build, list(shown), note)
            messages = first if first is not None and round_ == 0 else rebuild()
            ops = self.ask(messages, rebuild, prompt_version)
            reads = [op.file_path for op in ops if op.action == READ]
            edits = [op for op in ops if op.action != READ]
            if not reads:
                return ops
            if round_ == READ_ROUNDS:
                self.say(f"[Ignored: the model asked to read {', '.join(reads)} again; going on with its other "
                         f"changes]")
                return edits
            readable = {r: self._readable(r) for r in dict.fromkeys(reads)}
            wanted = [p for p in dict.fromkeys(readable.values()) if p and p not in shown]
            if not wanted and edits:
                return edits
            self.say(f"[The model asks to read {', '.join(wanted)}; asking again with "
                     f"{'it' if len(wanted) == 1 else 'them'} shown]" if wanted else
                     "[Asking again: none of the files the model asked to read can be shown]")
            shown.extend(wanted)
            note = prompts.READ.render(
                shown=", ".join(wanted) or "none",
                refused=", ".join(r for r, p in readable.items() if p is None) or "none")
        raise AssertionError("unreachable")

    def _noted(self, build: Showing, shown: list[str], note: str) -> list[Message]:
        """The request with the read files shown, and the note about them at the end of its last message."""
        messages = build(shown)
        if not note:
            return messages
        last = messages[-1]
        return self.requests.fitted([*messages[:-1], {**last, "content": f"{last['content']}\n\n{note}"}])

    def _readable(self, path: str) -> str | None:
        """A path the model asked to read, as an indexed file of the repository (never outside it, never a file
        the index leaves out such as key material); None, said once, for anything else."""
        rel = self._rel(path)
        if rel is None or self.repo_index is None or rel not in self.repo_index.files:
            self.say(f"[Not shown: {path} is not a file of the repository's index]")
            return None
        return rel

    def complete(self, rebuild: Build) -> ChatResponse:
        """The model's answer to self.messages; a server that names a smaller window is asked once more, with the
        request built again to fit it."""
        try:
            return self.model.complete(self.messages, on_token=self.on_token)
        except ContextOverflow:
            self.say(f"[Context window: {self.model.window.tokens} tokens, from the server's refusal; asking again "
                     f"with a smaller request]")
            self.messages = rebuild()
            return self.model.complete(self.messages, on_token=self.on_token)

    def spent(self) -> Usage:
        """What counts against --max-tokens and --max-cost: this run's model usage (best of N: all attempts')."""
        return self.model.usage

    def check_budget(self) -> None:
        usage = self.spent()
        if self.settings.max_tokens and usage.total_tokens > self.settings.max_tokens:
            raise StopRun(Stop.COST_CAP, f"{usage.total_tokens} tokens used, over --max-tokens "
                                         f"{self.settings.max_tokens}")
        cost = estimate_cost(self.model.name, usage.prompt_tokens, usage.completion_tokens, self.settings.base_url)
        if self.settings.max_cost is not None and cost is not None and cost > self.settings.max_cost:
            raise StopRun(Stop.COST_CAP, f"${cost:.4f} spent, over --max-cost ${self.settings.max_cost}")

    def apply(self, ops: list[EditOperation], *, is_plan: bool) -> Applied:
        """Preview, check the guardrails, let the user review, then write ("read" changes are not edits)."""
        ops = [op for op in ops if op.action != READ]
        if not ops:
            return Applied()
        forbidden = [self.settings.index_path, self.settings.state_path]
        preview = preview_edits(self.settings.repo, ops, forbidden)
        batch_reasons, weakened = refusals(preview, self.limits, is_plan=is_plan)
        self.refused_in_a_row = self.refused_in_a_row + 1 if batch_reasons else 0
        if batch_reasons:
            for reason in batch_reasons:
                self.say(f"[Refused: {reason}]")
            return Applied(refused=batch_reasons, whole_batch_refused=True)
        refused = [f"{path}: {why}" for path, why in weakened.items()]
        ops = [op for op in ops if self._rel(op.file_path) not in weakened]
        for reason in refused:
            self.say(f"[Refused: {reason}]")
        if self.pre_write:
            self.pre_write(preview.files)
        if self.review and preview.changes:
            decision, why = self.review(preview.diff())
            if decision == "q":
                raise StopRun(Stop.REFUSED, "the user stopped the run at review")
            if decision != "y":
                reason = f"the user rejected this change at review{': ' + why if why else ''}"
                return Applied(refused=[reason], whole_batch_refused=True)
        if ops:
            self.say(f"[Editing: {', '.join(dict.fromkeys(op.file_path for op in ops))}]")
        results = self.editor.apply_edits(ops)
        for result in results:
            if not result.ok:
                self.say(f"[Edit failed: {result.message.splitlines()[0]}]")
            elif result.syntax_error:
                self.say(f"[Syntax error after edit: {result.file_path}: {result.syntax_error}]")
        return Applied(results, refused, preview.changed_lines)

    def repair_syntax(self, applied: Applied) -> Applied:
        """An edit that broke a file's syntax goes straight back to the model, before the tests run (once)."""
        broken = [r for r in applied.results if r.ok and r.syntax_error]
        if not broken:
            return applied
        self.say(f"[Syntax error in {', '.join(r.file_path for r in broken)}: asking for a fix before testing]")
        request = prompts.SYNTAX.render(feedback=edit_feedback(applied.results, applied.refused))
        history = self.messages
        ops = self.ask(self.requests.follow_up(history, request), lambda: self.requests.follow_up(history, request),
                       prompts.SYNTAX.version)
        repaired = self.apply(ops, is_plan=False)
        return Applied([*applied.results, *repaired.results], [*applied.refused, *repaired.refused],
                       applied.patch_lines + repaired.patch_lines, repaired.whole_batch_refused)

    def _rel(self, path: str) -> str | None:
        try:
            return resolve_repo_path(self.settings.repo, path).relative_to(self.settings.repo).as_posix()
        except (PathError, ValueError):
            return None

    def dry_run(self, ops: list[EditOperation]) -> RunResult:
        preview = preview_edits(self.settings.repo, ops, [self.settings.index_path, self.settings.state_path])
        failed = [r.message for r in preview.results if not r.ok]
        for message in failed:
            self.say(f"[Edit would fail: {message.splitlines()[0]}]")
        return RunResult(not failed, Stop.DRY_RUN, 0, preview.files, False, preview.diff(),
                         "dry run: nothing was written", usage=self._usage(), cost_usd=self._cost())

    def record(self, applied: Applied, result: TestResult) -> None:
        self.step.step = self.iteration
        self.step.files = list(dict.fromkeys(r.file_path for r in applied.results if r.ok))
        self.step.patch_lines = applied.patch_lines
        self.step.edits_failed = sum(1 for r in applied.results if not r.ok) + len(applied.refused)
        self.step.test_exit_code = result.exit_code
        self.step.tests_failed = result.failed_ids
        self.step.tests_passed = result.passed_count
        self.step.timed_out = result.timed_out
        self.step.duration_s = round(self.step.duration_s + result.duration_s, 3)
        if self.trajectory:
            self.trajectory.append(self.step)

    def finish(self, reason: str) -> RunResult:
        diff, files = self.editor.diff(), self.editor.modified_files
        self.editor.finish()
        return RunResult(True, reason, self.iteration, files, False, diff, usage=self._usage(), cost_usd=self._cost(),
                         log_path=self._log_path(), reproduction=self._reproduction())

    def give_up(self, reason: str, message: str) -> RunResult:
        files = self.editor.modified_files
        restored = self.editor.rollback()
        logger.info("rolled back %d file(s) after %s", len(restored), reason)
        return RunResult(False, reason, self.iteration, files, True, "", message, usage=self._usage(),
                         cost_usd=self._cost(), log_path=self._log_path(), reproduction=self._reproduction())

    def close_log(self, outcome: RunResult | None) -> None:
        if not self.trajectory:
            return
        usage = self.model.usage
        final = Step(kind="final", step=self.iteration, model=self.model.name, prompt_tokens=usage.prompt_tokens,
                     completion_tokens=usage.completion_tokens, cost_usd=self._cost(),
                     files=outcome.files_modified if outcome else self.editor.modified_files,
                     stop_reason=outcome.stop_reason if outcome else "crashed", candidate=self.candidate,
                     reproduction=self._reproduction())
        if self.step.answers and self.step.test_exit_code is None:  # an answer whose step never reached a test run
            final.answers = self.step.answers
        self.trajectory.append(final)

    def _usage(self) -> dict[str, int]:
        u = self.model.usage
        counts = {"calls": u.calls, "prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens}
        return {**counts, "estimated": True} if u.estimated else counts

    def _cost(self) -> float | None:
        return estimate_cost(self.model.name, self.model.usage.prompt_tokens, self.model.usage.completion_tokens,
                             self.settings.base_url)

    def _reproduction(self) -> str | None:
        return self.reproduction.summary() if self.reproduction is not None else None

    def _log_path(self) -> str | None:
        return str(self.trajectory.path) if self.trajectory else None

