"""Converting one shard: read once, convert each row once, write every requested config.

This is the only place format logic runs; the builder (prepare and streaming), the exports and the mirror
all call it. For each native row of a shard::

    native --to_raw--> raw --to_unified--> unified --writer--> swift / toolmind / ...

each stage at most once, whatever set of configs is asked for, so one read of a split feeds every writer
and the statistics. A failure is charged to the configs it affects (a row that cannot be written in
``toolmind`` is still a ``unified`` row) and follows the error policy: ``raise`` stops with the typed error
naming file, row and field; ``skip`` counts it in that config's :class:`SkipReport`.

Rows leave in one of two forms, decided by the caller:

* Arrow tables (``arrow=True``): prepare and mirrors. JSON leaves are written as exact orjson text.
* Python rows: streaming. The same values the Arrow path stores, already in their decoded form, so no
  row is turned into Arrow and back; every JSON leaf is still serialized once to prove it can be stored,
  so both paths skip exactly the same rows.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import gc
from functools import partial
from typing import Any, Callable, Iterable, Iterator, Optional, Sequence

import pyarrow as pa
from datasets import Features

from .arrow_rows import RowEncoder
from .columnar import TableBuilder
from .errors import ConversionError, InvalidValueError, JsonValueError, SkipReport, ToolUseDataError, check_on_error
from .schema import UNIFIED_FEATURES
from .shards.paths import display_path
from .shards.reading import check_there
from .shards.shard import RawBatch, Shard
from .shards.versions import check_unchanged
from .source import RowContext, Source, SplitPlan

RAW, UNIFIED = "raw", "unified"
# Rows converted at a time: each piece's rows are handed out, written as text or encoded for Arrow before the
# next piece is converted, so few converted rows are alive at once. Measured on 30K ToolMind and ms-swift rows
# (CPU time): streaming at 1.3-1.5x and prepare at 1.1-1.2x the rate of whole 1,000-row batches; 1 to 16 rows
# were within noise of each other, 64-128 in between.
PIECE_ROWS = 4
# A source whose batch step needs batches (NESTFUL's sandbox: one interpreter per batch) converts whole batches,
# or, where its rows are handed out as they come, pieces of BATCH_STEP_ROWS: a first row after 64 executions,
# not 1,000, at one interpreter start per 64 rows.
BATCH_STEP_ROWS = 64


def piece_rows(source: Source, *, handed_out: bool) -> Optional[int]:
    """Rows of ``source`` converted at a time (None: the source's whole batches). ``handed_out``: each piece's
    rows go to the consumer before the next piece is converted (a stream in this process)."""
    if not source.has_batch_step:
        return PIECE_ROWS
    return BATCH_STEP_ROWS if handed_out else None


# What pyarrow raises for a Python value its column cannot hold (a number in a string column, a lone
# surrogate, an integer beyond int32...).
STORAGE_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, UnicodeEncodeError, OverflowError)


def config_features(source: Source, config: str) -> Features:
    """The features of ``config`` (a format name) for ``source``."""
    if config == UNIFIED:
        return UNIFIED_FEATURES
    if config == RAW:
        if source.raw_features is None:  # (the mix: load()'s refusal and validate()'s say the same)
            raise ValueError(f"source {source.name!r} has no 'raw' format (raw schemas differ per source); "
                             f"load each source's raw format on its own")
        return source.raw_features
    from .formats import output_format

    return output_format(config).features


@dataclasses.dataclass
class ConvertedBatch:
    """What one batch of a shard became. ``rows[config]`` are Arrow tables or lists of Python rows;
    ``positions[config][i]`` is where reading resumes after the input row of ``rows[config][i]``
    (Python rows only); ``end`` is where reading resumes after the whole batch; ``unified`` holds the
    unified Python rows when ``keep_unified`` was asked for (statistics and validation in one pass)."""

    rows: dict[str, Any]
    positions: dict[str, list[tuple[int, int]]]
    end: tuple[int, int]
    unified: Optional[list[dict]] = None


class ShardConverter:
    """Converts the shards of one source into ``configs``, with one error policy and one skip report per
    config (``reports``; created if not given). ``row_check`` (``load(validate=...)``: a unified row -> the
    error it raises, or None) runs on each unified row, so a row it refuses is failed with its file and row.
    ``counted_only``: configs converted only to be looked at (a mirror's statistics of unified rows it does not
    write): a row failing only there is counted in their reports, never raised."""

    def __init__(self, source: Source, configs: Sequence[str], *, on_error: str = "raise",
                 reports: Optional[dict[str, SkipReport]] = None,
                 row_check: Optional[Callable[[dict], Optional[Exception]]] = None,
                 counted_only: Sequence[str] = ()):
        check_on_error(on_error)
        self.row_check = row_check
        self.counted_only = frozenset(counted_only)
        if not configs:
            raise ValueError("no config to convert to")
        self.source = source
        self.configs = list(configs)
        self.on_error = on_error
        self.reports = reports if reports is not None else {c: SkipReport() for c in self.configs}
        self.features = {c: config_features(source, c) for c in self.configs}
        self._encoders = {c: RowEncoder(f) for c, f in self.features.items()}
        self._finishers = {c: python_row_finisher(f) for c, f in self.features.items()}
        self._writers: dict[str, Callable[[dict], dict]] = {}
        for c in self.configs:
            if c not in (RAW, UNIFIED):
                from .formats import output_format
                from .trailing_results import writer_for

                # (with trailing_results="drop", a row ending on tool results reaches the writer without them; its
                # message indices are unchanged, so an error still names the input field they came from)
                self._writers[c] = writer_for(c, output_format(c).write, source.options.trailing_results)
        self._needs_unified = any(c != RAW for c in self.configs)
        # Source.native_to_unified serves rows when no config needs the raw row and no batch step follows.
        self._shortcut = RAW not in self.configs and not source.has_batch_step
        # Into Arrow, the unified config alone and unchecked: such rows may skip their dicts altogether.
        self._fills_columns = (self._shortcut and self.configs == [UNIFIED] and not row_check
                               and type(source).fill_unified_columns is not Source.fill_unified_columns)

    def batches(self, split: SplitPlan, shard: Shard, *, arrow: bool, resume: Optional[tuple[int, int]] = None,
                keep_unified: bool = False, most_rows: Optional[int] = None) -> Iterator[ConvertedBatch]:
        """The converted batches of one shard: the source's batches, cut into pieces of at most ``most_rows``
        rows (a consumer that hands out each piece before the next is converted; see streaming)."""
        file = display_path(shard.file)
        label = shard.file_label
        try:
            batches = _pieces(self.source.read(shard, split, resume), most_rows)
            while True:
                with gc_paused():  # reading and converting a batch; the consumer's code runs with it on
                    raw_batch = next(batches, None)
                    if raw_batch is None:
                        break
                    if not raw_batch.items:
                        continue  # nothing read, no position to record
                    converted = self._convert(raw_batch, file, label, split.name, arrow, keep_unified)
                yield converted
        except GeneratorExit:  # a consumer that stopped early; named first, so that a stream left unfinished
            raise              # until interpreter exit, when module names may be gone, closes quietly
        except ToolUseDataError as exc:  # a whole shard is unreadable (not Parquet, a bad row group...)
            self._shard_failed(exc, file)

    def check_version(self, shard: Shard) -> bool:
        """The version check of ``shard``'s file alone (a resumed stream, before it reads the shard or with no row
        of it left to read): a change is the file's error, raised or reported as an unreadable shard's; a file
        not there any more, a DataNotFoundError naming it, as reading it is. Whether the file is unchanged."""
        check_there(shard)
        try:
            check_unchanged(shard)
        except ToolUseDataError as exc:
            self._shard_failed(exc, display_path(shard.file))
            return False
        return True

    def _shard_failed(self, exc: ToolUseDataError, file: str) -> None:
        exc.at(file=file, source=self.source.name)
        if self.on_error == "raise":
            raise exc
        for i, config in enumerate(self.configs):  # one item read, so read = written + skipped still holds
            self.reports[config].count_read(1)
            self.reports[config].add(exc, log=i == 0)

    def _convert(self, batch: RawBatch, file: str, label: str, split: str, arrow: bool,
                 keep_unified: bool) -> ConvertedBatch:
        # Into Arrow, each config's rows go to a TableBuilder as they are converted; else they are kept as rows.
        out: dict[str, Any] = {c: self._encoders[c].builder() if arrow else [] for c in self.configs}
        positions: dict[str, list] = {c: [] for c in self.configs}
        unified_rows: Optional[list[dict]] = [] if keep_unified else None
        # Into Arrow, a batch's rows are converted a piece at a time too (Python rows come in pieces already:
        # see most_rows), one table per batch.
        pieces = _pieces([batch], piece_rows(self.source, handed_out=False)) if arrow else [batch]
        for piece in pieces:
            self._convert_rows(piece.items, piece.positions, file, label, split, arrow, out, positions, unified_rows)
        for config in self.configs:
            self.reports[config].count_read(len(batch.items))
        rows: dict[str, Any] = out
        if arrow:
            rows = {c: self._table(c, out[c], file, split, positions[c]) for c in self.configs}
        end = batch.positions[-1]
        return ConvertedBatch(rows, positions, end, unified_rows)

    def _convert_rows(self, items: list, item_positions: list, file: str, label: str, split: str, arrow: bool,
                      out: dict[str, Any], positions: dict[str, list], unified_rows: Optional[list]) -> None:
        source = self.source
        converted = []  # (ctx, position, raw, unified) of the rows that converted
        columns = out[UNIFIED] if arrow and unified_rows is None and self._fills_columns else None
        for (row_number, item), position in zip(items, item_positions):
            ctx = RowContext(source.name, file, row_number, split, file_label=label)
            raw = unified = None
            try:
                if isinstance(item, ToolUseDataError):
                    raise item
                # Straight to the table's columns, while no row of the piece waits for the loop below (so
                # that the rows keep their order); the dicts are made only if the batch needs them.
                if columns is not None and not converted and columns.add_columns(
                        source.fill_unified_columns, item, ctx, partial(source.native_to_unified, item, ctx)):
                    positions[UNIFIED].append(position)
                    continue
                # A row in the source's common shape may go straight to its unified row (same result).
                unified = source.native_to_unified(item, ctx) if self._shortcut else None
                if unified is None:
                    raw = source.to_raw(item, ctx)
            except Exception as exc:
                self._fail(exc, ctx, self.configs)
                continue
            if unified is None and self._needs_unified:
                try:
                    unified = source.to_unified(raw, ctx)
                except Exception as exc:
                    # The row was read: it keeps its raw row (as loading the raw config alone gives it) and
                    # fails in the configs made from the unified row.
                    self._fail(exc, ctx, [c for c in self.configs if c != RAW])
                    if RAW not in self.configs:
                        continue
            converted.append((ctx, position, raw, unified))
        if self._needs_unified and any(u is not None for _, _, _, u in converted):
            converted = self._complete(converted)
        for ctx, position, raw, unified in converted:
            if unified_rows is not None and unified is not None:
                unified_rows.append(unified)
            for config in self.configs:
                if unified is None and config != RAW:
                    continue  # the batch step refused the row for the unified-based configs (reported there)
                try:
                    if config == UNIFIED and self.row_check and (violation := self.row_check(unified)):
                        raise violation
                    row = raw if config == RAW else unified if config == UNIFIED else self._writers[config](unified)
                    from_text = ctx.values_from_text and config == UNIFIED  # storable as they are
                    if arrow:
                        out[config].add(row, parsed=from_text)
                    else:
                        if not from_text:
                            self._encoders[config].check_row(row)
                        out[config].append(self._finishers[config](row))
                    positions[config].append(position)
                except Exception as exc:
                    if isinstance(exc, ConversionError) or (isinstance(exc, JsonValueError) and config == UNIFIED):
                        self._name_input_field(exc, unified)  # (a value too deep to store: the unified field found)
                    self._fail(exc, ctx, [config])

    def _complete(self, converted: list[tuple]) -> list[tuple]:
        """The source's batch step over the batch's unified rows (``Source.complete_unified``); a row it
        refuses keeps its raw row (for ``raw``) and fails in the other configs. Rows whose unified conversion
        failed already (kept for ``raw`` only) are passed over."""
        todo = [entry for entry in converted if entry[3] is not None]
        unified = [u for _, _, _, u in todo]
        try:
            finished = self.source.complete_unified(unified, [ctx for ctx, _, _, _ in todo])
        except ToolUseDataError as exc:  # the whole batch failed (e.g. the sandbox could not start)
            finished = [copy.copy(exc) for _ in todo]  # one error per row, each naming its own row
        if len(finished) != len(todo):
            raise ValueError(f"{type(self.source).__name__}.complete_unified returned {len(finished)} rows for "
                             f"{len(todo)}: it must return one row or error per row")
        done = iter(finished)
        out = []
        for ctx, position, raw, before in converted:
            if before is None:
                out.append((ctx, position, raw, None))
                continue
            row = next(done)
            if isinstance(row, Exception):
                self._fail(row, ctx, [c for c in self.configs if c != RAW])
                row = None
            out.append((ctx, position, raw, row))
        return out

    def _table(self, config: str, rows: TableBuilder, file: str, split: str, positions: list) -> pa.Table:
        try:
            return rows.table()
        except STORAGE_ERRORS:
            pass
        # A value Arrow cannot store in its column: find the rows, report them, keep the others.
        encoder = self._encoders[config]
        kept = []
        for row, (next_row, _) in zip(rows.encoded_rows(), positions):
            try:
                encoder.table([row])
            except STORAGE_ERRORS as exc:
                error = InvalidValueError(f"row cannot be stored in the {config!r} columns "
                                          f"({type(exc).__name__}: {exc})")
                self._fail(error, RowContext(self.source.name, file, next_row - 1, split), [config])
            else:
                kept.append(row)
        return encoder.table(kept)

    def _name_input_field(self, error: ConversionError, unified: dict) -> None:
        """A writer names a field of the unified row (``messages[2]``): where the source knows which part of the
        row as read that is, the error names that one, and the unified field in its message."""
        if not error.field:
            return
        try:  # (from the unified field, also where the writer named the row's own field with default options)
            found = self.source.input_field(unified, getattr(error, "unified_field", None) or error.field)
        except Exception:  # (finding the place must never hide the error itself)
            found = None
        error.read_from(found)

    def _fail(self, exc: Exception, ctx: RowContext, configs: list[str]) -> None:
        # A reader bug or a shape no check foresaw must still name the row and follow the error policy;
        # the original exception stays chained as the cause.
        error = exc if isinstance(exc, ToolUseDataError) else unexpected(exc)
        error.at(file=ctx.file, row=ctx.row, source=ctx.source)  # a mix's row names its member source
        if self.on_error == "raise" and not self.counted_only.issuperset(configs):
            if error is exc:
                raise error
            raise error from exc
        for i, config in enumerate(configs):  # logged once, however many configs skip the row
            self.reports[config].add(error, log=i == 0)


class TableGroups:
    """Arrow tables regrouped, in order, into tables of ``rows`` rows or about ``max_bytes`` bytes (at least one
    row; rows taken as evenly sized): a mirror's Parquet row groups, the record batches of a prepared cache."""

    def __init__(self, rows: int, max_bytes: int):
        self.rows, self.max_bytes = rows, max_bytes
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self._pending_bytes = 0

    def add(self, table: pa.Table) -> list[pa.Table]:
        """The groups ``table`` completes."""
        self._pending.append(table)
        self._pending_rows += table.num_rows
        self._pending_bytes += table.nbytes
        groups = []
        while self._pending_rows >= self.rows or self._pending_bytes >= self.max_bytes:
            groups.append(self._next_group())
        return groups

    def finish(self) -> list[pa.Table]:
        """The groups of the rows left."""
        groups = []
        while self._pending_rows:
            groups.append(self._next_group())
        return groups

    def _next_group(self) -> pa.Table:
        combined = pa.concat_tables(self._pending) if len(self._pending) > 1 else self._pending[0]
        take = min(self.rows, _rows_within(combined, self.max_bytes))
        group, rest = combined.slice(0, take), combined.slice(take)
        self._pending = [rest] if rest.num_rows else []
        self._pending_rows = rest.num_rows
        self._pending_bytes = rest.nbytes if rest.num_rows else 0
        return group


