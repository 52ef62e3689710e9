"""What a source folder provides: where its data lives, how its files split into shards, and how its rows map
to unified.

A source (``builders/<name>/``) subclasses :class:`Source` and implements three conversions::

    to_raw(native, ctx)   -> raw row (the source's own fields, JSON strings decoded)
    to_unified(raw, ctx)  -> unified row                                    (tooluse_datasets.schema)
    from_unified(row)     -> raw row; raw -> unified -> raw is exact
    complete_unified(rows, contexts) -> optional batch step over a batch's unified rows

and may override how files become splits (:meth:`Source.plan`) and how a shard is read (:meth:`Source.read`).
A source is built from its typed options (``options_class``, a dataclass the source's builder config mixes
in), so every option reaches the conversions through one channel. Everything else (configs, error policy,
Arrow encoding, streaming, sharding) is the shared pipeline's job (:mod:`tooluse_datasets.pipeline`).
"""
from __future__ import annotations

import abc
import dataclasses
import os
import re
import typing
import urllib.parse
import urllib.request
from typing import Any, Callable, ClassVar, Iterable, Iterator, Optional

import pyarrow as pa
import pyarrow.parquet as pq
from datasets import Features

from .errors import MissingFieldError, ToolUseDataError, wrapped_rows_error
from .shards.parquet import open_parquet
from .shards.paths import display_path, file_labels, file_stem, file_suffix
from .shards.plan import DEFAULT_TARGET_BYTES, plan_file, whole_file_shard
from .shards.reading import JSON_BATCH_ROWS, read_shard
from .shards.shard import RawBatch, Shard
from .trailing_results import check_trailing_results


@dataclasses.dataclass(frozen=True)
class UpstreamFile:
    split: str
    path: str  # path inside the repository
    sha256: Optional[str] = None
    num_bytes: Optional[int] = None
    num_rows: Optional[int] = None


@dataclasses.dataclass(frozen=True)
class Upstream:
    """Pinned location of a source's data.

    ``host="hf"`` gives ``hf://datasets/<repo>@<revision>/<path>`` (read through huggingface_hub's fsspec
    file system); ``host="github"`` gives the raw file at a commit. ``revision=None`` means the revision has
    not been pinned yet: loading resolves ``main`` and logs the commit it got.
    """

    host: str
    repo: str
    revision: Optional[str]
    files: tuple[UpstreamFile, ...]
    homepage: str = ""
    license: str = ""

    def urls(self, revision: Optional[str] = None) -> dict[str, list[str]]:
        rev = revision or self.revision or "main"
        out: dict[str, list[str]] = {}
        for f in self.files:
            if self.host == "hf":
                url = f"hf://datasets/{self.repo}@{rev}/{f.path}"
            elif self.host == "github":
                url = f"https://raw.githubusercontent.com/{self.repo}/{rev}/{f.path}"
            else:
                raise ValueError(f"unknown host {self.host!r}")
            out.setdefault(f.split, []).append(url)
        return out

    def describe(self, revision: Optional[str] = None) -> str:
        rev = revision or self.revision or "main (not pinned)"
        where = f"huggingface.co/datasets/{self.repo}" if self.host == "hf" else f"github.com/{self.repo}"
        return f"{where} @ {rev}"


COMMIT_ID = re.compile(r"^[0-9a-f]{40}$")


def hub_head_commit(repo: str, revision: str = "main") -> str:
    """The commit a branch or tag of a Hub dataset repo points at now."""
    from huggingface_hub import HfApi

    return HfApi().dataset_info(repo, revision=revision).sha


GITHUB_API = "https://api.github.com"


