"""The chat completions wire: a request as `POST /chat/completions` takes it, and its answer read from the stream
(content deltas, reasoning a server's parser sent apart, tool calls in pieces, usage in the last chunk) or, unstreamed,
from the completion. OpenAI, Azure OpenAI, OpenRouter, LiteLLM, Anthropic's and Google's compatible endpoints, Ollama,
vLLM, LM Studio, llama.cpp and llama-cpp-python all serve it.

What a thinking model's tool-call turn must send back is carried with the answer (ChatResponse.carried) and put back
on the assistant message that asked for the calls, as each provider documents it:
- DeepSeek's thinking mode: "For turns that do perform tool calls, the reasoning_content must be fully passed back to
  the API in all subsequent requests" (https://api-docs.deepseek.com/guides/thinking_mode, quoted in
  https://github.com/anomalyco/opencode/issues/24722) — and only on those turns: a turn without calls goes without it,
  as the older deepseek-reasoner refused it there with a 400. Carried when the server sent a `reasoning_content` field
  (empty too: an empty one must go back as ""); after its refusal (Lesson.REASONING_BACK) every tool-call turn has one.
- Gemini's OpenAI endpoint: each tool call's `extra_content.google.thought_signature` goes back with that call
  (https://ai.google.dev/gemini-api/docs/thought-signatures; the field as streamed:
  https://github.com/continuedev/continue/pull/8865). A call with none, after Gemini's refusal
  (Lesson.SIGNATURE_BACK), goes with the placeholder those docs give for histories without signatures."""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import openai

from code_assistant.model.accepts import Ask
from code_assistant.model.records import (
    CARRIED,
    ChatResponse,
    ModelError,
    StopAnswer,
    Streamed,
    ToolCall,
    answered,
    broke_off,
)
from code_assistant.model.structured import response_format

REASONING_ITEM = "chat.reasoning_content"  # a carried item: {"type", "text"}, the turn's reasoning_content
CALL_EXTRA_ITEM = "chat.extra_content"  # a carried item: {"type", "call_id", "extra_content"}, a call's own
NO_SIGNATURE = "skip_thought_signature_validator"  # Gemini's documented placeholder for a call without its signature


def body(ask: Ask) -> dict[str, Any]:
    """The request's JSON body (without `stream`)."""
    request: dict[str, Any] = {"model": ask.model, "messages": [
        _sent(m, reasoning_back=ask.reasoning_back, signature_back=ask.signature_back) for m in ask.messages]}
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


def _sent(message: dict[str, Any], *, reasoning_back: bool = False, signature_back: bool = False) -> dict[str, Any]:
    """A message as sent: what its tool-call turn carried put back where the provider wants it (above)."""
    carried = message.get(CARRIED) or []
    sent = {k: v for k, v in message.items() if k != CARRIED}
    if message.get("role") != "assistant" or not sent.get("tool_calls"):
        return sent
    for item in carried:
        if item.get("type") == REASONING_ITEM:
            sent["reasoning_content"] = item.get("text") or ""
    if reasoning_back:
        sent.setdefault("reasoning_content", "")
    extras = {i.get("call_id"): i.get("extra_content") for i in carried if i.get("type") == CALL_EXTRA_ITEM}
    calls = []
    for n, call in enumerate(sent["tool_calls"]):
        if extras.get(call.get("id")):
            call = {**call, "extra_content": extras[call.get("id")]}
        elif signature_back and n == 0:  # Gemini checks the first call of a step
            call = {**call, "extra_content": {"google": {"thought_signature": NO_SIGNATURE}}}
        calls.append(call)
    sent["tool_calls"] = calls
    return sent


def _carried(reasoning: str | None, calls: list[ToolCall], extras: dict[str, Any]) -> list[dict[str, Any]]:
    """What a tool-call turn must send back: its reasoning_content where the server sent that field (None: it did
    not), each call's extra_content."""
    if not calls:
        return []
    items: list[dict[str, Any]] = [{"type": REASONING_ITEM, "text": reasoning}] if reasoning is not None else []
    return items + [{"type": CALL_EXTRA_ITEM, "call_id": c.id, "extra_content": extras[c.id]}
                    for c in calls if c.id and extras.get(c.id)]


