"""A shard's rows, read by its kind: Parquet, JSON Lines, or a JSON document."""
from __future__ import annotations

import os
from typing import Callable, Collection, Iterator, Optional

from ..errors import DataNotFoundError
from ..network import failure_text
from .documents import read_document
from .lines import read_lines
from .parquet import UnreadableRows, iter_parquet_batches, open_parquet, parquet_batch_rows
from .paths import display_path
from .shard import LINES, PARQUET, RawBatch, Shard
from .versions import check_unchanged, local_file_of


def read_shard(shard: Shard, batch_size: int, resume: Optional[tuple[int, int]] = None,
               wanted: Optional[Callable[[int], bool]] = None, json_text: Collection[str] = (),
               null_fields_absent: bool = False) -> Iterator[RawBatch]:
    """Generic rows of a shard: Parquet rows as dicts, JSON Lines, or a JSON document (an array of objects or
    one object). ``resume``: a position from a previous :class:`RawBatch`; rows before it are not read.
    ``wanted``: a JSON line whose row number it refuses is passed over unparsed (not a row of the output).
    Batches hold ``batch_size`` rows, JSON rows at most :data:`JSON_BATCH_ROWS`. A file that is no longer the
    version the shard was planned from is the file's error (:func:`~.versions.check_unchanged`): checked before
    the shard is read and again after its last row, since a file rewritten while a shard of it is read (more
    than a read buffer) gives rows of both versions (a stat call when it is unchanged). ``json_text`` and
    ``null_fields_absent``: how Parquet rows are read (:func:`~.parquet.parquet_batch_rows`)."""
    yield from checked_reads(shard, read_unchecked(shard, batch_size, resume, wanted, json_text, null_fields_absent))


def checked_reads(shard: Shard, batches: Iterator[RawBatch]) -> Iterator[RawBatch]:
    """``batches`` of ``shard``, its file's version checked before the first and after the last
    (:func:`~.versions.check_unchanged`). A file not there any more (deleted or moved since the shard was
    planned) is a :class:`DataNotFoundError` naming it, as a missing path is when planning, not a bare
    FileNotFoundError from inside datasets' iterator: no row of it is bad, so ``on_error`` does not skip it."""
    try:
        check_unchanged(shard)
        yield from batches
        check_unchanged(shard)
    except FileNotFoundError as exc:
        if isinstance(exc, DataNotFoundError):
            raise
        raise file_gone(shard.file, exc) from None


def check_there(shard: Shard) -> None:
    """:func:`checked_reads`' error for a local file not there any more, where none of it is read (a stream resumed
    past its end), which said nothing; for a file of a local zip archive, the archive. (A file read by URL is not
    asked.)"""
    local = local_file_of(shard.file)
    try:
        if local is not None:
            os.stat(local)
    except FileNotFoundError as exc:
        raise file_gone(shard.file, exc) from None


def file_gone(path: str, exc: FileNotFoundError) -> DataNotFoundError:
    """A data file not there any more: the DataNotFoundError naming it, not the bare FileNotFoundError."""
    return DataNotFoundError(f"{display_path(path)}: the file is not there any more ({failure_text(exc)}): it was "
                             "deleted or moved since the stream or load was planned; load it again where it is")


def read_unchecked(shard: Shard, batch_size: int, resume: Optional[tuple[int, int]] = None,
                   wanted: Optional[Callable[[int], bool]] = None, json_text: Collection[str] = (),
                   null_fields_absent: bool = False) -> Iterator[RawBatch]:
    """:func:`read_shard` without its version checks, for a reader that wraps its whole reading of the shard in
    :func:`checked_reads` itself (each check is a request for a URL)."""
    if shard.kind == PARQUET:
        with open_parquet(shard.file) as pf:
            for record_batch, first_row in iter_parquet_batches(pf, shard, batch_size, resume):
                if isinstance(record_batch, UnreadableRows):
                    rows = record_batch.items()
                else:
                    rows = parquet_batch_rows(record_batch, first_row, json_text, null_fields_absent)
                yield RawBatch(rows, [(n + 1, 0) for n, _ in rows])
    elif shard.kind == LINES:
        yield from read_lines(shard, min(batch_size, JSON_BATCH_ROWS), resume, wanted)
    else:
        yield from read_document(shard, min(batch_size, JSON_BATCH_ROWS), resume, wanted)


# JSON rows are parsed as they are read, and a batch is converted before the next is read: a batch of this many
# rows is still in the CPU's caches when it converts (ms-swift rows prepared: 2.0-2.2 s CPU for 30K rows, against
# 2.3-2.8 s in batches of 1,000). A source whose batch step wants larger batches joins them (joined_batches).
JSON_BATCH_ROWS = 125
