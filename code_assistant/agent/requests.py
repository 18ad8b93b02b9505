"""What the model is sent — the plan, fix, reproduce, follow-up and question requests — sized to the model's window.

Each request the loop sends is a small typed value (PlanRequest, FixRequest, ReproduceRequest, FollowUp,
QuestionRequest) that `Requests.build` turns into messages after the conversation so far (conversation.py owns it),
and builds again — smaller — when the server names a smaller window, or with the files the model asked to read shown
first.

A request holds the system prompt, the task, and as much of the repository as the window leaves after those and the
answer's reserve (model/window.py): the context's budget shrinks to fit, and so do failing-test output and edit
feedback. A fix request carries the conversation so far; when that no longer fits, its older turns go first and the
longest messages are clipped in the middle (model/fitting.py). A window too small for the system prompt, the task and
a little code is a ContextWindowError that names the setting.
"""
from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from code_assistant.agent import instructions
from code_assistant.agent.feedback import failure_text, shown_output
from code_assistant.agent.instructions import Instructions
from code_assistant.gate import Gate
from code_assistant.index.indexer import RepoIndex
from code_assistant.memory import Memory, notes_text
from code_assistant.model import prompts
from code_assistant.model.chat import Message
from code_assistant.model.fitting import clip_text, fit_history, fit_tool_results, message_tokens
from code_assistant.model.window import ContextWindow, ContextWindowError
from code_assistant.retrieve.context import Context, build_context
from code_assistant.settings import TOOLS_MIN_WINDOW, EditFormat
from code_assistant.tools.box import Toolbox
from code_assistant.tools.fit import TOOLS_SHARE, declared_tokens, fit, paragraph, price
from code_assistant.verify.outputs_common import IMPORT_ERROR_RE
from code_assistant.verify.runner import TestResult

logger = logging.getLogger(__name__)

MIN_CONTEXT_TOKENS = 200  # a context smaller than this shows no useful code
SLACK = 16                # joins between context files, rounding in the context's own arithmetic
FAILURES_SHARE = 4        # failing-test output may take a quarter of a request's room
FEEDBACK_SHARE = 8        # edit feedback an eighth
NOTES_SHARE = 8           # a session's notes of earlier tasks an eighth
PLAN_ANSWER = "the JSON object of changes only"  # what a run's requests end with, once the model knows enough
ASK_ANSWER = "your answer, citing path:line"  # what a question ends with
MANIFESTS = ("pyproject.toml", "setup.py", "setup.cfg", "requirements.txt", "package.json", "go.mod", "Cargo.toml")

def _import_error(result: TestResult) -> bool:
    """A failure to import brings the dependency manifest into the fix request."""
    return any(IMPORT_ERROR_RE.search(f.message) for f in result.failures) or bool(
        IMPORT_ERROR_RE.search(result.output[-4000:]))


def too_small(window: ContextWindow, needed: int, *, tools: bool = False, over: int = 0) -> ContextWindowError:
    """`needed`: counted tokens, the declared tools' schema included; `tools`: the request offers the model tools;
    `over`: the counted tokens it is over its room."""
    offered = ", with the model's tools," if tools else ""
    instead = "; or leave the tools out with --no-tools" if tools else ""
    return ContextWindowError(
        f"the model's context window ({window.describe()}) is too small: the system prompt, the task and a little "
        f"code{offered} need about {round(needed * window.ratio)} tokens plus {window.reserve} for the answer; give "
        f"the model a larger window on its server and set it with --context-window or OPENAI_CONTEXT_WINDOW{instead}",
        over=over)


@dataclass(frozen=True)
class RequestConfig:
    """What building a request reads of the settings: the read gate of the working tree (the owner's instructions
    are read through it), the test command the model is told of, the iterations a fix request counts against,
    --context-tokens, the chunks a query may embed, and whether the owner's instructions are sent."""

    gate: Gate
    test_command: str
    max_iterations: int = 3
    context_tokens: int = 12000
    embed_budget: int = 200
    instructions: bool = True
    first_test: str = ""  # how the repository's framework has its first test written (languages.Framework)
    edit_format: EditFormat = EditFormat.JSON  # how the model is asked to write its edits


