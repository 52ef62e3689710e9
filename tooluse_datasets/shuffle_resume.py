"""A saved state loaded into a shuffled stream warns which rows the resume will not hand out.

datasets' ``shuffle(buffer_size=N)`` saves the position of the rows read into its buffer, not the buffer: the rows
still in it when a state is saved are never handed out after the resume (up to N; in each DataLoader worker, up
to N of that worker's rows, every worker having its own buffer). datasets warns of it only where the shuffle is
the stream's last step, which a stream of this package never is (its rows are decoded after it), so a resumed
training job lost up to N rows a worker without a word. :func:`install` (run once on import) makes
``IterableDataset.load_state_dict`` say so, naming the buffer size, whenever the state is past the start.
"""
from __future__ import annotations

import logging
from typing import Any, Iterator

from .datasets_patches import patched_once

logger = logging.getLogger("tooluse_datasets")


def buffer_sizes(ex_iterable: Any) -> Iterator[int]:
    """The ``buffer_size`` of every shuffle buffer in the stream below ``ex_iterable``."""
    from datasets.iterable_dataset import BufferShuffledExamplesIterable

    if isinstance(ex_iterable, BufferShuffledExamplesIterable):
        yield ex_iterable.buffer_size
    below = getattr(ex_iterable, "ex_iterables", None) or [getattr(ex_iterable, "ex_iterable", None)]
    for one in below:
        if one is not None:
            yield from buffer_sizes(one)


def past_the_start(state: Any) -> bool:
    """Whether a saved state names a row past the start of its stream (a shard after the first, a row of one):
    a state taken before any row keeps nothing in a buffer."""
    if isinstance(state, dict):
        if state.get("shard_idx") or state.get("shard_example_idx") or state.get("position") is not None:
            return True
        return any(past_the_start(value) for value in state.values())
    if isinstance(state, list):
        return any(past_the_start(value) for value in state)
    return False


def _in_a_dataloader_worker() -> bool:
    import sys

    if "torch" not in sys.modules:
        return False
    import torch.utils.data

    return torch.utils.data.get_worker_info() is not None


def install() -> None:
    """``IterableDataset.load_state_dict`` warns when it resumes a shuffled stream past its start (see the
    module)."""
    from datasets.iterable_dataset import IterableDataset

    original = IterableDataset.load_state_dict

    def load_state_dict(self, state_dict: dict) -> None:
        sizes = sorted(set(buffer_sizes(self._ex_iterable)))
        if sizes and past_the_start(state_dict):
            where = "this DataLoader worker's" if _in_a_dataloader_worker() else "its"
            logger.warning("resuming a shuffled stream from a saved state: the rows that were in %s shuffle buffer "
                           "when the state was saved (up to buffer_size=%s rows) are not handed out after the "
                           "resume (datasets saves the position of the rows read into the buffer, not the buffer)",
                           where, " and ".join(map(str, sizes)))
        return original(self, state_dict)

    IterableDataset.load_state_dict = patched_once(original, load_state_dict, "_warns_of_the_shuffle_buffer")
