"""The model's context window: how big it is, where that came from, and how many of our tokens a request may hold.

Our token counts are cl100k (tokens.py); a server counts with its own tokenizer and adds its chat template. The
window therefore carries a ratio (server tokens per counted token), assumed until the server's own numbers arrive in
a response's usage or in an error that names the window.

A response's usage is evidence, not an order: proxies report fixed or estimated numbers, and caching servers may count
only the part of a prompt they had not seen (usage.py). A low count is taken for a prompt the server cut only when no
cache can explain it, and even then the window shrinks only to a size that still holds a run's requests; otherwise
the run is warned once and keeps its window, and a refusal that names the server's window decides.
"""
from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from code_assistant.errors import AssistantError

logger = logging.getLogger(__name__)

DEFAULT_WINDOW = 8192  # when nothing reports a window: every current chat model has at least this; smaller ones
#                        answer an over-long request with an error that names their window, and are learned from it
OPENAI_RATIO = 1.05    # OpenAI's tokenizers (cl100k, o200k) against our cl100k count, with a little room
OTHER_RATIO = 1.3      # other tokenizers: SmolLM2's is 1.17 on this repository's code, 32k-vocabulary models more
RATIO_MARGIN = 1.03    # on top of a ratio the server's own counts gave: code and prose tokenize differently
MIN_OBSERVED = 200     # a prompt this short is mostly chat template; its ratio says little
TRUNCATED_RATIO = 0.7  # a server that read far fewer tokens than we sent has cut the prompt (Ollama does, silently),
#                        or left a cache or an estimate out of its count; no tokenizer reads code in fewer tokens
MAX_RATIO = 3.0        # no chat model's tokenizer needs three tokens for one cl100k token of code or prose (32k
#                        vocabularies take about 1.5): a higher count is not of this prompt alone (a proxy's sum)
RATIO_SAMPLES = 3      # the ratio is the largest of the last few measurements: a prose-heavy prompt raises it, and
#                        it comes back down after, rather than staying at the highest ever seen
MIN_USEFUL_ROOM = 1000  # counted tokens a window must leave for the requests a run builds: the system prompt (350),
#                         the task, failing tests and a little code (a one-line task with a two-file repository needs
#                         about 500); a window with less stops the run, so a count is never taken for one that small
MIN_RESERVE, MAX_RESERVE = 256, 4096  # tokens kept for the answer: an eighth of the window, within these (a plan
#                                       that fixes a bug is a few hundred tokens; a small window needs its room)
DEFAULT_SOURCE = "the default (nothing reported a window)"  # DEFAULT_WINDOW's, when nothing said another
CUT_SOURCE = "a prompt the server cut"  # the window's source once a server is found to cut prompts silently
FILLED_SOURCE = "an answer cut off at the server's window"  # once an answer is found to have filled the window
WINDOW_STEP = 256      # llama.cpp sizes its context in steps of 256 tokens (llama-cpp-python's n_ctx 3000 is 3072), and
#                        llama-cpp-python and Ollama run it: a window is a multiple of this
FILLED_SLACK = 8       # llama.cpp's server stops an answer a token before its window is full (n_past + 1 >= n_ctx)
ESTIMATE_LOW = 1.15    # without the server's counts, prompt and answer are estimated at the window's ratio, which
#                        until measured is OTHER_RATIO, at or above most tokenizers' (a third over for one like
#                        cl100k): the estimate is seldom more than this factor under the server's count
SHORT_OF_CAP = 0.9     # an estimated answer this far under the cap asked for stopped before it
MIN_WINDOW = 512       # no smaller window holds a request (settings.MIN_CONTEXT_WINDOW)

class ContextWindowError(AssistantError):
    """The window cannot hold a useful request (exit 2): the message names the setting that fixes it."""

    def __init__(self, message: str, over: int = 0) -> None:
        super().__init__(message)
        self.over = over  # counted tokens the request is over its room (0: not said)


