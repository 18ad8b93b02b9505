"""The chat-model seam: an OpenAI-compatible client with retries, usage accounting and one-line errors, asking through
one of two wires — chat completions (completions.py) or the Responses API (responses.py) — what the server takes
(accepts.py).

What a local server needs is here too: answers capped at the window's reserve, a window learned from a refusal that
names it (ContextOverflow: the caller builds a smaller request and asks once more; a stream closed before any event,
llama-cpp-python's refusal, or an empty answer near the window, the same refusal through a gateway, is asked about
once without streaming, which names it) or from an answer cut off where it
filled the window (window.filled_window), structured output in the first
form the server takes (structured.py), and answers always streamed, so that the timeout is the gap between two tokens,
not the answer; the first gap allows for reading the prompt at the speed the server has shown (pace.py). A server
that stays silent longer is given up on (ModelStalled), never asked again while it may still be working.

A documented refusal (refusals.py) — a parameter the model does not take, a model served only by the Responses API —
is learned at once: the request is asked again as the server wants it, the answer carries one line saying so (its
`notes`), and the model asks that way for the rest of the session. Tools are declared in OpenAI's chat form; the calls
an answer asks for come back as ToolCall records. A server that refuses `tools` is a ToolsRefused: the caller
describes its tools in words instead.
"""
from __future__ import annotations

import dataclasses
import logging
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import openai

from code_assistant import redact, tokens
from code_assistant.model import completions, responses
from code_assistant.model.accepts import WHAT, Accepts, Ask, Wire, answer_cap
from code_assistant.model.fitting import message_tokens
from code_assistant.model.pace import PromptPace
from code_assistant.model.prices import is_local
from code_assistant.model.records import (
    CARRIED,
    KEEP,
    ChatModel,
    ChatResponse,
    ContextOverflow,
    Keep,
    Message,
    ModelError,
    ModelStalled,
    ToolCall,
    ToolsRefused,
    Usage,
)
from code_assistant.model.refusals import Lesson, Read, error_body, error_detail, fatal_message, read_refusal
from code_assistant.model.retry import MAX_WAIT_S, Pause, lasting_cause, server_pause, transient
from code_assistant.model.structured import FORMS, refuses_response_format
from code_assistant.model.usage import SentPrompts
from code_assistant.model.window import (
    CUT_SOURCE,
    DEFAULT_SOURCE,
    FILLED_SOURCE,
    ContextWindow,
    WindowLimit,
    window_limit,
)

__all__ = ["CARRIED", "ChatModel", "ChatResponse", "ContextOverflow", "Message", "ModelError", "ModelStalled",
           "OpenAIChat", "ToolCall", "ToolsRefused", "Usage", "redact_messages"]

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 10.0
_TOOLS_REFUSAL_STATUSES = (400, 422, 500, 501)
NEAR_WINDOW = 0.75  # an empty answer to a prompt this near the window is asked about once more, unstreamed


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


