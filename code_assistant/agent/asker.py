"""Asking the model: one chat call per request, through the run's conversation (conversation.py), an unusable answer
sent back once with the reason, a smaller request when the server names a smaller window, the files the model asks to
read shown, and decide() asked before every call (cancelled?) and after every reply (the budget spent, an answer
unreadable again). What the model said goes to the run's recorder; what it came to comes back as an Answer."""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from code_assistant.agent.conversation import Conversation
from code_assistant.agent.decide import Ending, Facts, Point, decide
from code_assistant.agent.exchange import Round, exchange
from code_assistant.agent.kit import Budget, Tree
from code_assistant.agent.recorder import Recorder
from code_assistant.agent.requests import PLAN_ANSWER, FollowUp, PlanRequest, ReproduceRequest, Request
from code_assistant.agent.state import Answer
from code_assistant.answers.plan import PlanParseError, parse_answer
from code_assistant.answers.reasoning import split_reasoning
from code_assistant.answers.search_replace import SearchWatch, Unmatched
from code_assistant.answers.tool_calls import as_text
from code_assistant.edit.beside import file_text, looks_binary
from code_assistant.edit.edits import Action, EditResult, repo_relative
from code_assistant.edit.journal import read_state
from code_assistant.index.indexer import RepoIndex
from code_assistant.model import prompts
from code_assistant.model.chat import ChatModel, ChatResponse, Usage
from code_assistant.model.records import StopAnswer
from code_assistant.model.trajectory import StepKind
from code_assistant.tools.box import Toolbox
from code_assistant.waiting import SILENT, Status

logger = logging.getLogger(__name__)