def github_head_commit(repo: str, revision: str = "main") -> str:
    """The commit a branch or tag of a GitHub repository points at now: GitHub's REST API answers a commit's URL
    asked with ``Accept: application/vnd.github.sha`` with its bare id. ``GITHUB_TOKEN``, if set, is sent (the
    anonymous rate limit is 60 requests an hour). Raises ``urllib.error.URLError`` / ``OSError`` when GitHub
    cannot be reached or answers with an error, ``ValueError`` when its answer is not a commit id."""
    url = f"{GITHUB_API}/repos/{repo}/commits/{urllib.parse.quote(revision, safe='')}"
    headers = {"Accept": "application/vnd.github.sha", "User-Agent": "tooluse-datasets"}
    if os.environ.get("GITHUB_TOKEN"):
        headers["Authorization"] = f"Bearer {os.environ['GITHUB_TOKEN']}"
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as answer:
        commit = answer.read(128).decode("ascii", "replace").strip()
    if not COMMIT_ID.match(commit):
        raise ValueError(f"GitHub answered {commit[:60]!r} for {revision!r} of {repo}, not a commit id")
    return commit


def head_commit(host: str, repo: str, revision: str = "main") -> str:
    """The commit a branch or tag of an upstream points at now, asked of its host: the Hub (``host="hf"``) or
    GitHub (``host="github"``). Raises what that lookup raises, ``ValueError`` for any other host."""
    if host == "hf":
        return hub_head_commit(repo, revision)
    if host == "github":
        return github_head_commit(repo, revision)
    raise ValueError(f"unknown host {host!r}: cannot resolve {revision!r} of {repo} to a commit")


@dataclasses.dataclass
class RowContext:
    """Where a row comes from; errors raised by conversions get these filled in by the pipeline."""

    source: str
    file: str
    row: int
    split: str
    # Set by a conversion whose unified row holds only values read from JSON text (finite numbers, string
    # keys) nested less than codec.MAX_DEPTH deep: storable as they are, so the pipeline does not check
    # them again (streaming) nor look for NaN when writing them (prepare).
    values_from_text: bool = False
    # Set by a to_raw whose raw row does not count the file's parts one for one (ms-swift: calls and blocks
    # expand to several messages): what to_unified needs to name the file's field in an error. Source-defined.
    origins: Any = None
    # The file's name in ids and subsets (ms-swift, LLaMA-Factory): its stem, or its path where files of the
    # load share a stem (Shard.label, given by the pipeline). None: the stem.
    file_label: Optional[str] = None

    def __post_init__(self) -> None:
        if self.file_label is None:
            self.file_label = file_stem(self.file)


_LOOKS_SUFFIXED = re.compile(r"#[0-9]+\Z")  # what UniqueIds appends to a repeat


class UniqueIds:
    """Row ids taken from upstream ids (NESTFUL's ``sample_id``), made unique within each file: the first row
    holding an id keeps it, a later row of the same file repeating it gets ``#<row>`` (its row number in the
    file). A first holder whose id already ends in ``#<digits>`` gets ``#<row>`` too: otherwise ``"s#2"`` at row
    0 and the repeat of ``"s"`` at row 2 would share an id. So an id ending in ``#<digits>`` always reads back as
    (upstream id, row), which is unique within a file. Where each id was first seen is remembered, so converting the same rows again (another pass over
    a stream, another config) gives the same ids. A reader that starts past a file's first row (a later shard,
    a resumed stream, a worker process) first tells it the file's ids with :meth:`prime_file`."""

    def __init__(self) -> None:
        self._primed_rows: dict[tuple[str, str], int] = {}  # (file, id) -> first row, from prime_file
        self._seen_rows: dict[tuple[str, str], int] = {}    # the same for ids met converting, not primed
        self._primed_files: set[str] = set()

    def prime_file(self, file: str, ids: Iterable[tuple[int, str]]) -> None:
        """Every ``(row, upstream id)`` of ``file``, once per file (later calls for it do nothing)."""
        if file in self._primed_files:
            return
        for row, upstream_id in ids:
            key = (file, upstream_id)
            self._primed_rows[key] = min(row, self._primed_rows.get(key, row))
        self._primed_files.add(file)  # after the ids: a file marked primed has all of them

    def is_primed(self, file: str) -> bool:
        return file in self._primed_files

    def learn(self, file: str, ids: Iterable[tuple[int, str]]) -> None:
        """``(row, upstream id)`` pairs read in file order from the file's first row on (a reader that needs no
        :meth:`prime_file`): each id's first row is the first met."""
        seen = self._seen_rows
        for row, upstream_id in ids:
            seen.setdefault((file, upstream_id), row)

    def __call__(self, upstream_id: str, row_id: str, ctx: RowContext) -> str:
        """``row_id`` (built from ``upstream_id``) if this row is the first of its file holding that id."""
        key = (ctx.file, upstream_id)
        first = self._primed_rows.get(key)
        if first is None:
            first = self._seen_rows.setdefault(key, ctx.row)
        if first == ctx.row and not _LOOKS_SUFFIXED.search(row_id):
            return row_id
        return f"{row_id}#{ctx.row}"

    def for_another_process(self) -> "UniqueIds":
        """A copy for a worker process: the files primed so far (so the worker does not read their ids again),
        not the ids met converting. This process may be priming meanwhile (a pool pickles in its own thread):
        the set of primed files is copied before the ids, each copy in one step no other thread interleaves
        with, so a file is copied whole or not at all."""
        files = set(self._primed_files)
        rows = dict(self._primed_rows)
        copy = UniqueIds()
        copy._primed_files = files
        copy._primed_rows = {key: row for key, row in rows.items() if key[0] in files}
        return copy