@dataclass(frozen=True)
class PlanRequest:
    """The first request: the task, the baseline, the context; with a reproduction test, its failing run."""

    index: RepoIndex
    task: str
    baseline: TestResult
    reproduced: TestResult | None = None
    reproduction: Sequence[str] = ()
    # the plan asked as one more message of the reproduction step's conversation (Requests.plan_after): its text.
    # Answered with files to read, the plan is built afresh with them shown first.
    after: str = ""
    # 0: the plan; n: the same plan asked again at a temperature above 0 with seed n (settings.FixBy.SAMPLES)
    sample: int = 0

    @property
    def prompt(self) -> prompts.Prompt:
        return prompts.PLAN_NEXT if self.after else prompts.PLAN


@dataclass(frozen=True)
class ReproduceRequest:
    """A test that captures the task and fails before any fix; `first`: the repository has no test yet."""

    index: RepoIndex
    task: str
    baseline: TestResult
    first: bool = False
    prompt: ClassVar[prompts.Prompt] = prompts.REPRODUCE


@dataclass(frozen=True)
class FixRequest:
    """After the conversation so far: the failures, what became of the last edits, and the files involved."""

    index: RepoIndex
    task: str
    result: TestResult
    feedback: str
    modified: list[str]
    iteration: int
    prompt: ClassVar[prompts.Prompt] = prompts.FIX


@dataclass(frozen=True)
class FollowUp:
    """After the conversation so far, one more user message (a syntax repair, a reproduction test asked for again);
    the model asking to read files is not answered here."""

    text: str
    prompt: prompts.Prompt = field(default=prompts.SYNTAX)
    resample: bool = True  # an earlier answer sent again is asked once more, sampled (False: the same answer is the
    #                        model's word, as after "the file changed meanwhile": sent again, it ends the run)


@dataclass(frozen=True)
class QuestionRequest:
    """A question about the repository (--ask): the context with numbered lines, for file:line citations."""

    index: RepoIndex
    question: str
    prompt: ClassVar[prompts.Prompt] = prompts.ASK


Request = PlanRequest | ReproduceRequest | FixRequest | FollowUp | QuestionRequest


@dataclass(frozen=True)
class Built:
    """A request's messages, and the context they show (None: a follow-up shows none of its own)."""

    messages: list[Message]
    context: Context | None = None


