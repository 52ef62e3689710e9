"""A DataLoader worker resumes its own saved state, loaded once, into its own part of the stream.

In a DataLoader worker, datasets' ``IterableDataset._iter_pytorch`` builds the stream's iterables
(``_prepare_ex_iterable_for_iteration``), which loads the resumed state into them, then keeps the worker's shards
and loads the state again into those. The state is the worker's own, saved from its part: where the whole has
more sub-streams than the part (a mix of streams split with ``split_dataset_by_node``, a shuffled stream reading
several shards at once), the first load failed in the worker with a bare
``IndexError: list index out of range`` and the loader could not resume (datasets 5.2; plain datasets streams
too). :func:`install` (run once on import) leaves the state out of that first load: the second one, into the
worker's part, is the one the rows come from.

A worker that had handed out nothing when the loader was saved reports the state it had at start-up: the whole
stream's, before the worker divided it and shifted its random generators by its id. Its positions are all at the
start, which any part resumes alike, but the generator of a weighted ``interleave_datasets`` is the whole
stream's: loaded into the part, it replaced the worker's own, and the resumed worker drew its members in another
order than it would have (rows it would not have handed out, some twice). Such a state is loaded without its
generators, so the part keeps its own; where the part is made of other streams than the whole (a concatenation's
part is its single shards), the part starts afresh (:class:`~.resume_state.StartUpState`).
"""
from __future__ import annotations

from .datasets_patches import patched_once
from .resume_state import StartUpState

# Set on a stream by its _iter_pytorch until the first _prepare_ex_iterable_for_iteration of that pass: only that
# one skips the state (a worker's .iter(batch_size) or plain iteration, which load it once, are left alone).
_FIRST_PREPARE = "_tooluse_worker_prepares_whole"

# The keys of a state holding a random generator's place (datasets' weighted interleave_datasets).
_GENERATOR_KEYS = ("bit_generator_state", "bit_generator_index_offset")


def _without_generators(state):
    """``state`` with no random generator's place in it, at any depth: loaded, it leaves the stream's own."""
    if isinstance(state, dict):
        return {key: _without_generators(value) for key, value in state.items() if key not in _GENERATOR_KEYS}
    if isinstance(state, list):
        return [_without_generators(value) for value in state]
    return state


def install() -> None:
    """The first ``_prepare_ex_iterable_for_iteration`` of ``_iter_pytorch`` loads no saved state (see the
    module)."""
    from datasets.iterable_dataset import IterableDataset

    prepare, iter_pytorch = IterableDataset._prepare_ex_iterable_for_iteration, IterableDataset._iter_pytorch

    def _prepare_ex_iterable_for_iteration(self, *args, **kwargs):
        starting = getattr(self, "_starting_state_dict", None)
        if not self.__dict__.pop(_FIRST_PREPARE, False) or not starting:
            return prepare(self, *args, **kwargs)
        self._starting_state_dict = None
        try:
            return prepare(self, *args, **kwargs)
        finally:
            # The whole stream's state before any row (set by prepare): a start-up state, loaded into the
            # worker's part without the whole stream's generators, or not at all where its streams do not fit the
            # part's (see the module), for this pass only.
            if starting == self._state_dict:
                starting = _without_generators(starting)
                starting["examples_iterable"] = StartUpState(starting["examples_iterable"])
            self._starting_state_dict = starting

    def _iter_pytorch(self):
        self.__dict__[_FIRST_PREPARE] = True
        starting = getattr(self, "_starting_state_dict", None)
        try:
            yield from iter_pytorch(self)
        finally:
            self.__dict__.pop(_FIRST_PREPARE, None)
            self._starting_state_dict = starting

    IterableDataset._prepare_ex_iterable_for_iteration = patched_once(prepare, _prepare_ex_iterable_for_iteration,
                                                                      "_resumes_in_the_workers_part")
    IterableDataset._iter_pytorch = patched_once(iter_pytorch, _iter_pytorch, "_resumes_in_the_workers_part")