@dataclass
class ContextWindow:
    tokens: int
    source: str                 # "--context-window", "GET /props", "models.dev 1.0.398 (openai/gpt-5.2)", "the
    #                             default …", "the server's refusal", …
    ratio: float = OTHER_RATIO  # server tokens per counted (cl100k) token
    measured: bool = False      # the ratio comes from the server's own counts
    samples: tuple[float, ...] = ()  # the last measured ratios (a tuple: best of N's attempts copy the window)
    warned: bool = False        # the run was told once that the server's counts are below ours
    keep: Callable[[ContextWindow], None] | None = field(default=None, repr=False, compare=False)  # told of what
    #                             is learned from the server, to remember it for the next run (remembered.py)

    @classmethod
    def unlimited(cls) -> ContextWindow:
        return cls(tokens=10**9, source="unlimited", ratio=1.0, measured=True)

    @property
    def reserve(self) -> int:
        """Tokens kept for the answer (sent as max_tokens to OpenAI-compatible servers)."""
        return _reserve(self.tokens)

    def prompt_room(self) -> int:
        """How many counted tokens a whole request (every message) may hold."""
        return _room(self.tokens, self.ratio)

    def describe(self) -> str:
        return f"{self.tokens} tokens, from {self.source}"

    def observe(self, counted: int, server_prompt: int, shared: int = 0, complete: bool = False) -> str | None:
        """Learn from the server's count of a prompt we counted. `shared`: counted tokens at its start that an
        earlier request of the run sent too (a server's cache may hold them and leave them out of its count);
        `complete`: the server's numbers account for its cache, so its count is of the whole prompt.

        Returns a warning when the count is lower than any cache can explain: the server cut the prompt, and the
        window becomes what it read, or (when that is too small for a run's requests, or its numbers are estimates)
        the run is told once and keeps its window."""
        if counted < MIN_OBSERVED or server_prompt <= 0:
            return None
        ratio = server_prompt / counted
        if ratio > MAX_RATIO:
            logger.debug("the server counted %d tokens of a prompt of about %d: not of this prompt; ignored",
                         server_prompt, counted)
            return None
        if ratio >= TRUNCATED_RATIO:
            if complete or not shared or ratio * RATIO_MARGIN >= self.ratio:
                self._measured(ratio)
            else:  # lower than before, on a prompt whose start a cache may hold: not a smaller ratio
                logger.debug("the server counted %d tokens of a prompt of about %d, %d of them sent before; the "
                             "ratio stays %.2f", server_prompt, counted, shared, self.ratio)
            return None
        if not complete and server_prompt >= TRUNCATED_RATIO * (counted - shared):
            logger.debug("the server counted %d tokens of a prompt of about %d: the %d sent before were cached",
                         server_prompt, counted, shared)
            return None
        return self._cut(counted, server_prompt)

    def filled(self, *, prompt: float, answer: float, cap: int, estimated: bool, received: float | None = None) -> bool:
        """An answer cut off ("length"): when it ended where it and the prompt filled a window smaller than this one,
        short of the cap asked for, that is the server's window, learned now (True). `estimated`: the numbers are
        ours, the server sent none; they are taken only for a window that was itself a guess (the default): a window
        someone reported is not given up for an estimate (a gateway's own cap on answers would look the same)."""
        if estimated and self.source != DEFAULT_SOURCE:
            return False
        size = filled_window(prompt=prompt, answer=answer, cap=cap, window=self.tokens, estimated=estimated,
                             received=received)
        if size is None:
            return False
        self.tokens, self.source = size, FILLED_SOURCE
        self._learned()
        return True

    def learn(self, limit: WindowLimit, counted: int) -> None:
        """The server refused a request and named its window (and perhaps its count of the prompt)."""
        self.tokens, self.source = limit.window, "the server's refusal"
        if limit.prompt_tokens and counted >= MIN_OBSERVED and (
                TRUNCATED_RATIO <= limit.prompt_tokens / counted <= MAX_RATIO):
            self._measured(limit.prompt_tokens / counted, refused=True)
        self._learned()

    def _learned(self) -> None:
        if self.keep is not None:
            self.keep(self)

    def _measured(self, ratio: float, refused: bool = False) -> None:
        """A measured ratio. From usage numbers it never grows so far that the room falls below what a run needs
        (a proxy's fixed count over ever smaller requests would push it up and up); a refusal's count may."""
        self.samples = (*self.samples, ratio)[-RATIO_SAMPLES:]
        ratio = max(self.samples) * RATIO_MARGIN
        if not refused:
            ratio = min(ratio, max(self.ratio, (self.tokens - self.reserve) / MIN_USEFUL_ROOM))
        self.ratio, self.measured = ratio, True

    def _cut(self, counted: int, server_prompt: int) -> str | None:
        """A count no cache explains: a prompt cut to the server's window, or numbers that are not counts at all."""
        if server_prompt < self.tokens and _room(server_prompt, self.ratio) >= MIN_USEFUL_ROOM:
            self.tokens, self.source, self.warned = server_prompt, CUT_SOURCE, True
            self._learned()
            return (f"the server read only {server_prompt} tokens of a prompt of about {counted}: it cut the prompt "
                    f"to fit a smaller context window; requests now fit {self.tokens} tokens (set --context-window "
                    f"or OPENAI_CONTEXT_WINDOW to the server's real window)")
        if self.warned:
            return None
        self.warned = True
        return (f"the server counted {server_prompt} prompt tokens where we counted about {counted}: fewer than any "
                f"window a run works in, so its numbers look estimated; the context window stays {self.tokens} "
                f"tokens (if the server cuts prompts silently, set --context-window or OPENAI_CONTEXT_WINDOW to its "
                f"real window)")


