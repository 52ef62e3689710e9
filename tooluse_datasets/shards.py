"""Shards: pieces of data files that can be read independently, and their readers.

A :class:`Shard` is a descriptor, not data: a file plus a region of it (Parquet row groups, or a byte range of
a JSON Lines file aligned to line ends), so that ``num_proc``, ``split_dataset_by_node``, DataLoader workers and
a distributed engine can divide one big file. Row numbers always count rows from the start of the *file*,
whichever shard reads them, so ids built from them do not depend on how a file was cut.

* Parquet: one shard per group of consecutive row groups (at most ``target_bytes`` of uncompressed data;
  a larger row group is a shard of its own). Planning reads the footer only.
* JSON Lines (``.jsonl``, uncompressed): byte ranges of ``target_bytes``. A range owns the lines that *start*
  in it; the reader of a later range counts the newlines before it to number its rows (a scan, no parsing),
  unless the range was planned from the rows themselves and carries the number of its first line
  (``first_row``: ToolMind's splits, planned row by row).
* Everything else (``.json`` documents, compressed files): one shard per file. A JSON array larger than
  :data:`ARRAY_WHOLE_BYTES` is read a block at a time, so its memory does not grow with the file. Where
  workers will divide the shards (prepare with ``num_proc``), a local uncompressed array larger than
  ``target_bytes`` is cut between elements instead (:func:`cut_documents`: one reading pass first).

A stream's ``IterableDataset.reshard()`` asks for more, smaller shards (:func:`resharded`): single row groups,
byte ranges and array pieces of a quarter of ``target_bytes``.

Readers yield :class:`RawBatch` lists of ``(row number, native row or error)``: a row that cannot even be
parsed is yielded as a :class:`~tooluse_datasets.errors.ToolUseDataError`, so the error policy decides.
"""
from __future__ import annotations

import dataclasses
import datetime
import functools
import io
import itertools
import logging
import os
import re
import uuid
from typing import Any, Callable, Iterator, Optional, Union

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
from datasets.utils.file_utils import is_local_path, xopen

from .errors import InvalidJsonError, InvalidValueError, ToolUseDataError, json_kind

NativeItem = tuple[int, Union[dict, ToolUseDataError]]
logger = logging.getLogger("tooluse_datasets")

PARQUET, LINES, DOCUMENT = "parquet", "lines", "document"
COMPRESSION_SUFFIXES = (".gz", ".zst", ".bz2", ".xz", ".lz4", ".zip")
# Shards are the unit of parallel work and of resuming: a row group of ~1,000 long conversations (~10 MB) is one
# shard on its own, smaller row groups are grouped, and a JSON Lines file is cut every 16 MiB.
DEFAULT_TARGET_BYTES = 16 << 20
UTF8_BOM = b"\xef\xbb\xbf"


@dataclasses.dataclass(frozen=True)
class Shard:
    """A region of one data file. ``row_groups`` for Parquet; ``start``/``stop`` (bytes) for JSON Lines
    (``stop=None``: to the end; ``first_row``: the row number of the line at ``start``, when the planner
    knows it); a ``DOCUMENT`` shard is the whole file."""

    file: str
    kind: str
    row_groups: tuple[int, ...] = ()
    start: int = 0
    stop: Optional[int] = None
    first_row: Optional[int] = None

    @property
    def name(self) -> str:
        """Human-readable, for progress and error messages."""
        where = display_path(self.file)
        if self.kind == PARQUET and self.row_groups:
            groups = self.row_groups
            span = f"{groups[0]}" if len(groups) == 1 else f"{groups[0]}-{groups[-1]}"
            return f"{where} (row groups {span})"
        if self.kind == LINES and (self.start or self.stop is not None):
            return f"{where} (bytes {self.start}-{'' if self.stop is None else self.stop})"
        return where


@dataclasses.dataclass
class RawBatch:
    """Rows read from a shard. ``positions[i]`` is where reading resumes after ``items[i]``: the next row
    number, and for JSON Lines the byte offset of the next line."""

    items: list[NativeItem]
    positions: list[tuple[int, int]]


# --------------------------------------------------------------------------------------------------
# Paths
# --------------------------------------------------------------------------------------------------


def display_path(path: str) -> str:
    """The real file of a path as users know it (streaming chains URLs: ``gzip://x::https://.../x.gz``). A
    member of a zip archive keeps its whole chain, ``zip://<member>::<archive>``, which names both (datasets'
    own notation, which fsspec and ``data_files`` open)."""
    if "::" not in path or is_archive_member(path):
        return path
    return path.split("::")[-1]


def is_archive_member(path: str) -> bool:
    """Whether ``path`` names a file inside a zip archive: ``zip://<member>::<archive>``."""
    return path.startswith("zip://") and "::" in path


def is_zip_archive(path: str) -> bool:
    """Whether ``path`` is a zip archive itself (by its name), whose files :func:`archive_files` lists."""
    return "::" not in path and path.split("?")[0].lower().endswith(".zip")


def file_suffix(path: str) -> str:
    """Lower-case extension of a local path or URL, ignoring compression suffixes and chained URLs."""
    return os.path.splitext(_without_compression(path.split("::")[0].split("?")[0]))[1].lower()


@functools.lru_cache(maxsize=1024)  # asked once per row by the sources that name subsets after files
def file_stem(path: str) -> str:
    """``data/agent_rows.jsonl.gz`` -> ``agent_rows``: the file's name without data and compression suffixes."""
    name = path.split("::")[0][len("zip://"):] if is_archive_member(path) else display_path(path).split("?")[0]
    return os.path.splitext(_without_compression(os.path.basename(name)))[0] or "default"


def _without_compression(name: str) -> str:
    for ext in COMPRESSION_SUFFIXES:
        if name.endswith(ext):
            name = name[: -len(ext)]
    return name


def is_compressed(path: str) -> bool:
    return "::" in path or path.split("?")[0].endswith(COMPRESSION_SUFFIXES)


# --------------------------------------------------------------------------------------------------
# Planning
# --------------------------------------------------------------------------------------------------


def plan_file(path: str, target_bytes: int = DEFAULT_TARGET_BYTES) -> list[Shard]:
    """The shards of one file (see the module docstring). A ``.parquet`` file that is not Parquet is one
    shard that fails with a typed error naming the file when it is read, as is a zip archive left whole (one
    that cannot be read or holds no file: :func:`archive_files`)."""
    if is_zip_archive(path):
        return [Shard(path, DOCUMENT)]
    suffix = file_suffix(path)
    if suffix == ".parquet":
        try:
            metadata = open_parquet(path).metadata
        except InvalidValueError:
            # Not Parquet: one shard whose reading raises the same typed error, so that the error policy
            # decides (with on_error="skip" the file is one reported failure and the other files load).
            return [Shard(path, PARQUET)]
        return plan_parquet(path, metadata, target_bytes)
    if cut_at_lines(path):
        return plan_lines(path, _file_size(path), target_bytes)
    return [whole_file_shard(path)]


def cut_at_lines(path: str) -> bool:
    """Whether a file is read as byte ranges of lines (uncompressed JSON Lines), not as one shard."""
    return file_suffix(path) == ".jsonl" and not is_compressed(path)


def whole_file_shard(path: str) -> Shard:
    """One shard holding a whole JSON or JSON Lines file, read as :func:`plan_file` reads it (``.jsonl`` as
    lines, anything else as a JSON document, which falls back to lines when it is not an array)."""
    return Shard(path, LINES if file_suffix(path) == ".jsonl" else DOCUMENT)


