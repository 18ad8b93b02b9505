"""What a model's tokens cost, at the prices the model catalogue publishes (catalogue.py); a model it does not price,
and any model on a server on this machine: tokens only. The base prices: a request over the 200k tokens some models
charge more for (gemini-2.5-pro) is counted at them too."""
from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from code_assistant.model.catalogue import lookup


def is_local(base_url: str | None) -> bool:
    """A server on this machine (localhost, 127.0.0.0/8, ::1): whatever its model is called, nobody bills for it."""
    if not base_url:
        return False
    host = (urlsplit(base_url if "//" in base_url else f"//{base_url}").hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def estimate_cost(model: str, prompt_tokens: int, completion_tokens: int, base_url: str | None = None, *,
                  cached_tokens: int = 0, reasoning_tokens: int = 0) -> float | None:
    """Dollars, or None when there is no price: a model the catalogue does not price, or any model on a local server.
    `cached_tokens`: the part of the prompt a cache served (OpenAI's prompt_tokens_details.cached_tokens), at the
    cached-input price; `reasoning_tokens`: the part of the completion spent reasoning, at the reasoning price where
    the model has one apart (else, as OpenAI bills them, as output)."""
    if is_local(base_url):
        return None
    info = lookup(model)
    if info is None or info.input_price is None or info.output_price is None:
        return None
    cached = min(max(cached_tokens, 0), prompt_tokens)
    reasoning = min(max(reasoning_tokens, 0), completion_tokens)
    dollars = ((prompt_tokens - cached) * info.input_price
               + cached * (info.cached_input_price if info.cached_input_price is not None else info.input_price)
               + (completion_tokens - reasoning) * info.output_price
               + reasoning * (info.reasoning_price if info.reasoning_price is not None else info.output_price))
    return round(dollars / 1_000_000, 6)