def ids_in_file(path: str, column: str) -> Iterator[tuple[int, str]]:
    """``(row number, id)`` of every row of a file whose ``column`` holds an id (a non-empty string, or an
    integer), for :meth:`UniqueIds.prime_file` (Parquet: that column alone). Unreadable parts are left to the
    reader, which reports them."""
    for row, value in _column_values(path, column):
        if isinstance(value, (str, int)) and not isinstance(value, bool) and value != "":
            yield row, str(value)


def _parquet_column_values(pf: pq.ParquetFile, column: str) -> Iterator[tuple[int, Any]]:
    if column not in pf.schema_arrow.names:
        return
    first = 0
    for rg in range(pf.metadata.num_row_groups):
        try:  # group by group: a damaged group's rows are reported by the reader, the others keep their ids
            table = pf.read_row_group(rg, columns=[column])
            # (of several columns so named, the last: a row read from the file holds its value)
            values = table.column(table.schema.get_all_field_indices(column)[-1]).to_pylist()
        except (pa.ArrowInvalid, OSError, UnicodeDecodeError):
            values = []
        yield from enumerate(values, first)
        first += pf.metadata.row_group(rg).num_rows


def _column_values(path: str, column: str) -> Iterator[tuple[int, Any]]:
    if file_suffix(path) == ".parquet":
        try:
            with open_parquet(path) as pf:
                yield from _parquet_column_values(pf, column)
        except ToolUseDataError:  # not Parquet: the reader reports it
            pass
        return
    try:
        for batch in read_shard(whole_file_shard(path), 1000):
            for row, native in batch.items:
                if isinstance(native, dict):
                    yield row, native.get(column)
    except ToolUseDataError:  # damaged (a compressed file cut short): the reader reports it, after the rows before it
        return


def check_columns(source: str, files_by_split: dict[str, list[str]], columns: dict[str, str]) -> None:
    """A :class:`MissingFieldError` naming the file and its columns when an option (``columns``: option -> column
    it names) names a column a file of the load does not have: a mistake about the file, said once whatever
    ``on_error`` says, not a skip of every row. Parquet: its schema; JSON: the objects among its first rows (up to
    ``JSON_BATCH_ROWS``, read until one has each column), none of which has the column (an object wrapping rows
    that have it is left to the reader, which names its key). A file that cannot be read, or whose first rows
    hold no object, is left to the reader too."""
    if not columns:  # (nothing to check: no file is opened, no row parsed)
        return
    for path in dict.fromkeys(path for files in files_by_split.values() for path in files):
        found = _first_columns(path, set(columns.values()))
        if found is None:
            continue
        names, what, rows = found
        for option, column in columns.items():
            if column not in names and not any(wrapped_rows_error(row, (column,)) for row in rows):
                listed = ", ".join(map(repr, names[:20])) + (", ..." if len(names) > 20 else "")
                raise MissingFieldError(f"{option}={column!r}: the file has no column by that name ({what}: "
                                        f"{listed or 'none'})", file=display_path(path), field=column, source=source)


