"""Asking the model: one chat call per request, an unusable answer sent back once with the reason, a smaller request
when the server names a smaller window, the files the model asks to read shown, and the run's token and cost budget
checked after every answer."""
from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Sequence

from code_assistant.agent.exchange import exchange
from code_assistant.agent.requests import PlanRequest, ReproduceRequest, Request, Requests
from code_assistant.agent.state import RunState, StopRun
from code_assistant.agent.stop import Stop
from code_assistant.answers.plan import PlanParseError, parse_answer
from code_assistant.answers.reasoning import split_reasoning
from code_assistant.edit.operations import Action, EditOperation, PathError, resolve_repo_path
from code_assistant.model import prompts
from code_assistant.model.chat import ChatModel, ChatResponse, Message, Usage
from code_assistant.model.prices import estimate_cost
from code_assistant.model.trajectory import Step, StepKind
from code_assistant.settings import Settings

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
    attempt's); `stop`: when set, the next ask stops the run as interrupted (best of N's Ctrl-C)."""

    def __init__(self, settings: Settings, model: ChatModel, requests: Requests, state: RunState, *,
                 say: Callable[[str], None], budget: Callable[[], Usage],
                 on_token: Callable[[str], None] | None = None, stop: threading.Event | None = None,
                 flush: Callable[[], None] = lambda: None) -> None:
        """`flush`: writes the step being built to the run log before a new one starts (Recorder.flush)."""
        self.settings, self.model, self.requests, self.state = settings, model, requests, state
        self.say, self.budget, self.on_token, self.stop, self.flush = say, budget, on_token, stop, flush

    def ask(self, request: Request, messages: list[Message] | None = None) -> list[EditOperation]:
        """The model's changes for a request (`messages`: the request already built)."""
        return self._ask(messages if messages is not None else self.requests.build(request),
                         functools.partial(self.requests.build, request), request)

    def ask_reading(self, request: Request, first: list[Message] | None = None) -> list[EditOperation]:
        """ask(); an answer with "read" changes gets the same request again with those files shown first, a note
        saying so (and which could not be shown), and nothing else from it applied — READ_ROUNDS times per request.
        Reads of nothing readable, next to other changes, are dropped and the changes go on. `first`: the request
        already built."""
        shown: list[str] = []
        note = ""
        for round_ in range(READ_ROUNDS + 1):
            rebuild = functools.partial(self._noted, request, list(shown), note)
            ops = self._ask(first if first is not None and round_ == 0 else rebuild(), rebuild, request)
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
            note = prompts.READ.render(
                shown=", ".join(wanted) or "none",
                refused=", ".join(r for r, p in readable.items() if p is None) or "none")
        raise AssertionError("unreachable")

    def check_budget(self) -> None:
        usage = self.budget()
        if self.settings.max_tokens and usage.total_tokens > self.settings.max_tokens:
            raise StopRun(Stop.COST_CAP, f"{usage.total_tokens} tokens used, over --max-tokens "
                                         f"{self.settings.max_tokens}")
        cost = estimate_cost(self.model.name, usage.prompt_tokens, usage.completion_tokens, self.settings.base_url)
        if self.settings.max_cost is not None and cost is not None and cost > self.settings.max_cost:
            raise StopRun(Stop.COST_CAP, f"${cost:.4f} spent, over --max-cost ${self.settings.max_cost}")

    # ----- one request ------------------------------------------------------------------------------------
    def _ask(self, messages: list[Message], rebuild: Callable[[], list[Message]], request: Request
             ) -> list[EditOperation]:
        """One chat call; an unusable answer is sent back once with the parse error."""
        if self.stop is not None and self.stop.is_set():
            raise KeyboardInterrupt
        state = self.state
        self.flush()  # the answers of the step before, untested, are not lost
        state.step = Step(kind=step_kind(request), step=state.iteration, model=self.model.name,
                          prompt_version=request.prompt.version, candidate=state.candidate)
        state.step_written = False
        started = time.perf_counter()
        state.messages = messages
        try:
            for attempt in range(2):
                before = (self.model.usage.prompt_tokens, self.model.usage.completion_tokens)
                response = self._complete(rebuild)
                state.step.prompt_tokens += self.model.usage.prompt_tokens - before[0]
                state.step.completion_tokens += self.model.usage.completion_tokens - before[1]
                state.step.answers.append(response.text)
                state.step.answer = response.text
                state.step.reasoning.append(response.reasoning)
                visible = _visible(response.text)
                state.messages.append({"role": "assistant", "content": visible or REASONING_ONLY})
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
                    unfitted = [*state.messages, {"role": "user", "content": prompts.REASK.render(error=error)}]
                    state.messages = self.requests.fitted(unfitted)
                    rebuild = functools.partial(self.requests.fitted, unfitted)  # the re-ask, fitted again
            raise AssertionError("unreachable")
        finally:
            state.step.duration_s = round(time.perf_counter() - started, 3)
            state.step.cost_usd = estimate_cost(self.model.name, state.step.prompt_tokens,
                                                state.step.completion_tokens, self.settings.base_url)

    def _complete(self, rebuild: Callable[[], list[Message]]) -> ChatResponse:
        """The model's answer to the state's messages (exchange.py); the state keeps the request built again."""
        def rebuilt() -> list[Message]:
            self.state.messages = rebuild()
            return self.state.messages

        return exchange(self.model, self.state.messages, rebuilt, on_token=self.on_token, say=self.say)

    def _noted(self, request: Request, shown: Sequence[str], note: str) -> list[Message]:
        """The request with the read files shown, and the note about them at the end of its last message."""
        messages = self.requests.build(request, shown)
        if not note:
            return messages
        last = messages[-1]
        return self.requests.fitted([*messages[:-1], {**last, "content": f"{last['content']}\n\n{note}"}])

    def _readable(self, path: str) -> str | None:
        """A path the model asked to read, as an indexed file of the repository (never outside it, never a file
        the index leaves out such as key material); None, said once, for anything else."""
        rel = repo_relative(self.settings, path)
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


def repo_relative(settings: Settings, path: str) -> str | None:
    """A model's path as a path inside the repository, or None when it is not one."""
    try:
        return resolve_repo_path(settings.repo, path).relative_to(settings.repo).as_posix()
    except (PathError, ValueError):
        return None
