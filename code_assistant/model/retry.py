"""Whether a refused request is worth asking again, and when: pure functions of the answer's status, headers and body.

A refusal that will not pass by waiting ends the run at once, with its cause named (lasting_cause): an account out of
quota or credit, a key refused, a model the server does not have. OpenAI sends the quota as a 429 like a rate limit
(https://github.com/ChatGPTNextWeb/NextChat/issues/3123: {"error": {"message": "You exceeded your current quota,
please check your plan and billing details.", "type": "insufficient_quota", "code": "insufficient_quota"}}), so the
status alone cannot tell them apart.

A refusal that passes (429, 408, 409, 5xx) is asked again after the wait the server names (server_pause), else after
an exponential backoff. The server names it in `retry-after-ms` (OpenAI, Azure OpenAI), `retry-after` in seconds or as
an HTTP date (RFC 9110; Azure OpenAI's 429 says "Please retry after 3 seconds" beside `retry-after: 3`:
https://github.com/microsoft/action-python/issues/12), or OpenAI's `x-ratelimit-reset-requests` /
`x-ratelimit-reset-tokens` as a duration ("12ms", "1s", "6m0s": https://thoughtbot.com/blog/openai-rate-limits).
A wait longer than MAX_WAIT_S is not waited for: the run stops and says how long the server asked for (Azure has
asked for 86400 s: https://github.com/jasonacox/TinyLLM/issues/17).
"""
from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

from code_assistant.model.error_bodies import body_codes, body_message

# OpenAI's own SDKs honour a server's retry-after up to 60 s and back off on their own beyond it
# (https://github.com/openai/openai-node/issues/1108); a run waits as long, and no longer: a longer wait is a quota
# window that will not reopen while a person watches.
MAX_WAIT_S = 60.0
_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


@dataclass(frozen=True)
class Pause:
    """A wait the server asked for: how long, and the header that said so (as sent)."""

    seconds: float
    header: str
    value: str

    def words(self) -> str:
        return f"{self.seconds:.1f} s, as the server's {self.header}: {self.value} asks"


def duration_s(text: str) -> float | None:
    """Seconds in OpenAI's reset durations ("12ms", "1s", "6m0s", "1h2m3.5s") or a bare number of seconds."""
    text = text.strip()
    try:
        return max(float(text), 0.0)
    except ValueError:
        pass
    parts = _DURATION_RE.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _UNITS[u] for n, u in parts)


def _retry_after(value: str, now: float) -> float | None:
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        return max(parsedate_to_datetime(value).timestamp() - now, 0.0)
    except (TypeError, ValueError, IndexError):
        return None


def server_pause(headers: Mapping[str, str], now: float | None = None) -> Pause | None:
    """The wait the server named (None: it named none): retry-after-ms, else retry-after, else the longer of OpenAI's
    two reset durations (the request may need both limits back)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    if (value := lowered.get("retry-after-ms")) is not None:
        try:
            return Pause(max(float(value), 0.0) / 1000, "retry-after-ms", value)
        except ValueError:
            pass
    if (value := lowered.get("retry-after")) is not None and \
            (seconds := _retry_after(value, time.time() if now is None else now)) is not None:
        return Pause(seconds, "retry-after", value)
    resets = [(s, name, lowered[name]) for name in ("x-ratelimit-reset-requests", "x-ratelimit-reset-tokens")
              if name in lowered and (s := duration_s(lowered[name])) is not None]
    if resets:
        seconds, name, value = max(resets)
        return Pause(seconds, name, value)
    return None


# A code or type in the body that no wait will change, and what it means for the person.
_LASTING: dict[str, str] = {
    "insufficient_quota": "the account's quota is used up",  # OpenAI (above)
    "billing_hard_limit_reached": "the account reached its billing limit",  # OpenAI
    "billing_not_active": "the account's billing is not active",  # OpenAI
    "access_terminated": "the account's access was terminated",  # OpenAI
    "invalid_api_key": "the API key was refused",  # OpenAI's 401 code
    "authentication_error": "the API key was refused",  # Anthropic's type
    "auth_error": "the API key was refused",  # LiteLLM's (https://github.com/BerriAI/litellm/issues/4880)
    # LiteLLM without a database, a key that is not its master key (https://github.com/BerriAI/litellm/pull/20837)
    "no_db_connection": "the gateway cannot check the API key (LiteLLM without a database takes only its master key)",
    "permission_denied": "the API key may not use this model",  # Gemini's status
    "model_not_found": "the server has no such model",  # OpenAI's 404 code
}
# The same causes where only the message says them (OpenRouter's 402 "Insufficient credits", an older quota body
# with code null quoted in https://github.com/ChatGPTNextWeb/NextChat/issues/1792), and OpenAI's 429 for a request
# larger than the whole per-minute limit, code rate_limit_exceeded like a passing one
# (https://github.com/TheR1D/shell_gpt/issues/653: "Request too large for gpt-4o in organization ... on tokens per min
# (TPM): Limit 30000, Requested 31538. The input or output tokens must be reduced in order to run successfully.").
# Not Gemini's: its 429 RESOURCE_EXHAUSTED says "You exceeded your current quota, please check your plan and billing
# details" for a per-minute limit too (https://github.com/google-gemini/gemini-cli/issues/8437), which waiting passes.
_LASTING_WORDS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"Request too large for .* per min", re.IGNORECASE),
     "the request is larger than the account's per-minute token limit"),
    (re.compile(r"exceeded your current quota", re.IGNORECASE), _LASTING["insufficient_quota"]),
    (re.compile(r"insufficient (credits|balance)", re.IGNORECASE), "the account has no credits left"),
)


def lasting_cause(status: int, body: Any) -> str | None:
    """What a refusal that no wait will change says, for the person (None: it may pass, or it is not one of these)."""
    if status < 400:
        return None
    codes = body_codes(body)
    if cause := next((_LASTING[c] for c in sorted(codes) if c in _LASTING), None):
        return cause
    if "resource_exhausted" in codes:  # Gemini words a per-minute limit as OpenAI words a quota: it passes
        return None
    message = body_message(body)
    return next((cause for pattern, cause in _LASTING_WORDS if pattern.search(message)), None)


def transient(status: int) -> bool:
    """A status that may pass when asked again: a timeout, a conflict, a rate limit, the server's own failure."""
    return status in (408, 409, 429) or status >= 500