def _first_columns(path: str, wanted: set) -> Optional[tuple[list[str], str, list[dict]]]:
    """A file's columns, what they are and the rows they were read from: a Parquet file's schema; the keys of
    the objects among a JSON file's first rows, read one at a time until ``wanted`` are all seen (a row parsed,
    usually). None where that cannot be told."""
    rows: list[dict] = []
    try:
        if file_suffix(path) == ".parquet":
            with open_parquet(path) as pf:
                return list(pf.schema_arrow.names), "its columns", rows
        batches = read_shard(whole_file_shard(path), 1)
        try:
            for row_number, row in (item for batch in batches for item in batch.items):
                if isinstance(row, dict):
                    rows.append(row)
                    wanted = wanted.difference(row)
                if not wanted or row_number + 1 >= JSON_BATCH_ROWS:
                    break
        finally:
            batches.close()
    except ToolUseDataError:  # not readable: the reader reports it
        return None
    if not rows:
        return None
    return list(dict.fromkeys(key for row in rows for key in row)), "the keys of its first rows", rows


def ids_of_rows(items: Iterable[tuple[int, Any]], column: str) -> Iterator[tuple[int, str]]:
    """``(row number, id)`` of the rows read (a reader's ``(row, native row or error)`` items) whose ``column``
    holds an id, as :func:`ids_in_file` gives them."""
    for row, native in items:
        if isinstance(native, dict):
            value = native.get(column)
            if isinstance(value, (str, int)) and not isinstance(value, bool) and value != "":
                yield row, str(value)


@dataclasses.dataclass
class SourceOptions:
    """Options every source has; a source's own options class extends it, and its builder config mixes that
    class in (``load(source, ..., option=value)`` sets them)."""

    batch_size: int = 1000  # rows per converted batch
    shard_bytes: int = DEFAULT_TARGET_BYTES  # uncompressed bytes per shard of a large file
    # "drop": a row ending on tool results is written without them in a format whose writer refuses it
    # (llamafactory), ending on its calls; "refuse": the writer's error. See trailing_results.
    trailing_results: str = "refuse"


def check_options(options: Any, options_class: type) -> None:
    """Every option of ``options_class`` holds a value of its declared type, and sizes are positive: a wrong
    value (``strict="False"`` from a command line, ``shard_bytes="32MB"``) is a ValueError naming the option
    here, not a misbehaviour or a TypeError deep in reading."""
    hints = typing.get_type_hints(options_class)
    for field in dataclasses.fields(options_class):
        value, declared = getattr(options, field.name), hints[field.name]
        allowed = typing.get_args(declared) if typing.get_origin(declared) is typing.Union else (declared,)
        if not any(_holds(value, kind) for kind in allowed):
            names = " or ".join(_KIND_NAMES.get(kind, getattr(kind, "__name__", str(kind))) for kind in allowed)
            raise ValueError(f"option {field.name} must be {names}, got {value!r}")
    for name in ("batch_size", "shard_bytes"):
        if getattr(options, name) <= 0:
            raise ValueError(f"option {name} must be positive, got {getattr(options, name)!r}")


class UnknownOptionError(ValueError):
    """Options a source does not have. ``listing`` is the message without its note on other arguments (what
    load() itself takes), which the command line says in its own terms."""

    def __init__(self, listing: str, note: str = ""):
        super().__init__(f"{listing} ({note})" if note else listing)
        self.listing = listing


def unknown_options_error(source: str, options_class: type, unknown: Iterable[str],
                          also: str = "", advice: str = "") -> UnknownOptionError:
    """The error for options a source does not have: it lists the source's own options (the fields of its
    options class), not the builder config's other fields (load()'s arguments, internals); ``advice`` follows
    the listing (what to do instead), ``also`` adds a note in parentheses (e.g. what load() itself takes)."""
    options = ", ".join(sorted(f.name for f in dataclasses.fields(options_class)))
    return UnknownOptionError(f"{source} has no option {', '.join(map(repr, sorted(unknown)))}; its options: "
                              f"{options}{advice}", also)