@dataclass
class OpenAIChat:
    """Any OpenAI-compatible server: OpenAI, Azure OpenAI, OpenRouter, LiteLLM, Anthropic's and Google's compatible
    endpoints, Ollama, vLLM, LM Studio, llama.cpp, llama-cpp-python."""

    name: str
    api_key: str
    base_url: str | None = None
    timeout: float = 120.0  # seconds without a byte between two streamed tokens (the first: plus reading the prompt)
    max_retries: int = 3
    backoff_s: float = 1.0
    temperature: float = 0.0  # sent unless the model takes none (accepts.py)
    seed: int | None = None  # sent when set: best of N asks each attempt with its own seed
    window: ContextWindow = field(default_factory=ContextWindow.unlimited)
    schema: dict[str, Any] | None = None  # the answer's JSON schema, sent as response_format (None: free text)
    usage: Usage = field(default_factory=Usage)
    sleep: Callable[[float], None] = time.sleep
    sent: SentPrompts = field(default_factory=SentPrompts)  # this run's prompts so far (best of N's attempts share it)
    pace: PromptPace | None = None  # the server's prompt-reading speed (None: a new one; best of N's attempts share it)
    accepts: Accepts = field(default_factory=Accepts)  # what the server takes (shared by this model's copies)
    reasoning_effort: str | None = None  # --reasoning-effort: sent where the model takes one

    def __post_init__(self) -> None:
        self.pace = self.pace or PromptPace(local=self.base_url is not None and is_local(self.base_url))
        self._client = self._connect()
        self._form = 0 if self.schema is not None and self.accepts.structured is not False else FORMS.index(None)
        self._notes: list[str] = []  # lines learned since the last answer, said with the next one

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

    @property
    def native_tools(self) -> bool:
        """False once the server refused `tools`: later requests describe them in words."""
        return self.accepts.tools is not False

    @property
    def wire(self) -> str:
        """The API it is asked through now: "chat" or "responses"."""
        return self.accepts.wire.value

    def with_(self, *, temperature: float | Keep = KEEP, seed: int | None | Keep = KEEP,
              schema: dict[str, Any] | None | Keep = KEEP, window: ContextWindow | Keep = KEEP) -> OpenAIChat:
        """A copy asking the same server (what it accepts, its pace, the prompts sent so far are shared) with the
        values given and a usage of its own; its window is this one's unless one is given."""
        return dataclasses.replace(
            self, usage=Usage(), temperature=self.temperature if isinstance(temperature, Keep) else temperature,
            seed=self.seed if isinstance(seed, Keep) else seed, schema=self.schema if isinstance(schema, Keep) else schema,
            window=self.window if isinstance(window, Keep) else window)

    def complete(self, messages: list[Message], on_token: Callable[[str], None] | None = None, *,
                 tools: list[dict[str, Any]] | None = None, schema: bool = True,
                 on_wait: Callable[[str], None] | None = None) -> ChatResponse:
        messages = redact_messages(messages)
        waited = on_wait or _unseen
        counted = message_tokens(messages)
        shared = self.sent.record(messages)
        attempt = 0
        while True:
            attempt += 1
            reading = self._pace.reading_time(counted * self.window.ratio)
            window, version = self.window.tokens, self.accepts.version
            try:
                response = self._ask(messages, on_token, counted, shared, self.timeout + reading, tools=tools,
                                     schema=schema)
                self.usage.add(response)
                if self.window.tokens < window and self.window.source == CUT_SOURCE:
                    raise ContextOverflow(f"the server cut the prompt to its context window of {self.window.tokens} "
                                          "tokens; its answer, to a prompt the model did not see whole, is set aside")
                if self.window.tokens < window and self.window.source == FILLED_SOURCE:
                    raise ContextOverflow(f"the answer was cut off where it and the prompt filled the server's "
                                          f"context window of {self.window.tokens} tokens; it is set aside")
                response.notes, self._notes = [*self._notes, *response.notes], []
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
                read = read_refusal(exc.status_code, error_body(exc))
                if read is not None and self._learned(read, exc, tools=bool(tools), version=version):
                    attempt -= 1
                    continue
                lasting = lasting_cause(exc.status_code, error_body(exc))
                if tools and read is None and not lasting and exc.status_code in _TOOLS_REFUSAL_STATUSES and \
                        "tool" in detail.lower():  # a refusal the table reads (a thought signature's) is not this
                    self._tools_refused(exc)
                if lasting or not transient(exc.status_code) or attempt > self.max_retries:
                    raise ModelError(fatal_message(exc, self.base_url, self._hint(read, exc.status_code)),
                                     exit_code=2 if lasting or exc.status_code in (401, 403, 404) else 1) from exc
                self._backoff(attempt, exc, waited, server_pause(exc.response.headers))
            except _TIMEOUTS as exc:
                raise ModelStalled(self._pace.gave_up(self.timeout, counted * self.window.ratio)) from exc
            except _TRANSPORT as exc:
                if attempt > self.max_retries:
                    raise ModelError(f"the model server did not answer after {attempt} tries: {_short(exc)}") from exc
                self._backoff(attempt, exc, waited)
            except openai.APIError as exc:  # an error event inside a stream
                self._overflow(exc, counted)
                if attempt > self.max_retries:
                    raise ModelError(f"the model server failed after {attempt} tries: {_short(exc)}") from exc
                self._backoff(attempt, exc, waited)

    @property
    def _pace(self) -> PromptPace:
        assert self.pace is not None  # set by __post_init__
        return self.pace

    def _learned(self, read: Read, exc: openai.APIStatusError, *, tools: bool, version: int) -> bool:
        """A documented refusal taken as a lesson (True: ask again now). The structured-output form steps on; a
        refusal of tools ends in ToolsRefused; a window the refusal names was read already (_overflow)."""
        match read.lesson:
            case Lesson.WINDOW:
                return False
            case Lesson.RESPONSE_FORMAT:
                if self.form is None:
                    return False
                self._form += 1
                return True
            case Lesson.NO_TOOLS:
                if tools:
                    self._tools_refused(exc)
                return False
        if self.accepts.learn(read.lesson):
            line = (f"[Learned: {self.name} {WHAT[read.lesson]} (the server's {exc.status_code}); asked again so, for "
                    f"the rest of the session]")
            logger.info("%s: %s", read.row.provider, line)
            self._notes.append(line)
            return True
        return self.accepts.version != version  # another attempt learned it meanwhile: ask again as it now says

    def _tools_refused(self, exc: openai.APIStatusError) -> None:
        self.accepts.learn(Lesson.NO_TOOLS)
        raise ToolsRefused(f"the model server refused tools ({exc.status_code}: {error_detail(exc)[:200]})") from exc

    def _hint(self, read: Read | None, status: int) -> str:
        """What a refusal that ends the run should add: how to ask through the other wire."""
        if read is not None and read.lesson == Lesson.RESPONSES:
            return "; the model is served by the Responses API: --wire responses (OPENAI_WIRE=responses)"
        if self.accepts.wire == Wire.RESPONSES and status == 404:
            return "; it was asked at /responses (--wire chat asks at /chat/completions)"
        return ""

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

    def _backoff(self, attempt: int, exc: Exception, on_wait: Callable[[str], None], pause: Pause | None = None) -> None:
        """The wait before asking again: the one the server named (retry.py), else exponential; said in full in the
        log and in the waiting line. A server that asks for longer than MAX_WAIT_S ends the run instead."""
        why = _why(exc)
        if pause is not None and pause.seconds > MAX_WAIT_S:
            raise ModelError(f"the model server at {self.base_url or 'api.openai.com'} asks to wait {pause.words()}, "
                             f"longer than the {MAX_WAIT_S:.0f} s a run waits ({why})") from exc
        if pause is not None:
            delay, how = pause.seconds, pause.words()
        else:
            delay = self.backoff_s * (2 ** (attempt - 1)) * (1 + random.random() / 4)
            how = f"{delay:.1f} s"
        logger.warning("the model call failed (%s); retry %d/%d in %s", why, attempt, self.max_retries, how)
        on_wait(f"{why}; asking again in {how} (retry {attempt}/{self.max_retries})")
        self.sleep(delay)
        on_wait(f"asked again (retry {attempt}/{self.max_retries}), waiting for the first token")

    def _request(self, messages: list[Message], counted: int, *, tools: list[dict[str, Any]] | None,
                 schema: bool) -> Ask:
        """What to ask, as the server takes it now."""
        accepts = self.accepts
        expected = counted * self.window.ratio
        cap = answer_cap(self.window.reserve, self.window.tokens, expected, bool(accepts.reasoning),
                         accepts.max_output) if self.base_url else None  # an answer may not run past the window
        return Ask(model=self.name, messages=messages, tools=tools or None, form=self.form,
                   schema=self.schema if schema else None,
                   temperature=self.temperature if accepts.sends_temperature else None,
                   seed=self.seed if accepts.sends_seed else None, cap=cap, cap_name=accepts.cap_name,
                   effort=self.reasoning_effort if accepts.sends_effort(self.reasoning_effort) else None,
                   encrypted_reasoning=accepts.asks_encrypted_reasoning, reasoning_back=accepts.reasoning_back,
                   signature_back=accepts.signature_back)

    def _ask(self, messages: list[Message], on_token: Callable[[str], None] | None, counted: int, shared: int,
             wait: float, *, tools: list[dict[str, Any]] | None, schema: bool) -> ChatResponse:
        """One request, streamed whether or not the tokens are shown; `wait`: the longest the server may be silent."""
        wire: ModuleType = responses if self.accepts.wire == Wire.RESPONSES else completions
        ask = self._request(messages, counted, tools=tools, schema=schema)
        request = wire.body(ask)
        timeout = openai.Timeout(wait, connect=min(wait, CONNECT_TIMEOUT_S))
        streamed = wire.stream(self._client, request, on_token or _unseen, timeout)
        if streamed is None:
            logger.info("the model server closed the stream before any event; asking once without streaming")
            response = self._unstreamed(wire, request, timeout)
        elif _empty(streamed.response) and self._near_window(counted):
            logger.info("an empty answer to a prompt near the context window (about %d of %d tokens, from %s); asking "
                        "once without streaming", round(counted * self.window.ratio), self.window.tokens,
                        self.window.source)
            response = self._unstreamed(wire, request, timeout)
        else:
            response, reported = streamed.response, streamed.response.reported
            self._pace.learn(streamed.timings, reported.prompt - (reported.cached or 0) if reported
                             else counted * self.window.ratio, streamed.first)
        response.wire, response.cap = self.accepts.wire.value, ask.cap
        if response.reported is None:  # the server sent no counts
            response.prompt_tokens = round(counted * self.window.ratio)
            response.completion_tokens = tokens.count_tokens(response.text)
        else:
            response.prompt_tokens = response.reported.total(expected=counted * self.window.ratio)
            if warning := self.window.observe(counted, response.prompt_tokens, shared, response.reported.complete):
                logger.warning("%s", warning)
        if response.cut_off and ask.cap is not None:
            self._filled(response, counted, ask.cap)
        return response

    def _filled(self, response: ChatResponse, counted: int, cap: int) -> None:
        """An answer cut off short of its cap: the window learned when it and the prompt filled the server's (the
        caller asks again within it). Without the server's counts, both are estimated at the window's ratio."""
        said = response.text + response.reasoning + "".join(c.arguments for c in response.tool_calls)
        received = tokens.count_tokens(said) * self.window.ratio
        if response.reported is not None:
            prompt, answer, estimated = float(response.prompt_tokens), float(response.completion_tokens), False
        else:
            prompt, answer, estimated = counted * self.window.ratio, received, True
        if self.window.filled(prompt=prompt, answer=answer, cap=cap, estimated=estimated, received=received):
            logger.info("an answer cut off after %.0f tokens of a %d cap, to a prompt of %.0f%s: the server's window "
                        "is %d tokens", answer, cap, prompt, " (estimated)" if estimated else "", self.window.tokens)

    def _near_window(self, counted: int) -> bool:
        """A prompt that may not fit: within NEAR_WINDOW of the window, or under a window nobody reported (the
        default). Only the prompt: llama-cpp-python shortens the answer's limit to the room left, and refuses only a
        prompt over its window."""
        return self.window.source == DEFAULT_SOURCE or counted * self.window.ratio >= NEAR_WINDOW * self.window.tokens

    def _unstreamed(self, wire: ModuleType, request: dict[str, Any], timeout: openai.Timeout) -> ChatResponse:
        """The request asked once more without streaming, after the server closed its stream before any event (or,
        near the window, answered nothing: llama-cpp-python's dropped stream as LiteLLM passes it on, a 200 with
        finish_reason "stop" and no content): that is how llama-cpp-python refuses a prompt over its window, and
        unstreamed it says why (a 400 that names the window). It drops the connection after such a stream, so a request sent on it next would be reset
        ("Connection error.", taken for the network); this one goes on a new connection."""
        self._client.close()
        self._client = self._connect()
        return wire.once(self._client, request, timeout)


def _empty(response: ChatResponse) -> bool:
    return not (response.text.strip() or response.reasoning or response.tool_calls)


def _unseen(piece: str) -> None:
    """Where a streamed answer's tokens go when nobody watches them."""


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


def _why(exc: Exception) -> str:
    """What went wrong, in full: a refusal's status and the message its body carries (one line), else the error's."""
    if isinstance(exc, openai.APIStatusError):
        detail = " ".join(error_detail(exc).split())
        return f"the server answered {exc.status_code}" + (f": {detail}" if detail else "")
    return _short(exc)


def _short(exc: Exception) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200]
