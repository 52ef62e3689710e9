"""ToolMind's splits: the `split` column's values become HF splits, planned from Parquet metadata and read
without touching other splits' rows.

Planning reads, per Parquet row group, which split values it holds: from the column statistics when they
prove a single value (no data read: the upstream file is grouped by `split`), else from that row group's
`split` column alone. A split's shards are then the row groups that hold its value, so reading one split
never decompresses the others' row groups, and preparing all seven reads each row group once (a row group
shared by several splits, at a boundary, is read by each of them). Within a row group rows are selected in
Arrow, before any `messages` text becomes a Python object. JSON files carry no statistics: planning reads
every row once and notes each row's split in a bitmap per split, so a split parses only its own lines and
elements (a JSON array of up to 4 MB is still parsed whole) and checks their value as it reads them. A JSON
line that ends with the split key and a plain string value (rows written with `split` as their last column,
upstream's order) is not parsed to plan it (:func:`_split_reader`). In a
JSON Lines file planning also notes the byte ranges each split's lines fill: a split's shards are those ranges
(a range spans the few lines of other splits between two of its own, up to 256 KiB, unparsed; ranges are
joined across larger gaps only to balance the shard count), so in a file
grouped by split, as upstream's is, a split reads its own lines only and preparing all seven reads the file
once more after planning, not seven times.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Collection, Iterator, Optional

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tooluse_datasets import codec
from tooluse_datasets.errors import (InvalidValueError, MissingFieldError, ToolUseDataError, json_kind,
                                     wrapped_rows_error)
from tooluse_datasets.shards.lines import file_version, read_lines
from tooluse_datasets.shards.parquet import (UnreadableRows, iter_parquet_batches, open_parquet, parquet_batch_rows,
                                             parquet_row_offsets)
from tooluse_datasets.shards.paths import display_path, file_suffix
from tooluse_datasets.shards.plan import cut_at_lines, plan_file, plan_parquet, whole_file_shard
from tooluse_datasets.shards.reading import checked_reads, read_shard, read_unchecked
from tooluse_datasets.shards.shard import LINES, PARQUET, NativeItem, RawBatch, Shard
from tooluse_datasets.source import SplitPlan

from .upstream import hf_split_name, table_order

# Longest HF split name we make: names become file names (``<split>-00000-of-00001.parquet``, cache files).
MAX_SPLIT_NAME = 96
# A split column names each row's source dataset: a handful of values (ToolMind's card: seven). Thousands are a
# column of something else (an id, a text), each value a split of its own; planning JSON keeps a bitmap of rows
# per value, so memory grew with values x rows (20K distinct values: 543 MB, half a minute), and datasets would
# then make a split, a cache file and a progress bar of each.
MAX_SPLIT_VALUES = 1000
# A JSON Lines range of one split goes on over lines of other splits up to this many bytes (read, not parsed)
# rather than end there: a file whose splits interleave row by row gets ranges, not a shard per row.
MAX_GAP_BYTES = 256 << 10


@dataclass(frozen=True)
class SplitSelection:
    """How a split's rows are picked from its shards."""

    value: Optional[str]        # the `split` value (None: null cells)
    select: bool                # filter on the split column (files shared by several splits)
    report_unassigned: bool     # JSON rows that belong to no split are reported here (the first split only)
    stem_ids: bool              # the load has several files: ids carry the file's name (Shard.file_label)
    unassigned: frozenset = frozenset()  # files with no split column while others have one: rows reported
    # JSON files: (path, bitmap of the row numbers this split reads), from planning; other lines go unparsed
    json_rows: tuple = ()

    def reports_errors(self, path: str) -> Callable[[int], bool]:
        """Whether this split reports a JSON row of ``path`` that cannot be read: one planned into it (a line
        planned by its last key alone), else one that belongs to no split, or lies past the map, when this
        split reports those."""
        planned = self._planned(path)
        if planned is None:
            return lambda row: self.report_unassigned
        return lambda row: planned(row, self.report_unassigned)

    def wanted_rows(self, path: str) -> Optional[Callable[[int], bool]]:
        """Whether this split reads a row of the JSON file ``path`` (None: no map, read every row). A row past
        the map (a file that grew since planning, where a shard reaches it) is read and checked."""
        planned = self._planned(path)
        return None if planned is None else lambda row: planned(row, True)

    def _planned(self, path: str) -> Optional[Callable[[int, bool], bool]]:
        """Whether planning put a row of ``path`` into this split (``past``: the answer past the map)."""
        bitmap = next((rows for file, rows in self.json_rows if file == path), None)
        if bitmap is None:
            return None
        size = len(bitmap) * 8
        return lambda row, past: past if row >= size else bool(bitmap[row >> 3] >> (row & 7) & 1)


