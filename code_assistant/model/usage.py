"""What a server's usage numbers say about a prompt we sent, and how much of that prompt a cache may have held.

Servers count a cache's part of the prompt in different ways (checked against each one's documentation or code):
- OpenAI, vLLM, llama.cpp's server, LiteLLM: `usage.prompt_tokens_details.cached_tokens`, a part of `prompt_tokens`
  (the Responses API: `input_tokens_details.cached_tokens`, a part of `input_tokens`);
- DeepSeek: `usage.prompt_cache_hit_tokens`, a part of `prompt_tokens` (which is hits plus misses);
- Anthropic's names (`cache_read_input_tokens`, `cache_creation_input_tokens`), which Anthropic leaves out of its
  `input_tokens` and gateways such as LiteLLM count into their `prompt_tokens`;
- llama.cpp's server also sends `timings`: `prompt_n` tokens processed now and `cache_n` taken from its cache, the
  whole prompt together;
- and some count only what they processed, saying nothing of a cache (Ollama's llama-server runner until its fix).
A count that leaves a cache out is low on every request whose start was sent before, which is not a cut prompt.
"""
from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from code_assistant import tokens
from code_assistant.model.fitting import MESSAGE_OVERHEAD, Message

_INCLUDED = (("prompt_tokens_details", "cached_tokens"), ("input_tokens_details", "cached_tokens"),
             ("prompt_cache_hit_tokens",))  # parts of prompt_tokens (input_tokens)
_ANTHROPIC = (("cache_read_input_tokens",), ("cache_creation_input_tokens",))  # left out of Anthropic's input_tokens


@dataclass(frozen=True)
class ReportedPrompt:
    """A server's usage numbers for one prompt."""

    prompt: int               # prompt_tokens (Anthropic's input_tokens)
    cached: int | None        # the part counted apart for a cache (read from it, or written to it: Anthropic's
    #                           cache_creation_input_tokens), by whatever name the server gave it; None: it named none
    whole: int | None = None  # llama.cpp's timings: prompt_n + cache_n
    read: int = 0             # the part a cache served, as billed apart (at the cached-input price): OpenAI's and
    #                           DeepSeek's cached part, else Anthropic's cache_read_input_tokens (never a cache write)

    @property
    def complete(self) -> bool:
        """The numbers account for a cache (or say there was none): their total is the whole prompt."""
        return self.cached is not None or self.whole is not None

    def total(self, expected: float) -> int:
        """The server's count of the whole prompt. A cache's part is inside prompt_tokens by OpenAI's and DeepSeek's
        definitions and outside it by Anthropic's, and servers differ from their own documentation: of the two
        readings, the one nearer our own estimate (`expected`, in the server's tokens) is taken."""
        if self.whole is not None:
            return self.whole
        if not self.cached:
            return self.prompt
        return min((self.prompt, self.prompt + self.cached), key=lambda n: abs(math.log(max(n, 1) / max(expected, 1))))


def count_at(usage: Mapping[str, Any], *path: str) -> int | None:
    """The count at a path of keys in a usage object (None: not there, or not a count)."""
    value: Any = usage
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def reported_prompt(usage: Mapping[str, Any] | None, timings: Mapping[str, Any] | None = None) -> ReportedPrompt | None:
    """The prompt's numbers in a response's `usage` (and llama.cpp's `timings`); None when it has no prompt count."""
    if not isinstance(usage, Mapping):
        return None
    prompt = count_at(usage, "prompt_tokens")
    if prompt is None:
        prompt = count_at(usage, "input_tokens")
    if prompt is None:
        return None
    included = [n for path in _INCLUDED if (n := count_at(usage, *path)) is not None]
    anthropic = [n for path in _ANTHROPIC if (n := count_at(usage, *path)) is not None]
    cached = max(included) if included else None
    read = cached if cached is not None else (count_at(usage, *_ANTHROPIC[0]) or 0)
    if anthropic:
        cached = max(cached or 0, sum(anthropic))
    whole = None
    if isinstance(timings, Mapping):
        done, reused = count_at(timings, "prompt_n"), count_at(timings, "cache_n")
        whole = done + reused if done is not None and reused is not None else None
    return ReportedPrompt(prompt, cached, whole, read)


def shared_tokens(messages: list[Message], earlier: list[Message]) -> int:
    """Counted tokens at the start of `messages` that `earlier` began with too: the whole messages they share, then
    the common start of the first one that differs. A server's prompt cache holds at most this much of it."""
    shared = 0
    for new, old in zip(messages, earlier):
        if new.get("role") != old.get("role"):
            break
        text, before = said(new), said(old)
        if text == before:
            shared += tokens.count_tokens(text) + MESSAGE_OVERHEAD
            continue
        return shared + tokens.count_tokens(os.path.commonprefix([text, before]))
    return shared


def said(message: Message) -> str:
    """A message's text as a prompt holds it, whatever its content is: None for an assistant's tool calls alone (a
    None beside a text stopped a run with a TypeError in commonprefix), a list of parts (their text), a string; then
    its calls, as sent."""
    content = message.get("content")
    if isinstance(content, list):
        text = "".join(str(part.get("text") or "") if isinstance(part, Mapping) else str(part) for part in content)
    else:
        text = "" if content is None else str(content)
    calls = message.get("tool_calls")
    return text + (json.dumps(calls, sort_keys=True, default=str) if calls else "")


class SentPrompts:
    """The prompts this run has sent, shared by best of N's attempts (which send the same start at once, so one
    attempt's first request may find another's in the server's cache)."""

    def __init__(self) -> None:
        self._sent: list[list[Message]] = []
        self._lock = threading.Lock()

    def record(self, messages: list[Message]) -> int:
        """Remember a prompt about to be sent; returns how many of its counted tokens were sent before."""
        with self._lock:
            earlier = list(self._sent)
            self._sent.append(list(messages))
        return max((shared_tokens(messages, e) for e in earlier), default=0)