class Requests:
    """Builds each request from the current state of the window, so a request built again after the server named a
    smaller window comes out smaller. `index_lock`: held while the context is built from the index (best of N's
    attempts share one index)."""

    def __init__(self, config: RequestConfig, window: ContextWindow,
                 index_lock: contextlib.AbstractContextManager[object] | None = None,
                 memory: Memory | None = None, tools: Toolbox | None = None) -> None:
        """`memory`: a session's notes of earlier tasks and the files it pins into every context; `tools`: what the
        model may call before it answers (their schema takes room; the system message says how to call them)."""
        self.config, self.window = config, window
        self.index_lock = index_lock or contextlib.nullcontext()
        self.memory = memory
        self.tools = tools
        self.task = ""  # the task (or question) of the last request that had one: which MCP tools it names

    def room(self) -> int:
        """The counted tokens a request's messages may take: the window's prompt room, less the declared tools'
        schema."""
        return self.window.prompt_room() - self._schema()

    def _schema(self) -> int:
        box = self.tools
        return declared_tokens([t.spec for t in box.tools]) if box is not None and box.declared() else 0

    def _too_small(self, needed: int, over: int) -> ContextWindowError:
        """`needed`: the messages' counted tokens (the declared tools' schema is added), `over` their excess."""
        return too_small(self.window, needed + self._schema(), tools=self._offers_tools, over=over)

    @property
    def _offers_tools(self) -> bool:
        return bool(self.tools and self.tools.tools)

    def tools_text(self, answer: str) -> str:
        """How the model may call its tools, for the system message ("" without tools); `answer`: what it replies
        with when it knows enough."""
        box = self.tools
        if box is None or not box.tools:
            return ""
        return paragraph([t.spec for t in box.tools], box.form, answer, box.max_calls)

    def fit_tools(self, over: int = 0) -> bool:
        """The tools narrowed to what the window holds (tools/fit.py): at most a third of the room, and `over` counted
        tokens fewer than now when a request built with them was that much over its room. True when they changed."""
        box = self.tools
        if box is None or not box.tools:
            return False
        specs = [t.spec for t in box.tools]
        budget = self.window.prompt_room() // TOOLS_SHARE
        if over:
            budget = min(budget, price(specs, box.form, box.max_calls) - over)
        offer = fit(specs, box.form, budget=budget, task=self.task, max_calls=box.max_calls, auto=box.auto,
                    small=self.window.tokens < TOOLS_MIN_WINDOW)
        return box.narrow(offer.names, offer.form, f"the {self.window.tokens}-token context window")

    def instructions(self, budget: int, shown: Sequence[str] = ()) -> Instructions | None:
        """The repository owner's instructions for a request showing `shown`, within `budget` tokens (None: none,
        or --no-instructions)."""
        if not self.config.instructions or budget <= 0:
            return None
        return instructions.find(self.config.gate, budget, shown)

    def system(self, budget: int = 0, shown: Sequence[str] = ()) -> str:
        """The system message: the tool's rules, then the owner's instructions (within `budget` tokens), a session's
        notes of earlier tasks, then how to call the tools. Never dropped nor clipped when a conversation is fitted to
        the window, so every request of a task carries what it holds."""
        found = self.instructions(budget, shown)
        return self.rules().render() + (found.text() if found else "") + self.session_notes() + self.tools_text(
            PLAN_ANSWER)

    def opening(self, budget: int = 0, shown: Sequence[str] = ()) -> list[Message]:
        """What a request for changes starts with: the system message, then — for a model that writes SEARCH/REPLACE
        blocks — one worked exchange (prompts.EXAMPLE_BLOCKS_*), the form shown by use rather than by placeholders
        a small model copies. The same every time: a server that keeps the last prompt reads it once."""
        system: list[Message] = [{"role": "system", "content": self.system(budget, shown)}]
        if self.config.edit_format != EditFormat.BLOCKS:
            return system
        return [*system, *EXAMPLE]

    def rules(self) -> prompts.Prompt:
        """The system message's rules: the answer format's."""
        return prompts.SYSTEM_BLOCKS if self.config.edit_format == EditFormat.BLOCKS else prompts.SYSTEM

    def _split(self, room: int, shell: list[Message], index: RepoIndex) -> tuple[int, int]:
        """The context's budget and the instructions' (at most a tenth of it), out of what the room leaves after
        the request's other parts."""
        whole = self._context_budget(room, shell)
        share = whole // instructions.SHARE if self.config.instructions and self._owner_has_any(index) else 0
        return whole - share, share

    def _owner_has_any(self, index: RepoIndex) -> bool:
        """Whether the repository has instructions for agents at all (else the context keeps their share)."""
        return instructions.exist(self.config.gate, index.files)

    def session_notes(self) -> str:
        """A session's notes of earlier tasks, newest first, within an eighth of the room ("" for none)."""
        notes = notes_text(self.memory.notes, self.room() // NOTES_SHARE) if self.memory else ""
        return "\n" + prompts.SESSION.render(notes=notes) if notes else ""

    def build(self, request: Request, *, history: Sequence[Message] = (), asked: Sequence[str] = (),
              note: str = "") -> Built:
        """The messages of a request after `history` (the conversation so far: a fix and a follow-up carry it, a
        new start does not); `asked`: files the model asked to read, shown first; `note`: said at the end. The tools
        are fitted to the window first, and narrowed further before a request too large with them stops the run."""
        self.task = getattr(request, "task", None) or getattr(request, "question", None) or self.task
        self.fit_tools()
        while True:
            try:
                return self._build(request, history, asked, note)
            except ContextWindowError as exc:
                if not self.fit_tools(over=exc.over):
                    raise

    def _build(self, request: Request, history: Sequence[Message], asked: Sequence[str], note: str) -> Built:
        context: Context | None = None
        match request:
            case PlanRequest() if request.after and not asked:
                messages = self.follow_up(history, request.after)
            case PlanRequest():
                messages, context = self.plan(request, asked)
            case ReproduceRequest():
                messages, context = self.reproduce(request, asked)
            case FixRequest():
                messages, context = self.fix(request, history, asked)
            case FollowUp():
                messages = self.follow_up(history, request.text)
            case QuestionRequest():
                messages, context = self.question(request)
        if note:
            last = messages[-1]
            messages = self.fitted([*messages[:-1], {**last, "content": f"{last['content']}\n\n{note}"}])
        return Built(messages=messages, context=context)

    def plan(self, request: PlanRequest, asked: Sequence[str] = ()) -> tuple[list[Message], Context]:
        """The first request; with a reproduction test, its failing run is shown where the failing tests go. `asked`:
        files the model asked to read, shown first."""
        index, task, baseline = request.index, request.task, request.baseline
        reproduced, reproduction = request.reproduced, list(request.reproduction)
        room = self.room()
        failures = failure_text(baseline)
        shown = clip_text(failures, room // FAILURES_SHARE, "test output") if failures else ""
        before = f"# Failing tests before any change\n{shown}\n\n" if shown else ""
        extra = failures
        if reproduced is not None and reproduction:
            output = failure_text(reproduced) or shown_output(reproduced)
            before += prompts.REPRODUCED.render(paths=", ".join(reproduction),
                                                output=clip_text(output, room // FAILURES_SHARE, "test output"))
            extra = f"{failures}\n{output}"

        def render(context: str, owner: int = 0, shown: Sequence[str] = (), excerpts: str = prompts.EXCERPTS
                   ) -> list[Message]:
            user = prompts.PLAN.render(task=task, test_command=self.config.test_command,
                                       baseline=baseline.summary(), baseline_failures=before, context=context,
                                       excerpts=excerpts)
            return [*self.opening(owner, shown), {"role": "user", "content": user}]

        budget, owner = self._split(room, render(""), index)  # the shell as long as it can be
        pinned = self.memory.shown() if self.memory else []
        context = self._context(index, task, budget, extra_text=extra,
                                must_include=[*asked, *reproduction, *pinned])
        logger.info("prompts %s + %s; context budget %d of a %d-token room", self.rules().version,
                    prompts.PLAN.version, budget, room)
        said = prompts.excerpts_said(f.mode for f in context.files)
        return self.fitted(render(context.render() or "(no files indexed)", owner, context.paths, said)), context

    def context_room(self, index: RepoIndex, task: str) -> int:
        """The context's budget in a first request for `task` whose tests passed (no failing output to show): what a
        run's plan request really gives the code in this window, with these tools."""
        self.task = task
        self.fit_tools()
        user = prompts.PLAN.render(task=task, test_command=self.config.test_command, baseline="", baseline_failures="",
                                   context="", excerpts=prompts.EXCERPTS)
        budget, _ = self._split(self.room(), [*self.opening(), {"role": "user", "content": user}], index)
        return budget

    def warm_up(self, request: PlanRequest) -> None:
        """The plan request built once and set aside, for what building it does: the task's chunks embedded (up to
        the embed budget) and a window too small for it found now. Best of N calls this before its attempts, which
        embed nothing themselves (embed budget 0) and find the same vectors."""
        self.plan(request)

    def reproduce(self, request: ReproduceRequest, asked: Sequence[str] = ()) -> tuple[list[Message], Context]:
        """The request for a test that captures the task and fails before any fix."""
        index, task, baseline = request.index, request.task, request.baseline
        room = self.room()

        def render(context: str, owner: int = 0, shown: Sequence[str] = ()) -> list[Message]:
            user = prompts.REPRODUCE.render(task=task, test_command=self.config.test_command,
                                            baseline=baseline.summary(), context=context)
            if request.first:
                user += "\n" + prompts.FIRST_TEST.render(how=self.config.first_test or "a test of the project's own framework",
                                                         test_command=self.config.test_command)
            return [*self.opening(owner, shown), {"role": "user", "content": user}]

        budget, owner = self._split(room, render(""), index)
        context = self._context(index, task, budget, must_include=list(asked), with_tests=True)
        logger.info("prompts %s + %s", self.rules().version, prompts.REPRODUCE.version)
        return self.fitted(render(context.render() or "(no files indexed)", owner, context.paths)), context

    def fix(self, request: FixRequest, history: Sequence[Message] = (),
            asked: Sequence[str] = ()) -> tuple[list[Message], Context]:
        index, task, result, feedback = request.index, request.task, request.result, request.feedback
        room = self.room()
        failures = failure_text(result)
        shown = clip_text(failures, room // FAILURES_SHARE, "test output") if failures else ""
        feedback = clip_text(feedback, room // FEEDBACK_SHARE, "feedback") if feedback else ""

        def render(files: str) -> str:
            return prompts.FIX.render(
                iteration=request.iteration, max_iterations=self.config.max_iterations, summary=result.summary(),
                failures=shown or "(no structured failures; see the output)", edit_feedback=feedback, files=files)

        shell = message_tokens([{"role": "user", "content": render("")}])
        wanted = min(self.config.context_tokens // 2, max(MIN_CONTEXT_TOKENS, room // 3))
        kept = fit_request(list(history), room - shell - wanted)
        budget = min(self.config.context_tokens // 2, room - message_tokens(kept) - shell - SLACK)
        context = self._context(index, task, max(budget, 1), extra_text=failures,
                                must_include=[*asked, *self._involved(index, result, request.modified)])
        logger.info("prompt %s; context budget %d of a %d-token room", prompts.FIX.version, budget, room)
        return self.fitted([*kept, {"role": "user", "content": render(context.render())}]), context

    def plan_after(self, history: Sequence[Message], paths: Sequence[str], failed: TestResult | None,
                   note: str) -> str | None:
        """The plan asked for in the reproduction step's conversation (`history`), as one more message: what became
        of its test (`paths` failing as `failed`, or the `note` why none was kept), then the plan's last words; the
        messages before it stay as the server last read them. None when the conversation and the message would not
        fit the window whole: the plan is then asked afresh (dropping older turns would drop the code shown)."""
        if paths and failed is not None:
            output = failure_text(failed) or shown_output(failed)
            said = prompts.REPRODUCED.render(paths=", ".join(paths),
                                             output=clip_text(output, self.room() // FAILURES_SHARE, "test output"))
        else:
            said = prompts.NOT_REPRODUCED.format(note=note or "no test was written")
        text = prompts.PLAN_NEXT.render(reproduction=said)
        return text if message_tokens([*history, {"role": "user", "content": text}]) <= self.room() else None

    def follow_up(self, history: Sequence[Message], text: str) -> list[Message]:
        """The conversation and one more user message (a re-ask, a syntax repair)."""
        return self.fitted([*history, {"role": "user", "content": text}])

    def question(self, request: QuestionRequest) -> tuple[list[Message], Context]:
        index, question = request.index, request.question
        room = self.room()
        shell: list[Message] = [{"role": "user", "content": prompts.ASK.render(question=question, context="")}]
        budget, owner = self._split(room, shell, index)
        context = self._context(index, question, budget, numbered=True,
                                must_include=self.memory.pins if self.memory else None)
        text = prompts.ASK.render(question=question, context=context.render() or "(no files indexed)")
        found = self.instructions(owner, context.paths)
        said = ((found.text() if found else "") + self.session_notes() + self.tools_text(ASK_ANSWER)).strip()
        system: list[Message] = [{"role": "system", "content": said}] if said else []
        logger.info("prompt %s with %d files", prompts.ASK.version, len(context.files))
        return self.fitted([*system, {"role": "user", "content": text}]), context

    def _context_budget(self, room: int, shell: list[Message]) -> int:
        """The context's budget: what the room leaves after the request without its context (`shell`), at most
        --context-tokens; a room too small for a little code is a ContextWindowError."""
        fixed = message_tokens(shell)
        budget = min(self.config.context_tokens, room - fixed - SLACK)
        if budget < MIN_CONTEXT_TOKENS:
            raise self._too_small(fixed + MIN_CONTEXT_TOKENS, MIN_CONTEXT_TOKENS - budget)
        return budget

    def _context(self, index: RepoIndex, task: str, budget: int, *, extra_text: str = "",
                 must_include: list[str] | None = None, numbered: bool = False, with_tests: bool = False) -> Context:
        # while a big tree's files are pending, from the fast signals: loading the embedding model and embedding
        # the candidates' chunks would double the first request's wait (docs/indexing.md, "A big tree")
        embed_budget = 0 if index.pending else self.config.embed_budget
        # a map of more files is for a model that can ask to read one: a JSON plan's "read", or the tools (a small
        # model in blocks copied the map's lines as its SEARCH text)
        can_read = self.config.edit_format == EditFormat.JSON or self._offers_tools
        with self.index_lock:
            return build_context(index, task, budget, extra_text=extra_text, must_include=must_include,
                                 numbered=numbered, with_tests=with_tests, embed_budget=embed_budget,
                                 map_files=can_read)

    def fitted(self, messages: list[Message]) -> list[Message]:
        """The messages within the window's room (tool results shortened first, then older turns dropped and long
        ones clipped), or a ContextWindowError."""
        room = self.room()
        if self.config.edit_format == EditFormat.BLOCKS:  # every message passes here: said once for all of them
            messages = [m if m.get("role") not in ("system", "user") or not isinstance(m.get("content"), str)
                        else {**m, "content": prompts.in_blocks(m["content"])} for m in messages]
        fitted = fit_request(fit_tool_results(messages, room), room)
        if (size := message_tokens(fitted)) > room:
            raise self._too_small(size, size - room)
        return fitted

    def _involved(self, index: RepoIndex, result: TestResult, modified: list[str]) -> list[str]:
        """Files the fix request must show: those changed so far, those in the failures' frames, and (on an import
        error) the dependency manifest; each as the read gate admits it (a frame is the test run's word: a path out
        of the tree, a link it planted, is no file to show)."""
        frames = [p for f in result.failures for p in ([f.file] if f.file else []) + [x for x, _ in f.frames]]
        manifests = [m for m in MANIFESTS if _import_error(result)]
        return [p for p in dict.fromkeys([*modified, *frames, *manifests]) if index.gate.admits(p)]


EXAMPLE: tuple[Message, ...] = ({"role": "user", "content": prompts.EXAMPLE_BLOCKS_TASK.text},
                                {"role": "assistant", "content": prompts.EXAMPLE_BLOCKS_ANSWER.text})


def fit_request(messages: list[Message], room: int) -> list[Message]:
    """fit_history, the worked example (Requests.opening) given up first: it is what a request can best do without,
    and fit_history takes the first user message for the task, which it keeps."""
    if message_tokens(messages) > room:
        messages = [m for m in messages if m not in EXAMPLE]
    return fit_history(messages, room)
