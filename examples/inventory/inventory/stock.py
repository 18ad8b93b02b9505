"""Stock keeping: quantities and prices per SKU."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

SKU_RE = re.compile(r"^[A-Z]{3}-\d{4}$")


def parse_sku(text: str) -> str:
    """Normalize a SKU such as ' abc-0042 ' to 'ABC-0042'; raise ValueError when malformed."""
    sku = text.strip()
    if not SKU_RE.match(sku):
        raise ValueError(f"malformed SKU: {text!r}")
    return sku


@dataclass
class Stock:
    quantities: dict[str, int] = field(default_factory=dict)
    prices_cents: dict[str, int] = field(default_factory=dict)

    def add(self, sku: str, quantity: int, price_cents: int) -> None:
        sku = parse_sku(sku)
        self.quantities[sku] = self.quantities.get(sku, 0) + quantity
        self.prices_cents[sku] = price_cents

    def remove(self, sku: str, quantity: int) -> None:
        sku = parse_sku(sku)
        self.quantities[sku] = self.quantities.get(sku, 0) - quantity

    def total_value(self, discount: float = 0.0) -> int:
        """Value of everything in stock in cents, after a fractional discount, rounded to the nearest cent."""
        total = sum(q * self.prices_cents[s] for s, q in self.quantities.items())
        return int(total * (1 - discount))
