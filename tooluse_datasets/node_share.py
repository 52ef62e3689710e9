"""Skip reports of a stream that nodes split row by row.

datasets' ``split_dataset_by_node`` hands out whole shards only when the world size divides their number;
otherwise every node reads every row and keeps every world_size-th (a ``StepExamplesIterable`` over the stream).
Each node then reads and skips every row of the split, and its report used to count them all: the nodes'
reports added up to world_size times the split's, and a shared ``rows_path`` listed every skipped row once per
node. :class:`NodeShare` is the part of those rows a node's report counts: the rows it keeps, and the skipped
rows read just before each (the ones after the split's last row go to the node that would keep the next), so
every row read is counted by one node and the reports add up to the split's.

:func:`install` (run once on import) makes each ``StepExamplesIterable`` give its node's share to the streams
of this package below it, in a copy of the iterables down to them: the dataset that was split keeps its own
streams, counting everything.
"""
from __future__ import annotations

import copy
import dataclasses

from .datasets_patches import patched_once


@dataclasses.dataclass
class NodeShare:
    """Node ``node`` of ``nodes`` keeps rows ``node``, ``node + nodes``, ... of those a stream hands out.
    ``handed``: how many it has handed out so far, modulo ``nodes`` (kept in the stream's state, so a resumed
    stream goes on where it was, as datasets' step does)."""

    nodes: int
    node: int
    handed: int = 0

    def keeps_next(self) -> bool:
        """Whether this node keeps the next row handed out (and so counts the skipped rows before it)."""
        return self.handed == self.node

    def hand_out(self, rows: int = 1) -> int:
        """``rows`` rows are handed out: how many of them this node keeps."""
        kept = sum(1 for i in range(self.handed, self.handed + rows) if i % self.nodes == self.node)
        self.handed = (self.handed + rows) % self.nodes
        return kept


def shared_by_nodes(ex_iterable, nodes: int, node: int):
    """``ex_iterable`` with the streams of this package below it counting node ``node``'s share only; the
    iterables on the way are copied (not changed), and one of another kind is left as it is."""
    share = getattr(ex_iterable, "shared_by_nodes", None)
    if share is not None:
        return share(nodes, node)
    for attribute in ("ex_iterable", "ex_iterables"):  # datasets' wrappers: one iterable below, or several
        below = getattr(ex_iterable, attribute, None)
        if isinstance(below, list):
            shared = [shared_by_nodes(one, nodes, node) for one in below]
            changed = any(a is not b for a, b in zip(shared, below))
        elif below is not None:
            shared = shared_by_nodes(below, nodes, node)
            changed = shared is not below
        else:
            continue
        if not changed:
            return ex_iterable
        clone = copy.copy(ex_iterable)
        setattr(clone, attribute, shared)
        return clone
    return ex_iterable


def install() -> None:
    """Every ``StepExamplesIterable`` made from now on shares the skip reports below it out (see the module)."""
    from datasets.iterable_dataset import StepExamplesIterable

    original = StepExamplesIterable.__init__

    def __init__(self, ex_iterable, step: int, offset: int):
        original(self, shared_by_nodes(ex_iterable, step, offset), step, offset)

    StepExamplesIterable.__init__ = patched_once(original, __init__, "_shares_reports")
