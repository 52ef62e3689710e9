"""A saved stream state loaded into a stream built with other steps is a ValueError saying so.

datasets' ``load_state_dict`` copies a saved state into the one the stream builds from its steps (map, filter,
shuffle, take, skip, interleave, ...), key by key. A state saved before a training script gained or lost a step,
or saved from another dataset, failed there at the first row with a bare ``KeyError: 'shard_idx'`` (or
``'examples_iterable'``, ``'taken'``...), which names neither the state nor the stream. :func:`install` (run
once on import) checks the saved state's keys against the stream's before it is loaded, for every stream of
the process: it refuses only what datasets would fail on, saying what does not fit. What is no stream's state
at all (a StatefulDataLoader's, given to the stream instead of the loader; the state of the stream's steps
alone; not a dict), which failed at the first row with ``KeyError: 'epoch'``, is refused when it is loaded.
"""
from __future__ import annotations

from typing import Any, Optional

from .datasets_patches import patched_once


def mismatch(live: Any, saved: Any, path: str = "state") -> Optional[str]:
    """Where ``saved`` holds a state of another kind than ``live`` (keys the stream's state lacks), described;
    None if it fits. A None on either side fits: datasets keeps the stream's value, or takes the saved one."""
    if saved is None or live is None:
        return None
    if isinstance(live, dict):
        if not isinstance(saved, dict):
            return f"{path} is {type(saved).__name__}, where this stream has {_kind(live)}"
        unknown = sorted(map(str, set(saved) - set(live)))
        if unknown:
            return f"{path} is {_kind(saved)}, where this stream has {_kind(live)} (which has no {', '.join(unknown)})"
        for key in saved:
            found = mismatch(live[key], saved[key], f"{path}[{key!r}]")
            if found:
                return found
    elif isinstance(live, list) and isinstance(saved, list):
        if len(saved) != len(live):
            # A mix of other members (or shards read at once) fails in datasets with a bare IndexError, or
            # loses a member's place where it has more. (A DataLoader worker's start-up state, the whole
            # stream's, is a StartUpState: its part starts afresh.)
            return f"{path} holds {len(saved)} streams' states, where this stream has {len(live)}"
        for i, (one_live, one_saved) in enumerate(zip(live, saved)):
            found = mismatch(one_live, one_saved, f"{path}[{i}]")
            if found:
                return found
    return None


class StartUpState(dict):
    """A DataLoader worker's start-up state, the whole stream's before any row (see worker_resume): it names no
    row, so a worker's part of other streams than the whole (a concatenation's part is its single shards) starts
    afresh from it."""


def _kind(state: dict) -> str:
    return f"the state of {state['type']}" if state.get("type") else "a state of other keys"


# What IterableDataset.state_dict() gives: its steps' state and the epoch it was taken in (the keys datasets reads
# back; others it passes over).
STREAM_KEYS = ("examples_iterable", "epoch")


def not_a_stream_state(state: Any) -> Optional[str]:
    """What ``state`` is, where it is no stream's state_dict; None if it is one, or no state (None, {}: a stream
    given either starts afresh)."""
    if not state and (state is None or isinstance(state, dict)):
        return None
    if not isinstance(state, dict):
        return f"got {type(state).__name__} {state!r:.60}"
    if all(key in state for key in STREAM_KEYS):
        return None
    if "dataset_state" in state or "_snapshot" in state:
        return "got a StatefulDataLoader's state: restore it with the loader's load_state_dict"
    if "type" in state:
        return f"got the state of the stream's steps ({state['type']}): load the whole state_dict()"
    return f"got a dict of {', '.join(map(repr, sorted(map(str, state))))}"


def install() -> None:
    """Every examples iterable's ``load_state_dict`` checks the saved state's keys first, and a stream's
    ``load_state_dict`` that it is given a stream's state (see the module)."""
    from datasets.iterable_dataset import IterableDataset, _BaseExamplesIterable

    load_stream_state = IterableDataset.load_state_dict

    def load_a_streams_state(self, state_dict: dict) -> None:
        found = not_a_stream_state(state_dict)
        if found:
            raise ValueError(f"this is not a stream's state_dict (IterableDataset.state_dict() gives a dict of "
                             f"'examples_iterable' and 'epoch'): {found}")
        # datasets applies a state only in the epoch it was saved in: one of a later epoch, loaded into the new
        # stream of a restarted job (epoch 0), was passed over and that epoch read again from its first row
        if state_dict and state_dict["epoch"] > self.epoch:
            self.set_epoch(state_dict["epoch"])
        return load_stream_state(self, state_dict)

    IterableDataset.load_state_dict = patched_once(load_stream_state, load_a_streams_state, "_checks_a_streams_state")

    original = _BaseExamplesIterable.load_state_dict

    def load_state_dict(self, state_dict: dict) -> dict:
        found = mismatch(self._init_state_dict(), state_dict)
        if found and isinstance(state_dict, StartUpState):
            state_dict = self._init_state_dict()
        elif found:
            raise ValueError(f"this state_dict was saved from a stream built otherwise: {found}. A state resumes "
                             "a stream built with the same steps (map, filter, shuffle, take, skip, interleave...) "
                             "over the same data it was saved from")
        return original(self, state_dict)

    _BaseExamplesIterable.load_state_dict = patched_once(original, load_state_dict, "_checks_saved_shape")
