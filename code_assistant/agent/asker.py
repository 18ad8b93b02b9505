"""Asking the model: one chat call per request, through the run's conversation (conversation.py), an unusable answer
sent back once with the reason, a smaller request when the server names a smaller window, the files the model asks to
read shown, and the run's token and cost budget checked after every answer."""
from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
from collections.abc import Callable

from code_assistant.agent.conversation import Conversation
from code_assistant.agent.exchange import Round, exchange
from code_assistant.agent.requests import PLAN_ANSWER, PlanRequest, ReproduceRequest, Request
from code_assistant.agent.state import RunState, StopRun
from code_assistant.agent.stop import Stop
from code_assistant.agent.waiting import SILENT, Status
from code_assistant.answers.plan import PlanParseError, parse_answer
from code_assistant.answers.reasoning import split_reasoning
from code_assistant.answers.tool_calls import as_text
from code_assistant.edit.operations import Action, EditOperation, repo_relative
from code_assistant.model import prompts
from code_assistant.model.chat import ChatModel, ChatResponse, Usage
from code_assistant.model.trajectory import Step, StepKind
from code_assistant.settings import Settings
from code_assistant.tools.box import Made, Toolbox

logger = logging.getLogger(__name__)

READ_ROUNDS = 1  # answers per request that may ask to read files; after that, "read" changes are ignored
REASONING_ONLY = "(reasoning only, no answer)"  # the conversation's record of an answer that was all reasoning


def step_kind(request: Request) -> StepKind:
    """The run log's name for the step a request starts."""
    if isinstance(request, PlanRequest):
        return StepKind.PLAN
    if isinstance(request, ReproduceRequest) or request.prompt in (prompts.REPRODUCE, prompts.REPRODUCE_AGAIN):
        return StepKind.REPRODUCE
    if request.prompt is prompts.SYNTAX:
        return StepKind.SYNTAX
    return StepKind.FIX