def _rows_within(table: pa.Table, max_bytes: int) -> int:
    """How many leading rows of ``table`` fit in ``max_bytes``, assuming evenly sized rows (at least one)."""
    if table.nbytes <= max_bytes:
        return table.num_rows
    return max(1, int(table.num_rows * max_bytes / table.nbytes))


def _pieces(batches: Iterable[RawBatch], rows: Optional[int]) -> Iterator[RawBatch]:
    """``batches`` cut into pieces of at most ``rows`` rows (None: as they are)."""
    for batch in batches:
        if rows is None:
            yield batch
            continue
        for start in range(0, len(batch.items), rows):
            yield RawBatch(batch.items[start:start + rows], batch.positions[start:start + rows])


@contextlib.contextmanager
def gc_paused():
    """Converting a batch allocates hundreds of thousands of small containers, none in a reference cycle;
    Python's cyclic collector would walk them again and again meanwhile (1.4-1.6x the conversion time,
    measured on ToolMind and ms-swift rows). It runs as usual between batches."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def unexpected(exc: Exception) -> InvalidValueError:
    if isinstance(exc, RecursionError):
        return InvalidValueError("row nests values too deeply to convert")
    return InvalidValueError(f"row could not be converted ({type(exc).__name__}: {exc})")


# --------------------------------------------------------------------------------------------------
# Python rows in their decoded shape
# --------------------------------------------------------------------------------------------------


def python_row_finisher(features: Features) -> Callable[[dict], dict]:
    """A function giving a converted Python row the exact shape that decoding its stored form gives
    (:class:`~tooluse_datasets.exact_features.ExactFeatures`): struct keys as the features declare them (missing ones
    null), and unified messages in chat-template shape. JSON leaves are already Python values."""
    from .exact_features import ExactFeatures

    if features == UNIFIED_FEATURES:
        # Unified messages are built by schema.message in their decoded (chat) shape already; walking them
        # again would cost as much as the conversion. Only the columns are checked, and empty media dropped.
        columns = list(features)
        column_set = frozenset(columns)
        media = ExactFeatures(features).omitted_empty_media

        def finish(row):
            if row.keys() != column_set:
                row = {k: row.get(k) for k in columns}
            for name in media:
                if not row[name]:
                    del row[name]
            return row

        return finish
    # Other configs hold no unified messages: their rows need every struct's declared keys, and messages decoded in
    # chat shape (the swift format's: exact_features._is_chat_messages) that shape too.
    normalize = _compile_struct_normalizer(features)
    shapes = ExactFeatures(features).chat_shapers()
    if not shapes or normalize is None:
        return normalize

    def finish_shaped(row):
        row = normalize(row)
        for name, shape in shapes:
            row[name] = shape(row[name])
        return row

    return finish_shaped


def _compile_struct_normalizer(feature: Any) -> Optional[Callable[[Any], Any]]:
    """Walks lists and structs (not JSON leaves) so every struct, the row included, carries exactly its
    declared keys, as Arrow stores it; None where there is no struct to walk."""
    from datasets import Json, LargeList, List

    if isinstance(feature, Json):
        return None
    if isinstance(feature, (List, LargeList)):
        inner = _compile_struct_normalizer(feature.feature)
        if inner is None:
            return None
        return lambda v: None if v is None else [inner(x) for x in v]
    if isinstance(feature, dict):
        keys = list(feature)
        key_set = frozenset(keys)
        subs = [(k, n) for k, f in feature.items() if (n := _compile_struct_normalizer(f)) is not None]

        def normalize(v):
            if v is None:
                return None
            if v.keys() != key_set:
                v = {k: v.get(k) for k in keys}
            elif subs:
                v = dict(v)
            for k, n in subs:
                v[k] = n(v[k])
            return v

        return normalize
    return None