def filled_window(*, prompt: float, answer: float, cap: int, window: int, estimated: bool,
                  received: float | None = None) -> int | None:
    """The window an answer cut off ("length") filled, or None when its cut was the cap asked for or its end is no
    window smaller than `window` (the one the request was sized for).

    llama-cpp-python, llama.cpp's server and Ollama answer a prompt that fits their window but leaves no room for the
    answer's cap by cutting the answer where the window ends, without a word but finish_reason "length":
    llama-cpp-python shortens max_tokens to n_ctx - prompt (llama.py, `_create_completion`: "Truncate max_tokens if
    requested tokens would exceed the context window"); llama.cpp's server, context shift off (its default since
    2025), stops generating once the window is full (ggml-org/llama.cpp#9544: "n_predict <= n_ctx - n_tokens_prompt";
    #13577: no error when running out of context); Ollama "If context is exhausted (number of input tokens (`prompt`)
    and number of output tokens (`eval`) reaches the length of the context buffer) then the generation will stop with
    a `done_reason` of `length`" (ollama/ollama#3839: num_ctx 4096, prompt_eval_count 2050, eval_count 2046).

    With the server's counts, prompt and answer make up its window exactly, or a token less, and that is a multiple
    of WINDOW_STEP: any other sum (a gateway's own cap on answers) is no window. With our estimates (llama-cpp-python
    streams no usage), which run high rather than low, the window is the largest power of two the sum reaches (every
    default of the three, 2,048 or 4,096, is one; another window is learned from the refusal a request sized for too
    large a one meets), and the answer must be clearly short of the cap.

    `received`: the answer as it arrived, estimated here in the server's tokens. An answer as long as the cap was cut
    at the cap, whatever count came with it: a gateway that recounts a cut answer with a tokenizer of its own (LiteLLM
    in front of a server that streams no usage: 230 of the 256 sent) would otherwise make a sum that lands on a window
    step by chance (one prompt in 32) read as a smaller window, and every later request shrink to it."""
    if answer >= cap * (SHORT_OF_CAP if estimated else 1) or (received or 0) >= cap * SHORT_OF_CAP:
        return None
    total = prompt + answer
    if estimated:
        size = 2 ** math.floor(math.log2(max(total * ESTIMATE_LOW, 1)))
    elif (size := math.ceil(total / WINDOW_STEP) * WINDOW_STEP) - total > FILLED_SLACK:
        return None
    return size if MIN_WINDOW <= size < window else None


def _reserve(window: int) -> int:
    return max(MIN_RESERVE, min(MAX_RESERVE, window // 8))


def _room(window: int, ratio: float) -> int:
    return max(0, math.floor((window - _reserve(window)) / ratio))


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
