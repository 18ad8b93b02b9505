"""How long a server may be silent before its first token: the time it takes to read the prompt, at the speed it has
shown, on top of --request-timeout. A local model on a CPU reads a long prompt for minutes before it says anything;
asking again then only queues a second copy behind the first.

The speed comes from the server's own numbers when it sends them (llama.cpp's `timings.prompt_per_second`), else from
the time its previous answer took to start; before either, from an assumed speed: slow for a server on this machine,
fast for a hosted one.
"""
from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

UNMEASURED_LOCAL_TPS = 50.0     # a local server not yet measured: llama.cpp on a laptop CPU reads a 7B model's prompt
#                                 at ~20-100 tokens/s (a 6,500-token prompt at ~60 tokens/s took ~110 s in issue #38)
UNMEASURED_HOSTED_TPS = 1000.0  # a hosted server not yet measured: GPUs read thousands of tokens a second
MIN_MEASURED_PROMPT = 256       # a prompt shorter than this says more about latency than about reading speed


class PromptPace:
    """The prompt-reading speed a server has shown (tokens a second), shared by the requests of a run."""

    def __init__(self, local: bool) -> None:
        self.assumed = UNMEASURED_LOCAL_TPS if local else UNMEASURED_HOSTED_TPS
        self.tokens_per_s: float | None = None
        self.source = "assumed for a server not yet measured"
        self._lock = threading.Lock()

    def reading_time(self, prompt_tokens: float) -> float:
        """Seconds the server may need to read a prompt of this many tokens before its first token."""
        return max(prompt_tokens, 0.0) / (self.tokens_per_s or self.assumed)

    def learn(self, timings: Mapping[str, Any] | None, prompt_tokens: float, first_token_s: float | None) -> None:
        """After an answer: llama.cpp's own measurement, else the prompt's tokens over the time to the first event."""
        speed, source = None, ""
        if isinstance(timings, Mapping):
            measured, read = timings.get("prompt_per_second"), timings.get("prompt_n")
            if isinstance(measured, (int, float)) and measured > 0 and isinstance(read, int) \
                    and read >= MIN_MEASURED_PROMPT:
                speed, source = float(measured), "as the server's timings showed"
        if speed is None and first_token_s and first_token_s > 0 and prompt_tokens >= MIN_MEASURED_PROMPT:
            speed, source = prompt_tokens / first_token_s, "as the previous answer showed"
        if speed is not None:
            with self._lock:
                self.tokens_per_s, self.source = speed, source

    def gave_up(self, timeout: float, prompt_tokens: float) -> str:
        """The one line that says how long the server was waited for, and which option allows more."""
        reading = self.reading_time(prompt_tokens)
        allowed = f"{timeout:g} s of --request-timeout"
        if reading >= 1:
            allowed += (f" plus {reading:.0f} s to read a prompt of about {prompt_tokens:.0f} tokens at "
                        f"{self.tokens_per_s or self.assumed:.0f} tokens/s, {self.source}")
        return (f"Gave up waiting for the model server: it sent nothing for {timeout + reading:.0f} s ({allowed}); "
                f"a slow local model needs a larger --request-timeout")
