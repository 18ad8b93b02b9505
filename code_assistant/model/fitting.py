"""Making a conversation fit a token budget: counting messages, clipping a text in the middle, dropping old turns.

Pure functions over counted (cl100k) tokens; the budget comes from ContextWindow.prompt_room().
"""
from __future__ import annotations

import json
from typing import Any

from code_assistant import tokens

Message = dict[str, Any]  # role and content; an assistant's tool calls (tool_calls), a tool's answer (tool_call_id)

MESSAGE_OVERHEAD = 8  # the chat template's tokens around each message (role markers, separators)
TOOL_RESULTS_HEAD = "# Results of your tool calls"  # opens the user message that answers calls written as text
SHORTENED_RESULT = 40  # a result shortened to make room keeps this many tokens (and says it was cut)
MIN_CLIPPED = 48      # a clipped message keeps at least this much
HEAD_SHARE = 0.65     # of a clipped text, the share kept from its start (the task, the first lines); the rest: its end


def message_tokens(messages: list[Message]) -> int:
    return sum(one_message_tokens(m) for m in messages) + 3


def one_message_tokens(message: Message) -> int:
    """A message's tokens: its text, the calls it asks for, the template's overhead."""
    calls = message.get("tool_calls")
    return (tokens.count_tokens(message.get("content") or "") + MESSAGE_OVERHEAD
            + (tokens.count_tokens(json.dumps(calls)) if calls else 0))


def clip_text(text: str, budget: int, what: str = "text") -> str:
    """The text within `budget` tokens: its start and its end, whole lines where possible, with a note in the middle
    saying how much was left out (the reader is the model)."""
    total = tokens.count_tokens(text)
    if total <= budget:
        return text
    budget = max(budget, 1)
    keep = max(0, budget - 24)  # the note
    chars_per_token = len(text) / max(total, 1)
    while True:
        head_chars = int(keep * HEAD_SHARE * chars_per_token)
        tail_chars = int(keep * (1 - HEAD_SHARE) * chars_per_token)
        head, tail = _head(text, head_chars), _tail(text, tail_chars)
        omitted = total - tokens.count_tokens(head) - tokens.count_tokens(tail)
        note = f"[… {omitted} tokens of this {what} left out to fit the model's context window …]"
        clipped = f"{head}\n{note}\n{tail}"
        if tokens.count_tokens(clipped) <= budget or keep == 0:
            return clipped
        keep = int(keep * 0.85)


def _head(text: str, chars: int) -> str:
    if chars <= 0:
        return ""
    cut = text[:chars]
    line_end = cut.rfind("\n")
    return cut[:line_end] if line_end > chars // 2 else cut


def _tail(text: str, chars: int) -> str:
    if chars <= 0:
        return ""
    cut = text[-chars:]
    line_start = cut.find("\n")
    return cut[line_start + 1:] if 0 <= line_start < chars // 2 else cut


def fit_history(messages: list[Message], room: int) -> list[Message]:
    """The conversation within `room` tokens, or as close as it gets (the caller checks):
    1. earlier turns go, oldest first, as (assistant, user) pairs after the first request — the system message, the
       first request (the task) and the latest turn stay, and the roles still alternate;
    2. then the longest message but the system message and the last is clipped in the middle, again and again;
    3. then the last message itself."""
    fitted = list(messages)
    if message_tokens(fitted) <= room:
        return fitted
    first_user = next((i for i, m in enumerate(fitted) if m.get("role") == "user"), 0)
    while (message_tokens(fitted) > room and len(fitted) - (first_user + 1) > 2
           and not any(is_tool_result(m) or m.get("tool_calls") for m in fitted[first_user + 1:first_user + 3])):
        del fitted[first_user + 1:first_user + 3]  # a round of tool calls goes whole (fit_tool_results) or not at all
    clippable = [i for i, m in enumerate(fitted) if m.get("role") != "system" and i != len(fitted) - 1]
    for order in (clippable, [len(fitted) - 1]):
        while (excess := message_tokens(fitted) - room) > 0:
            sizes = {i: tokens.count_tokens(fitted[i].get("content") or "") for i in order}
            i = max(sizes, key=lambda k: sizes[k], default=None)
            if i is None or sizes[i] <= MIN_CLIPPED:
                break
            budget = max(MIN_CLIPPED, sizes[i] - excess)
            fitted[i] = {**fitted[i], "content": clip_text(fitted[i]["content"], budget, "message")}
            if tokens.count_tokens(fitted[i]["content"]) >= sizes[i]:
                break
    return fitted


def is_tool_result(message: Message) -> bool:
    """A tool's answer: a native `tool` message, or the user message that answers calls written as text."""
    return message.get("role") == "tool" or (
        message.get("role") == "user" and str(message.get("content") or "").startswith(TOOL_RESULTS_HEAD))


def fit_tool_results(messages: list[Message], room: int) -> list[Message]:
    """The conversation within `room` by its tool results alone, as far as they go: first each result shortened to a
    few lines, oldest first; then whole rounds of calls dropped, oldest first (a call and its answer go together, as
    servers require). Never the task, the context or the answers; fit_history does the rest."""
    fitted = list(messages)
    for i, message in enumerate(fitted):
        if message_tokens(fitted) <= room:
            return fitted
        if is_tool_result(message) and tokens.count_tokens(message.get("content") or "") > SHORTENED_RESULT * 2:
            fitted[i] = {**message, "content": clip_text(message["content"], SHORTENED_RESULT, "tool result")}
    while message_tokens(fitted) > room:
        rounds = [i for i, m in enumerate(fitted)
                  if m.get("role") == "assistant" and i + 1 < len(fitted) and is_tool_result(fitted[i + 1])]
        if len(rounds) < 2:  # the latest round stays: its results are what the model asked for last
            break
        end = rounds[0] + 1
        while end < len(fitted) and is_tool_result(fitted[end]):
            end += 1
        del fitted[rounds[0]:end]
    return fitted
