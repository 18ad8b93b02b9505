"""The chat-model seam: an OpenAI-compatible client with retries, usage accounting and one-line errors.

What a local server needs is here too: answers capped at the window's reserve, a window learned from a refusal that
names it (ContextOverflow: the caller builds a smaller request and asks once more; a stream closed before any event,
llama-cpp-python's refusal, is asked about once without streaming, which names it), structured output in the first
form the server takes (structured.py), and answers always streamed, so that the timeout is the gap between two tokens,
not the answer; the first gap allows for reading the prompt at the speed the server has shown (pace.py). A server
that stays silent longer is given up on (ModelStalled), never asked again while it may still be working.

Tools are declared in OpenAI's `tools` form; the calls an answer asks for (streamed in pieces, or whole) come back as
ToolCall records. A server that refuses `tools` is a ToolsRefused: the caller describes its tools in words instead.
"""
from __future__ import annotations

import logging
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import openai

from code_assistant import redact, tokens
from code_assistant.errors import EXIT_FAILED, AssistantError, GaveUpWaiting
from code_assistant.model.fitting import message_tokens
from code_assistant.model.pace import PromptPace
from code_assistant.model.prices import is_local
from code_assistant.model.refusals import error_body, error_detail, fatal_message
from code_assistant.model.structured import FORMS, refuses_response_format, response_format
from code_assistant.model.usage import ReportedPrompt, SentPrompts, reported_prompt
from code_assistant.model.window import CUT_SOURCE, ContextWindow, WindowLimit, window_limit

logger = logging.getLogger(__name__)

Message = dict[str, Any]  # role and content; an assistant's tool_calls; a tool's answer with its tool_call_id
CONNECT_TIMEOUT_S = 10.0
_TOOLS_REFUSAL_STATUSES = (400, 422, 500, 501)


def _transport_errors() -> tuple[tuple[type[Exception], ...], tuple[type[Exception], ...]]:
    """The timeout and transport exceptions of the HTTP library the openai client sends with, which a broken stream
    can raise unwrapped: httpx before openai 3.6x, httpx2 from then on (whichever `import openai` loaded)."""
    timeouts: list[type[Exception]] = [openai.APITimeoutError]
    transport: list[type[Exception]] = [openai.APIConnectionError]
    for name in ("httpx2", "httpx"):
        if (module := sys.modules.get(name)) is None:
            continue
        timeouts.append(module.TimeoutException)
        transport.append(module.TransportError)
    return tuple(timeouts), tuple(transport)


_TIMEOUTS, _TRANSPORT = _transport_errors()


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
    completion_tokens: int = 0
    estimated: bool = False  # the server sent no counts (a stream without usage): counted here
    cut_off: bool = False    # the answer stopped at max_tokens (finish_reason "length")
    reported: ReportedPrompt | None = None  # the server's own numbers for the prompt (its cache's part, if named)
    reasoning: str = ""  # what a reasoning parser sent apart (reasoning_content / reasoning): never the answer
    tool_calls: list[ToolCall] = field(default_factory=list)  # native calls the answer asks for, in order


@dataclass
class Usage:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated: bool = False  # some of the counts are ours, not the server's

    def add(self, response: ChatResponse) -> None:
        self.calls += 1
        self.prompt_tokens += response.prompt_tokens
        self.completion_tokens += response.completion_tokens
        self.estimated = self.estimated or response.estimated

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(calls=self.calls + other.calls, prompt_tokens=self.prompt_tokens + other.prompt_tokens,
                     completion_tokens=self.completion_tokens + other.completion_tokens,
                     estimated=self.estimated or other.estimated)


class ChatModel(Protocol):
    name: str
    usage: Usage
    window: ContextWindow

    def complete(self, messages: list[Message], on_token: Callable[[str], None] | None = None, *,
                 tools: list[dict[str, Any]] | None = None, schema: bool = True) -> ChatResponse:
        """The answer to `messages`; `tools`: declared in OpenAI's form (the answer may ask for calls); `schema`:
        False when the answer may be something else than a plan (tool calls written as text)."""
        ...