def once(client: openai.OpenAI, request: dict[str, Any], timeout: openai.Timeout) -> ChatResponse:
    completion = client.chat.completions.create(**request, timeout=timeout)
    if not completion.choices:
        raise ModelError("the model server returned no choices")
    message = completion.choices[0].message
    cut_off = completion.choices[0].finish_reason == "length"
    response = answered(message.content or "", cut_off, _usage(completion.usage), _extra(completion).get("timings"))
    response.reasoning = _reasoning(message)
    calls = [c for c in (message.tool_calls or []) if getattr(c, "function", None) is not None]
    response.tool_calls = [ToolCall(name=c.function.name or "", arguments=c.function.arguments or "", id=c.id or "")
                           for c in calls]
    extras = {c.id: _extra(c).get("extra_content") for c in calls if c.id and _extra(c).get("extra_content")}
    response.carried = _carried(_reasoning_field(message), response.tool_calls, extras)
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
    extras: dict[int, Any] = {}  # a call's extra_content by its index (Gemini's thought signature)
    reasoning_sent = False  # the server sent a reasoning_content field (DeepSeek: it goes back with the calls)
    usage = timings = None
    events = 0
    cut_off = False
    stopped = ""
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
                reasoning_sent = reasoning_sent or (choice.delta is not None and
                                                    _reasoning_field(choice.delta) is not None)
                for piece_of_call in (choice.delta.tool_calls or []) if choice.delta else []:
                    call = calls.setdefault(piece_of_call.index or 0, {"id": "", "name": "", "arguments": ""})
                    call["id"] = piece_of_call.id or call["id"]
                    if extra := _extra(piece_of_call).get("extra_content"):
                        extras[piece_of_call.index or 0] = extra
                    if piece_of_call.function is not None:
                        call["name"] += piece_of_call.function.name or ""
                        call["arguments"] += piece_of_call.function.arguments or ""
    except openai.APIConnectionError as exc:
        broke_off(exc, events)
    except StopAnswer as stop:
        chunks.close()
        stopped = stop.reason
    if events == 0:
        return None
    response = answered("".join(parts), cut_off, _usage(usage), timings)
    response.stopped = stopped
    response.reasoning = "".join(thought)
    response.tool_calls = [ToolCall(name=c["name"], arguments=c["arguments"], id=c["id"])
                           for _, c in sorted(calls.items()) if c["name"]]
    response.carried = _carried(response.reasoning if reasoning_sent else None, response.tool_calls,
                                {calls[n]["id"]: extra for n, extra in extras.items() if n in calls})
    return Streamed(response, first, timings)


def _usage(usage: Any) -> dict[str, Any] | None:
    return usage.model_dump() if usage is not None else None


def _extra(obj: Any) -> dict[str, Any]:
    """Fields a response has beyond OpenAI's (llama.cpp's `timings`, DeepSeek's cache counts)."""
    return getattr(obj, "model_extra", None) or {}


def _reasoning_field(message: Any) -> str | None:
    """DeepSeek's reasoning_content as sent, "" included (None: the field was not sent)."""
    value = getattr(message, "reasoning_content", None)
    value = value if value is not None else _extra(message).get("reasoning_content")
    return value if isinstance(value, str) else None


def _reasoning(message: Any) -> str:
    """The reasoning a server's reasoning parser put beside the answer (llama.cpp and vLLM's `reasoning_content`,
    newer vLLM and OpenRouter's `reasoning`), in a message or a stream delta."""
    for name in ("reasoning_content", "reasoning"):
        value = getattr(message, name, None) or _extra(message).get(name)
        if isinstance(value, str) and value:
            return value
    return ""
