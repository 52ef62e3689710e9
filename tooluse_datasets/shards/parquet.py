"""Parquet shards read: the file opened for streaming reads, record batches of a shard's row groups (a row
group that cannot be read is an error a row), and rows as the values a JSON file would give."""
from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import uuid
from typing import Any, Callable, Collection, Iterator, Optional, Union

import pyarrow as pa
import pyarrow.parquet as pq
from datasets.utils.file_utils import xopen

from ..arrow_memory import default_pool, package_memory_pool
from ..codec import json_reason, loads
from ..errors import InvalidJsonError, InvalidValueError, JsonValueError
from ..network import is_network_error
from .files import no_range_requests, transfer_cut_short
from .paths import display_path
from .shard import NativeItem, Shard


@contextlib.contextmanager
def open_parquet(path: str) -> Iterator[pq.ParquetFile]:
    """A Parquet file opened for streaming reads while the block runs (``with open_parquet(path) as pf``); a typed
    error naming the file if it is not Parquet. The file is closed when the block ends: pyarrow leaves a file
    object it was handed open (a ResourceWarning per shard, and a descriptor held until garbage collection).

    ``pre_buffer=False``: the default keeps compressed column chunks buffered until the read ends, which makes
    peak memory grow with the file; ``buffer_size``: read column chunks in 1 MiB pieces instead of whole. The
    reader allocates from the package's pool
    (:func:`~tooluse_datasets.arrow_memory.package_memory_pool`)."""
    try:
        source = xopen(path, "rb")  # opened before the pool swap, which holds a lock
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise _not_parquet(path, exc) from None
    try:
        try:
            with default_pool(package_memory_pool()):
                pf = pq.ParquetFile(source, pre_buffer=False, buffer_size=1 << 20)
        except (pa.ArrowInvalid, OSError) as exc:
            if isinstance(exc, FileNotFoundError):
                raise
            if is_network_error(exc):  # no fault of the file: not its error, which on_error="skip" would count
                raise transfer_cut_short(path, exc) from exc
            raise _not_parquet(path, exc) from None
        except ValueError as exc:
            if "range requests" not in str(exc):
                raise
            # fsspec's words for a server that sends the whole file for a byte range (python -m http.server):
            # a Parquet file is read from its end, by ranges
            raise no_range_requests(path, "reading Parquet by URL needs") from exc
        yield pf
    finally:
        source.close()


def _not_parquet(path: str, exc: Exception) -> InvalidValueError:
    return InvalidValueError(f"file cannot be read as Parquet ({exc})", file=display_path(path), field="<file>")


def parquet_row_offsets(metadata: pq.FileMetaData) -> list[int]:
    """Row number (in the file) of the first row of each row group."""
    offsets, total = [], 0
    for rg in range(metadata.num_row_groups):
        offsets.append(total)
        total += metadata.row_group(rg).num_rows
    return offsets


@dataclasses.dataclass
class UnreadableRows:
    """Rows ``[first, stop)`` of row group ``row_group`` that could not be read (a damaged page...)."""

    row_group: int
    first: int
    stop: int
    reason: str

    def items(self) -> list[NativeItem]:
        """One error per row, so that every row of the file is still counted (read = returned + skipped)."""
        return [(n, InvalidValueError(f"row group {self.row_group} cannot be read ({self.reason})", row=n,
                                      field="<row group>")) for n in range(self.first, self.stop)]


