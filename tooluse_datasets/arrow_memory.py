"""The Arrow memory pool this package's own reads and tables allocate from."""
from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
from typing import Iterator, Optional

import pyarrow as pa


def package_memory_pool() -> Optional[pa.MemoryPool]:
    """jemalloc (else the system allocator) where pyarrow's default is mimalloc on Linux, unless
    ``ARROW_DEFAULT_MEMORY_POOL`` states the user's choice; None keeps pyarrow's default. Asked at each use, so
    that a pool the user sets with ``pa.set_memory_pool`` after the package's first read is kept too (one
    set to mimalloc cannot be told from pyarrow's default, and is replaced).

    Conversion frees and allocates Arrow buffers a batch at a time (the arrays a Parquet reader decodes, the
    tables prepare builds), and mimalloc backs them with transparent huge pages where the kernel offers them on
    request (``madvise``, common on Linux): each purge and refault zeroes 2 MiB in the kernel. Measured on 30K
    ToolMind rows, that was a fifth to a quarter of preparing's CPU time, and three quarters of a bare
    ``iter_batches`` + ``orjson.loads`` loop's, in some runs and not others. (A reader still decompresses pages
    into Arrow's built-in default pool, which no Python call changes: ``ARROW_DEFAULT_MEMORY_POOL`` does.)"""
    pool = replacement_pool()
    # The default is the package's own pool while another thread opens a file (default_pool).
    if pool is None or pa.default_memory_pool().backend_name not in ("mimalloc", pool.backend_name):
        return None
    return pool


@functools.lru_cache(maxsize=1)
def replacement_pool() -> Optional[pa.MemoryPool]:
    """The pool that replaces mimalloc: jemalloc, else the system allocator; None off Linux or where
    ``ARROW_DEFAULT_MEMORY_POOL`` is set."""
    if os.environ.get("ARROW_DEFAULT_MEMORY_POOL") or not sys.platform.startswith("linux"):
        return None
    return pa.jemalloc_memory_pool() if "jemalloc" in pa.supported_memory_backends() else pa.system_memory_pool()


# pyarrow's default pool is one for the process: threads swapping it at once (datasets' interleave_datasets
# reads each stream in a thread of its own) would save each other's swap as the pool to restore, and the last
# to finish would leave the package's pool the process default. Reentrant: a nested use is no deadlock.
_swapping = threading.RLock()


def _new_lock_in_child() -> None:
    # A process forked while another thread held the lock (a stream's num_proc workers started from one of the
    # threads datasets' shuffle or interleave_datasets reads with) would inherit it held by no thread of its
    # own and wait for it at its first Parquet file, for ever.
    global _swapping
    _swapping = threading.RLock()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_new_lock_in_child)


@contextlib.contextmanager
def default_pool(pool: Optional[pa.MemoryPool]) -> Iterator[None]:
    """``pool`` as pyarrow's default while an object that keeps its creation-time default is made (a
    ``ParquetReader``: ``ParquetFile`` takes no pool), one thread at a time. None: nothing changes."""
    if pool is None:
        yield
        return
    with _swapping:
        previous = pa.default_memory_pool()
        pa.set_memory_pool(pool)
        try:
            yield
        finally:
            pa.set_memory_pool(previous)