READ_ROUNDS = 1  # answers per request that may ask to read files; after that, "read" changes are ignored
# An answer with edits the model sent before in this run, sent again: at temperature 0 the same request gets it every
# time, so it is asked once more (once a run) at this temperature and seed before the run gives up on it
SAMPLE_TEMPERATURE = 0.7  # that re-ask's, and a sampled plan's (FixBy.SAMPLES, its seed the sample's number)
RESAMPLE_SEED = 1
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
    """The model side of a run: each ask comes back as an Answer — the edits, or why the run must stop (the budget
    spent, the run cancelled, an answer unparsable twice). `budget`: --max-tokens and --max-cost; `spent`: the usage
    that counts against them (best of N: every attempt's); `cancelled`: when set, the next ask ends the run as
    interrupted (best of N's Ctrl-C); `iteration`: the run's, for the run log."""

    def __init__(self, model: ChatModel, conversation: Conversation, recorder: Recorder, *, tree: Tree,
                 budget: Budget, spent: Callable[[], Usage], iteration: Callable[[], int],
                 index: Callable[[], RepoIndex | None], say: Callable[[str], None],
                 on_token: Callable[[str], None] | None = None, status: Status = SILENT,
                 cancelled: threading.Event | None = None, tools: Toolbox | None = None,
                 metered: Callable[[ChatModel], None] = lambda model: None, sampling: bool = False) -> None:
        """`index`: the repository's, whose files the model may ask to read; `tools`: what the model may call
        before it answers; `metered`: counts another model's usage into the run's (the one that resamples);
        `sampling`: a plan that cannot be read is followed by a sample of it (FixBy.SAMPLES), not a re-ask."""
        self.model, self.conversation, self.recorder, self.tree = model, conversation, recorder, tree
        self.budget, self.spent, self.iteration, self.index = budget, spent, iteration, index
        self.say, self.on_token, self.cancelled = say, on_token, cancelled
        self.tools, self.status, self.metered, self.sampling = tools, status, metered, sampling
        self._over: Ending | None = None  # the budget spent during the answer's tool calls
        self._earlier: list[str] = []  # the answers of this run so far that held edits
        self._sampler: ChatModel | None = None  # the model that asked again at SAMPLE_TEMPERATURE (once a run)

    def ask(self, request: Request) -> Answer:
        """The model's changes for a request (a new step of the conversation, unless it is the one just opened)."""
        if self.conversation.request is not request:
            self.conversation.open(request)
        return self._ask(request)

    def _owner(self, search: str) -> str | None:
        """The one file shown to the model (the last context of the conversation: a follow-up shows none of its own)
        that holds `search` (its lines, trailing spaces aside): where a SEARCH/REPLACE block that names no file
        belongs. None when no file or several do."""
        index, context = self.index(), self.conversation.last_context
        if index is None or context is None:
            return None
        wanted = "\n" + _lines(search)  # whole lines, from a line's start
        holders = [path for path in context.paths if wanted in "\n" + _lines(index.gate.text(path) or "")]
        return holders[0] if len(holders) == 1 else None

    def ask_reading(self, request: Request) -> Answer:
        """ask(); an answer with "read" changes gets the same request again with those files shown first, a note
        saying so (and which could not be shown), and nothing else from it applied — READ_ROUNDS times per request.
        Reads of nothing readable, next to other changes, are dropped and the changes go on. With tools, a "read"
        change is a call of the read tool, answered like any other."""
        if self.tools is not None and "read" in self.tools.names:
            return self._ask_reading_with_tools(request)
        shown: list[str] = []
        said: tuple[str, ...] = ()
        for round_ in range(READ_ROUNDS + 1):
            answer = self.ask(request)
            said += answer.said
            if answer.stop is not None:
                return replace(answer, said=said)
            reads = [op.file_path for op in answer.ops if op.action == Action.READ]
            edits = [op for op in answer.ops if op.action != Action.READ]
            if not reads:
                return replace(answer, said=said)
            if round_ == READ_ROUNDS:
                self.say(f"[Ignored: the model asked to read {', '.join(reads)} again; going on with its other "
                         f"changes]")
                return Answer(ops=edits, said=said)
            readable = {r: self._readable(r) for r in dict.fromkeys(reads)}
            wanted = [p for p in dict.fromkeys(readable.values()) if p and p not in shown]
            if not wanted and edits:
                return Answer(ops=edits, said=said)
            self.say(f"[The model asks to read {', '.join(wanted)}; asking again with "
                     f"{'it' if len(wanted) == 1 else 'them'} shown]" if wanted else
                     "[Asking again: none of the files the model asked to read can be shown]")
            shown.extend(wanted)
            self.conversation.reopen(shown=shown, note=prompts.READ.render(
                shown=", ".join(wanted) or "none",
                refused=", ".join(r for r, p in readable.items() if p is None) or "none"))
        raise AssertionError("unreachable")

    def _ask_reading_with_tools(self, request: Request) -> Answer:
        answer = self.ask(request)
        said = answer.said
        for _ in range(READ_ROUNDS):
            reads = [op.file_path for op in answer.ops if op.action == Action.READ]
            if answer.stop is not None or not reads or self.tools is None or self.tools.exhausted \
                    or "read" not in self.tools.names:
                break  # (no tools: withdrawn from a window learned too small for them)
            made = [self.tools.call("read", {"path": path}) for path in dict.fromkeys(reads)]
            self.conversation.written_round(None, made)
            self.recorder.called(made)
            answer = self._ask(request)
            said += answer.said
        if answer.stop is not None:
            return replace(answer, said=said)
        reads = [op.file_path for op in answer.ops if op.action == Action.READ]
        if reads:
            self.say(f"[Ignored: the model asked to read {', '.join(reads)} again; going on with its other changes]")
        return Answer(ops=[op for op in answer.ops if op.action != Action.READ], said=said)

    def replied(self, unreadable: str = "", times: int = 0) -> Ending | None:
        """decide() after a reply: the usage so far against the budget; `unreadable`: why the answer could not be
        read (`times`: how many answers to this request could not)."""
        usage = self.spent()
        budget = self.budget
        return decide(Facts(point=Point.REPLIED, tokens=usage.total_tokens, cost=budget.cost(usage, self.model.name),
                            max_tokens=budget.max_tokens, max_cost=budget.max_cost, unreadable=unreadable,
                            unreadable_times=times))

    # ----- one request ------------------------------------------------------------------------------------
    def _ask(self, request: Request) -> Answer:
        """One chat call for the conversation's open step; an unusable answer is sent back once with the parse
        error."""
        cancelled = self.cancelled is not None and self.cancelled.is_set()
        if ending := decide(Facts(point=Point.ASKING, cancelled=cancelled)):
            return Answer(stop=ending.reason, why=ending.message)
        recorder = self.recorder
        recorder.begin(step_kind(request), self.iteration(), request.prompt.version)  # the step before is written
        started = time.perf_counter()
        if self.tools is not None:
            self.tools.new_answer()  # a re-ask of this request shares its calls
        model = self._model_for(request)
        before = replace(model.usage)
        sampled = replace(self._sampler.usage) if self._sampler is not None else Usage()
        said: list[str] = []
        self._over = None
        unreadable = 0
        try:
            while True:
                unmatched: list[Unmatched] = []
                response = exchange(model, self.conversation, tools=self.tools,
                                    on_token=self._watched(request, unmatched), say=self.say, on_round=self._round,
                                    answer=PLAN_ANSWER, status=self.status)
                if self._over is not None:
                    return Answer(said=tuple(said), stop=self._over.reason, why=self._over.message)
                visible = _visible(response.text)
                resample = (not isinstance(request, FollowUp) or request.resample) and model is self.model
                if resample and self._sampler is None and visible in self._earlier:
                    recorder.answered(response.text, response, final=False)
                    response = self._resample()
                    if self._over is not None:
                        return Answer(said=tuple(said), stop=self._over.reason, why=self._over.message)
                    visible = _visible(response.text)
                recorder.answered(response.text, response)
                self.conversation.answer(visible or REASONING_ONLY)
                said.append(visible)
                if ending := self.replied():
                    return Answer(said=tuple(said), stop=ending.reason, why=ending.message)
                if response.stopped and unmatched:
                    self._earlier.append(visible)
                    return Answer(said=tuple(said), unapplied=EditResult.failed(
                        unmatched[0].path, Action.MODIFY, f"{unmatched[0].path}: {unmatched[0].why}"))
                try:
                    plan = parse_answer(response.text, cut_off=response.cut_off, owner=self._owner)
                    recorder.read_as(plan.format)
                    if plan.ops:
                        self._earlier.append(visible)
                    return Answer(ops=plan.ops, said=tuple(said))
                except PlanParseError as exc:
                    error = _why(exc, response, visible)
                    if self.sampling and isinstance(request, PlanRequest):  # the next sample, not a re-ask
                        return Answer(said=tuple(said), why=error)
                    unreadable += 1
                    if ending := self.replied(error, unreadable):
                        return Answer(said=tuple(said), stop=ending.reason, why=ending.message)
                    logger.info("unparsable answer (%s); asking again", error)
                    self.say("[The model's answer could not be read" + (" (it was cut off at the answer limit)"
                             if response.cut_off else "") + "; asking once more]")
                    self.conversation.tell(prompts.REASK.render(error=error))
        finally:
            extra = self._sampler.usage - sampled if self._sampler is not None else Usage()
            recorder.used(model.usage - before + extra, time.perf_counter() - started)

    def _watched(self, request: Request, unmatched: list[Unmatched]) -> Callable[[str], None] | None:
        """The tokens shown as they come — and, for a sampled run's plan asked without tools, read as they come: an
        answer whose SEARCH text matches nowhere in its file is stopped there (StopAnswer; the block put in
        `unmatched`), since that edit cannot apply whatever follows, and the run goes on as it would after the
        whole answer's failed edit. Qwen2.5-Coder-1.5B wrote up to a thousand tokens, 50 s on a CPU, of setup.py
        or a whole index.js that were not the files' lines."""
        if not (self.sampling and self.tools is None and isinstance(request, PlanRequest)):
            return self.on_token
        shown, watch, written = self.on_token, SearchWatch(self._current), []

        def on_token(piece: str) -> None:
            if shown is not None:
                shown(piece)
            written.append(piece)
            if "\n" in piece and not unmatched and (found := watch(_visible("".join(written)))) is not None:
                unmatched.append(found)  # once: what the display held back comes after the stream is closed
                raise StopAnswer(str(found))
        return on_token

    def _current(self, path: str) -> str | None:
        """A file of the repository's index as the edit will find it on disk (None: not such a file, or unreadable):
        what a streamed SEARCH text is held against."""
        rel = repo_relative(self.tree.root, path)
        index = self.index()
        if rel is None or index is None or rel not in index.files:
            return None
        data = read_state(self.tree.root / rel)
        return file_text(data)[0] if data is not None and not looks_binary(data) else None

    def _model_for(self, request: Request) -> ChatModel:
        """The run's model, or for a sampled plan a copy at SAMPLE_TEMPERATURE with the sample's seed, its usage
        counted into the run's."""
        if not isinstance(request, PlanRequest) or not request.sample:
            return self.model
        sampler = self.model.with_(temperature=SAMPLE_TEMPERATURE, seed=request.sample)
        self.metered(sampler)
        return sampler

    def _resample(self) -> ChatResponse:
        """The same messages once more at SAMPLE_TEMPERATURE: the answer just received was sent before in this
        run, and at temperature 0 asking again gets it again."""
        self.say(f"[The model sent an earlier answer again; asking once more at temperature {SAMPLE_TEMPERATURE:g}]")
        self._sampler = self.model.with_(temperature=SAMPLE_TEMPERATURE, seed=RESAMPLE_SEED)
        self.metered(self._sampler)
        return exchange(self._sampler, self.conversation, tools=self.tools, on_token=self.on_token, say=self.say,
                        on_round=self._round, answer=PLAN_ANSWER, status=self.status)

    def _round(self, round_: Round) -> bool:
        """An answer that asked for tool calls, into the step being built (in the written form, which --replay reads
        back as the model's text), and the budget checked: every round counts. True: the budget is spent, the
        exchange stops here."""
        text = round_.response.text if not round_.response.tool_calls else as_text(round_.calls)
        self.recorder.answered(text, round_.response, final=False)
        self.recorder.called(round_.made)
        self._over = self.replied()
        return self._over is not None

    def _readable(self, path: str) -> str | None:
        """A path the model asked to read, as an indexed file of the repository (never outside it, never a file
        the index leaves out such as key material); None, said once, for anything else."""
        rel = repo_relative(self.tree.root, path)
        index = self.index()
        if rel is None or index is None or rel not in index.files:
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
    recount = f"; the server counted {response.completion_tokens}" \
        if response.cap and response.completion_tokens not in (0, response.cap) else ""
    limit = f"it was cut off at the limit for an answer ({response.cap or response.completion_tokens} tokens{recount})"
    if error.only_reasoning or (not visible.strip() and response.reasoning):
        return f"{limit} while still reasoning, before any plan; reason briefly, then send the plan"
    return f"{limit}, so it is incomplete; send fewer or shorter changes"


def _lines(text: str) -> str:
    """Text compared line by line, without trailing spaces or the line endings' kind."""
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"