def iter_parquet_batches(pf: pq.ParquetFile, shard: Shard, batch_size: int, resume: Optional[tuple[int, int]] = None
                         ) -> Iterator[tuple[Union[pa.RecordBatch, UnreadableRows], int]]:
    """``(record batch, row number of its first row)`` over the shard's row groups, from ``resume`` on. The
    rows of a row group that cannot be read come as one :class:`UnreadableRows` in place of batches, and
    reading goes on with the next row group. A row group of the shard that the file no longer has (replaced
    since it was planned, by a file of fewer row groups) is the file's error."""
    offsets = parquet_row_offsets(pf.metadata)
    missing = [rg for rg in shard.row_groups if rg >= len(offsets)]
    if missing:
        raise InvalidValueError(f"row group {missing[0]} was planned, but the file has {len(offsets)} row groups now: "
                                "it changed since the stream or load was planned (read it again from the start)",
                                file=display_path(shard.file), field="<file>")
    skip_to = resume[0] if resume else 0
    for rg in shard.row_groups:
        first = offsets[rg]
        stop = first + pf.metadata.row_group(rg).num_rows
        if stop <= skip_to:
            continue
        try:
            # On this thread: conversion, not decoding, bounds the rate, and pyarrow's pool threads cost CPU
            # waking and handing over a row group's columns (one large text column here): ToolMind streaming
            # used 25-30% more CPU (and wall time on 2 cores) with them.
            batches = pf.iter_batches(batch_size=batch_size, row_groups=[rg], use_threads=False)
            for record_batch in batches:
                n = record_batch.num_rows
                if first + n <= skip_to:
                    first += n
                    continue
                if first < skip_to:
                    record_batch, first = record_batch.slice(skip_to - first), skip_to
                yield record_batch, first
                first += record_batch.num_rows
        except GeneratorExit:  # named first: see _batched
            raise
        except (pa.ArrowInvalid, OSError) as exc:
            if is_network_error(exc):  # a transfer cut short, as at the footer (open_parquet): no fault of the rows
                raise transfer_cut_short(shard.file, exc) from exc
            start = max(first, skip_to)  # the rows already handed out are not reported again
            yield UnreadableRows(rg, start, stop, str(exc)), start


def parquet_batch_rows(record_batch: pa.RecordBatch, first_row: int, json_text: Collection[str] = (),
                       null_fields_absent: bool = False) -> list[NativeItem]:
    """``(row number, row dict)`` of a record batch; a row that cannot become Python values is an error. A JSON
    cell (datasets' ``Json()``, the ``arrow.json`` extension type) is the value its text holds, as a JSON file
    gives it, except in the top-level columns named in ``json_text``, read as the text. ``null_fields_absent``:
    a null field of a struct, or a null column, is left out (Arrow pads structs with nulls), not one inside a
    JSON cell's value."""
    try:
        rows = record_batch.to_pylist()
    except (UnicodeDecodeError, pa.ArrowInvalid):
        # One bad cell (invalid UTF-8) must not take the batch down: convert row by row, report the bad ones.
        rows = []
        for i in range(record_batch.num_rows):
            try:
                rows.append(record_batch.slice(i, 1).to_pylist()[0])
            except (UnicodeDecodeError, pa.ArrowInvalid) as exc:
                rows.append(_undecodable_row(record_batch.slice(i, 1), exc))
    if _holds_non_json_values(record_batch.schema):
        rows = [row if isinstance(row, InvalidValueError) else _as_json_values(row) for row in rows]
    read = _row_reader(record_batch.schema, frozenset(json_text), null_fields_absent)
    if read is not None:
        rows = [row if isinstance(row, InvalidValueError) else read(row) for row in rows]
    return [(first_row + i, row) for i, row in enumerate(rows)]


Reader = Callable[[Any], Any]


@functools.lru_cache(maxsize=256)
def _row_reader(schema: pa.Schema, json_text: frozenset, null_fields_absent: bool) -> Optional[Reader]:
    """What :func:`parquet_batch_rows` does to a row of ``schema``: a row -> the row, or the typed error of a
    JSON cell that does not parse (naming its column). None when there is nothing to do."""
    columns = {field.name: None if field.name in json_text else _cell_reader(field.type, null_fields_absent)
               for field in schema}  # (of two columns of a name, the last: to_pylist keeps its value)
    readers = [(name, read) for name, read in columns.items() if read is not None]
    if not readers and not null_fields_absent:
        return None

    def read_row(row: dict) -> Any:
        name = None
        try:
            for name, read in readers:
                row[name] = read(row[name])
        except ValueError as exc:  # (orjson's JSONDecodeError is one; JsonValueError too)
            kind = JsonValueError if isinstance(exc, JsonValueError) else InvalidJsonError
            return kind(f"JSON cell cannot be read ({json_reason(exc)})", field=name)
        except RecursionError:
            return JsonValueError("JSON cell nests values too deeply to read", field=name)
        return {k: v for k, v in row.items() if v is not None} if null_fields_absent else row
    return read_row


