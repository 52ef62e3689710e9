"""Types of the arguments of load(), validate() and a builder made directly, checked before anything is read."""
from __future__ import annotations

import os
from typing import Any


def check_argument_types(**arguments: Any) -> None:
    """A TypeError naming the argument for a value of the wrong type, before anything is read: datasets would
    fail deep inside (``unhashable type: 'dict'`` after preparing every split, for ``split=["train"]``), or
    write into a folder named after the value's repr (``cache_dir=b"/data"`` made ``./b'/data'``)."""
    from datasets import NamedSplit, ReadInstruction

    for name, value in arguments.items():
        if value is None:
            continue
        if name in ("config", "config_name"):  # (config_name: a builder made directly)
            ok, wanted = isinstance(value, str), "a format name (str)"
        elif name == "split":
            ok = isinstance(value, (str, ReadInstruction, NamedSplit))
            wanted = "one split name or expression (str, e.g. 'train' or 'train[:10%]+test'), or None for every split"
        elif name in ("streaming", "keep_in_memory"):
            ok, wanted = isinstance(value, bool) or (isinstance(value, int) and value in (0, 1)), "True or False"
        elif name == "revision":  # resolving it failed deep inside ("expected string or bytes-like object")
            ok, wanted = isinstance(value, str), "a branch, tag or commit (str), or None for the pinned one"
            if ok and not value.strip():  # an unset shell variable: read as no revision, the pinned one
                raise ValueError("revision is empty: give a branch, tag or commit, or None for the pinned one")
        else:  # folders
            ok = isinstance(value, (str, os.PathLike)) and isinstance(os.fspath(value), str)
            wanted = "a path (str or pathlib.Path)"
            if ok and not os.fspath(value).strip():  # an unset shell variable, read as none given: data_dir=""
                # read the upstream files instead of a folder's, cache_dir="" prepared into datasets' own cache
                meaning = {"data_dir": " for the source's upstream files", "cache_dir": " for datasets' own cache"}
                raise ValueError(f"{name} is empty: give a path, or None{meaning.get(name, '')}")
        if not ok:
            raise TypeError(f"{name} must be {wanted}, got {value!r:.80} ({type(value).__name__})")
