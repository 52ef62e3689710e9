"""Reading one HF split of ToolMind files: the `split` column is filtered in Arrow, before `messages` is
turned into Python objects, and Parquet row groups whose statistics exclude the value are not read at all.

The upstream file appears grouped by `split` (the viewer's first rows are all `synthetic`), so pruning by
row-group min/max means reading one split decompresses roughly that split's share of the file.
"""
from __future__ import annotations

import os
from typing import Any, Iterator, Optional

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tooluse_datasets.errors import InvalidValueError, ToolUseDataError
from tooluse_datasets.source import NativeItem, file_suffix, open_parquet, read_json_any

# Rows handed to read() carry this key when a split is read from several files, so ids stay unique.
SHARD_KEY = "@shard"


def file_stem(path: str) -> str:
    base = os.path.basename(path.split("::")[0].split("?")[0])
    for ext in (".gz", ".zst", ".bz2", ".xz", ".parquet", ".jsonl", ".json"):
        if base.endswith(ext):
            base = base[: -len(ext)]
    return base


# --------------------------------------------------------------------------------------------------
# Which `split` values the files hold
# --------------------------------------------------------------------------------------------------


def discover_split_values(files: list[str], split_column: str, batch_size: int) -> Optional[set[Optional[str]]]:
    """Distinct values of ``split_column`` over ``files``; None if no file has that column.

    Parquet: reads that one column only. JSON: one pass over the rows (JSON files here are small exports).
    A mix of files with and without the column is refused: their rows could not be assigned to splits.
    """
    values: set[Optional[str]] = set()
    with_column: list[str] = []
    without_column: list[str] = []
    for path in files:
        found = _parquet_split_values(path, split_column) if file_suffix(path) == ".parquet" else \
            _json_split_values(path, split_column, batch_size)
        (without_column if found is None else with_column).append(path)
        values |= found or set()
    if with_column and without_column:
        raise ValueError(f"some files have a {split_column!r} column and some do not ({without_column[0]}); pass "
                         f"data_files as a dict of splits, or split_column=None")
    return values if with_column else None


def _parquet_split_values(path: str, split_column: str) -> Optional[set[Optional[str]]]:
    pf = open_parquet(path)
    if split_column not in pf.schema_arrow.names:
        return None
    column_type = pf.schema_arrow.field(split_column).type
    if pa.types.is_dictionary(column_type):
        column_type = column_type.value_type
    if not (pa.types.is_string(column_type) or pa.types.is_large_string(column_type)):
        raise ValueError(f"{path}: the {split_column!r} column holds {column_type}, not strings; pass "
                         f"split_column=None (and data_files splits) if it is not the source identifier")
    column = pf.read(columns=[split_column]).column(split_column)
    return set(pc.unique(column).to_pylist())


def _json_split_values(path: str, split_column: str, batch_size: int) -> Optional[set[Optional[str]]]:
    values: set[Optional[str]] = set()
    seen_column = False
    for batch in read_json_any(path, batch_size):
        for _, row in batch:
            if isinstance(row, dict):
                seen_column = seen_column or split_column in row
                value = row.get(split_column)
                if value is None or isinstance(value, str):
                    values.add(value)
    return values if seen_column else None


# --------------------------------------------------------------------------------------------------
# Reading the rows of one split
# --------------------------------------------------------------------------------------------------


def read_rows(path: str, batch_size: int, split_column: Optional[str], split_value: Optional[str],
              select: bool, report_unassigned: bool) -> Iterator[list[NativeItem]]:
    """Batches of ``(row number in file, row dict)``; with ``select``, only rows whose ``split_column`` equals
    ``split_value`` (None = null). ``report_unassigned``: JSON rows that belong to no split (unparseable lines,
    non-string split values) are yielded as errors here, so they are counted once instead of vanishing."""
    if file_suffix(path) == ".parquet":
        yield from _read_parquet(path, batch_size, split_column if select else None, split_value)
    else:
        yield from _read_json(path, batch_size, split_column if select else None, split_value, report_unassigned)


def _read_parquet(path: str, batch_size: int, split_column: Optional[str],
                  split_value: Optional[str]) -> Iterator[list[NativeItem]]:
    pf = open_parquet(path)
    metadata = pf.metadata
    stats_column = _leaf_index(pf, split_column) if split_column else None
    first_row = 0
    for rg in range(metadata.num_row_groups):
        rg_meta = metadata.row_group(rg)
        if split_column and not _may_hold(rg_meta, stats_column, split_value):
            first_row += rg_meta.num_rows
            continue
        offset = first_row
        for record_batch in pf.iter_batches(batch_size=batch_size, row_groups=[rg]):
            rows = _select(record_batch, split_column, split_value, offset)
            if rows:
                yield rows
            offset += record_batch.num_rows
        first_row += rg_meta.num_rows


def _select(record_batch: pa.RecordBatch, split_column: Optional[str], split_value: Optional[str],
            offset: int) -> list[NativeItem]:
    n = record_batch.num_rows
    if not split_column:
        return [(offset + i, row) for i, row in enumerate(record_batch.to_pylist())]
    column = record_batch.column(split_column)
    mask = pc.is_null(column) if split_value is None else pc.fill_null(pc.equal(column, split_value), False)
    selected = pc.sum(mask).as_py() or 0
    if selected == 0:
        return []
    if selected == n:
        return [(offset + i, row) for i, row in enumerate(record_batch.to_pylist())]
    indices = pc.indices_nonzero(mask)
    rows = record_batch.take(indices).to_pylist()
    return [(offset + i, row) for i, row in zip(indices.to_pylist(), rows)]


def _leaf_index(pf: pq.ParquetFile, column: str) -> Optional[int]:
    """Index of the Parquet leaf column holding ``column`` (leaves differ from Arrow fields when other
    columns are nested, e.g. a native list `conversations`)."""
    schema = pf.schema
    for i in range(len(schema)):
        if schema.column(i).path == column:
            return i
    return None


def _may_hold(rg_meta: pq.RowGroupMetaData, leaf: Optional[int], value: Optional[str]) -> bool:
    """False only if the row group's statistics prove that no row has ``value``."""
    if leaf is None:
        return True
    stats = rg_meta.column(leaf).statistics
    if stats is None:
        return True
    if value is None:
        return stats.null_count is None or stats.null_count > 0
    if not stats.has_min_max:
        return True
    low, high = stats.min, stats.max
    if isinstance(low, bytes):
        low, high = low.decode("utf-8", "replace"), high.decode("utf-8", "replace")
    return low <= value <= high


def _read_json(path: str, batch_size: int, split_column: Optional[str], split_value: Optional[str],
               report_unassigned: bool) -> Iterator[list[NativeItem]]:
    for batch in read_json_any(path, batch_size):
        if not split_column:
            yield batch
            continue
        kept: list[NativeItem] = []
        for row_number, row in batch:
            if isinstance(row, ToolUseDataError):
                if report_unassigned:
                    kept.append((row_number, row))
                continue
            value: Any = row.get(split_column)
            if value is not None and not isinstance(value, str):
                if report_unassigned:
                    kept.append((row_number, InvalidValueError(
                        f"{split_column} must be a string, got {type(value).__name__}", field=split_column)))
                continue
            if value == split_value:
                kept.append((row_number, row))
        if kept:
            yield kept