# --------------------------------------------------------------------------------------------------
# Planning
# --------------------------------------------------------------------------------------------------


@dataclass
class _FileValues:
    path: str
    values: set                                   # split values in the file
    by_row_group: Optional[list[set]] = None      # Parquet: values per row group
    undecodable: frozenset = frozenset()          # Parquet: row groups with a split value not UTF-8 or unreadable
    metadata: Any = None                          # Parquet: the footer, read once while planning
    # JSON: bitmaps of the rows holding each value, and of the rows that name no split (the first split's)
    bitmap_by_value: Optional[dict] = None
    unassigned_bitmap: bytearray = field(default_factory=bytearray)
    rows_read: int = 0                            # JSON: row numbers planned (one past the last)
    # JSON Lines: [start, stop, first row] byte ranges holding each value's rows, and the unassigned rows'
    spans_by_value: Optional[dict] = None
    unassigned_spans: list = field(default_factory=list)

    def line_shards(self, value: Optional[str], first: bool) -> list[Shard]:
        """The shards of JSON Lines a split of ``value`` reads (the ``first`` split: also the unassigned rows'),
        in file order. Ranges of different splits may overlap (a range spans other splits' lines); the first
        split's two kinds are joined where they do, so that no line is read twice."""
        spans = sorted(self.spans_by_value.get(value, []) + (self.unassigned_spans if first else []))
        joined: list[list[int]] = []
        for start, stop, row in spans:
            if joined and start < joined[-1][1]:
                joined[-1][1] = max(joined[-1][1], stop)
            else:
                joined.append([start, stop, row])
        return [Shard(self.path, LINES, start=start, stop=stop, first_row=row) for start, stop, row in joined]

    def json_rows(self, value: Optional[str], first: bool) -> tuple[str, bytes]:
        """(path, bitmap) of the rows a split of ``value`` reads (the ``first`` split: also the unassigned),
        one bit a row of the file."""
        bits = int.from_bytes(self.bitmap_by_value.get(value, b""), "little")
        if first:
            bits |= int.from_bytes(self.unassigned_bitmap, "little")
        return self.path, bits.to_bytes((self.rows_read + 7) >> 3, "little")


def _extend_spans(spans: list, start: int, stop: int, first_row: int, shard_bytes: int) -> None:
    """Add the line(s) in ``[start, stop)`` (starting with row ``first_row``) to a value's byte ranges."""
    if spans:
        last = spans[-1]
        if start - last[1] <= MAX_GAP_BYTES and stop - last[0] <= shard_bytes:
            last[1] = stop
            return
    spans.append([start, stop, first_row])


