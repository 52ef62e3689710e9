"""The first row of each config, as the card shows it: decoded exactly, long strings and lists cut."""
from __future__ import annotations

from typing import Any

import pyarrow as pa

from ..exact_features import ExactFeatures

EXAMPLE_MAX_CHARS = 300
EXAMPLE_MAX_ITEMS = 6
# Objects are cut later than lists: a tool's parameters often have more than a handful of properties, and
# the card should show them; an object of thousands of keys (arguments of a bulk call) would fill it.
EXAMPLE_MAX_KEYS = 24


def first_example(table: pa.Table, decoder: ExactFeatures) -> Any:
    """The first row of ``table`` decoded with ``decoder`` and shortened; None for an empty table."""
    if not table.num_rows:
        return None
    return shorten(decoder.decode_example(table.slice(0, 1).to_pylist()[0]))


def shorten(value: Any, max_chars: int = EXAMPLE_MAX_CHARS, max_items: int = EXAMPLE_MAX_ITEMS) -> Any:
    """A copy of ``value`` with long strings, lists and objects cut (and the cut said), for display in a card."""
    if isinstance(value, str) and len(value) > max_chars:
        return f"{value[:max_chars]}… [+{len(value) - max_chars} chars]"
    if isinstance(value, list):
        kept = [shorten(v, max_chars, max_items) for v in value[:max_items]]
        return kept + ([f"… [+{len(value) - max_items} items]"] if len(value) > max_items else [])
    if isinstance(value, dict):
        kept = {k: shorten(v, max_chars, max_items) for k, v in list(value.items())[:EXAMPLE_MAX_KEYS]}
        if len(value) > EXAMPLE_MAX_KEYS:
            kept["…"] = f"[+{len(value) - EXAMPLE_MAX_KEYS} keys]"
        return kept
    return value
