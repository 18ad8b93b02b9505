"""The model's context window: how big it is, where that came from, and how many of our tokens a request may hold.

Our token counts are cl100k (tokens.py); a server counts with its own tokenizer and adds its chat template. The
window therefore carries a ratio (server tokens per counted token), assumed until the server's own numbers arrive in
a response's usage or in an error that names the window.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from code_assistant.errors import AssistantError

DEFAULT_WINDOW = 8192  # when nothing reports a window: every current chat model has at least this; smaller ones
#                        answer an over-long request with an error that names their window, and are learned from it
OPENAI_RATIO = 1.05    # OpenAI's tokenizers (cl100k, o200k) against our cl100k count, with a little room
OTHER_RATIO = 1.3      # other tokenizers: SmolLM2's is 1.17 on this repository's code, 32k-vocabulary models more
RATIO_MARGIN = 1.03    # on top of a ratio the server's own counts gave: code and prose tokenize differently
MIN_OBSERVED = 200     # a prompt this short is mostly chat template; its ratio says little
TRUNCATED_RATIO = 0.7  # a server that read far fewer tokens than we sent has cut the prompt (Ollama does, silently)
MIN_RESERVE, MAX_RESERVE = 256, 4096  # tokens kept for the answer: an eighth of the window, within these (a plan
#                                       that fixes a bug is a few hundred tokens; a small window needs its room)

# Hosted models whose window is published (tokens). Local servers report theirs (servers.py).
KNOWN_WINDOWS: dict[str, int] = {
    "gpt-4o": 128_000, "gpt-4o-mini": 128_000, "gpt-4-turbo": 128_000, "gpt-4": 8_192, "gpt-3.5-turbo": 16_385,
    "gpt-4.1": 1_047_576, "gpt-4.1-mini": 1_047_576, "gpt-4.1-nano": 1_047_576, "o1": 200_000, "o3": 200_000,
    "o3-mini": 200_000, "o4-mini": 200_000, "gpt-5": 400_000, "gpt-5-mini": 400_000, "gpt-5-nano": 400_000,
}


class ContextWindowError(AssistantError):
    """The window cannot hold a useful request (exit 2): the message names the setting that fixes it."""


def known_window(model: str) -> int | None:
    """The published window of a hosted model, also for dated names (gpt-4o-2024-08-06) and provider prefixes."""
    key = model.split("/")[-1].lower()
    if key in KNOWN_WINDOWS:
        return KNOWN_WINDOWS[key]
    return next((v for k, v in sorted(KNOWN_WINDOWS.items(), key=lambda kv: -len(kv[0]))
                 if key.startswith(k + "-")), None)


@dataclass
class ContextWindow:
    tokens: int
    source: str                 # "--context-window", "GET /props", "known model", "default", "the server's error", …
    ratio: float = OTHER_RATIO  # server tokens per counted (cl100k) token
    measured: bool = False      # the ratio comes from the server's own counts

    @classmethod
    def unlimited(cls) -> ContextWindow:
        return cls(10**9, "unlimited", 1.0, True)

    @property
    def reserve(self) -> int:
        """Tokens kept for the answer (sent as max_tokens to OpenAI-compatible servers)."""
        return max(MIN_RESERVE, min(MAX_RESERVE, self.tokens // 8))

    def prompt_room(self) -> int:
        """How many counted tokens a whole request (every message) may hold."""
        return max(0, math.floor((self.tokens - self.reserve) / self.ratio))

    def describe(self) -> str:
        return f"{self.tokens} tokens, from {self.source}"

    def observe(self, counted: int, server_prompt: int) -> str | None:
        """Learn from the server's count of a prompt we counted. Returns a warning when the server evidently cut
        the prompt (it read far fewer tokens than were sent): the window is then taken to be what it read."""
        if counted < MIN_OBSERVED or server_prompt <= 0:
            return None
        ratio = server_prompt / counted
        if ratio < TRUNCATED_RATIO:
            self.tokens, self.source = max(server_prompt, MIN_RESERVE * 2), "a prompt the server cut"
            return (f"the server read only {server_prompt} tokens of a prompt of about {counted}: it cut the prompt "
                    f"to fit a smaller context window; requests now fit {self.tokens} tokens (set --context-window "
                    f"or OPENAI_CONTEXT_WINDOW to the server's real window)")
        ratio *= RATIO_MARGIN
        self.ratio = max(self.ratio, ratio) if self.measured else ratio
        self.measured = True
        return None

    def learn(self, limit: WindowLimit, counted: int) -> None:
        """The server refused a request and named its window (and perhaps its count of the prompt)."""
        self.tokens, self.source = limit.window, "the server's error"
        if limit.prompt_tokens and counted >= MIN_OBSERVED:
            ratio = limit.prompt_tokens / counted * RATIO_MARGIN
            self.ratio = max(self.ratio, ratio) if self.measured else ratio
            self.measured = True


@dataclass(frozen=True)
class WindowLimit:
    """What an error said about the window: its size, and the server's count of the refused prompt if given."""

    window: int
    prompt_tokens: int | None = None
    requested: int | None = None  # prompt + completion, as vLLM counts a request


_WINDOW_RES = (
    re.compile(r"maximum context length is (\d+) tokens", re.IGNORECASE),           # OpenAI, vLLM, llama-cpp-python
    re.compile(r"context length of only (\d+) tokens", re.IGNORECASE),              # LM Studio
    re.compile(r"exceed(?:s|ed)? (?:the )?context window of (\d+)", re.IGNORECASE),  # llama-cpp-python's own ValueError
)
_PROMPT_RES = (
    re.compile(r"\((\d+) in the messages", re.IGNORECASE),      # vLLM, llama-cpp-python
    re.compile(r"messages resulted in (\d+) tokens", re.IGNORECASE),  # OpenAI
    re.compile(r"requested tokens \((\d+)\)", re.IGNORECASE),   # llama-cpp-python's ValueError
    re.compile(r"keep the first (\d+) tokens", re.IGNORECASE),  # LM Studio
)
_REQUESTED_RE = re.compile(r"you requested (\d+) tokens", re.IGNORECASE)


def window_limit(message: str, body: Any = None) -> WindowLimit | None:
    """Read the window out of a server's refusal. llama.cpp's own server puts it in the error object
    (`exceed_context_size_error`, `n_ctx`, `n_prompt_tokens`); the others say it in words."""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("n_ctx"), int):
        prompt = error.get("n_prompt_tokens")
        return WindowLimit(error["n_ctx"], prompt if isinstance(prompt, int) else None)
    window = next((int(m.group(1)) for r in _WINDOW_RES if (m := r.search(message or ""))), None)
    if window is None:
        return None
    prompt = next((int(m.group(1)) for r in _PROMPT_RES if (m := r.search(message))), None)
    requested = _REQUESTED_RE.search(message)
    return WindowLimit(window, prompt, int(requested.group(1)) if requested else None)
