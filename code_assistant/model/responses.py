"""The Responses API wire (`POST /responses`): OpenAI's codex and pro models are served only here, and its other
models too (https://platform.openai.com/docs/api-reference/responses).

The conversation stays ours, in chat messages (agent/conversation.py); this module renders it as the Responses API's
input: the first system message as `instructions`, user and assistant turns as messages, an assistant's tool calls as
`function_call` items and their results as `function_call_output` items, joined by `call_id`. Nothing is kept on the
server (`store: false`): a reasoning model's reasoning comes back encrypted (`include: ["reasoning.encrypted_content"]`)
and goes back in the next request before the calls it led to, as the API asks of a stateless conversation. Tools are
declared flat (`{type: "function", name, description, parameters}`); the plan's schema goes in `text.format`.

The answer is read from the stream's events: `response.output_text.delta` for the text shown as it comes,
`response.output_item.added` / `response.function_call_arguments.delta` / `response.output_item.done` for calls and
reasoning items, and `response.completed` (or `response.incomplete`, cut at `max_output_tokens`) for the whole output
and the usage (`input_tokens`, `output_tokens` and their details). `response.failed` and `error` events are errors.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import openai

from code_assistant.model.accepts import Ask
from code_assistant.model.records import CARRIED, ChatResponse, StopAnswer, Streamed, ToolCall, answered, broke_off
from code_assistant.model.structured import text_format

ENCRYPTED_REASONING = "reasoning.encrypted_content"


def body(ask: Ask) -> dict[str, Any]:
    """The request's JSON body (without `stream`)."""
    instructions, items = input_items(ask.messages)
    request: dict[str, Any] = {"model": ask.model, "input": items, "store": False}
    if instructions:
        request["instructions"] = instructions
    if ask.temperature is not None:
        request["temperature"] = ask.temperature
    if ask.cap is not None:
        request["max_output_tokens"] = ask.cap
    if ask.effort:
        request["reasoning"] = {"effort": ask.effort}
    if ask.encrypted_reasoning:
        request["include"] = [ENCRYPTED_REASONING]
    if ask.tools:
        request["tools"] = flat_tools(ask.tools)
    elif ask.schema is not None and (fmt := text_format(ask.form, ask.schema)):
        request["text"] = fmt
    return request