class Asker:
    """The model side of a run. `budget`: the usage that counts against --max-tokens and --max-cost (best of N: every
    attempt's); `cancelled`: when set, the next ask ends the run as interrupted (best of N's Ctrl-C)."""

    def __init__(self, settings: Settings, model: ChatModel, conversation: Conversation, state: RunState, *,
                 say: Callable[[str], None], budget: Callable[[], Usage],
                 on_token: Callable[[str], None] | None = None, status: Status = SILENT,
                 cancelled: threading.Event | None = None, flush: Callable[[], None] = lambda: None,
                 tools: Toolbox | None = None) -> None:
        """`flush`: writes the step being built to the run log before a new one starts (Recorder.flush); `tools`:
        what the model may call before it answers."""
        self.settings, self.model, self.conversation, self.state = settings, model, conversation, state
        self.say, self.budget, self.on_token, self.cancelled, self.flush = say, budget, on_token, cancelled, flush
        self.tools, self.status = tools, status

    def ask(self, request: Request) -> list[EditOperation]:
        """The model's changes for a request (a new step of the conversation, unless it is the one just opened)."""
        if self.conversation.request is not request:
            self.conversation.open(request)
        return self._ask(request)

    def ask_reading(self, request: Request) -> list[EditOperation]:
        """ask(); an answer with "read" changes gets the same request again with those files shown first, a note
        saying so (and which could not be shown), and nothing else from it applied — READ_ROUNDS times per request.
        Reads of nothing readable, next to other changes, are dropped and the changes go on. With tools, a "read"
        change is a call of the read tool, answered like any other."""
        if self.tools is not None and "read" in self.tools.names:
            return self._ask_reading_with_tools(request)
        shown: list[str] = []
        for round_ in range(READ_ROUNDS + 1):
            ops = self.ask(request)
            reads = [op.file_path for op in ops if op.action == Action.READ]
            edits = [op for op in ops if op.action != Action.READ]
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
            self.conversation.reopen(shown=shown, note=prompts.READ.render(
                shown=", ".join(wanted) or "none",
                refused=", ".join(r for r, p in readable.items() if p is None) or "none"))
        raise AssertionError("unreachable")

    def _ask_reading_with_tools(self, request: Request) -> list[EditOperation]:
        ops = self.ask(request)
        for _ in range(READ_ROUNDS):
            reads = [op.file_path for op in ops if op.action == Action.READ]
            if not reads or self.tools is None or self.tools.exhausted or "read" not in self.tools.names:
                break  # (no tools: withdrawn from a window learned too small for them)
            made = [self.tools.call("read", {"path": path}) for path in dict.fromkeys(reads)]
            self.conversation.written_round(None, made)
            self.state.step.tool_calls += [_record(m) for m in made]
            ops = self._ask(request)
        reads = [op.file_path for op in ops if op.action == Action.READ]
        if reads:
            self.say(f"[Ignored: the model asked to read {', '.join(reads)} again; going on with its other changes]")
        return [op for op in ops if op.action != Action.READ]

    def check_budget(self) -> None:
        usage = self.budget()
        if self.settings.max_tokens and usage.total_tokens > self.settings.max_tokens:
            raise StopRun(Stop.COST_CAP, f"{usage.total_tokens} tokens used, over --max-tokens "
                                         f"{self.settings.max_tokens}")
        cost = usage.cost(self.model.name, self.settings.base_url)
        if self.settings.max_cost is not None and cost is not None and cost > self.settings.max_cost:
            raise StopRun(Stop.COST_CAP, f"${cost:.4f} spent, over --max-cost ${self.settings.max_cost}")

    # ----- one request ------------------------------------------------------------------------------------
    def _ask(self, request: Request) -> list[EditOperation]:
        """One chat call for the conversation's open step; an unusable answer is sent back once with the parse
        error."""
        if self.cancelled is not None and self.cancelled.is_set():
            raise KeyboardInterrupt
        state = self.state
        self.flush()  # the answers of the step before, untested, are not lost
        state.step = Step(kind=step_kind(request), step=state.iteration, model=self.model.name,
                          prompt_version=request.prompt.version, candidate=state.candidate)
        state.step_written = False
        started = time.perf_counter()
        if self.tools is not None:
            self.tools.new_answer()  # a re-ask of this request shares its calls
        before = dataclasses.replace(self.model.usage)
        try:
            for attempt in range(2):
                response = exchange(self.model, self.conversation, tools=self.tools, on_token=self.on_token,
                                    say=self.say, on_round=self._round, answer=PLAN_ANSWER, status=self.status)
                state.step.answers.append(response.text)
                state.step.answer = response.text
                state.step.reasoning.append(response.reasoning)
                state.step.wires.append(response.wire)
                visible = _visible(response.text)
                self.conversation.answer(visible or REASONING_ONLY)
                state.answers.append(visible)
                self.check_budget()
                try:
                    plan = parse_answer(response.text, cut_off=response.cut_off)
                    state.step.answer_format = plan.format
                    return plan.ops
                except PlanParseError as exc:
                    error = _why(exc, response, visible)
                    if attempt == 1:
                        raise PlanParseError(f"the model's answer could not be parsed twice: {error}") from exc
                    logger.info("unparsable answer (%s); asking again", error)
                    self.say("[The model's answer could not be read" + (" (it was cut off at the answer limit)"
                             if response.cut_off else "") + "; asking once more]")
                    self.conversation.tell(prompts.REASK.render(error=error))
            raise AssertionError("unreachable")
        finally:
            used = self.model.usage - before
            step = state.step
            step.prompt_tokens, step.completion_tokens = used.prompt_tokens, used.completion_tokens
            step.reasoning_tokens = used.reasoning_tokens
            step.duration_s = round(time.perf_counter() - started, 3)
            step.cost_usd = used.cost(self.model.name, self.settings.base_url)

    def _round(self, round_: Round) -> None:
        """An answer that asked for tool calls, into the step being built (in the written form, which --replay reads
        back as the model's text), and the budget checked: every round counts."""
        step = self.state.step
        text = round_.response.text if not round_.response.tool_calls else as_text(round_.calls)
        step.answers.append(text)
        step.reasoning.append(round_.response.reasoning)
        step.wires.append(round_.response.wire)
        step.tool_calls += [_record(made) for made in round_.made]
        self.check_budget()

    def _readable(self, path: str) -> str | None:
        """A path the model asked to read, as an indexed file of the repository (never outside it, never a file
        the index leaves out such as key material); None, said once, for anything else."""
        rel = repo_relative(self.settings.repo, path)
        if rel is None or self.state.repo_index is None or rel not in self.state.repo_index.files:
            self.say(f"[Not shown: {path} is not a file of the repository's index]")
            return None
        return rel


def _visible(text: str) -> str:
    """The answer as the conversation keeps it: without its reasoning blocks (the run log keeps them)."""
    answer = split_reasoning(text).answer
    return text if answer == text.strip() else answer


def _why(error: PlanParseError, response: ChatResponse, visible: str) -> str:
    """What the re-ask tells the model: an answer cut off at max_tokens is said to be cut off, whatever broke."""
    if not response.cut_off:
        return str(error)
    limit = f"it was cut off at the limit for an answer ({response.completion_tokens} tokens)"
    if error.only_reasoning or (not visible.strip() and response.reasoning):
        return f"{limit} while still reasoning, before any plan; reason briefly, then send the plan"
    return f"{limit}, so it is incomplete; send fewer or shorter changes"


def _record(made: Made) -> dict[str, object]:
    return {"name": made.name, "arguments": json.dumps(made.arguments), "summary": made.result.summary,
            "result": made.result.text}
