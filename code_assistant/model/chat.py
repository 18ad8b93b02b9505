"""The chat-model seam: an OpenAI-compatible client with retries, usage accounting and one-line errors."""
from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import openai

from code_assistant import redact
from code_assistant.errors import EXIT_FAILED, AssistantError

logger = logging.getLogger(__name__)

Message = dict[str, str]


class ModelError(AssistantError):
    """The model cannot be used (bad key, unknown model, server gone after retries). One line for the user.

    exit_code is 2 for configuration problems (401/403/404), 1 for a server that stayed unavailable.
    """

    exit_code = EXIT_FAILED


@dataclass
class ChatResponse:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class Usage:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, response: ChatResponse) -> None:
        self.calls += 1
        self.prompt_tokens += response.prompt_tokens
        self.completion_tokens += response.completion_tokens

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class ChatModel(Protocol):
    name: str
    usage: Usage

    def complete(self, messages: list[Message], on_token: Callable[[str], None] | None = None) -> ChatResponse: ...


def _fatal_message(exc: openai.APIStatusError, base_url: str | None) -> str:
    where = base_url or "api.openai.com"
    detail = ""
    try:
        body = exc.response.json()
        detail = (body.get("error") or {}).get("message", "") if isinstance(body, dict) else ""
    except Exception:  # noqa: BLE001 - a non-JSON error body is still an error
        detail = ""
    suffix = f": {detail}" if detail else ""
    if exc.status_code == 401:
        return f"the model server at {where} rejected the API key (401 Unauthorized){suffix}; check OPENAI_API_KEY"
    if exc.status_code == 403:
        return f"the model server at {where} refused access (403 Forbidden){suffix}"
    if exc.status_code == 404:
        return f"the model or endpoint was not found at {where} (404){suffix}; check OPENAI_MODEL and OPENAI_BASE_URL"
    return f"the model server at {where} answered {exc.status_code}{suffix}"


@dataclass
class OpenAIChat:
    """Any OpenAI-compatible /chat/completions server: OpenAI, Ollama, vLLM, LM Studio."""

    name: str
    api_key: str
    base_url: str | None = None
    timeout: float = 120.0
    max_retries: int = 3
    backoff_s: float = 1.0
    temperature: float = 0.0
    usage: Usage = field(default_factory=Usage)
    sleep: Callable[[float], None] = time.sleep

    def __post_init__(self) -> None:
        # Retries are ours (logged, bounded); the client's own are off so the count is honest.
        self._client = openai.OpenAI(api_key=self.api_key, base_url=self.base_url, timeout=self.timeout, max_retries=0)

    @property
    def client(self) -> openai.OpenAI:
        return self._client

    def complete(self, messages: list[Message], on_token: Callable[[str], None] | None = None) -> ChatResponse:
        messages = redact_messages(messages)
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self._stream(messages, on_token) if on_token else self._once(messages)
                self.usage.add(response)
                return response
            except (openai.RateLimitError, openai.InternalServerError, openai.APITimeoutError,
                    openai.APIConnectionError) as exc:
                if attempt > self.max_retries:
                    raise ModelError(f"the model server did not answer after {attempt} tries: {_short(exc)}") from exc
                delay = self.backoff_s * (2 ** (attempt - 1)) * (1 + random.random() / 4)
                logger.warning("model call failed (%s); retry %d/%d in %.1fs", _short(exc), attempt,
                               self.max_retries, delay)
                self.sleep(delay)
            except openai.APIStatusError as exc:
                if exc.status_code in (408, 409) or exc.status_code >= 500:
                    if attempt > self.max_retries:
                        raise ModelError(_fatal_message(exc, self.base_url)) from exc
                    self.sleep(self.backoff_s * (2 ** (attempt - 1)))
                    continue
                raise ModelError(_fatal_message(exc, self.base_url),
                                 exit_code=2 if exc.status_code in (401, 403, 404) else 1) from exc

    def _once(self, messages: list[Message]) -> ChatResponse:
        completion = self._client.chat.completions.create(
            model=self.name, messages=messages, temperature=self.temperature)  # type: ignore[arg-type]
        if not completion.choices:
            raise ModelError("the model server returned no choices")
        text = completion.choices[0].message.content or ""
        usage = completion.usage
        return ChatResponse(text, usage.prompt_tokens if usage else 0, usage.completion_tokens if usage else 0)

    def _stream(self, messages: list[Message], on_token: Callable[[str], None]) -> ChatResponse:
        stream = self._client.chat.completions.create(
            model=self.name, messages=messages, temperature=self.temperature, stream=True,  # type: ignore[arg-type]
            stream_options={"include_usage": True})
        parts: list[str] = []
        prompt_tokens = completion_tokens = 0
        for chunk in stream:
            if chunk.usage:
                prompt_tokens, completion_tokens = chunk.usage.prompt_tokens, chunk.usage.completion_tokens
            for choice in chunk.choices:
                piece = choice.delta.content or ""
                if piece:
                    parts.append(piece)
                    on_token(piece)
        return ChatResponse("".join(parts), prompt_tokens, completion_tokens)


def redact_messages(messages: list[Message]) -> list[Message]:
    """The one choke point: nothing that looks like a credential leaves this process."""
    cleaned: list[Message] = []
    total = 0
    for message in messages:
        text, count = redact.redact(message.get("content", ""))
        total += count
        cleaned.append({**message, "content": text})
    if total:
        logger.info("redacted %d secret(s) before calling the model", total)
    return cleaned


def _short(exc: Exception) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200]