def input_items(messages: list[dict[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """Chat messages as (instructions, input items)."""
    instructions = None
    items: list[dict[str, Any]] = []
    for n, message in enumerate(messages):
        role, content = message.get("role"), message.get("content")
        if role == "system" and n == 0:
            instructions = content
        elif role == "system":
            items.append({"role": "developer", "content": content or ""})
        elif role == "tool":
            items.append({"type": "function_call_output", "call_id": message.get("tool_call_id", ""),
                          "output": content or ""})
        elif role == "assistant":
            items += [i for i in message.get(CARRIED) or [] if i.get("type") == "reasoning"]  # the chat wire's: not here
            if content:
                items.append({"role": "assistant", "content": content})
            items += [{"type": "function_call", "call_id": call["id"], "name": call["function"]["name"],
                       "arguments": call["function"]["arguments"]} for call in message.get("tool_calls") or []]
        else:
            items.append({"role": "user", "content": content or ""})
    return instructions, items


def flat_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tools declared in the chat form (`{type, function: {name, description, parameters}}`), flat."""
    flat = []
    for tool in tools:
        function = tool.get("function") or {}
        flat.append({"type": "function", "name": function.get("name", ""),
                     "description": function.get("description", ""),
                     "parameters": function.get("parameters") or {"type": "object", "properties": {}},
                     "strict": False})  # our schemas have optional arguments, which strict mode does not allow
    return flat


def once(client: openai.OpenAI, request: dict[str, Any], timeout: openai.Timeout) -> ChatResponse:
    return _answer(client.responses.create(**request, timeout=timeout), _Pieces())


class _Pieces:
    """What the events brought before the last one: the text, reasoning text, calls by output index, reasoning
    items."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.thought: list[str] = []
        self.calls: dict[int, dict[str, str]] = {}
        self.carried: list[dict[str, Any]] = []
        self.stopped = ""  # why the answer was stopped as it came

    def item(self, index: int, item: Any) -> None:
        if item.type == "function_call":
            self.calls[index] = {"id": item.call_id or "", "name": item.name or "", "arguments": item.arguments or ""}
        elif item.type == "reasoning" and (kept := _carried(item)):
            self.carried.append(kept)


def stream(client: openai.OpenAI, request: dict[str, Any], on_token: Callable[[str], None],
           timeout: openai.Timeout) -> Streamed | None:
    """The answer as its events arrive; None when the server closed the stream before a single event."""
    started = time.monotonic()
    events = client.responses.create(**request, stream=True, timeout=timeout)
    pieces = _Pieces()
    final: Any = None
    count = 0
    first: float | None = None
    try:
        for event in events:
            count += 1
            first = first if first is not None else time.monotonic() - started
            kind = getattr(event, "type", "")
            if kind == "response.output_text.delta":
                pieces.text.append(event.delta)
                on_token(event.delta)
            elif kind in ("response.reasoning_text.delta", "response.reasoning_summary_text.delta"):
                pieces.thought.append(event.delta)  # not shown, not parsed: kept for the run log
            elif kind == "response.output_item.added" and event.item.type == "function_call":
                pieces.item(event.output_index, event.item)
            elif kind == "response.function_call_arguments.delta":
                call = pieces.calls.setdefault(event.output_index, {"id": "", "name": "", "arguments": ""})
                call["arguments"] += event.delta
            elif kind == "response.output_item.done":
                pieces.item(event.output_index, event.item)
            elif kind in ("response.completed", "response.incomplete"):
                final = event.response
            elif kind in ("response.failed", "error"):
                error = event.response.error if kind == "response.failed" else event
                message = getattr(error, "message", None) or "the response failed"
                raise openai.APIError(message, request=events.response.request,
                                      body={"code": getattr(error, "code", None), "message": message})
    except openai.APIConnectionError as exc:
        broke_off(exc, count)
    except StopAnswer as stop:
        events.close()
        pieces.stopped = stop.reason
    if count == 0:
        return None
    return Streamed(_answer(final, pieces), first)


def _answer(final: Any, pieces: _Pieces) -> ChatResponse:
    """The answer: the final response's output where it has one (the whole of it), else what the events brought."""
    output = list(getattr(final, "output", None) or [])
    whole = _Pieces()
    for index, item in enumerate(output):
        whole.item(index, item)
    text = "".join(pieces.text) or "".join(part.text for item in output if item.type == "message"
                                           for part in item.content or [] if getattr(part, "type", "") == "output_text")
    details = getattr(final, "incomplete_details", None)
    cut_off = getattr(final, "status", None) == "incomplete" and getattr(details, "reason", "") == "max_output_tokens"
    usage = final.usage.model_dump() if getattr(final, "usage", None) is not None else None
    response = answered(text, cut_off, usage)
    response.wire = "responses"
    calls = whole.calls or pieces.calls
    response.tool_calls = [ToolCall(name=c["name"], arguments=c["arguments"], id=c["id"])
                           for _, c in sorted(calls.items()) if c["name"]]
    response.carried = whole.carried or pieces.carried
    response.reasoning = "".join(pieces.thought) or "".join(
        part.text for item in output if item.type == "reasoning" for part in item.summary or [])
    response.stopped = pieces.stopped
    return response


def _carried(item: Any) -> dict[str, Any] | None:
    """A reasoning item as it goes back to the server; only with its encrypted content (by its id alone, an item
    the server did not store is not found)."""
    if not getattr(item, "encrypted_content", None):
        return None
    return {"type": "reasoning", "id": item.id, "encrypted_content": item.encrypted_content,
            "summary": [part.model_dump() for part in item.summary or []]}
