"""The chat completions wire: a request as `POST /chat/completions` takes it, and its answer read from the stream
(content deltas, reasoning a server's parser sent apart, tool calls in pieces, usage in the last chunk) or, unstreamed,
from the completion. OpenAI, Azure OpenAI, OpenRouter, LiteLLM, Anthropic's and Google's compatible endpoints, Ollama,
vLLM, LM Studio, llama.cpp and llama-cpp-python all serve it."""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import openai

from code_assistant.model.accepts import Ask
from code_assistant.model.records import CARRIED, ChatResponse, ModelError, Streamed, ToolCall, answered
from code_assistant.model.structured import response_format

logger = logging.getLogger(__name__)


def body(ask: Ask) -> dict[str, Any]:
    """The request's JSON body (without `stream`)."""
    request: dict[str, Any] = {"model": ask.model, "messages": [_sent(m) for m in ask.messages]}
    if ask.temperature is not None:
        request["temperature"] = ask.temperature
    if ask.seed is not None:
        request["seed"] = ask.seed
    if ask.cap is not None:
        request[ask.cap_name] = ask.cap
    if ask.effort:
        request["reasoning_effort"] = ask.effort
    if ask.tools:
        request["tools"] = ask.tools
    elif ask.schema is not None and (fmt := response_format(ask.form, ask.schema)):
        request["response_format"] = fmt  # never beside tools: a grammar for the plan leaves no room for a call
    return request


def _sent(message: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in message.items() if k != CARRIED} if CARRIED in message else message


def once(client: openai.OpenAI, request: dict[str, Any], timeout: openai.Timeout) -> ChatResponse:
    completion = client.chat.completions.create(**request, timeout=timeout)
    if not completion.choices:
        raise ModelError("the model server returned no choices")
    message = completion.choices[0].message
    cut_off = completion.choices[0].finish_reason == "length"
    response = answered(message.content or "", cut_off, _usage(completion.usage), _extra(completion).get("timings"))
    response.reasoning = _reasoning(message)
    response.tool_calls = [ToolCall(name=c.function.name or "", arguments=c.function.arguments or "", id=c.id or "")
                           for c in (message.tool_calls or []) if getattr(c, "function", None) is not None]
    return response


def stream(client: openai.OpenAI, request: dict[str, Any], on_token: Callable[[str], None],
           timeout: openai.Timeout) -> Streamed | None:
    """The answer token by token; None when the server closed the stream before a single event, cleanly or not
    (llama-cpp-python does so for a prompt over its window): the caller then asks without streaming, which says
    why."""
    started = time.monotonic()
    chunks = client.chat.completions.create(**request, stream=True, stream_options={"include_usage": True},
                                            timeout=timeout)
    parts: list[str] = []
    thought: list[str] = []
    calls: dict[int, dict[str, str]] = {}  # a call's pieces by its index: id, name, arguments
    usage = timings = None
    events = 0
    cut_off = False
    first: float | None = None
    try:
        for chunk in chunks:
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
        logger.debug("the stream broke off before any event: %s", exc)
    if events == 0:
        return None
    response = answered("".join(parts), cut_off, _usage(usage), timings)
    response.reasoning = "".join(thought)
    response.tool_calls = [ToolCall(name=c["name"], arguments=c["arguments"], id=c["id"])
                           for _, c in sorted(calls.items()) if c["name"]]
    return Streamed(response, first, timings)


def _usage(usage: Any) -> dict[str, Any] | None:
    return usage.model_dump() if usage is not None else None


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