_KIND_NAMES = {bool: "true or false", int: "an integer", float: "a number", str: "a string", type(None): "null",
               dict: "an object (a dict)"}


def _holds(value: Any, kind: Any) -> bool:
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is type(None):
        return value is None
    if kind is str:
        return isinstance(value, (str, os.PathLike))  # a path option may be given as a Path
    return isinstance(value, kind) if isinstance(kind, type) else True


@dataclasses.dataclass(frozen=True)
class SplitPlan:
    """One HF split: its name, the shards that hold its rows, and what the source needs to pick them out
    (``selection``: a frozen dataclass of the source's own, e.g. ToolMind's split-column value)."""

    name: str
    shards: tuple[Shard, ...]
    selection: Any = None


def with_file_labels(plans: list[SplitPlan], files_by_split: dict[str, list[str]]) -> list[SplitPlan]:
    """``plans`` with each shard labelled with its file's name in row ids and subsets, decided over the files
    of every split (:func:`~tooluse_datasets.shards.paths.file_labels`): ids are unique across the splits of a
    load too, and a load of one split names its rows as a load of all does."""
    labels = file_labels(path for files in files_by_split.values() for path in files)
    return [dataclasses.replace(plan, shards=tuple(dataclasses.replace(shard, label=labels.get(shard.file))
                                                   for shard in plan.shards))
            for plan in plans]


def splits_read(split: Any) -> Optional[tuple[str, ...]]:
    """The split names a ``split`` argument reads (``"train"``, ``"train[:10%]+test"``), sorted; None for all of
    them (None, ``"all"``, or a ``ReadInstruction`` object)."""
    if split is None or not isinstance(split, str):
        return None
    names = {part.split("[", 1)[0].strip() for part in split.split("+")}
    if "" in names:  # ("train+": datasets' "Split name should match ..." or "Bad split", validate's "no split ''")
        raise ValueError(f"split={split!r} has an empty split name (an unset variable?): give names joined by + "
                         "(train, or a+b to read both), or leave split out for every split")
    return None if "all" in names else tuple(sorted(names))