def starts_file(shard: Shard) -> bool:
    """Whether ``shard`` begins at its file's first row (its reader meets the file's rows from the first on)."""
    if shard.kind == PARQUET:
        return not shard.row_groups or shard.row_groups[0] == 0
    return shard.start == 0


def plan_parquet(path: str, metadata: pq.FileMetaData, target_bytes: int,
                 row_groups: Optional[list[int]] = None) -> list[Shard]:
    """Consecutive row groups (of ``row_groups``, default all) grouped up to ``target_bytes`` uncompressed.
    A file without row groups is one shard that reads nothing."""
    candidates = list(range(metadata.num_row_groups)) if row_groups is None else row_groups
    shards: list[Shard] = []
    group: list[int] = []
    size = 0
    for rg in candidates:
        rg_bytes = metadata.row_group(rg).total_byte_size
        contiguous = not group or rg == group[-1] + 1
        if group and (not contiguous or size + rg_bytes > target_bytes):
            shards.append(Shard(path, PARQUET, tuple(group)))
            group, size = [], 0
        group.append(rg)
        size += rg_bytes
    if group or not shards and row_groups is None:
        shards.append(Shard(path, PARQUET, tuple(group)))
    return shards


# datasets' split_dataset_by_node (and torch's DataLoader workers) give each node whole shards only when their
# number is a multiple of the world size; otherwise every node reads every row and keeps a 1/world_size slice.
# Shard counts are therefore rounded down to a multiple of the largest of these that merging can reach.
SHARD_COUNT_MULTIPLES = (12, 6, 4, 2)


def balanced(shards: list[Shard]) -> list[Shard]:
    """``shards`` with some adjacent shards of the same file merged (consecutive row groups, touching byte
    ranges), so that their number is a multiple of 12, 6, 4 or 2: the largest of these that the possible
    merges reach (a run of k mergeable shards can become anything from k shards to one). Merges are spread
    over the list; where no multiple is reachable, the shards stay as they are."""
    mergeable = [i for i in range(len(shards) - 1) if _merged(shards[i], shards[i + 1]) is not None]
    excess = next((len(shards) % m for m in SHARD_COUNT_MULTIPLES
                   if m <= len(shards) and len(shards) % m <= len(mergeable)), 0)
    if not excess:
        return shards
    step = len(mergeable) / excess  # >= 1: the chosen joins are distinct; two that touch chain three shards
    joins = {mergeable[int(k * step)] for k in range(excess)}
    out: list[Shard] = [shards[0]]
    for i in range(1, len(shards)):
        out[-1:] = [_merged(out[-1], shards[i])] if i - 1 in joins else [out[-1], shards[i]]
    return out


_REGION_FIELDS = frozenset({"row_groups", "start", "stop", "first_row"})


def _merged(a: Shard, b: Shard) -> Optional[Shard]:
    if type(a) is not type(b) or any(getattr(a, f.name) != getattr(b, f.name) for f in dataclasses.fields(a)
                                     if f.name not in _REGION_FIELDS):
        return None  # other files, or shards a subclass tells apart (e.g. the mix's member splits)
    if a.kind == PARQUET and a.row_groups and b.row_groups and a.row_groups[-1] + 1 == b.row_groups[0]:
        return dataclasses.replace(a, row_groups=a.row_groups + b.row_groups)
    if a.kind in (LINES, DOCUMENT) and a.stop is not None and a.stop == b.start:
        return dataclasses.replace(a, stop=b.stop)
    return None


def plan_lines(path: str, size: Optional[int], target_bytes: int) -> list[Shard]:
    if not size or size <= target_bytes:
        return [Shard(path, LINES)]
    bounds = list(range(0, size, target_bytes)) + [size]
    return [Shard(path, LINES, start=a, stop=None if b == size else b) for a, b in zip(bounds, bounds[1:])]


def cut_documents(shards: list[Shard], target_bytes: int) -> list[Shard]:
    """``shards`` with every whole JSON array file (local, uncompressed) larger than ``target_bytes`` cut into
    pieces of about that size, each beginning after an element's comma, for workers to divide. Finding the cuts
    reads the array once (about 2.3 s a GB): planning a stream does not, so its first row does not wait for it.
    The cuts of a file are kept for this process (one ToolMind split after another)."""
    out: list[Shard] = []
    for shard in shards:
        whole = shard.kind == DOCUMENT and shard.start == 0 and shard.stop is None
        if whole and "://" not in shard.file and not is_compressed(shard.file) and _larger(shard.file, target_bytes):
            key = (file_version(shard.file), target_bytes)
            if key not in _ARRAY_CUTS:
                if len(_ARRAY_CUTS) >= _MAX_REMEMBERED_FILES:
                    _ARRAY_CUTS.pop(next(iter(_ARRAY_CUTS)))
                try:
                    _ARRAY_CUTS[key] = cut_array(shard.file, target_bytes)
                except ToolUseDataError:  # unreadable (permissions, a read error): reading the shard reports it
                    out.append(shard)
                    continue
            out += [dataclasses.replace(shard, start=p.start, stop=p.stop, first_row=p.first_row)
                    for p in _ARRAY_CUTS[key]]
        else:
            out.append(shard)
    return out


_ARRAY_CUTS: dict[tuple, list[Shard]] = {}

# IterableDataset.reshard() cuts byte ranges and JSON arrays into pieces of target_bytes / RESHARD_DIVISOR.
RESHARD_DIVISOR = 4