def _mark(bitmap: bytearray, row: int) -> None:
    byte = row >> 3
    if byte >= len(bitmap):
        bitmap.extend(bytes(byte + 1 - len(bitmap) + len(bitmap) // 2))  # grown geometrically
    bitmap[byte] |= 1 << (row & 7)


def plan_splits(files: list[str], split_column: str, shard_bytes: int, *, column_required: bool = False,
                wanted: Optional[tuple[str, ...]] = None,
                messages_column: str = "messages") -> Optional[list[SplitPlan]]:
    """One split per `split` value (card order), or None if no file has ``split_column`` (or its rows hold
    no usable value: they are then read as data_files splits and each row is reported). ``column_required``
    (a column the user named): no file having it is an error, not one ``train`` split. ``wanted``: the splits
    that will be read (None: all); rows that belong to no split (a file that cannot be read, rows without a
    split value) are reported by the first of them, so that reading one split does not lose them silently."""
    with_column, unassigned, unreadable = [], [], []
    for path in files:
        try:
            found = _file_values(path, split_column, shard_bytes, messages_column)
        except InvalidValueError as exc:
            found = None  # not readable, or a column of another type: reading it gives the errors
            unreadable.append(exc)
        if found is None:
            # No split value (no such column, a column that is not text, no readable row): the first split
            # reads the file and reports each of its rows, so that the error policy decides and the other
            # files still load.
            unassigned.append(path)
        else:
            with_column.append(found)
    if not with_column and column_required:
        one = len(files) == 1
        which = "the file has no" if one else f"none of the {len(files)} files has a"
        raise MissingFieldError(f"split_column={split_column!r}: {which} column of text by that name; pass the "
                                f"column naming each row's source dataset, or split_column=None",
                                file=display_path(files[0]) if one else None, field=split_column, source="toolmind")
    if not with_column and unreadable and wanted and "train" not in wanted:
        # No file could tell its splits: the splits asked for cannot be found because of this error (the
        # files would load as one `train` split, each row reported), not because the data lacks them.
        raise unreadable[0].at(source="toolmind")
    if not with_column or not any(f.values for f in with_column):
        return None
    values = set().union(*(f.values for f in with_column))
    if len(values) > MAX_SPLIT_VALUES:
        raise too_many_split_values(split_column, files[0] if len(files) == 1 else None)
    names = split_names(values)
    stem_ids = len(files) > 1
    ordered = sorted(values, key=table_order)
    # The split that reports rows of no split: the first one read.
    reporter = next((i for i, value in enumerate(ordered) if names[value] in wanted), 0) if wanted else 0
    plans = []
    for position, value in enumerate(ordered):
        first = position == reporter
        shards: list[Shard] = []
        json_rows: list[tuple[str, bytes]] = []
        for f in with_column:
            if f.by_row_group is None:
                if value in f.values or first:  # the reporting split also reads rows of no split
                    shards += plan_file(f.path, shard_bytes) if f.spans_by_value is None else \
                        f.line_shards(value, first)
                    json_rows.append(f.json_rows(value, first))
            else:
                groups = [rg for rg, held in enumerate(f.by_row_group)
                          if value in held or (first and rg in f.undecodable)]
                if groups:
                    shards += plan_parquet(f.path, f.metadata, shard_bytes, groups)
        if first:
            shards += [shard for path in unassigned for shard in plan_file(path, shard_bytes)]
        selection = SplitSelection(value, True, first, stem_ids,
                                   frozenset(unassigned) if first else frozenset(), tuple(json_rows))
        plans.append(SplitPlan(names[value], tuple(shards), selection))
    return plans


def split_names(values: set) -> dict[Optional[str], str]:
    """HF split name of every value: the table's names, the same rule for other values; values whose names
    would collide or be too long get a short hash of the value appended (the value itself stays in
    ``subset`` / ``split``)."""
    names: dict[Optional[str], str] = {}
    taken: set[str] = set()  # lower-cased: names become file names, which macOS and Windows compare ignoring case
    for value in sorted(values, key=table_order):
        name = hf_split_name(value)
        # "all" (any case) is datasets' keyword for the union of the splits: no split may be named so.
        if len(name) > MAX_SPLIT_NAME or name.lower() in taken or name.lower() == "all":
            digest = hashlib.sha1(repr(value).encode()).hexdigest()[:8]
            name = f"{name[:MAX_SPLIT_NAME - 9]}_{digest}"
        names[value] = name
        taken.add(name.lower())
    return names


# What planning found in a file, by file version (this process): a script that loads the training split and then
# the evaluation split of one file plans it once, not once per load (JSON: a parse of every row; Parquet: the
# statistics of every row group). A file rewritten in place is planned anew.
_PLANS: dict[tuple, Optional[_FileValues]] = {}
_MAX_PLANS = 8


def too_many_split_values(split_column: str, path: Optional[str]) -> ValueError:
    where = f" of {display_path(path)}" if path else ""
    return ValueError(f"split_column={split_column!r}: the column{where} holds more than {MAX_SPLIT_VALUES:,} distinct "
                      f"values, each of which would be a split of its own; it names something other than each row's "
                      f"source dataset: pass the column that does, or split_column=None (one split, or data_files "
                      f"as a dict of splits)")


def _file_values(path: str, split_column: str, shard_bytes: int, messages_column: str) -> Optional[_FileValues]:
    key = (file_version(path), split_column, shard_bytes, messages_column)
    if key not in _PLANS:
        if file_suffix(path) == ".parquet":
            found = _parquet_values(path, split_column, messages_column)
        else:
            found = _plan_json(path, split_column, shard_bytes)
        if len(_PLANS) >= _MAX_PLANS:
            _PLANS.pop(next(iter(_PLANS)))
        _PLANS[key] = found
    return _PLANS[key]


def _parquet_values(path: str, split_column: str, messages_column: str) -> Optional[_FileValues]:
    with open_parquet(path) as pf:
        return _parquet_file_values(path, pf, split_column, messages_column)


def _split_column_type_error(path: str, schema: pa.Schema, split_column: str) -> Optional[InvalidValueError]:
    """The file's error if its ``split_column`` is of a type that holds no split names (None: text, or no such
    column)."""
    if split_column not in schema.names:
        return None
    column_type = schema.field(schema.get_all_field_indices(split_column)[-1]).type
    if _holds_text(column_type):
        return None
    return InvalidValueError(f"the {split_column!r} column holds {column_type}, not strings; pass "
                             f"split_column=None (and data_files splits) if it is not the source identifier",
                             file=display_path(path), field=split_column)


def _messages_column_type_error(path: str, schema: pa.Schema, column: str) -> Optional[InvalidValueError]:
    """The file's error if its messages ``column`` is of a type that holds no conversations (None: text, binary
    read as UTF-8 text, native message lists, null, or no such column), so that it is one error, not one per row."""
    if column not in schema.names:
        return None
    column_type = schema.field(schema.get_all_field_indices(column)[-1]).type
    if isinstance(column_type, pa.BaseExtensionType):
        column_type = column_type.storage_type  # (arrow.json, as datasets' Json() writes it: text, read as its storage)
    if _holds_text(column_type):
        return None
    # A list of message structs; a list of nulls is a column whose every list is empty (each row reported)
    if ((pa.types.is_list(column_type) or pa.types.is_large_list(column_type) or pa.types.is_list_view(column_type)
         or pa.types.is_large_list_view(column_type) or pa.types.is_fixed_size_list(column_type))
            and (pa.types.is_struct(column_type.value_type) or pa.types.is_null(column_type.value_type))):
        return None
    return InvalidValueError(f"the {column!r} column holds {column_type}, not conversations (JSON text, or lists "
                             f"of message structs)", file=display_path(path), field=column)


def _holds_text(column_type: pa.DataType) -> bool:
    """Whether a column of ``column_type`` is read as text. A null column is a column of text whose every cell is
    null (pandas and pyarrow type an all-None column so); a binary one, text written without the UTF-8 annotation
    (_plain_strings)."""
    if pa.types.is_dictionary(column_type):
        column_type = column_type.value_type
    return (pa.types.is_string(column_type) or pa.types.is_large_string(column_type)
            or pa.types.is_string_view(column_type) or pa.types.is_null(column_type) or _is_binary(column_type))


def _column_type_error(path: str, schema: pa.Schema, split_column: Optional[str],
                       messages_column: str) -> Optional[InvalidValueError]:
    return (_split_column_type_error(path, schema, split_column)
            or _messages_column_type_error(path, schema, messages_column))


def _parquet_file_values(path: str, pf: pq.ParquetFile, split_column: str,
                         messages_column: str) -> Optional[_FileValues]:
    if split_column not in pf.schema_arrow.names:
        return None
    # A file whose messages cannot be read is planned into no split: the first split reports it, once
    refused = _column_type_error(path, pf.schema_arrow, split_column, messages_column)
    if refused is not None:
        raise refused
    leaf = _leaf_index(pf, split_column)
    by_row_group, undecodable = [], set()
    for rg in range(pf.metadata.num_row_groups):
        single = _single_value(pf.metadata.row_group(rg), leaf)
        if single is not None:
            by_row_group.append(single)
        else:
            try:
                column = _split_cells(pf.read_row_group(rg, columns=[split_column]), split_column)
            except (pa.ArrowInvalid, OSError):  # a damaged row group: its rows are reported by the first split
                by_row_group.append(set())
                undecodable.add(rg)
                continue
            values, bad = _decoded_unique(_plain_strings(column))
            by_row_group.append(values)
            if bad:
                undecodable.add(rg)
    return _FileValues(path, set().union(*by_row_group) if by_row_group else set(), by_row_group,
                       frozenset(undecodable), pf.metadata)


def _plain_strings(values: Any) -> Any:
    """A split column's cells as Arrow strings: a string_view column (Polars' layout) has no kernels for the
    comparisons and binary views used here. The cast copies the bytes without checking them, so a cell that is
    not UTF-8 is still found (and reported) as such; a binary column's cells are viewed as strings, unchecked
    too."""
    binary_dictionary = pa.types.is_dictionary(values.type) and _is_binary(values.type.value_type)
    if binary_dictionary or _is_binary(values.type):
        if isinstance(values, pa.ChunkedArray):  # (a row group's column: one chunk, usually)
            values = values.combine_chunks()
        if binary_dictionary:
            values = values.dictionary_decode()
        return values.cast(pa.large_binary()).view(pa.large_string())
    return values.cast(pa.large_string()) if pa.types.is_string_view(values.type) else values


def _is_binary(arrow_type: pa.DataType) -> bool:
    return pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type) or \
        pa.types.is_binary_view(arrow_type)


def _decoded_unique(values: Any) -> tuple[set, list[bytes]]:
    """The distinct values of a string column, and those that are not valid UTF-8 (as bytes): such a cell
    names no split; its row is reported by the first split."""
    unique = pc.unique(values)
    if pa.types.is_dictionary(unique.type):
        unique = unique.dictionary_decode()
    try:
        return set(unique.to_pylist()), []
    except UnicodeDecodeError:
        pass
    decoded, bad = set(), []
    binary = pa.large_binary() if pa.types.is_large_string(unique.type) else pa.binary()
    for raw in unique.view(binary).to_pylist():
        try:
            decoded.add(None if raw is None else raw.decode())
        except UnicodeDecodeError:
            bad.append(raw)
    return decoded, bad


def _single_value(rg_meta: pq.RowGroupMetaData, leaf: Optional[int]) -> Optional[set]:
    """``{value}`` when the row group's statistics prove every row holds that one value, else None."""
    if leaf is None:
        return None
    stats = rg_meta.column(leaf).statistics
    if stats is None or not stats.has_min_max or stats.null_count is None:
        return None
    try:
        low, high = stats.min, stats.max
    except UnicodeDecodeError:  # pyarrow decodes string statistics itself; an invalid cell: read the column
        return None
    if isinstance(low, bytes):
        try:
            low, high = low.decode(), high.decode()
        except UnicodeDecodeError:
            return None
    if low != high:
        return None
    return {low} if stats.null_count == 0 else {low, None}


def _leaf_index(pf: pq.ParquetFile, column: str) -> Optional[int]:
    """Index of the Parquet leaf column holding ``column`` (leaves differ from Arrow fields when other
    columns are nested, e.g. a native list `conversations`); the last, where several are so named."""
    schema = pf.schema
    found = None
    for i in range(len(schema)):
        if schema.column(i).path == column:
            found = i
    return found


def _split_cells(columns: Any, column: str) -> Any:
    """The cells of ``column`` in a table or record batch. Of several columns so named, the last: a row read
    from the file holds its value (``to_pylist`` keeps a repeated name's last, as JSON keeps a repeated key's),
    so the row is read by the split its value names."""
    return columns.column(columns.schema.get_all_field_indices(column)[-1])


def _plan_json(path: str, split_column: str, shard_bytes: int) -> Optional[_FileValues]:
    bitmap_by_value: dict[Optional[str], bytearray] = {}  # a bit a row: a few MB for millions of rows
    unassigned = bytearray()
    # JSON Lines: a row's line (and any blank lines before it) fills the bytes from where the previous row's
    # reading ended to where its own ended; reading resumes there at row ``next_row``.
    spans: Optional[dict[Optional[str], list]] = {} if cut_at_lines(path) else None
    unassigned_spans: list = []
    next_row, next_offset = 0, 0
    seen_column = False
    rows_read = 0
    shard = whole_file_shard(path)
    batches = read_lines(shard, 1000, parse=_split_reader(split_column)) if shard.kind == LINES else \
        read_shard(shard, 1000)
    for batch in _before_damage(batches):
        for (row_number, row), (row_after, offset_after) in zip(batch.items, batch.positions):
            rows_read = row_number + 1
            value = row.get(split_column) if isinstance(row, dict) else None
            seen_column = seen_column or (isinstance(row, dict) and split_column in row)
            assigned = isinstance(row, dict) and (value is None or isinstance(value, str))
            if assigned:
                bitmap = bitmap_by_value.get(value)
                if bitmap is None:
                    if len(bitmap_by_value) >= MAX_SPLIT_VALUES:
                        raise too_many_split_values(split_column, path)
                    bitmap = bitmap_by_value[value] = bytearray()
                _mark(bitmap, row_number)
            else:
                _mark(unassigned, row_number)
            if spans is not None:
                _extend_spans(spans.setdefault(value, []) if assigned else unassigned_spans, next_offset,
                              offset_after, next_row, shard_bytes)
                next_row, next_offset = row_after, offset_after
    if not seen_column:
        return None
    return _FileValues(path, set(bitmap_by_value), bitmap_by_value=bitmap_by_value, unassigned_bitmap=unassigned,
                       rows_read=rows_read, spans_by_value=spans, unassigned_spans=unassigned_spans)


def _before_damage(batches: Iterator[RawBatch]) -> Iterator[RawBatch]:
    """``batches`` up to a file error that comes after rows (a compressed file cut short): the rows before it
    are planned into their splits, and reading meets the error again (:func:`read_split_rows`). An error
    before any row is the file's: it cannot tell its splits."""
    read_rows = False
    try:
        for batch in batches:
            read_rows = read_rows or bool(batch.items)
            yield batch
    except ToolUseDataError:
        if not read_rows:
            raise


# How far from a line's end planning looks for its last member (the split key and a plain string value).
_TAIL_BYTES = 512


def _split_reader(column: str) -> Callable[[bytes], Any]:
    """Planning's reader of a JSON line: ``{column: value}`` from the line's end when it ends with the key and a
    string of plain characters, else the line parsed. In a line that is JSON, a member just before the line's
    last brace is the top-level object's last, whose value a duplicated key takes; a line that is not JSON is
    then reported by the split it names, which reads it (``SplitSelection.reports_errors``)."""
    key = json.dumps(column).encode()
    # Found from the key's last occurrence (bytes.rfind is far faster than a regex search): a comma or the
    # object's brace before it, and after it the value, the brace and the line's end.
    before = re.compile(rb"[,{][ \t\r\n]{0,64}\Z")
    after = re.compile(rb'[ \t\r\n]*:[ \t\r\n]*"([^"\\\x00-\x1f]*)"[ \t\r\n]*\}[ \t\r\n]*\Z')

    def parse(line: bytes) -> Any:
        at = line.rfind(key, max(0, len(line) - _TAIL_BYTES))
        if at > 0 and before.search(line, max(0, at - 65), at):
            found = after.match(line, at + len(key))
            if found is not None:
                try:
                    return {column: found.group(1).decode()}
                except UnicodeDecodeError:
                    pass  # not UTF-8: parsing says so
        return codec.loads(line)

    return parse


# --------------------------------------------------------------------------------------------------
# Reading the rows of one split
# --------------------------------------------------------------------------------------------------


def read_split_rows(shard: Shard, split_column: Optional[str], selection: Optional[SplitSelection],
                    batch_size: int, resume: Optional[tuple[int, int]],
                    messages_column: str = "messages", json_text: Collection[str] = ()) -> Iterator[RawBatch]:
    """Batches of a shard's rows; with a selecting ``selection``, only rows whose ``split_column`` equals its
    value. JSON rows that belong to no split (unparseable lines, non-string values) are yielded as errors
    by the split that reports them, so they are counted once instead of vanishing. ``json_text``: Parquet JSON
    columns read as their text (:func:`~tooluse_datasets.shards.parquet.parquet_batch_rows`)."""
    # Before anything is read: the rows each split selects were planned from that version of the file too, and
    # a split that does not report the file's damage (below) must still report its being replaced; and after the
    # shard's last row, as read_shard checks: a file rewritten while the shard was read gave rows of both. (Once:
    # the shard's reading below is not checked again.)
    yield from checked_reads(shard, _split_rows(shard, split_column, selection, batch_size, resume, messages_column,
                                                json_text))


def _split_rows(shard: Shard, split_column: Optional[str], selection: Optional[SplitSelection],
                batch_size: int, resume: Optional[tuple[int, int]], messages_column: str,
                json_text: Collection[str]) -> Iterator[RawBatch]:
    column = split_column if selection is not None and selection.select else None
    planned = column is not None and shard.file not in selection.unassigned  # (its columns' types checked then)
    # Checked on the file the shard reads its rows from (opening it once more was a footer read, a Hub request,
    # per shard)
    check_types = shard.kind == PARQUET and not planned
    if column and shard.file in selection.unassigned:
        if check_types:
            with open_parquet(shard.file) as pf:
                if _refused(shard, pf.schema_arrow, split_column, messages_column):
                    return
        yield from _unassigned_rows(shard, column, batch_size, resume)
        return
    if shard.kind == PARQUET:
        with open_parquet(shard.file) as pf:
            if check_types and _refused(shard, pf.schema_arrow, split_column, messages_column):
                return
            for record_batch, first_row in iter_parquet_batches(pf, shard, batch_size, resume):
                if isinstance(record_batch, UnreadableRows):
                    items = _unreadable_rows_of_split(pf, record_batch, column, selection)
                else:
                    items = _select(record_batch, column, selection.value if column else None, first_row,
                                    report_undecodable=bool(column) and selection.report_unassigned,
                                    json_text=json_text)
                if items:
                    yield RawBatch(items, [(n + 1, 0) for n, _ in items])
        return
    reports = selection.reports_errors(shard.file) if column else None
    wanted = selection.wanted_rows(shard.file) if column else None
    try:
        for batch in read_unchecked(shard, batch_size, resume, wanted, json_text):
            if column is None:
                yield batch
                continue
            items, positions = [], []
            for (row_number, row), position in zip(batch.items, batch.positions):
                kept = _json_row(row, row_number, column, selection, reports)
                if kept is not None:
                    items.append((row_number, kept))
                    positions.append(position)
            if items:
                yield RawBatch(items, positions)
    except ToolUseDataError:
        # A planned file damaged past its planned rows (_before_damage): every split reading it meets the damage
        # after its own rows; the split that reports rows of no split reports it, once.
        if wanted is not None and not selection.report_unassigned:
            return
        raise


def _refused(shard: Shard, schema: pa.Schema, split_column: Optional[str], messages_column: str) -> bool:
    """Whether the shard's file is refused for a column's type: one error for the file, raised by the shard holding
    its first row group, not one for each of its rows (its other shards read nothing)."""
    refused = _column_type_error(shard.file, schema, split_column, messages_column)
    if refused is not None and shard.row_groups[:1] in ((), (0,)):
        raise refused
    return refused is not None


def _unassigned_rows(shard: Shard, column: str, batch_size: int,
                     resume: Optional[tuple[int, int]]) -> Iterator[RawBatch]:
    for batch in read_unchecked(shard, batch_size, resume):
        batch.items = [(n, row if isinstance(row, ToolUseDataError) else _no_split_value(row, column))
                       for n, row in batch.items]
        yield batch


def _no_split_value(row: Any, column: str) -> ToolUseDataError:
    """The error of a row in a file that gives no split value while other files do; an object wrapping rows
    that have one (``{"data": [...]}``) is named as such, as it is when read alone."""
    return (isinstance(row, dict) and wrapped_rows_error(row, (column,))) or MissingFieldError(
        f"this file gives its rows no {column!r} value (no such text column) while other files do, so they "
        f"belong to no split (pass data_files as a dict of splits, or split_column=None)", field=column)


def _unreadable_rows_of_split(pf: pq.ParquetFile, unreadable: UnreadableRows, column: Optional[str],
                              selection: Optional[SplitSelection]) -> list:
    """The rows of a damaged row group this split reports: those whose split value it holds (the split column
    alone may still be readable), else, when not even that column reads, all of them by one split."""
    if not column:
        return unreadable.items()
    try:
        cells = _split_cells(pf.read_row_group(unreadable.row_group, columns=[column]), column)
        values = _plain_strings(cells).to_pylist()  # (a binary column's as text too)
    except (pa.ArrowInvalid, OSError, UnicodeDecodeError):
        # Statistics that name the group's values planned it into those splits only: the first of them
        # reports it. Otherwise the group was planned into the first split, which reports it.
        named = _single_value(pf.metadata.row_group(unreadable.row_group), _leaf_index(pf, column))
        owner = selection.report_unassigned if named is None else selection.value == min(named, key=table_order)
        return unreadable.items() if owner else []
    group_first = parquet_row_offsets(pf.metadata)[unreadable.row_group]
    return [(n, error) for n, error in unreadable.items() if values[n - group_first] == selection.value]


def _json_row(row: Any, row_number: int, column: str, selection: SplitSelection,
              reports: Callable[[int], bool]) -> Any:
    if isinstance(row, ToolUseDataError):
        return row if reports(row_number) else None
    value = row.get(column)
    if value is not None and not isinstance(value, str):
        if selection.report_unassigned:
            return InvalidValueError(f"{column} must be a string, got {json_kind(value)}", field=column)
        return None
    return row if value == selection.value else None


def _select(record_batch: pa.RecordBatch, column: Optional[str], value: Optional[str],
            first_row: int, *, report_undecodable: bool = False, json_text: Collection[str] = ()) -> list[NativeItem]:
    if not column:
        return parquet_batch_rows(record_batch, first_row, json_text)
    values = _plain_strings(_split_cells(record_batch, column))
    try:
        # Split names are short: compared in Python, a batch's selection costs a few us, where the compute
        # kernels (equal, fill_null, sum) cost ~100 us a batch, more than a us a row.
        cells = values.to_pylist()
    except (UnicodeDecodeError, pa.ArrowInvalid):  # a cell that is not UTF-8: it belongs to no split
        mask = pc.is_null(values) if value is None else pc.fill_null(pc.equal(values, value), False)
        indices = pc.indices_nonzero(mask).to_pylist()
        bad = _undecodable_rows(values, column, first_row) if report_undecodable else []
    else:
        indices = [i for i, cell in enumerate(cells) if cell == value]
        bad = []
    if not indices:
        return bad
    if len(indices) == record_batch.num_rows:
        return parquet_batch_rows(record_batch, first_row, json_text)
    try:
        rows = parquet_batch_rows(record_batch.take(pa.array(indices, pa.int64())), 0, json_text)
    except pa.ArrowNotImplementedError:  # no take kernel for view columns (string_view): the selected runs
        items = [item for start, stop in _runs(indices)
                 for item in parquet_batch_rows(record_batch.slice(start, stop - start), first_row + start, json_text)]
    else:
        items = [(first_row + i, row) for i, (_, row) in zip(indices, rows)]
    return sorted(items + bad, key=lambda item: item[0]) if bad else items


def _runs(indices: list[int]) -> Iterator[tuple[int, int]]:
    """``[start, stop)`` of each run of consecutive numbers in the ascending ``indices``."""
    start = previous = indices[0]
    for i in indices[1:]:
        if i != previous + 1:
            yield start, previous + 1
            start = i
        previous = i
    yield start, previous + 1


def _undecodable_rows(values: pa.Array, column: str, first_row: int) -> list[NativeItem]:
    """Rows whose split cell is not valid UTF-8, as errors (they belong to no split)."""
    _, bad = _decoded_unique(values)
    if not bad:
        return []
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    binary = pa.large_binary() if pa.types.is_large_string(values.type) else pa.binary()
    mask = pc.is_in(values.view(binary), value_set=pa.array(bad, binary))
    return [(first_row + i, InvalidValueError(f"the {column!r} cell is not valid UTF-8", field=column))
            for i in pc.indices_nonzero(mask).to_pylist()]