def _cell_reader(arrow_type: pa.DataType, null_fields_absent: bool) -> Optional[Reader]:
    """A cell of ``arrow_type`` as Python values -> its JSON cells read as values (and, with
    ``null_fields_absent``, its structs' null fields left out); None when that changes nothing."""
    if isinstance(arrow_type, pa.BaseExtensionType):
        if arrow_type.extension_name == "arrow.json":
            return lambda cell: None if cell is None else loads(cell)
        return None
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type) or pa.types.is_fixed_size_list(arrow_type):
        inner = _cell_reader(arrow_type.value_type, null_fields_absent)
        return None if inner is None else (lambda cell: None if cell is None else [inner(v) for v in cell])
    if not pa.types.is_struct(arrow_type):
        return None
    fields = [(f.name, _cell_reader(f.type, null_fields_absent)) for f in arrow_type]
    readers = [(name, read) for name, read in fields if read is not None]
    if not readers and not null_fields_absent:
        return None

    def read_struct(cell: Optional[dict]) -> Optional[dict]:
        if cell is None:
            return None
        for name, read in readers:
            cell[name] = read(cell[name])
        return {k: v for k, v in cell.items() if v is not None} if null_fields_absent else cell
    return read_struct


def _undecodable_row(row: pa.RecordBatch, exc: Exception) -> InvalidValueError:
    """The error of a one-row record batch that cannot become Python values, naming the first column whose cell
    cannot (a string that is not UTF-8)."""
    for name, column in zip(row.schema.names, row.columns):
        try:
            column.to_pylist()
        except (UnicodeDecodeError, pa.ArrowInvalid) as cell_exc:
            exc = cell_exc
            return InvalidValueError(f"cell cannot be decoded ({type(exc).__name__}: {exc})", field=name)
    return InvalidValueError(f"row cannot be decoded ({type(exc).__name__}: {exc})")


# Arrow types whose Python values (datetime, date, time, UUID objects; a map's entries as tuples) orjson
# writes as JSON text without complaint: prepare stored that text while a stream handed out the objects.
# Rows holding them get the values of that text instead, so both modes give the same rows.
@functools.lru_cache(maxsize=256)
def _holds_non_json_values(schema: pa.Schema) -> bool:
    return any(_non_json_type(field.type) for field in schema)


def _non_json_type(arrow_type: pa.DataType) -> bool:
    if isinstance(arrow_type, pa.BaseExtensionType):
        return _non_json_type(arrow_type.storage_type) or arrow_type.extension_name == "arrow.uuid"
    if pa.types.is_timestamp(arrow_type) or pa.types.is_date(arrow_type) or pa.types.is_time(arrow_type) \
            or pa.types.is_map(arrow_type):
        return True
    if pa.types.is_struct(arrow_type):
        return any(_non_json_type(field.type) for field in arrow_type)
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type) or pa.types.is_fixed_size_list(arrow_type):
        return _non_json_type(arrow_type.value_type)
    return False


def _as_json_values(value: Any) -> Any:
    """``value`` as orjson writes it: dates and times in ISO 8601 (``isoformat``, orjson's spelling), UUIDs as
    their hex text, tuples as lists (a nanosecond timestamp, which pyarrow gives as pandas' ``Timestamp``, keeps its
    nine digits). Other values are left to the conversions' own checks."""
    kind = type(value)
    if kind is dict:
        return {k: _as_json_values(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [_as_json_values(v) for v in value]
    if kind is datetime.datetime or kind is datetime.date or kind is datetime.time:
        return value.isoformat()
    if kind is uuid.UUID:
        return str(value)
    if isinstance(value, (datetime.date, datetime.time)):  # pandas' Timestamp, a nanosecond one's: all its digits
        return value.isoformat()
    return value
