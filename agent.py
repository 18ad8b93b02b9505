"""The loop: index → baseline → context → plan → apply → test → (fix → apply → test)* → finish or roll back."""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import context_builder
import prompts
from config import Settings
from file_editor import EditOperation, EditResult, FileEditor
from indexer import Indexer, RepoIndex
from llm import ChatModel, Message, ModelError
from plan import PlanParseError, parse_plan
from test_runner import TestResult, TestRunner

logger = logging.getLogger(__name__)

Say = Callable[[str], None]
FIX_OUTPUT_CHARS = 6000


class StopReason:
    PASSED = "passed"
    MAX_ITERATIONS = "max_iterations"
    NO_PROGRESS = "no_progress"
    NO_CHANGES = "no_changes"
    INTERRUPTED = "interrupted"
    REFUSED = "refused"
    MODEL_ERROR = "model_error"


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


class Agent:
    def __init__(self, settings: Settings, model: ChatModel, indexer: Indexer, runner: TestRunner,
                 editor: FileEditor, say: Say = lambda line: None) -> None:
        self.settings = settings
        self.model = model
        self.indexer = indexer
        self.runner = runner
        self.editor = editor
        self.say = say
        self.messages: list[Message] = []
        self.answers: list[str] = []

    # ----- the loop, top to bottom ------------------------------------------------------------------------
    def run(self, task: str) -> RunResult:
        iteration = 0
        try:
            index = self.index()
            baseline = self.runner.run()
            logger.info("baseline: %s", baseline.summary())
            context = context_builder.build_context(index, task, self.settings.context_tokens,
                                                    extra_text=_failure_text(baseline))
            self.say(f"[Context: {len(context.files)} relevant files selected]")
            self.say("[Planning changes...]")
            ops = self.ask(self.plan_messages(task, baseline, context))
            self.say(f"[Plan: {len({op.file_path for op in ops})} file(s) to change]")
            feedback = self.apply(ops)
            for iteration in range(1, self.settings.max_iterations + 1):
                self.say(f"[Testing (iteration {iteration})...]")
                result = self.runner.run()
                if result.passed:
                    self.say(f"[Tests passed on iteration {iteration}]")
                    return self.finish(iteration, StopReason.PASSED if ops else StopReason.NO_CHANGES)
                self.say("[Tests failed. Analyzing errors...]")
                if iteration == self.settings.max_iterations:
                    return self.give_up(iteration, StopReason.MAX_ITERATIONS, result.summary())
                ops = self.ask(self.fix_messages(index, task, iteration, result, feedback))
                if self.answers[-1] in self.answers[:-1]:
                    return self.give_up(iteration, StopReason.NO_PROGRESS, "the model repeated an earlier answer")
                if not ops:
                    return self.give_up(iteration, StopReason.NO_CHANGES, "the model proposed no further changes")
                feedback = self.apply(ops)
            return self.give_up(iteration, StopReason.MAX_ITERATIONS, "")
        except KeyboardInterrupt:
            return self.give_up(iteration, StopReason.INTERRUPTED, "interrupted")
        except (ModelError, PlanParseError) as exc:
            result = self.give_up(iteration, StopReason.MODEL_ERROR, str(exc))
            if isinstance(exc, ModelError):
                raise exc
            return result

    # ----- steps ------------------------------------------------------------------------------------------
    def index(self) -> RepoIndex:
        self.say(f"[Indexing repository: {self.settings.repo}]")
        index, stats = self.indexer.update(exclude=[self.settings.state_path])
        self.say(f"[Indexed: {stats.files} files, {stats.symbols} symbols]")
        return index

    def ask(self, messages: list[Message]) -> list[EditOperation]:
        """One chat call; an unusable answer is sent back once with the parse error."""
        self.messages = messages
        for attempt in range(2):
            started = time.perf_counter()
            response = self.model.complete(self.messages)
            logger.info("model answered in %.1fs (%d+%d tokens)", time.perf_counter() - started,
                        response.prompt_tokens, response.completion_tokens)
            self.messages.append({"role": "assistant", "content": response.text})
            self.answers.append(response.text)
            try:
                return parse_plan(response.text)
            except PlanParseError as exc:
                if attempt == 1:
                    raise PlanParseError(f"the model's answer could not be parsed twice: {exc}") from exc
                logger.warning("unparsable answer (%s); asking again", exc)
                self.messages.append({"role": "user", "content": prompts.REASK.render(error=str(exc))})
        raise AssertionError("unreachable")

    def apply(self, ops: list[EditOperation]) -> list[EditResult]:
        if ops:
            self.say(f"[Editing: {', '.join(dict.fromkeys(op.file_path for op in ops))}]")
        results = self.editor.apply_edits(ops)
        for result in results:
            if not result.ok:
                self.say(f"[Edit refused: {result.file_path}: {result.message.splitlines()[0]}]")
            elif result.syntax_error:
                self.say(f"[Syntax error after edit: {result.file_path}: {result.syntax_error}]")
        return results

    def finish(self, iteration: int, reason: str) -> RunResult:
        diff = self.editor.diff()
        files = self.editor.modified_files
        self.editor.finish()
        return RunResult(True, reason, iteration, files, False, diff, usage=self._usage())

    def give_up(self, iteration: int, reason: str, message: str) -> RunResult:
        files = self.editor.modified_files
        restored = self.editor.rollback()
        logger.info("rolled back %d file(s) after %s", len(restored), reason)
        return RunResult(False, reason, iteration, files, True, "", message, usage=self._usage())

    def _usage(self) -> dict[str, int]:
        usage = self.model.usage
        return {"calls": usage.calls, "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens}

    # ----- prompts ----------------------------------------------------------------------------------------
    def plan_messages(self, task: str, baseline: TestResult, context: context_builder.Context) -> list[Message]:
        failures = _failure_text(baseline)
        user = prompts.PLAN.render(
            task=task, test_command=self.settings.test_command, baseline=baseline.summary(),
            baseline_failures=f"# Failing tests before any change\n{failures}\n\n" if failures else "",
            context=context.render() or "(no files indexed)")
        logger.info("prompts %s + %s", prompts.SYSTEM.version, prompts.PLAN.version)
        return [{"role": "system", "content": prompts.SYSTEM.text}, {"role": "user", "content": user}]

    def fix_messages(self, index: RepoIndex, task: str, iteration: int, result: TestResult,
                     feedback: list[EditResult]) -> list[Message]:
        failure_text = _failure_text(result)
        involved = list(dict.fromkeys([*self.editor.modified_files, *(f.file for f in result.failures if f.file),
                                       *(path for f in result.failures for path, _ in f.frames)]))
        involved = [p for p in involved if p in index.files or (self.settings.repo / p).is_file()]
        context = context_builder.build_context(index, task, self.settings.context_tokens // 2,
                                                extra_text=failure_text, must_include=involved)
        user = prompts.FIX.render(
            iteration=iteration, max_iterations=self.settings.max_iterations, summary=result.summary(),
            failures=failure_text or "(no structured failures; see the output)",
            edit_feedback=_edit_feedback(feedback), files=context.render())
        logger.info("prompt %s", prompts.FIX.version)
        return [*self.messages, {"role": "user", "content": user}]


def _failure_text(result: TestResult) -> str:
    """Failing tests with their messages and frames, then the tail of the raw output."""
    if result.passed:
        return ""
    lines: list[str] = []
    for failure in result.failures[:20]:
        where = f" ({failure.file}:{failure.line})" if failure.file and failure.line else ""
        lines.append(f"- {failure.test_id} [{failure.status}]{where}: {failure.message.strip()[:800]}")
        for path, line in failure.frames[-3:]:
            lines.append(f"    at {path}:{line}")
    output = result.output[-FIX_OUTPUT_CHARS:]
    if result.timed_out:
        lines.append(f"The test command timed out ({result.summary()}).")
    lines.append(f"Test output (tail):\n```\n{output.strip()}\n```")
    return "\n".join(lines)


def _edit_feedback(results: list[EditResult]) -> str:
    failed = [r for r in results if not r.ok]
    broken = [r for r in results if r.ok and r.syntax_error]
    if not failed and not broken:
        return ""
    parts = ["# Problems with your previous edits"]
    for r in failed:
        parts.append(f"- NOT APPLIED: {r.file_path} ({r.action}): {r.message}")
    for r in broken:
        parts.append(f"- APPLIED BUT BROKE THE SYNTAX of {r.file_path}: {r.syntax_error}")
    applied = [r.file_path for r in results if r.ok]
    if applied:
        parts.append(f"Edits to {', '.join(dict.fromkeys(applied))} were applied; do not resend them.")
    return "\n".join(parts) + "\n\n"