def resharded(shards: list[Shard], target_bytes: int) -> list[Shard]:
    """``shards`` cut further, for datasets' ``IterableDataset.reshard()`` (more DataLoader workers or nodes than
    shards): Parquet into single row groups, as datasets reshards Parquet; JSON Lines ranges into pieces of about
    ``target_bytes / RESHARD_DIVISOR``; a whole JSON array (local, uncompressed) into pieces of that size, which
    reads it once to find its elements. Compressed files stay whole. Balanced as plans are (:func:`balanced`)."""
    piece = max(1, target_bytes // RESHARD_DIVISOR)
    out: list[Shard] = []
    for shard in cut_documents(shards, piece):
        if shard.kind == PARQUET and len(shard.row_groups) > 1:
            out += [dataclasses.replace(shard, row_groups=(group,)) for group in shard.row_groups]
        elif shard.kind == LINES and cut_at_lines(shard.file):
            out += _cut_range(shard, piece)
        else:
            out.append(shard)
    return balanced(out)


def _cut_range(shard: Shard, piece: int) -> list[Shard]:
    """A JSON Lines range in pieces of about ``piece`` bytes (each owns the lines that start in it)."""
    try:
        stop = shard.stop if shard.stop is not None else _file_size(shard.file)
    except OSError:  # not there: reading the shard reports it
        stop = None
    if stop is None or stop - shard.start <= piece:
        return [shard]
    bounds = list(range(shard.start, stop, piece)) + [stop]
    if bounds[-1] - bounds[-2] < piece // 2 and len(bounds) > 2:
        del bounds[-2]  # no sliver at the end
    cuts = [dataclasses.replace(shard, start=a, stop=b, first_row=None) for a, b in zip(bounds, bounds[1:])]
    cuts[0] = dataclasses.replace(cuts[0], first_row=shard.first_row)
    cuts[-1] = dataclasses.replace(cuts[-1], stop=shard.stop)
    return cuts


def _larger(path: str, size: int) -> bool:
    try:
        return (_file_size(path) or 0) > size
    except OSError:  # not there: reading the file reports it
        return False


def cut_array(path: str, target_bytes: int) -> list[Shard]:
    """The pieces of a JSON array file: byte ranges of about ``target_bytes``, each ending just after the comma
    of an element (the next piece's first element is its ``first_row``). A file that is not an array, or one
    element, is one piece; an array that cannot be delimited to its end (a string that never ends) is cut up
    to there, and its last piece reports the rest."""
    whole = [whole_file_shard(path)]
    with open_text_file(path) as f:
        head = _sniffed(f)
        if not head.lstrip().startswith(b"["):
            return whole
        after_bracket = f.tell() - len(head) + head.index(b"[") + 1
        f.seek(after_bracket)
        pieces: list[Shard] = []
        start, first = 0, 0
        # Runs of a quarter of the target at most: a piece ends at the first run end past the target.
        for index, _, resume_at in _streamed_array(f, [], after_bracket, 0, None, parse=False,
                                                   run_bytes=min(RUN_BYTES, max(1, target_bytes // 4))):
            # (<= 0: inside a run of elements parsed together, the array's end, or the undelimitable rest)
            if resume_at > 0 and resume_at - start >= target_bytes:
                pieces.append(Shard(path, DOCUMENT, start=start, stop=resume_at, first_row=first))
                start, first = resume_at, index + 1
    if not pieces:
        return whole
    return pieces + [Shard(path, DOCUMENT, start=start, first_row=first)]


def _file_size(path: str) -> Optional[int]:
    if "://" not in path:
        return os.path.getsize(path)
    import fsspec

    try:
        fs, inner = fsspec.core.url_to_fs(path)
        return fs.size(inner)
    except Exception:  # a server that does not report sizes: read the file as one shard
        return None


# --------------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------------


def open_parquet(path: str) -> pq.ParquetFile:
    """A Parquet file opened for streaming reads; a typed error naming the file if it is not Parquet.

    ``pre_buffer=False``: the default keeps compressed column chunks buffered until the read ends, which makes
    peak memory grow with the file; ``buffer_size``: read column chunks in 1 MiB pieces instead of whole."""
    try:
        return pq.ParquetFile(xopen(path, "rb"), pre_buffer=False, buffer_size=1 << 20)
    except (pa.ArrowInvalid, OSError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise InvalidValueError(f"file cannot be read as Parquet ({exc})", file=display_path(path),
                                field="<file>") from None


def parquet_row_offsets(metadata: pq.FileMetaData) -> list[int]:
    """Row number (in the file) of the first row of each row group."""
    offsets, total = [], 0
    for rg in range(metadata.num_row_groups):
        offsets.append(total)
        total += metadata.row_group(rg).num_rows
    return offsets


def read_shard(shard: Shard, batch_size: int, resume: Optional[tuple[int, int]] = None,
               wanted: Optional[Callable[[int], bool]] = None) -> Iterator[RawBatch]:
    """Generic rows of a shard: Parquet rows as dicts, JSON Lines, or a JSON document (an array of objects or
    one object). ``resume``: a position from a previous :class:`RawBatch`; rows before it are not read.
    ``wanted``: a JSON line whose row number it refuses is passed over unparsed (not a row of the output).
    Batches hold ``batch_size`` rows, JSON rows at most :data:`JSON_BATCH_ROWS`."""
    if shard.kind == PARQUET:
        pf = open_parquet(shard.file)
        for record_batch, first_row in iter_parquet_batches(pf, shard, batch_size, resume):
            if isinstance(record_batch, UnreadableRows):
                rows = record_batch.items()
            else:
                rows = parquet_batch_rows(record_batch, first_row)
            yield RawBatch(rows, [(n + 1, 0) for n, _ in rows])
    elif shard.kind == LINES:
        yield from read_lines(shard, min(batch_size, JSON_BATCH_ROWS), resume, wanted)
    else:
        yield from read_document(shard, min(batch_size, JSON_BATCH_ROWS), resume, wanted)


# JSON rows are parsed as they are read, and a batch is converted before the next is read: a batch of this many
# rows is still in the CPU's caches when it converts (ms-swift rows prepared: 2.0-2.2 s CPU for 30K rows, against
# 2.3-2.8 s in batches of 1,000). A source whose batch step wants larger batches joins them (joined_batches).
JSON_BATCH_ROWS = 125


def joined_batches(batches: Iterator[RawBatch], rows: int, weight: Optional[Callable[[NativeItem], int]] = None,
                   most_weight: int = 0) -> Iterator[RawBatch]:
    """``batches`` regrouped in order into batches of ``rows`` rows (the last may hold fewer), and with
    ``weight``, of at most ``most_weight`` in all (a heavier row is a batch of its own). A read error comes
    after the rows before it, as readers give it."""
    return _batched(((item, position) for batch in batches for item, position in zip(batch.items, batch.positions)),
                    rows, weight, most_weight)


def _batched(rows: Iterator[tuple[NativeItem, tuple[int, int]]], size: int,
             weight: Optional[Callable[[NativeItem], int]] = None, most_weight: int = 0) -> Iterator[RawBatch]:
    """``(item, position)`` pairs as batches of ``size`` (and of at most ``most_weight``, see joined_batches); a
    read error comes after the rows before it, as readers give it."""
    items: list[NativeItem] = []
    positions: list[tuple[int, int]] = []
    held = 0
    try:
        for item, position in rows:
            if weight is not None:
                heft = weight(item)
                if items and held + heft > most_weight:
                    yield RawBatch(items, positions)
                    items, positions, held = [], [], 0
                held += heft
            items.append(item)
            positions.append(position)
            if len(items) >= size:  # now, not when the next row comes: it may be a read away
                yield RawBatch(items, positions)
                items, positions, held = [], [], 0
    except GeneratorExit:  # a consumer that stopped early; named first, so that a stream left unfinished until
        raise              # interpreter exit, when module names may be gone (None), closes quietly
    except ToolUseDataError:
        if items:
            yield RawBatch(items, positions)
        raise
    if items:
        yield RawBatch(items, positions)


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
    reading goes on with the next row group."""
    offsets = parquet_row_offsets(pf.metadata)
    skip_to = resume[0] if resume else 0
    for rg in shard.row_groups:
        first = offsets[rg]
        stop = first + pf.metadata.row_group(rg).num_rows
        if stop <= skip_to:
            continue
        try:
            batches = pf.iter_batches(batch_size=batch_size, row_groups=[rg])
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
            start = max(first, skip_to)  # the rows already handed out are not reported again
            yield UnreadableRows(rg, start, stop, str(exc)), start


def parquet_batch_rows(record_batch: pa.RecordBatch, first_row: int) -> list[NativeItem]:
    """``(row number, row dict)`` of a record batch; a row that cannot become Python values is an error."""
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
    return [(first_row + i, row) for i, row in enumerate(rows)]


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
    their hex text, tuples as lists. Other values are left to the conversions' own checks (a nanosecond
    timestamp, which orjson refuses, stays a row that cannot be stored)."""
    kind = type(value)
    if kind is dict:
        return {k: _as_json_values(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [_as_json_values(v) for v in value]
    if kind is datetime.datetime or kind is datetime.date or kind is datetime.time:
        return value.isoformat()
    if kind is uuid.UUID:
        return str(value)
    return value


def open_text_file(path: str):
    """A JSON/JSON Lines file opened for reading bytes, decompressed when its name says so (``.gz``, ``.bz2``,
    ``.xz``...; a member of a zip archive by its own name; streaming's chained URLs such as
    ``gzip://x.jsonl::...`` already decompress). A file that cannot be opened (permissions, a zip archive that
    is not one...), and reading past a truncated or corrupt compressed stream, raise an
    :class:`InvalidValueError` naming the file; a file that is not there, FileNotFoundError."""
    try:
        if is_zip_archive(path):  # left whole: it cannot be read or holds no file (archive_files says which)
            files = archive_files(path)
            raise InvalidValueError(f"zip archive of {len(files)} files read as one file: pass its files "
                                    f"(zip://<file>::<archive>), or pass the archive in data_files, which reads "
                                    f"every one", file=display_path(path), field="<file>")
        if "::" not in path and not is_compressed(path) and is_local_path(path):
            # Lines of JSON rows are a few KB: with the default 8 KiB buffer nearly every line is a system call
            # (2.7 us a line of ms-swift rows, against 0.5 us with 1 MiB).
            return _CheckedReads(open(path, "rb", buffering=_READ_BUFFER_BYTES), path)
        # fsspec's open for URLs and chains (auth and retries); decompressed here, after the name of the file
        # itself (the chain's first part), since xopen hands a compression= argument to the http client.
        raw = xopen(path, "rb")
        codec = _compression(path)
        if codec is None:
            return _CheckedReads(raw, path)
        try:
            return _CheckedReads(_decompressed(raw, codec), path, raw)
        except BaseException:
            raw.close()
            raise
    except (FileNotFoundError, ToolUseDataError):
        raise
    except (*_DECOMPRESSION_ERRORS, NotImplementedError) as exc:  # permissions, a damaged header, a zip member
        # compressed in a way zipfile does not read...
        raise InvalidValueError(f"file cannot be read ({type(exc).__name__}: {exc})", file=display_path(path),
                                field="<file>") from None


# Compression of a file by its name (datasets' and fsspec's suffixes), and the module that reads it.
_CODECS = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz", ".zst": "zstd", ".lz4": "lz4"}
_CODEC_PACKAGES = {"zstd": "zstandard", "lz4": "lz4"}


def _compression(path: str) -> Optional[str]:
    name = path.split("::")[0].split("?")[0].lower()
    return next((codec for ext, codec in _CODECS.items() if name.endswith(ext)), None)


def _decompressed(raw, codec: str):
    if codec == "gzip":
        import gzip

        return gzip.GzipFile(fileobj=raw, mode="rb")
    if codec == "bz2":
        import bz2

        return bz2.BZ2File(raw, mode="rb")
    if codec == "xz":
        import lzma

        return lzma.LZMAFile(raw, mode="rb")
    if codec == "zstd":
        try:
            import zstandard
        except ImportError:
            raise OSError("the file is zstd-compressed, and reading it needs the zstandard package (pip install "
                          "zstandard)") from None
        return _ZstdReader(raw, zstandard)
    from fsspec.compression import compr

    if codec not in compr:
        raise OSError(f"the file is {codec}-compressed, and reading it needs the {_CODEC_PACKAGES[codec]} package "
                      f"(pip install {_CODEC_PACKAGES[codec]})")
    if codec == "lz4":
        return _Lz4Reader(compr[codec](raw, mode="rb"))
    return compr[codec](raw, mode="rb")


class _Lz4Reader:
    """lz4's frame reader, whose errors (a corrupt frame, a file that is not lz4 at all) are RuntimeErrors:
    here OSErrors, as the other codecs' readers raise, so that they become the typed error naming the file."""

    def __init__(self, f):
        self._f = f

    def _call(self, method, *args):
        try:
            return getattr(self._f, method)(*args)
        except RuntimeError as exc:
            raise OSError(str(exc)) from None

    def read(self, size: int = -1) -> bytes:
        return self._call("read", size)

    def read1(self, size: int = -1) -> bytes:
        return self._call("read1", size)

    def readline(self) -> bytes:
        return self._call("readline")

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._call("seek", offset, whence)

    def tell(self) -> int:
        return self._f.tell()

    def close(self) -> None:
        self._f.close()


class _ZstdFrames(io.RawIOBase):
    """The decompressed bytes of a zstd-compressed file, frame after frame. zstandard's own reader stops at the end
    of the first frame by default (a file of several frames, concatenated or written by a parallel compressor,
    would end early) and takes a file cut inside a frame for a shorter file; here that is an EOFError, as gzip's
    reader raises."""

    _CHUNK = 1 << 16  # compressed bytes fed at a time: what one feed decompresses to stays bounded

    def __init__(self, raw, zstandard):
        self._raw, self._zstandard = raw, zstandard
        self._frame = None  # the decompressor of the current frame
        self._input = b""   # compressed bytes read but not fed yet (the start of the next frame)
        self._output = b""  # decompressed bytes not handed out yet

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self._output:
            data = self._input or self._raw.read(self._CHUNK)
            self._input = b""
            if not data:
                if self._frame is not None and not self._frame.eof:
                    raise EOFError("compressed file ended before the end of a zstd frame")
                return 0
            if self._frame is None or self._frame.eof:
                self._frame = self._zstandard.ZstdDecompressor().decompressobj()
            self._output = self._frame.decompress(data)
            if self._frame.eof:
                self._input = self._frame.unused_data
        n = min(len(buffer), len(self._output))
        buffer[:n] = self._output[:n]
        self._output = self._output[n:]
        return n


class _ZstdReader:
    """A zstd-compressed file read as gzip's reader reads one: lines, ``tell``, and ``seek`` (forward by reading
    on, backward by starting again from the file's start); zstandard's own reader has neither readline nor
    seek."""

    def __init__(self, raw, zstandard):
        self._raw, self._zstandard = raw, zstandard
        self._start()

    def _start(self) -> None:
        self._f = io.BufferedReader(_ZstdFrames(self._raw, self._zstandard), buffer_size=_READ_BUFFER_BYTES)
        self._position = 0

    def read(self, size: int = -1) -> bytes:
        data = self._f.read(size)
        self._position += len(data)
        return data

    def read1(self, size: int = -1) -> bytes:
        data = self._f.read1(size)
        self._position += len(data)
        return data

    def readline(self) -> bytes:
        line = self._f.readline()
        self._position += len(line)
        return line

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence != io.SEEK_SET or offset < 0:
            raise io.UnsupportedOperation("a zstd-compressed file seeks to an offset from its start")
        if offset < self._position:
            self._raw.seek(0)
            self._start()
        while self._position < offset:
            if not self.read(min(offset - self._position, _READ_BUFFER_BYTES)):
                break
        return self._position

    def close(self) -> None:
        self._f.close()


def archive_files(path: str) -> list[str]:
    """The files of a zip archive as paths fsspec opens, ``zip://<file>::<archive>``: every file but folders and
    names starting with ``.`` or ``__`` (``__MACOSX/``, ``.DS_Store``), in the order datasets reads an archive's
    files (its ``iter_files``: a folder's files sorted by name, then its folders, each sorted). An archive that
    cannot be read, or holds no file, is an :class:`InvalidValueError` naming it; one that is not there,
    FileNotFoundError."""
    import zipfile

    try:
        with xopen(path, "rb") as f:
            names = [info.filename for info in zipfile.ZipFile(f).infolist()]
    except FileNotFoundError:
        raise
    except (zipfile.BadZipFile, ValueError, NotImplementedError, *_DECOMPRESSION_ERRORS) as exc:
        raise InvalidValueError(f"file cannot be read as a zip archive ({type(exc).__name__}: {exc})",
                                file=display_path(path), field="<file>") from None
    files = _walk_order([n for n in names if not n.endswith("/")])
    if not files:
        raise InvalidValueError(f"zip archive holds no file{' to read' if names else ''}"
                                f"{f' ({len(names)} folders and hidden files)' if names else ''}",
                                file=display_path(path), field="<file>")
    left_out = len([n for n in names if not n.endswith("/")]) - len(files)
    if left_out:
        logger.info("%s: %d hidden files of the zip archive left out (names starting with '.' or '__')",
                    display_path(path), left_out)
    return [f"zip://{name}::{path}" for name in files]


def _walk_order(names: list[str]) -> list[str]:
    """File names of an archive in the order of a walk (os.walk, top down): a folder's files sorted, then each
    of its folders sorted; hidden names (``.``, ``__``) left out, folders too."""
    tree: dict = {}
    for name in names:
        *folders, base = name.strip("/").split("/")
        if any(part.startswith((".", "__")) for part in folders + [base]):
            continue
        node = tree
        for folder in folders:
            node = node.setdefault(folder + "/", {})
        node[base] = None
    out: list[str] = []

    def walk(node: dict, prefix: str) -> None:
        out.extend(prefix + name for name in sorted(n for n, v in node.items() if v is None))
        for folder in sorted(n for n, v in node.items() if v is not None):
            walk(node[folder], prefix + folder)

    walk(tree, "")
    return out


def with_archive_files(paths: list[str]) -> list[str]:
    """``paths`` with every zip archive replaced by its files (:func:`archive_files`), each then read as a file of
    its own (its rows numbered from 0, ids after its own name). An archive that cannot be read or holds no file
    stays, and reading it reports why (one whole-file error)."""
    out: list[str] = []
    for path in paths:
        if is_zip_archive(path):
            try:
                out += archive_files(path)
                continue
            except ToolUseDataError:
                pass
        out.append(path)
    return out


def _decompression_errors() -> tuple[type, ...]:
    import lzma
    import zipfile
    import zlib

    errors: list[type] = [EOFError, OSError, zlib.error, lzma.LZMAError, zipfile.BadZipFile]  # (a bad CRC...)
    try:
        import zstandard

        errors.append(zstandard.ZstdError)
    except ImportError:
        pass
    return tuple(errors)


_READ_BUFFER_BYTES = 1 << 20


class _CheckedReads:
    """A file object whose read errors (a truncated or corrupt archive, a dropped connection) are typed errors
    naming the file, so the error policy decides instead of a raw traceback."""

    def __init__(self, f, path: str, raw=None):
        self._f, self._path, self._raw = f, path, raw  # raw: the file a decompressing ``f`` reads
        self._failed: Optional[ToolUseDataError] = None  # a read error held back, after the bytes read before it

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            self._f.close()
        finally:
            if self._raw is not None:
                self._raw.close()

    def _call(self, method, *args):
        try:
            return getattr(self._f, method)(*args)
        except _DECOMPRESSION_ERRORS as exc:
            raise InvalidValueError(f"file cannot be read on ({type(exc).__name__}: {exc})",
                                    file=display_path(self._path), field="<file>") from None

    def read(self, size: int = -1) -> bytes:
        """``size`` bytes (all, if negative: then a read error is raised) unless the file ends first. A read
        error after some of the ``size`` is held back for the next read: a buffered reader asked for many bytes
        at once drops those it read before the error, and a reader keeps the rows they hold (a JSON array cut
        short keeps its elements before the cut, as a JSON Lines file keeps its lines)."""
        if self._failed is not None:
            raise self._failed
        if size < 0:
            return self._call("read", size)
        read1 = getattr(self._f, "read1", None)
        pieces: list[bytes] = []
        left = size
        try:
            while left > 0:
                # One read of the underlying reader at a time (read1), or small reads when it has none.
                piece = self._call("read1", left) if read1 is not None else self._call("read", min(left, 1 << 16))
                if not piece:
                    break
                pieces.append(piece)
                left -= len(piece)
        except ToolUseDataError as exc:
            if not pieces:
                raise
            self._failed = exc
        return b"".join(pieces)

    def readline(self) -> bytes:
        if self._failed is not None:
            raise self._failed
        return self._call("readline")

    def seek(self, offset: int) -> int:
        self._failed = None
        return self._call("seek", offset)

    def tell(self) -> int:
        return self._f.tell()


_DECOMPRESSION_ERRORS = _decompression_errors()


def read_lines(shard: Shard, batch_size: int, resume: Optional[tuple[int, int]] = None,
               wanted: Optional[Callable[[int], bool]] = None,
               parse: Optional[Callable[[bytes], Any]] = None) -> Iterator[RawBatch]:
    """JSON Lines of a byte range: the lines that start in ``[start, stop)``. Row numbers count lines in the
    file from 0, blank lines included (they are skipped, not numbered anew). Lines whose row number
    ``wanted`` refuses are skipped unparsed. ``parse``: what reads a line instead of the exact decoder (a
    planner that needs one key); it raises ValueError for a line that is not JSON."""
    from .codec import loads

    loads = parse or loads

    with open_text_file(shard.file) as f:
        if resume is not None:
            row, offset = resume
            if offset:
                _check_line_start(f, shard.file, offset)
            else:
                f.seek(offset)
        else:
            if shard.start and not_json_text(f.read(_SNIFF_BYTES)):
                return  # the file's first shard reports it as a whole
            offset = _first_line_start(f, shard.start)
            if shard.first_row is not None and offset == shard.start:
                row = shard.first_row
            else:
                row = _count_lines_before(f, shard.file, offset) if offset else 0
            f.seek(offset)
        items: list[NativeItem] = []
        positions: list[tuple[int, int]] = []
        while shard.stop is None or offset < shard.stop:
            try:
                line = f.readline()
            except ToolUseDataError:
                if items:  # the rows before the damage are rows
                    yield RawBatch(items, positions)
                raise
            if not line:
                _remember_line_number(shard.file, offset, row)
                break
            start_of_line = offset
            offset += len(line)
            if start_of_line == 0:
                line = first_line(line, shard.file)
            if (wanted is None or wanted(row)) and line.strip():
                try:
                    value = loads(line)
                except ValueError as exc:
                    value = InvalidJsonError(f"line is not {_not_json_reason(line, exc)}", row=row, field="<line>")
                except RecursionError:
                    value = InvalidJsonError("line nests values too deeply to read", row=row, field="<line>")
                else:
                    if not isinstance(value, dict):
                        value = InvalidJsonError(f"line holds a JSON {json_kind(value)}, not an object",
                                                 row=row, field="<line>")
                items.append((row, value))
                positions.append((row + 1, offset))
                if len(items) >= batch_size:
                    yield RawBatch(items, positions)
                    items, positions = [], []
            row += 1
        _remember_line_number(shard.file, offset, row)
        if items:
            yield RawBatch(items, positions)


def _check_line_start(f, path: str, offset: int) -> None:
    """Move ``f`` to ``offset``, where a saved stream resumes: the start of a line (after a newline) or the end of
    a file whose last line has none. Elsewhere the file was edited since the state was saved, and reading on
    would take the rest of a line for a row (a bad row reported, the real one lost, rows numbered wrongly)."""
    f.seek(offset - 1)
    before = f.read(1)
    if before != b"\n" and (not before or f.read(1)):
        raise ValueError(f"{display_path(path)}: a saved stream resumes at byte {offset}, which "
                         f"{'is past the end of the file' if not before else 'is not the start of a line'}: the "
                         "file changed since the state_dict was saved; a state resumes the data it was taken from")


def _not_json_reason(line: bytes, exc: ValueError, start: Optional[int] = None) -> str:
    """Why a line is not JSON: bytes that are not UTF-8 are named by value and place (orjson says only that
    the text is not UTF-8, at a position in characters it could not decode), else the parser's message.
    ``start``: the file offset of the text (an array element), which then names its byte in the file."""
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as bad:
        where = f"byte {bad.start} of the line" if start is None else f"byte {start + bad.start} of the file"
        return f"UTF-8 text (byte 0x{line[bad.start]:02x} at {where}; JSON files are UTF-8)"
    return f"valid JSON ({exc})"


# What a file that should hold JSON may hold instead, by its first bytes.
_MAGIC = ((b"PAR1", "Parquet data (name it .parquet)"), (b"\x1f\x8b", "gzip-compressed data (name it .gz)"),
          (b"\x28\xb5\x2f\xfd", "zstd-compressed data (name it .zst)"), (b"PK\x03\x04", "a zip archive (name it .zip)"),
          (b"\xfd7zXZ\x00", "xz-compressed data (name it .xz)"),
          (b"\x04\x22\x4d\x18", "lz4-compressed data (name it .lz4)"),
          (b"\xff\xfe", "UTF-16 text (JSON files are UTF-8)"), (b"\xfe\xff", "UTF-16 text (JSON files are UTF-8)"))
_BZIP2_MAGIC = re.compile(rb"BZh[1-9](?:1AY&SY|\x17rE8P\x90)")
_SNIFF_BYTES = 1024


def first_line(line: bytes, file: str) -> bytes:
    """A JSON Lines file's first line without its UTF-8 BOM; a file that is plainly not JSON text is an error."""
    kind = not_json_text(line[:_SNIFF_BYTES])
    if kind:
        raise InvalidValueError(f"file holds {kind}, not JSON text", file=display_path(file), field="<file>")
    return line.removeprefix(UTF8_BOM)


def not_json_text(head: bytes) -> Optional[str]:
    """What the file starting with ``head`` holds if it is plainly not JSON text (binary data), else None."""
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    if _BZIP2_MAGIC.match(head):  # "BZh", the block size, then a block's or the end's magic (no JSON text starts so)
        return "bzip2-compressed data (name it .bz2)"
    if head[257:262] == b"ustar":  # a tar header's magic (POSIX and GNU)
        return "a tar archive (extract it and pass its files, or zip them: a .zip archive's files are read)"
    return "binary data" if b"\x00" in head else None


def _first_line_start(f, start: int) -> int:
    """Offset of the first line that starts at or after ``start``."""
    if start == 0:
        return 0
    f.seek(start - 1)
    if f.read(1) == b"\n":
        return start
    f.readline()
    return f.tell()


# Row numbers of line starts readers reached, per file (this process): a reader of a later byte range counts
# lines from the nearest known start before its own instead of from the top of the file, so reading a file's
# shards in order scans it once, not once per shard.
# A local file is known by its size and modification time too, so a file rewritten in place is counted anew.
_LINE_NUMBERS: dict[tuple, dict[int, int]] = {}
_MAX_REMEMBERED_FILES = 64


def file_version(path: str) -> tuple:
    """What tells a file's contents apart in this process: its path, size and modification time (a URL: its path)."""
    try:
        stat = os.stat(path)
    except (OSError, ValueError):  # a URL: pinned revisions do not change
        return (path,)
    return (path, stat.st_size, stat.st_mtime_ns)


def _remember_line_number(path: str, offset: int, row: int) -> None:
    key = file_version(path)
    if key not in _LINE_NUMBERS and len(_LINE_NUMBERS) >= _MAX_REMEMBERED_FILES:
        _LINE_NUMBERS.pop(next(iter(_LINE_NUMBERS)))
    _LINE_NUMBERS.setdefault(key, {})[offset] = row


def _count_lines_before(f, path: str, offset: int) -> int:
    known = _LINE_NUMBERS.get(file_version(path), {})
    start = max((o for o in known if o <= offset), default=0)
    f.seek(start)
    count, remaining = known.get(start, 0), offset - start
    while remaining:
        chunk = f.read(min(remaining, 16 << 20))
        if not chunk:
            break
        count += chunk.count(b"\n")
        remaining -= len(chunk)
    return count


def read_document(shard: Shard, batch_size: int, resume: Optional[tuple[int, int]] = None,
                  wanted: Optional[Callable[[int], bool]] = None) -> Iterator[RawBatch]:
    """A ``.json`` file: an array of row objects, one object (on one line or several), or JSON Lines saved as
    ``.json``. Elements of an array are numbered from 0; in an array that does not parse as a whole, each
    element that does is a row and each that does not is an error at its index (:func:`_array_elements`).
    An array of up to :data:`ARRAY_WHOLE_BYTES` is parsed whole; a larger one, or a piece of one
    (:func:`cut_array`), is read a block at a time (:func:`_streamed_array`). ``wanted`` picks rows by number,
    as for JSON Lines (elements delimited one by one are then not even parsed)."""
    from .codec import loads, try_loads

    with open_text_file(shard.file) as f:
        # The first bytes say whether it is an array; only then is the file read on (JSON Lines is not).
        head = _sniffed(f)
        array = head.lstrip().startswith(b"[")
        data = b""
        # Where reading starts inside an array (after an element and its comma; 0: at its start), and the index
        # of the element there: a piece's start, or a position (see _streamed_array).
        inside, index = shard.start, shard.first_row or 0
        if resume and resume[1] > 0:
            inside, index = resume[1], resume[0]
        elif resume and resume[1] < 0:
            inside, into = _unpacked(resume[1])
            index = resume[0] - into
        later = resume[0] if resume else 0  # (a resume at 0, after the last element: the rows before it are skipped)
        if array and inside:
            if shard.stop is not None and inside >= shard.stop:
                return  # resumed after the piece's last element
            f.seek(inside)
            elements = _streamed_array(f, [], inside, index, lambda n: n >= later and (wanted is None or wanted(n)),
                                       stop=shard.stop)
            yield from _array_batches(elements, batch_size)
            return
        if array:
            after_bracket = f.tell() - len(head) + head.index(b"[") + 1  # the file offset blocks start at
            blocks, size = [head], len(head)
            failed: Optional[ToolUseDataError] = None
            try:
                while shard.stop is None and size <= ARRAY_WHOLE_BYTES and (block := f.read(_ARRAY_READ_BYTES)):
                    blocks.append(block)
                    size += len(block)
            except ToolUseDataError as exc:  # cut short (a damaged compressed file): the elements read whole
                failed = exc                 # before the damage are rows, as in a larger array, then the error
            if size > ARRAY_WHOLE_BYTES or shard.stop is not None or failed is not None:
                # large, the first piece of a cut array, or cut short
                blocks[0] = head[head.index(b"[") + 1:]
                elements = _streamed_array(f if failed is None else _FailedReads(failed), blocks, after_bracket, 0,
                                           lambda n: n >= later and (wanted is None or wanted(n)), stop=shard.stop)
                yield from _array_batches(elements, batch_size)
                return
            data = b"".join(blocks)
        document = None
        if not array and head.lstrip().startswith(b"{"):
            # A first line that is not a JSON value of its own may open one object written over several lines.
            start = f.tell() - len(head)
            if b"\n" not in head:
                head += f.readline()
            if not try_loads(head.lstrip().split(b"\n", 1)[0])[0]:
                document = _multiline_object(head + f.read(), start)
    if not array:
        if document is not None:
            if not resume or resume[0] == 0:
                yield RawBatch([(0, document)], [(1, 0)])
            return
        yield from read_lines(Shard(shard.file, LINES), batch_size, resume, wanted)  # also a broken first line's
        return
    try:
        elements: list = loads(data)
    except (ValueError, RecursionError):
        # One bad element (a truncated value, NaN, 1e400, a lone surrogate escape...) must not cost the others:
        # delimit the elements and parse each on its own.
        elements = list(_array_elements(data, after_bracket - data.index(b"[") - 1))
    for start in range(later, len(elements), batch_size):
        chunk = elements[start:start + batch_size]
        items: list[NativeItem] = [(start + i, _array_row(row, start + i)) for i, row in enumerate(chunk)]
        yield RawBatch(items, [(n + 1, 0) for n, _ in items])


# Lines after the first of a .json file looked at to tell JSON Lines from one object written over several lines.
_LINES_TO_TELL = 64


def _multiline_object(text: bytes, start: int) -> Union[dict, ToolUseDataError, None]:
    """The object of a ``.json`` file whose first line is not JSON alone (``text``, from file offset ``start``):
    one object written over several lines; or, when that does not parse and none of the next lines is an object
    of its own either, the error saying why, for the whole file (read as lines, each line of it would be a row
    that is not JSON: a pretty-printed object with one stray comma was a hundred errors). None: the file is JSON
    Lines with a bad first line, whose other lines are rows."""
    from .codec import loads, try_loads

    try:
        value = loads(text)
    except (ValueError, RecursionError) as exc:
        rest = (line for line in itertools.islice(io.BytesIO(text), 1, None) if line.strip())
        later = list(itertools.islice(rest, _LINES_TO_TELL))
        if not later or any(isinstance(try_loads(line)[1], dict) for line in later):
            return None  # (one line alone: a bad line of JSON Lines as much as a bad object)
        why = f"is not {_not_json_reason(text, exc, start)}" if isinstance(exc, ValueError) else \
            "nests values too deeply to read"
        return InvalidJsonError(f"file holds one JSON object written over several lines that {why}", row=0,
                                field="<file>")
    return value if isinstance(value, dict) else None


class _FailedReads:
    """A file whose every read raises the error that ended the reading of it."""

    def __init__(self, error: ToolUseDataError):
        self._error = error

    def read(self, size: int = -1) -> bytes:
        raise self._error


def _sniffed(f) -> bytes:
    """The first bytes of a JSON file read from ``f`` that are not all white space (a UTF-8 BOM dropped): what
    it holds starts there, at file offset ``f.tell() - len(head)``."""
    head = f.read(_SNIFF_BYTES).removeprefix(UTF8_BOM)
    while head and not head.strip():  # leading white space longer than one sniff
        head = f.read(_SNIFF_BYTES)
    return head


# A JSON array of up to this many bytes is parsed whole; a larger one is read a block of _ARRAY_READ_BYTES at a
# time, in runs of elements (or element by element), so memory holds a block and a run, not the file. Runs are
# the faster way as well: 47 MB of ms-swift rows read in 0.19 s CPU and 188 MiB peak, against 0.27 s and 360 MiB
# parsed whole (first row after 29 instead of 250 ms).
ARRAY_WHOLE_BYTES = 4 << 20
_ARRAY_READ_BYTES = 4 << 20


def _array_batches(elements: Iterator[tuple[int, Any, int]], batch_size: int) -> Iterator[RawBatch]:
    """Batches of ``(index, element, offset)``; a read error (a truncated compressed file) comes after the
    elements before it, as in JSON Lines."""
    return _batched((((index, _array_row(element, index)), (index + 1, offset)) for index, element, offset in elements),
                    batch_size)


def _element_pattern(depth: int) -> bytes:
    """A JSON object or array nesting at most ``depth`` levels: brackets around runs of other characters and
    whole strings, each run matched at C speed. (A ``{`` closed by ``]`` matches too: the parser refuses it.)"""
    pattern = rb'[\[{](?:[^{}\[\]"]++|' + _STRING + rb')*+[\]}]'
    for _ in range(depth - 1):
        pattern = rb'[\[{](?:[^{}\[\]"]++|' + _STRING + rb'|' + pattern + rb')*+[\]}]'
    return pattern


_STRING = rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"'
# An array element (with the white space around it) and the comma or bracket after it: the common case, found by
# one regex match, about twice as fast as token by token. Deeper elements, and text that is not JSON, are
# delimited token by token instead, as is everything on Python 3.10 (no possessive quantifiers, without which
# a failing match could backtrack exponentially).
try:
    _ELEMENT: Optional[re.Pattern] = re.compile(
        rb'(\s*+(?:' + _element_pattern(8) + rb'|' + _STRING + rb'|[^\s{}\[\],"]++)\s*+)([,\]])', re.DOTALL)
except re.error:
    _ELEMENT = None


def _streamed_array(f, blocks: list[bytes], base: int, index: int, wanted: Optional[Callable[[int], bool]], *,
                    stop: Optional[int] = None, parse: bool = True,
                    run_bytes: int = 0) -> Iterator[tuple[int, Any, int]]:
    """``(index, element or error, position to resume at)`` for the elements of a JSON array read from ``f``, from
    ``blocks`` (the bytes read so far, which start at file offset ``base``, just after ``[`` or an element's
    comma; emptied here, so that this generator alone holds them) on. The same elements, errors and numbering
    as :func:`_array_elements` on the whole text. Elements ``wanted`` refuses are not yielded (those delimited
    one by one are not parsed either). ``stop``: end after the element whose comma ends at that offset (a piece
    of a cut array); ``parse=False``: yield each element as None (finding cuts); ``run_bytes``: the span of a
    run of elements parsed together (0: :data:`RUN_BYTES`, which is 0 to read every element alone).

    Runs of elements are parsed together where they can be (:func:`_element_run`), else each is delimited and
    parsed alone. The position is the offset after the element's comma, 0 after the last element (a resume
    there reads the array again, skipping its elements), or, inside a run, a negative number packing the run's
    start and how many of its elements come before the resume point (:func:`_packed`)."""
    from .codec import loads

    failed: Optional[ToolUseDataError] = None

    def read(size: int = -1) -> bytes:
        """The next bytes of ``f``; after a read error (a compressed file cut short), none: the elements whole
        before it are still given, then the error (the element it cuts is not one)."""
        nonlocal failed
        if failed is not None:
            return b""
        try:
            return f.read(size)
        except ToolUseDataError as exc:
            failed = exc
            return b""

    buf = b"".join(blocks)
    blocks.clear()
    pos, eof = 0, False
    run_bytes = run_bytes or RUN_BYTES
    runs_from = base if run_bytes else None  # file offset from which runs are tried again (None: never)
    while True:
        if runs_from is not None and base + pos >= runs_from:
            if not eof and len(buf) - pos < 2 * run_bytes:  # room for a whole run
                pending = [buf[pos:]]
                while not eof and sum(map(len, pending)) < 2 * run_bytes:
                    pending.append(read(_ARRAY_READ_BYTES))
                    eof = not pending[-1]
                base, buf, pos = base + pos, b"".join(pending), 0
            limit = len(buf) if stop is None else min(len(buf), stop - base)  # the comma may end at stop
            comma, values = _element_run(buf, pos, limit, run_bytes)
            if values is None:
                runs_from = base + comma
            else:
                run_start = base + pos
                last = len(values) - 1
                for i, value in enumerate(values):
                    if wanted is None or wanted(index + i):
                        yield index + i, value if parse else None, \
                            base + comma + 1 if i == last else _packed(run_start, i + 1)
                index += len(values)
                pos = comma + 1
                if stop is not None and base + pos >= stop:
                    return
                if len(buf) - pos < pos:
                    base, buf, pos = base + pos, buf[pos:], 0
                continue
        match = _ELEMENT.match(buf, pos) if _ELEMENT is not None else None
        if match is not None:
            text, separator, end = match.group(1), match.group(2), match.end()
        else:
            found = _token_delimited(buf, pos)
            if found is None:  # the element goes on past the bytes read, or cannot be delimited at all
                if not eof:  # read at least as much again as is pending: an element is scanned O(log n) times
                    more = read(max(_ARRAY_READ_BYTES, len(buf) - pos))
                    eof = not more
                    base, buf, pos = base + pos, buf[pos:] + more, 0
                    continue
                if failed is not None:
                    raise failed
                rest = buf[pos:]  # a string that never ends, or no closing bracket: nothing after it can be cut
                if rest.strip() and (wanted is None or wanted(index)):
                    yield index, InvalidJsonError(f"element {index} and what follows cannot be read (unterminated "
                                                  f"string or missing bracket; {len(rest)} bytes to the end of the "
                                                  f"file)", row=index, field="<element>"), 0
                return
            text, separator, end = buf[pos:found], buf[found:found + 1], found + 1
        if not (separator == b"]" and index == 0 and not text.strip()):  # "[]" holds no element
            if wanted is None or wanted(index):
                if not parse:
                    element = None
                elif separator == b"]" and not text.strip():  # "[{...},]": a comma and no element after it
                    element = InvalidJsonError(f"trailing comma after the last element (byte {base + pos - 1}); "
                                               "JSON allows none: remove it", row=index, field="<file>")
                else:
                    element = _parse_element(loads, text, index, base + pos)
                yield index, element, base + end if separator == b"," else 0
            index += 1
        if stop is not None and separator == b"," and base + end >= stop:
            return
        pos = end
        if separator == b"]":
            rest = (buf[pos:] + read()).strip()
            if failed is not None:
                raise failed
            if rest and (wanted is None or wanted(index)):
                yield index, InvalidJsonError(f"{len(rest)} bytes of text after the array's end", row=index,
                                              field="<file>"), 0
            return
        if len(buf) - pos < pos:  # drop what was consumed once it outweighs what is left
            base, buf, pos = base + pos, buf[pos:], 0


# Elements parsed together span up to this many bytes (a few hundred rows); an element larger than that, or
# the elements of a run that did not parse, are read one by one.
RUN_BYTES = 1 << 20
# An object element's start: white space, the brace, and its first key (up to 64 characters, no escapes).
_OBJECT_START = re.compile(rb'\s*\{\s*"[^"\\]{0,64}"\s*:')
_INTO_BITS = 23  # a packed position: elements into the run (a 1 MB run holds at most 150K), then the run's offset


def _element_run(buf: bytes, pos: int, limit: int, run_bytes: int) -> tuple[int, Optional[list]]:
    """The elements of ``buf`` from ``pos`` (just after ``[`` or an element's comma) up to a comma before
    ``limit``, parsed in one orjson call: ``(the comma's index, their values)``; or ``(where to try again, None)``.

    The comma is a guess: the last one in the next ``run_bytes`` followed by the same white space, brace and
    first key as the element at ``pos`` (the next element's start, in an array of rows alike). ``[`` + the text
    before it + ``]`` then parses only if the guess is right: a comma inside a string leaves the string open, one
    inside an element leaves its brackets open (orjson accepts no trailing commas or unclosed values). A run
    holding what the exact reader treats apart (an integer beyond 64 bits, NaN, an element too deep or not JSON)
    does not parse or is not taken, and its elements are read one by one."""
    start = _OBJECT_START.match(buf, pos)
    if start is None:
        return pos + 1, None  # not an object: this element alone
    signature = b"," + start.group()
    comma = buf.rfind(signature, pos + 1, min(limit - 1, pos + run_bytes) + len(signature))
    if comma < 0:
        return pos + run_bytes, None  # no boundary in reach: read on one by one
    from .codec import may_hold_big_int

    try:
        values = orjson.loads(b"[" + buf[pos:comma] + b"]")
    except orjson.JSONDecodeError:
        return comma + 1, None
    if may_hold_big_int(values):  # orjson rounds integers beyond 64 bits to floats: read each alone, exactly
        return comma + 1, None
    if len(values) >> _INTO_BITS:  # more elements than a packed position can count into a run
        return comma + 1, None
    return comma, values


def _packed(run_start: int, into: int) -> int:
    return -(run_start << _INTO_BITS | into)


def _unpacked(position: int) -> tuple[int, int]:
    """(a run's start offset, elements into it) of a packed position."""
    return -position >> _INTO_BITS, -position & ((1 << _INTO_BITS) - 1)


def _token_delimited(data: bytes, start: int) -> Optional[int]:
    """Where the array element starting at ``start`` ends (the offset of the comma or bracket after it), found
    token by token as :func:`_array_elements` does; None if ``data`` ends first or a string in it never does."""
    depth = 0
    for token in _ARRAY_TOKEN.finditer(data, start):
        char = token.group()
        if char in (b"[", b"{"):
            depth += 1
        elif char in (b"]", b"}") and depth:
            depth -= 1
        elif char == b'"':
            return None
        elif depth == 0 and char in (b",", b"]"):
            return token.start()
    return None


def _array_row(element, index: int) -> Union[dict, ToolUseDataError]:
    if isinstance(element, (dict, ToolUseDataError)):
        return element
    return InvalidJsonError(f"element is a JSON {json_kind(element)}, not an object", row=index, field="<element>")


# Strings (whole, escapes included), a quote that opens no complete string, and the structural characters.
_ARRAY_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|["\[\]{},]', re.DOTALL)


def _array_elements(data: bytes, offset: int = 0) -> Iterator[Any]:
    """The elements of a JSON array that does not parse as a whole: each element's text is found by
    matching brackets outside strings, then parsed alone; an element that does not parse is an
    :class:`InvalidJsonError` at its index. Where the text stops being delimitable (an unterminated string,
    a missing bracket), the rest of the file is one error at the index it starts at. (The streamed reader over
    text already in memory; ``offset``: the file offset ``data`` starts at, for the byte offsets errors name.)"""
    opened = data.index(b"[") + 1
    return (value for _, value, _ in _streamed_array(io.BytesIO(), [data[opened:]], offset + opened, 0, None))


def _parse_element(loads, text: bytes, index: int, start: int) -> Any:
    """The value of an array element's ``text`` (at file offset ``start``), or the error saying why it has none."""
    try:
        return loads(text)
    except ValueError as exc:
        return InvalidJsonError(f"element is not {_not_json_reason(text, exc, start)}", row=index, field="<element>")
    except RecursionError:
        return InvalidJsonError("element nests values too deeply to read", row=index, field="<element>")
