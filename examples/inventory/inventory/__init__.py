"""A tiny inventory package with a few intentional bugs, for trying the assistant."""
from inventory.stock import Stock, parse_sku

__all__ = ["Stock", "parse_sku"]