@dataclass
class OpenAIChat:
    """Any OpenAI-compatible /chat/completions server: OpenAI, Ollama, vLLM, LM Studio, llama.cpp."""

    name: str
    api_key: str
    base_url: str | None = None
    timeout: float = 120.0  # seconds without a byte between two streamed tokens (the first: plus reading the prompt)
    max_retries: int = 3
    backoff_s: float = 1.0
    temperature: float = 0.0
    seed: int | None = None  # sent when set: best of N asks each attempt with its own seed
    window: ContextWindow = field(default_factory=ContextWindow.unlimited)
    schema: dict[str, Any] | None = None  # the answer's JSON schema, sent as response_format (None: free text)
    usage: Usage = field(default_factory=Usage)
    sleep: Callable[[float], None] = time.sleep
    sent: SentPrompts = field(default_factory=SentPrompts)  # this run's prompts so far (best of N's attempts share it)
    pace: PromptPace | None = None  # the server's prompt-reading speed (None: a new one; best of N's attempts share it)
    native_tools: bool = True  # False once the server refused `tools`: later requests describe them in words

    def __post_init__(self) -> None:
        self.pace = self.pace or PromptPace(local=self.base_url is not None and is_local(self.base_url))
        self._client = self._connect()
        self._form = 0 if self.schema is not None else FORMS.index(None)

    def _connect(self) -> openai.OpenAI:
        """A client with a pool of its own. Retries are ours (logged, bounded); the client's are off so the count
        is honest."""
        timeout = openai.Timeout(self.timeout, connect=min(self.timeout, CONNECT_TIMEOUT_S))
        return openai.OpenAI(api_key=self.api_key, base_url=self.base_url, timeout=timeout, max_retries=0)

    @property
    def client(self) -> openai.OpenAI:
        return self._client

    @property
    def form(self) -> str | None:
        """The response_format form this server is asked with now."""
        return FORMS[self._form]

    def complete(self, messages: list[Message], on_token: Callable[[str], None] | None = None, *,
                 tools: list[dict[str, Any]] | None = None, schema: bool = True) -> ChatResponse:
        messages = redact_messages(messages)
        counted = message_tokens(messages)
        shared = self.sent.record(messages)
        attempt = 0
        while True:
            attempt += 1
            reading = self._pace.reading_time(counted * self.window.ratio)
            window = self.window.tokens
            try:
                response = self._ask(messages, on_token, counted, shared, self.timeout + reading, tools=tools,
                                     schema=schema)
                self.usage.add(response)
                if self.window.tokens < window and self.window.source == CUT_SOURCE:
                    raise ContextOverflow(f"the server cut the prompt to its context window of {self.window.tokens} "
                                          "tokens; its answer, to a prompt the model did not see whole, is set aside")
                return response
            except openai.APIStatusError as exc:
                detail = error_detail(exc)
                if self.form is not None and refuses_response_format(exc.status_code, detail):
                    logger.debug("the server refused response_format %r (%d); asking with the next form",
                                 self.form, exc.status_code)  # expected of some servers: not worth a warning
                    self._form += 1
                    attempt -= 1
                    continue
                self._overflow(exc, counted)
                if tools and exc.status_code in _TOOLS_REFUSAL_STATUSES and "tool" in detail.lower():
                    self.native_tools = False
                    raise ToolsRefused(f"the model server refused tools ({exc.status_code}: {detail[:200]})") from exc
                transient = exc.status_code in (408, 409, 429) or exc.status_code >= 500
                if not transient or attempt > self.max_retries:
                    raise ModelError(fatal_message(exc, self.base_url),
                                     exit_code=2 if exc.status_code in (401, 403, 404) else 1) from exc
                self._backoff(attempt, exc)
            except _TIMEOUTS as exc:
                raise ModelStalled(self._pace.gave_up(self.timeout, counted * self.window.ratio)) from exc
            except _TRANSPORT as exc:
                if attempt > self.max_retries:
                    raise ModelError(f"the model server did not answer after {attempt} tries: {_short(exc)}") from exc
                self._backoff(attempt, exc)
            except openai.APIError as exc:  # an error event inside a stream
                self._overflow(exc, counted)
                if attempt > self.max_retries:
                    raise ModelError(f"the model server failed after {attempt} tries: {_short(exc)}") from exc
                self._backoff(attempt, exc)

    @property
    def _pace(self) -> PromptPace:
        assert self.pace is not None  # set by __post_init__
        return self.pace

    def _overflow(self, exc: openai.APIError, counted: int) -> None:
        """A refusal that names the window: remember the window, let the caller shrink the request."""
        limit = window_limit(error_detail(exc) or str(exc), error_body(exc))
        if limit is None:
            return
        prompt = limit.prompt_tokens
        if prompt is None and limit.requested and self.base_url:
            prompt = limit.requested - self.window.reserve  # vLLM counts the answer's max_tokens in the request
        self.window.learn(WindowLimit(limit.window, prompt), counted)
        raise ContextOverflow(f"the request did not fit the model's context window of {limit.window} tokens") from exc

    def _backoff(self, attempt: int, exc: Exception) -> None:
        delay = self.backoff_s * (2 ** (attempt - 1)) * (1 + random.random() / 4)
        logger.warning("model call failed (%s); retry %d/%d in %.1fs", _short(exc), attempt, self.max_retries, delay)
        self.sleep(delay)

    def _ask(self, messages: list[Message], on_token: Callable[[str], None] | None, counted: int, shared: int,
             wait: float, *, tools: list[dict[str, Any]] | None, schema: bool) -> ChatResponse:
        """One request, streamed whether or not the tokens are shown; `wait`: the longest the server may be silent."""
        request: dict[str, Any] = {"model": self.name, "messages": messages, "temperature": self.temperature}
        if self.seed is not None:
            request["seed"] = self.seed
        if self.base_url:  # OpenAI-compatible servers: an answer may not run past the window's reserve
            request["max_tokens"] = self.window.reserve
        if tools:
            request["tools"] = tools
        elif schema and self.schema is not None and (fmt := response_format(self.form, self.schema)):
            request["response_format"] = fmt  # never beside tools: a grammar for the plan leaves no room for a call
        timeout = openai.Timeout(wait, connect=min(wait, CONNECT_TIMEOUT_S))
        response = self._stream(request, on_token or _unseen, timeout, counted * self.window.ratio)
        if response is None:
            response = self._unstreamed(request, timeout)
        if response.reported is None:  # the server sent no counts
            response.prompt_tokens = round(counted * self.window.ratio)
            response.completion_tokens = tokens.count_tokens(response.text)
            return response
        response.prompt_tokens = response.reported.total(expected=counted * self.window.ratio)
        if warning := self.window.observe(counted, response.prompt_tokens, shared, response.reported.complete):
            logger.warning("%s", warning)
        return response

    def _unstreamed(self, request: dict[str, Any], timeout: openai.Timeout) -> ChatResponse:
        """The request asked once more without streaming, after the server closed its stream before any event: that
        is how llama-cpp-python refuses a prompt over its window, and unstreamed it says why (a 400 that names the
        window). It drops the connection after such a stream, so a request sent on it next would be reset
        ("Connection error.", taken for the network); this one goes on a new connection."""
        self._client.close()
        self._client = self._connect()
        return self._once(request, timeout)

    def _once(self, request: dict[str, Any], timeout: openai.Timeout) -> ChatResponse:
        completion = self._client.chat.completions.create(**request, timeout=timeout)
        if not completion.choices:
            raise ModelError("the model server returned no choices")
        message = completion.choices[0].message
        cut_off = completion.choices[0].finish_reason == "length"
        response = _answer(message.content or "", cut_off, completion.usage, _extra(completion).get("timings"))
        response.reasoning = _reasoning(message)
        response.tool_calls = [ToolCall(name=c.function.name or "", arguments=c.function.arguments or "", id=c.id or "")
                               for c in (message.tool_calls or []) if getattr(c, "function", None) is not None]
        return response

    def _stream(self, request: dict[str, Any], on_token: Callable[[str], None], timeout: openai.Timeout,
                expected: float) -> ChatResponse | None:
        """The answer token by token; None when the server closed the stream before a single event, cleanly or not
        (llama-cpp-python does so for a prompt over its window): the caller then asks without streaming, which says
        why. The time to the first event teaches the pace (`expected`: the prompt's tokens, as the server may count
        them)."""
        started = time.monotonic()
        stream = self._client.chat.completions.create(**request, stream=True, stream_options={"include_usage": True},
                                                      timeout=timeout)
        parts: list[str] = []
        thought: list[str] = []
        calls: dict[int, dict[str, str]] = {}  # a call's pieces by its index: id, name, arguments
        usage = timings = None
        events = 0
        cut_off = False
        first: float | None = None
        try:
            for chunk in stream:
                events += 1
                first = first if first is not None else time.monotonic() - started
                usage = chunk.usage or usage
                timings = _extra(chunk).get("timings") or timings  # llama.cpp's server: with the last chunks
                for choice in chunk.choices:
                    cut_off = cut_off or choice.finish_reason == "length"
                    piece = (choice.delta.content if choice.delta else None) or ""
                    if piece:
                        parts.append(piece)
                        on_token(piece)
                    if choice.delta and (reasoning := _reasoning(choice.delta)):
                        thought.append(reasoning)  # not shown, not parsed: kept for the run log
                    for piece_of_call in (choice.delta.tool_calls or []) if choice.delta else []:
                        call = calls.setdefault(piece_of_call.index or 0, {"id": "", "name": "", "arguments": ""})
                        call["id"] = piece_of_call.id or call["id"]
                        if piece_of_call.function is not None:
                            call["name"] += piece_of_call.function.name or ""
                            call["arguments"] += piece_of_call.function.arguments or ""
        except openai.APIConnectionError as exc:  # the stream broke off: after an event, a failure like any other
            if events or isinstance(exc, openai.APITimeoutError):
                raise
            logger.debug("the stream broke off before any event: %s", _short(exc))
        if events == 0:
            logger.info("the model server closed the stream before any event; asking once without streaming")
            return None
        response = _answer("".join(parts), cut_off, usage, timings)
        response.reasoning = "".join(thought)
        response.tool_calls = [ToolCall(name=c["name"], arguments=c["arguments"], id=c["id"])
                               for _, c in sorted(calls.items()) if c["name"]]
        reported = response.reported
        self._pace.learn(timings, reported.prompt - (reported.cached or 0) if reported else expected, first)
        return response


