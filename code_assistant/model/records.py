"""What the model seam hands back, whichever wire asked: the answer (ChatResponse), a run's usage, the errors that end
or reshape a request, and the ChatModel protocol every model (a server's, a replay) follows. No HTTP library here:
a run log, an outcome or a replay reads these without loading a client.

Usage as servers report it: `prompt_tokens`/`completion_tokens` (chat completions) or `input_tokens`/`output_tokens`
(the Responses API); the reasoning a model did before it answered in `completion_tokens_details.reasoning_tokens` or
`output_tokens_details.reasoning_tokens`, a part of the output and billed as output. Some servers leave it out of
`completion_tokens` and count it only in `total_tokens` (Gemini's own count; gateways that copy it): then it is added
back, so the cost counts it. OpenRouter's `usage.cost` (its charge in credits, one credit a dollar:
https://openrouter.ai/docs/use-cases/usage-accounting) is the cost when every call had one.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

import openai

from code_assistant.errors import EXIT_FAILED, AssistantError, GaveUpWaiting
from code_assistant.model.prices import estimate_cost
from code_assistant.model.usage import ReportedPrompt, count_at, reported_prompt
from code_assistant.model.window import ContextWindow

logger = logging.getLogger(__name__)

Message = dict[str, Any]  # role and content; an assistant's tool_calls; a tool's answer with its tool_call_id
CARRIED = "carried"  # an assistant message's key for what its wire needs back next turn (the Responses API's
#                      reasoning items, encrypted); the chat completions wire leaves it out of what it sends


class ModelError(AssistantError):
    """The model cannot be used (bad key, unknown model, server gone after retries). One line for the user.

    exit_code is 2 for configuration problems (401/403/404), 1 for a server that stayed unavailable.
    """

    exit_code = EXIT_FAILED


class ModelStalled(ModelError, GaveUpWaiting):
    """The server sent nothing for longer than it was allowed (--request-timeout, plus the time to read the prompt
    before the first token): the message says how long and names --request-timeout."""


class ToolsRefused(ModelError):
    """The server refused a request for the tools it declares (it serves no tool calls): describe them in words."""


class ContextOverflow(ModelError):
    """The server refused a request longer than its context window and named the window, which the model now
    remembers (its `window`): build the request again — it comes out smaller — and ask once more."""


@dataclass(frozen=True)
class ToolCall:
    """A call an answer asks for: the tool's name, its arguments as the model wrote them (JSON text, maybe sloppy),
    and the id a native call carries ("" in the JSON form, where the model writes its calls as text)."""

    name: str
    arguments: str
    id: str = ""


@dataclass
class ChatResponse:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0  # the whole output as billed: the reasoning too
    estimated: bool = False  # the server sent no counts (a stream without usage): counted here
    cut_off: bool = False    # the answer stopped at its token limit (finish_reason "length", status "incomplete")
    cap: int | None = None   # the token limit the answer was asked with (None: none was sent)
    reported: ReportedPrompt | None = None  # the server's own numbers for the prompt (its cache's part, if named)
    reasoning: str = ""  # what a reasoning parser sent apart (reasoning_content / reasoning): never the answer
    tool_calls: list[ToolCall] = field(default_factory=list)  # native calls the answer asks for, in order
    reasoning_tokens: int = 0  # of completion_tokens, those the model reasoned with
    cached_tokens: int = 0  # of prompt_tokens, those the server's cache served (billed at the cached-input price)
    cost: float | None = None  # dollars, as the server charged them (OpenRouter's usage.cost); None: not said
    wire: str = "chat"  # the API that answered: "chat" (/chat/completions), "responses" (/responses), "replay"
    carried: list[dict[str, Any]] = field(default_factory=list)  # the wire's items to send back with the calls
    notes: list[str] = field(default_factory=list)  # lines for the person: what the server's refusals taught
    stopped: str = ""  # why the answer was stopped as it came (StopAnswer): it is only its beginning


@dataclass
class Usage:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated: bool = False  # some of the counts are ours, not the server's
    reasoning_tokens: int = 0  # of completion_tokens
    cached_tokens: int = 0  # of prompt_tokens, those a cache served
    charged: float = 0.0  # dollars the server said it charged (OpenRouter), over the calls that said so
    charged_calls: int = 0
    estimated_calls: int = 0  # calls whose counts are ours

    def add(self, response: ChatResponse) -> None:
        self.calls += 1
        self.prompt_tokens += response.prompt_tokens
        self.completion_tokens += response.completion_tokens
        self.reasoning_tokens += response.reasoning_tokens
        self.cached_tokens += min(response.cached_tokens, response.prompt_tokens)
        self.estimated = self.estimated or response.estimated
        self.estimated_calls += response.estimated
        if response.cost is not None:
            self.charged += response.cost
            self.charged_calls += 1

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(calls=self.calls + other.calls, prompt_tokens=self.prompt_tokens + other.prompt_tokens,
                     completion_tokens=self.completion_tokens + other.completion_tokens,
                     estimated=self.estimated or other.estimated,
                     reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
                     cached_tokens=self.cached_tokens + other.cached_tokens,
                     charged=self.charged + other.charged, charged_calls=self.charged_calls + other.charged_calls,
                     estimated_calls=self.estimated_calls + other.estimated_calls)

    def __sub__(self, earlier: Usage) -> Usage:
        """What was used since `earlier` (a copy of this usage taken then)."""
        estimated = self.estimated_calls > earlier.estimated_calls if earlier.estimated else self.estimated
        return Usage(calls=self.calls - earlier.calls, prompt_tokens=self.prompt_tokens - earlier.prompt_tokens,
                     completion_tokens=self.completion_tokens - earlier.completion_tokens, estimated=estimated,
                     reasoning_tokens=self.reasoning_tokens - earlier.reasoning_tokens,
                     cached_tokens=self.cached_tokens - earlier.cached_tokens,
                     charged=self.charged - earlier.charged, charged_calls=self.charged_calls - earlier.charged_calls,
                     estimated_calls=self.estimated_calls - earlier.estimated_calls)

    def cost(self, model: str, base_url: str | None) -> float | None:
        """Dollars: what the server charged, when it said so for every call; else the price table's estimate; None
        when neither knows (an unknown model, a local server)."""
        if self.calls and self.charged_calls == self.calls:
            return round(self.charged, 6)
        estimate = estimate_cost(model, self.prompt_tokens, self.completion_tokens, base_url,
                                 cached_tokens=self.cached_tokens, reasoning_tokens=self.reasoning_tokens)
        if estimate is None and self.charged_calls:
            return round(self.charged, 6)
        return estimate


class Keep(Enum):
    """with_()'s default: the copy keeps the model's own value."""

    KEEP = "keep"


KEEP = Keep.KEEP


class ChatModel(Protocol):
    """The model seam. What it is and what it takes are its fields (`native_tools`: False once its server refused
    tool calls; `wire`: the API it is asked through); a caller that wants it asked otherwise (free text, another temperature, a seed) asks for a copy
    (`with_`), never sets a field of it."""

    name: str
    usage: Usage  # every call of this model (a copy's start from nothing)
    window: ContextWindow

    @property
    def native_tools(self) -> bool: ...

    @property
    def wire(self) -> str: ...

    def with_(self, *, temperature: float | Keep = KEEP, seed: int | None | Keep = KEEP,
              schema: dict[str, Any] | None | Keep = KEEP, window: ContextWindow | Keep = KEEP) -> ChatModel:
        """The same model on the same server, asked with the values given (`schema` None: free text; `window`: a
        window of its own, which a parallel attempt learns alone), with a usage of its own."""
        ...

    def complete(self, messages: list[Message], on_token: Callable[[str], None] | None = None, *,
                 tools: list[dict[str, Any]] | None = None, schema: bool = True,
                 on_wait: Callable[[str], None] | None = None) -> ChatResponse:
        """The answer to `messages`; `tools`: declared in OpenAI's chat form (the answer may ask for calls);
        `schema`: False when the answer may be something else than a plan (tool calls written as text); `on_wait`:
        told in words why and how long the model waits before asking again (for the waiting line)."""
        ...


def answered(text: str, cut_off: bool, usage: Mapping[str, Any] | None, timings: Any = None) -> ChatResponse:
    """The answer with the server's usage numbers, in either wire's names; estimated (counted by the caller) when it
    sent none."""
    reported = reported_prompt(usage, timings)
    if usage is None or reported is None:
        return ChatResponse(text=text, estimated=True, cut_off=cut_off)
    completion = count_at(usage, "completion_tokens")
    completion = completion if completion is not None else count_at(usage, "output_tokens") or 0
    reasoning = (count_at(usage, "completion_tokens_details", "reasoning_tokens")
                 or count_at(usage, "output_tokens_details", "reasoning_tokens") or 0)
    if reasoning and count_at(usage, "total_tokens") == reported.prompt + completion + reasoning:
        completion += reasoning  # counted apart from the answer's tokens: billed as output all the same
    cost = usage.get("cost")
    charged = float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) and cost >= 0 else None
    return ChatResponse(text=text, prompt_tokens=reported.prompt, completion_tokens=completion, cut_off=cut_off,
                        reported=reported, reasoning_tokens=reasoning, cached_tokens=reported.read, cost=charged)


class StopAnswer(Exception):  # noqa: N818 (a stop asked for, not an error)
    """Raised by a stream's token callback: the answer so far is enough to know it will not do (`reason`); the
    stream is closed, which a server such as llama.cpp's takes as the end of the generation, and the answer is
    what came until then, marked `stopped`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class Streamed:
    """A streamed answer, with what the stream showed of the server's pace: seconds to the first event, and
    llama.cpp's `timings` if it sent them."""

    response: ChatResponse
    first: float | None = None
    timings: Any = None


def broke_off(exc: openai.APIConnectionError, events: int) -> None:
    """A stream that broke off before any event is no answer (the wire returns None and the request is asked again);
    after an event, or on a timeout, it is a failure like any other (raised again)."""
    if events or isinstance(exc, openai.APITimeoutError):
        raise exc
    logger.debug("the stream broke off before any event: %s", exc)