class Source(abc.ABC):
    """One upstream dataset or format. Subclasses live in ``builders/<name>/``."""

    name: ClassVar[str]
    pretty_name: ClassVar[str]
    upstream: ClassVar[Optional[Upstream]] = None
    raw_features: ClassVar[Features]
    citation: ClassVar[str] = ""
    description: ClassVar[str] = ""
    options_class: ClassVar[type] = SourceOptions
    # Glob patterns tried under ``data_dir=`` when no data_files are given.
    local_patterns: ClassVar[tuple[str, ...]] = ("**/*.jsonl", "**/*.json", "**/*.parquet")
    # Names of files the source's own folders hold beside its data that match those patterns but hold no rows.
    local_not_data: ClassVar[frozenset[str]] = frozenset()
    # Parquet rows: a null field of a struct, or a null column, is absent (Arrow pads structs with differing keys
    # with nulls), not a null of the source's own; a JSON cell's value keeps its nulls.
    parquet_null_fields_absent: ClassVar[bool] = False

    @classmethod
    def card_file(cls, options: dict) -> str:
        """The file in the source's folder whose prose introduces a mirror built with ``options`` (the options
        given, as the manifest records them): a source whose options read another dataset says so there."""
        return "card.md"

    @classmethod
    def pretty_name_for(cls, options: dict) -> str:
        """The name a mirror built with ``options`` (as :meth:`card_file` takes them) is called by: its card's
        headings and figures."""
        return cls.pretty_name

    def __init__(self, options: Optional[SourceOptions] = None):
        self.options = options if options is not None else self.options_class()
        check_options(self.options, self.options_class)
        # (a builder config is the options with its format as ``name``; options alone name no format)
        check_trailing_results(self.options.trailing_results, getattr(self.options, "name", None))
        self.unique_ids = UniqueIds()

    def __getstate__(self) -> dict:
        # A copy for another process (a worker, a Ray task) takes the ids of the files this process has
        # primed (a thread of this process may be priming one while the copy is pickled: see
        # UniqueIds.for_another_process); it primes the others itself.
        state = dict(self.__dict__)
        state["unique_ids"] = self.unique_ids.for_another_process()
        return state

    def plan(self, files_by_split: dict[str, list[str]]) -> list[SplitPlan]:
        """Map data files to HF splits and cut them into shards, labelled with their file's name in ids
        (:func:`with_file_labels`). Default: one split per data_files key. Sources with a split column override
        this."""
        return with_file_labels(
            [SplitPlan(split, tuple(shard for path in files for shard in plan_file(path, self.options.shard_bytes)))
             for split, files in files_by_split.items()], files_by_split)

    def split_names(self, files_by_split: dict[str, list[str]]) -> Optional[list[str]]:
        """The splits :meth:`plan` makes of these files when their names alone tell (no file is read), else None.
        Default: one split per data_files key."""
        return list(files_by_split)

    def json_text_columns(self) -> frozenset[str]:
        """Parquet columns of JSON (datasets' ``Json()``, the ``arrow.json`` extension type) whose cells this source
        reads as their text, parsing it itself; every other JSON cell is read as the value it holds, as a JSON
        file gives it (so a mirror's rows load back). Default: none."""
        return frozenset()

    def read(self, shard: Shard, split: SplitPlan, resume: Optional[tuple[int, int]] = None) -> Iterator[RawBatch]:
        """Batches of ``(row number, native row or error)`` of one shard. Default: Parquet rows as dicts (read
        as :meth:`json_text_columns` and :attr:`parquet_null_fields_absent` say), JSON Lines, or a JSON
        document."""
        yield from read_shard(shard, self.options.batch_size, resume, json_text=self.json_text_columns(),
                              null_fields_absent=self.parquet_null_fields_absent)

    @abc.abstractmethod
    def to_raw(self, native: dict, ctx: RowContext) -> dict:
        ...

    @abc.abstractmethod
    def to_unified(self, raw: dict, ctx: RowContext) -> dict:
        ...

    def native_to_unified(self, native: dict, ctx: RowContext) -> Optional[dict]:
        """A shortcut from a native row to its unified row, for rows in the source's common shape; None sends
        the row through :meth:`to_raw` and :meth:`to_unified`, which must give the same row. Taken when no
        config needs the raw row and the source has no batch step. Default: None."""
        return None

    def fill_unified_columns(self, native: Any, ctx: RowContext, lists: dict, write: Callable[[Any], str]) -> bool:
        """:meth:`native_to_unified` appending the row's values straight to a unified table's columns
        (``columnar.ColumnPlan.lists``; ``write`` spells a JSON leaf read from text) instead of building its
        dicts: prepare's shortcut, taken when the unified config is the only one, unchecked. False, having
        appended nothing, for a row :meth:`native_to_unified` does not take. Default: False."""
        return False

    @abc.abstractmethod
    def from_unified(self, row: dict) -> dict:
        ...

    def input_field(self, row: dict, field: str) -> Optional[str]:
        """Where, in the source's own row, the part of unified ``row`` that ``field`` names (``messages[2]``) was
        read from, or None where that is not known: an error a writer raises about ``field`` then names what the
        user finds in the file. Default: None (the unified field is named)."""
        return None

    @property
    def has_batch_step(self) -> bool:
        """Whether :meth:`complete_unified` does work per batch (then streamed rows are converted in larger
        pieces; see ``tooluse_datasets.streaming``)."""
        return False

    def complete_unified(self, rows: list[dict], contexts: list[RowContext]) -> list:
        """A batch step after the per-row conversion: the batch's unified rows -> per row, the finished row
        or the typed error refusing it (e.g. NESTFUL executes a batch's call sequences in one sandbox
        process). Default: the rows as they are."""
        return rows
