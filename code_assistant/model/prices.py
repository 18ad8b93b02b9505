"""What a model's tokens cost, for the models whose prices are known; unknown and local models: tokens only."""
from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

# USD per million tokens (input, output). Unknown models: tokens only.
PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o": (2.50, 10.00), "gpt-4o-mini": (0.15, 0.60), "gpt-4.1": (2.00, 8.00), "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40), "o3-mini": (1.10, 4.40), "o4-mini": (1.10, 4.40), "o3": (2.00, 8.00),
    "gpt-5": (1.25, 10.00), "gpt-5-mini": (0.25, 2.00),
}


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


def estimate_cost(model: str, prompt_tokens: int, completion_tokens: int, base_url: str | None = None) -> float | None:
    """Dollars, or None when there is no price: an unknown model, or any model on a local server."""
    if is_local(base_url):
        return None
    key = model.split("/")[-1]
    prices = PRICES.get(key) or next((v for k, v in sorted(PRICES.items(), key=lambda kv: -len(kv[0]))
                                      if key.startswith(k + "-")), None)
    if prices is None:
        return None
    return round((prompt_tokens * prices[0] + completion_tokens * prices[1]) / 1_000_000, 6)