def _unseen(piece: str) -> None:
    """Where a streamed answer's tokens go when nobody watches them."""


def _extra(obj: Any) -> dict[str, Any]:
    """Fields a response has beyond OpenAI's (llama.cpp's `timings`, DeepSeek's cache counts)."""
    return getattr(obj, "model_extra", None) or {}


def _reasoning(message: Any) -> str:
    """The reasoning a server's reasoning parser put beside the answer (llama.cpp and vLLM's `reasoning_content`,
    newer vLLM and OpenRouter's `reasoning`), in a message or a stream delta."""
    for name in ("reasoning_content", "reasoning"):
        value = getattr(message, name, None) or _extra(message).get(name)
        if isinstance(value, str) and value:
            return value
    return ""


def _answer(text: str, cut_off: bool, usage: Any, timings: Any) -> ChatResponse:
    """The answer with the server's usage numbers; estimated (counted by the caller) when it sent none."""
    reported = reported_prompt(usage.model_dump() if usage is not None else None, timings)
    if reported is None:
        return ChatResponse(text=text, estimated=True, cut_off=cut_off)
    completion = getattr(usage, "completion_tokens", None)
    return ChatResponse(text=text, prompt_tokens=reported.prompt,
                        completion_tokens=completion if isinstance(completion, int) else 0, cut_off=cut_off,
                        reported=reported)


def redact_messages(messages: list[Message]) -> list[Message]:
    """The one choke point: nothing that looks like a credential leaves this process (a tool's result and a call's
    arguments neither)."""
    cleaned: list[Message] = []
    total = 0
    for message in messages:
        text, count = redact.redact(message.get("content") or "")
        total += count
        clean = {**message, "content": text if message.get("content") is not None else None}
        if message.get("tool_calls"):
            calls = []
            for call in message["tool_calls"]:
                arguments, found = redact.redact(call["function"]["arguments"])
                total += found
                calls.append({**call, "function": {**call["function"], "arguments": arguments}})
            clean["tool_calls"] = calls
        cleaned.append(clean)
    if total:
        logger.info("redacted %d secret(s) before calling the model", total)
    return cleaned


def _short(exc: Exception) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200]
