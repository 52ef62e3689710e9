"""Rows read from shards regrouped into :class:`~.shard.RawBatch` lists of a given size (and weight)."""
from __future__ import annotations

from typing import Callable, Iterator, Optional

from ..errors import ToolUseDataError
from .shard import NativeItem, RawBatch


def joined_batches(batches: Iterator[RawBatch], rows: int, weight: Optional[Callable[[NativeItem], int]] = None,
                   most_weight: int = 0) -> Iterator[RawBatch]:
    """``batches`` regrouped in order into batches of ``rows`` rows (the last may hold fewer), and with
    ``weight``, of at most ``most_weight`` in all (a heavier row is a batch of its own). A read error comes
    after the rows before it, as readers give it."""
    return _batched(((item, position) for batch in batches for item, position in zip(batch.items, batch.positions)),
                    rows, weight, most_weight)


def _batched(rows: Iterator[tuple[NativeItem, tuple[int, int]]], size: int,
             weight: Optional[Callable[[NativeItem], int]] = None, most_weight: int = 0) -> Iterator[RawBatch]:
    """``(item, position)`` pairs as batches of ``size`` (and of at most ``most_weight``, see joined_batches); a
    read error comes after the rows before it, as readers give it."""
    items: list[NativeItem] = []
    positions: list[tuple[int, int]] = []
    held = 0
    try:
        for item, position in rows:
            if weight is not None:
                heft = weight(item)
                if items and held + heft > most_weight:
                    yield RawBatch(items, positions)
                    items, positions, held = [], [], 0
                held += heft
            items.append(item)
            positions.append(position)
            if len(items) >= size:  # now, not when the next row comes: it may be a read away
                yield RawBatch(items, positions)
                items, positions, held = [], [], 0
    except GeneratorExit:  # a consumer that stopped early; named first, so that a stream left unfinished until
        raise              # interpreter exit, when module names may be gone (None), closes quietly
    except ToolUseDataError:
        if items:
            yield RawBatch(items, positions)
        raise
    if items:
        yield RawBatch(items, positions)
