"""``tooluse_datasets.load``: a source's builder, prepared or streamed, with exact JSON decoding."""
from __future__ import annotations

import copy
import difflib
import hashlib
import inspect
import logging
import os
from typing import Any, Iterator, Optional, Union

import pyarrow as pa
from datasets import BuilderConfig, Dataset, DatasetDict, DownloadMode, Features, IterableDataset, IterableDatasetDict
from datasets import config as datasets_config
from datasets.exceptions import DatasetGenerationError
from datasets.formatting import query_table
from datasets.table import table_iter

from . import registry
from .arguments import check_argument_types
from .datasets_patches import DataGoneInWorker
from .exact_features import ExactFeatures, ForeignExactFeatures, MappedUnifiedFeatures, holds_mapped_messages
from .errors import DataNotFoundError, SkipReport
from .formats import FORMATS
from .registry import sample_files

logger = logging.getLogger("tooluse_datasets")

AnyDataset = Union[Dataset, DatasetDict, IterableDataset, IterableDatasetDict]


def check_revision_reads_upstream(source: str, revision: Optional[str], data_files: Any, data_dir: Any) -> None:
    """``revision`` beside ``data_files`` or ``data_dir`` is refused (load() and validate() alike): the files are
    read as given, the revision not used, yet keyed (an hf:// file read at main under revision="v2", and local
    files prepared again into a cache of their own)."""
    if revision is not None and (data_files is not None or data_dir is not None):
        raise ValueError(f"revision={revision!r} picks the revision of {source}'s upstream files; data_files and "
                         f"data_dir are read as they are: leave revision out, or give it in the hf:// URLs "
                         f"(hf://datasets/<repo>@<revision>/<path>)")


def load(
    source: str,
    config: str = "unified",
    split: Optional[str] = None,
    streaming: bool = False,
    data_files: Any = None,
    data_dir: Optional[str] = None,
    *,
    revision: Optional[str] = None,
    on_error: str = "raise",
    cache_dir: Optional[str] = None,
    num_proc: Optional[int] = None,
    report: Optional[SkipReport] = None,
    validate: Any = None,
    download_mode: Optional[str] = None,
    keep_in_memory: Optional[bool] = None,
    **config_kwargs: Any,
) -> AnyDataset:
    """Load a source in one format.

    Args:
        source: a registered source name (``tooluse_datasets.SOURCES``), or ``"all"`` for every source in one
            schema.
        config: output format: ``"unified"`` (default), ``"raw"``, or a writer format.
        split: one split name (or a split expression such as ``"train[:10%]+test"``); None returns every split
            (``DatasetDict`` / ``IterableDatasetDict``). Map-style, only the splits named are prepared.
        streaming: stream from the files without preparing an Arrow cache (constant memory).
        num_proc: processes that prepare the splits (map-style), or that convert the next shards ahead while
            rows are handed out (streaming; same rows, same order).
        data_files: local paths, globs, ``hf://`` or ``https://`` URLs; a dict maps split -> files.
            Default: the source's upstream files at the pinned revision.
        data_dir: a folder to take the source's files from.
        revision: read this upstream revision instead of the pinned one.
        on_error: ``"raise"`` or ``"skip"``; skipped rows are logged and counted in ``report``.
        report: a :class:`SkipReport` to fill (map-style: complete on return, also from the cache;
            streaming: filled while you iterate in this process, with the rows passed so far).
            ``SkipReport(keep_all=True)`` or ``SkipReport(rows_path=...)`` also lists every skipped row with its
            file, row and reason.
        validate: validation rules to enforce (ids, globs, ``"error"``, ``"warning"`` or ``"all"``; see
            ``tooluse_datasets.validation``): rows breaking one are dropped and counted in ``report`` as
            ``RuleViolationError:<rule>`` (``on_error="skip"``), or the first one raises. Unified config only.
        download_mode: map-style only, as in ``datasets.load_dataset``: ``"reuse_dataset_if_exists"`` (default),
            ``"reuse_cache_if_exists"`` (prepare again from the downloaded files) or ``"force_redownload"``
            (download and prepare again). The cache is keyed on a local data file's path, size, modification and
            status-change times and inode, so a file rewritten with its size and modification time kept (``cp -p``,
            ``rsync -a``) is read again; where the status-change time does not follow writes (Windows), it needs
            ``"reuse_cache_if_exists"``.
        keep_in_memory: map-style only, as in ``datasets.load_dataset``: ``True`` reads the prepared splits into
            memory instead of memory-mapping the cache; None: datasets' ``IN_MEMORY_MAX_SIZE`` decides (by default,
            memory-mapped).
        config_kwargs: source options (e.g. ToolMind's ``messages_column``). Every source's
            ``trailing_results="drop"`` (``llamafactory`` only, whose writer refuses such rows) writes a row that ends
            on tool results without them, ending on its calls, as ``td.drop_trailing_results`` makes it.

    JSON columns (``tools``, ``arguments``, ``meta``...) come back as Python values decoded exactly,
    in both modes; rows are identical map-style and streaming.
    """
    builder_cls = registry.builder_class(source)
    from .cache_keys import one_head_commit_per_load
    from .source import splits_read  # with the builder: importing the package stays light

    check_argument_types(config=config, split=split, data_dir=data_dir, cache_dir=cache_dir, streaming=streaming,
                         revision=revision, keep_in_memory=keep_in_memory)
    from datasets import NamedSplit, ReadInstruction

    if isinstance(split, (NamedSplit, ReadInstruction)):
        # as the expression it stands for: datasets.Split.TEST read (and reported) every split, and a stream of a
        # sliced ReadInstruction was datasets' "Bad split" instead of the slice's own error
        split = str(split)
    if streaming and keep_in_memory:
        raise ValueError("keep_in_memory applies to map-style loads: a stream reads the files as you iterate")
    if not streaming and cache_dir is not None and "://" in os.fspath(cache_dir) \
            and not os.fspath(cache_dir).startswith("file://"):
        # datasets reads no prepared split back from another file system (nor are skip reports written there):
        # the prepare failed as "An error occurred while generating the dataset"
        raise ValueError(f"cache_dir={cache_dir!r} is not a local folder: a map-style load memory-maps the splits it "
                         f"prepares from there; give a local path (or stream, which prepares nothing)")
    check_revision_reads_upstream(source, revision, data_files, data_dir)
    names = splits_read(split)
    _check_arguments(source, config, split, names, streaming, num_proc, report)
    download_mode = _download_mode(download_mode, streaming)
    _check_source_options(source, builder_cls, config_kwargs)
    _refuse_redownloading_offline(source, builder_cls, config_kwargs, download_mode, data_files, data_dir)
    if isinstance(validate, Iterator):
        # part of the config, which datasets pickles: a generator cannot be; any iterator (iter(), map()) is
        # read more than once, and the second time found empty, validated nothing
        validate = tuple(validate)

    def make_builder(**extra):
        return builder_cls(config_name=config, data_files=data_files, data_dir=data_dir, cache_dir=cache_dir,
                           on_error=on_error, revision=revision, validate=validate, **config_kwargs, **extra)

    with one_head_commit_per_load():  # the builders made here read an upstream branch at one commit
        if streaming and names:
            builder = make_builder(prepare_splits=names)  # a split the data lacks: our error, naming those it has
        else:
            builder = make_builder()
        if not streaming and names and not builder.is_prepared():
            # Only the splits read are converted (into a cache of their own), unless every split is cached
            # already or they are every split (one cache then serves this load and a load of all splits). With
            # every split cached, download_mode prepares that cache again: later loads of the split read it.
            every = builder.split_names()
            if every is None or not set(every) <= set(names):
                builder = make_builder(prepare_splits=names)
        elif not streaming and names and builder.offline_cache_read_at is not None:
            # Offline, a cache of all splits was found: a cache of just these splits that a later load read (at
            # the commit the branch had moved on to) serves instead.
            own = make_builder(prepare_splits=names)
            if own.offline_cache_read_at is not None and own.offline_cache_read_at > builder.offline_cache_read_at:
                builder = own
    if report is not None and report.rows_path is not None:  # each skipped row appended to a file being read
        builder.refuse_writing_inputs({"report's rows_path": [report.rows_path]})
    if streaming:
        if names and "[" in split:
            _refuse_stream_slice(builder, split, names)
        if report is not None:
            builder.skip_report = report
        builder.stream_num_proc = num_proc
        return _exact(builder.as_streaming_dataset(split=split), foreign=False)
    try:
        builder.download_and_prepare(num_proc=num_proc, download_mode=download_mode)
    except DatasetGenerationError as exc:
        # Row errors leave the builder as themselves (ToolUseBuilder._prepare_split_single); a missing-data
        # error cannot (datasets would turn that OSError into "Cannot find data file"), so it is unwrapped
        # here: users see it, not "An error occurred while generating the dataset".
        cause = exc.error if isinstance(exc, DataGoneInWorker) else exc.__cause__  # (a num_proc worker's)
        if isinstance(cause, DataNotFoundError):
            raise cause from exc
        raise
    builder.mark_read()
    if names:
        builder.check_split_names(names, builder.info.splits)  # a build read from the cache: checked here
        _refuse_rows_twice(split, builder.info.splits)
    prepared = builder.prepared_skip_report(split, with_rows=report is not None and report.wants_rows)
    if prepared.skipped:
        logger.warning("%s/%s: %s", source, config, prepared.summary())
    if report is not None:
        report.merge(prepared)
    if keep_in_memory is None:  # as datasets' load_dataset decides it
        from datasets.utils.info_utils import is_small_dataset

        keep_in_memory = is_small_dataset(builder.info.dataset_size)
    if split is not None:
        ds = _exact(_prepared_split(builder, split, keep_in_memory), foreign=False)
    else:
        ds = _exact(DatasetDict({name: _prepared_split(builder, name, keep_in_memory) for name in builder.info.splits}),
                    foreign=False)
    return ds


def _check_arguments(source: str, config: Any, split: Any, names: Optional[tuple[str, ...]], streaming: bool,
                     num_proc: Any, report: Any) -> None:
    """Arguments datasets would refuse late (at the first row) or deep inside, with messages about itself."""
    check_format(source, config)
    if num_proc is not None and (type(num_proc) is not int or num_proc < 1):
        # datasets: a ZeroDivisionError (0), "Invalid batch size -2" (-1), a TypeError (1.5, "2")
        raise ValueError(f"num_proc must be a positive integer or None, got {num_proc!r}")
    if report is not None and not isinstance(report, SkipReport):
        raise TypeError(f"report must be a tooluse_datasets.SkipReport (it is filled in), got {type(report).__name__}")
    if streaming and names:
        parts = [part.strip() for part in split.split("+")]
        twice = sorted({part for part in parts if parts.count(part) > 1})
        if twice:  # every row of it twice, under the same ids
            raise ValueError(f"split={split!r} names {', '.join(map(repr, twice))} more than once: a stream reads "
                             f"whole splits, so each of its rows would come twice with the same id")


def _refuse_rows_twice(split: str, splits: Any) -> None:
    """A split expression whose parts overlap (``"train+train"``, ``"train[:50%]+train[40%:]"``) gave their rows
    twice with the same ids, as a stream of it, refused, would; parts that do not overlap are read as given."""
    from datasets import ReadInstruction

    read: dict[str, list[tuple[int, int]]] = {}
    sizes = {name: info.num_examples for name, info in splits.items()}
    for part in ReadInstruction.from_spec(split).to_absolute(sizes):
        for start, end in read.get(part.splitname, []):
            if part.from_ < end and start < part.to:
                raise ValueError(f"split={split!r} reads rows {max(start, part.from_)} to {min(end, part.to) - 1} "
                                 f"of {part.splitname!r} more than once: they would come twice with the same ids; "
                                 f"name each row once (concatenate_datasets to repeat rows on purpose)")
        read.setdefault(part.splitname, []).append((part.from_, part.to))


def _refuse_stream_slice(builder: Any, split: str, names: tuple[str, ...]) -> None:
    """datasets streams no slices: say what to do instead, once the names are known to be splits of the data (a
    misspelt one is refused naming the split meant, not repeated in the advice)."""
    known = builder.split_names()
    builder.check_split_names(names, known if known is not None else [plan.name for plan in builder.split_plans()])
    raise ValueError(f"a stream reads whole splits; split={split!r} has a slice (datasets streams none): stream "
                     f"{'+'.join(names)!r} and take rows with .skip(n) / .take(n)")


def _download_mode(value: Any, streaming: bool) -> DownloadMode:
    if value is None:
        return DownloadMode.REUSE_DATASET_IF_EXISTS
    try:
        mode = DownloadMode(value)
    except ValueError:
        raise ValueError(f"download_mode must be one of {', '.join(m.value for m in DownloadMode)}, got {value!r}") \
            from None
    if streaming and mode != DownloadMode.REUSE_DATASET_IF_EXISTS:
        raise ValueError("download_mode applies to map-style loads: a stream prepares nothing and reads the files "
                         "each time")
    return mode


def _refuse_redownloading_offline(source: str, builder_cls: type, config_kwargs: dict, mode: DownloadMode,
                                  data_files: Any, data_dir: Any) -> None:
    """Offline, ``force_redownload`` of the upstream files prepared again from the copies an earlier load kept:
    a user replacing a damaged download got the same file back, told nothing. Local files (also those a source's
    options name, a LLaMA-Factory entry) and sources without upstream files are no download."""
    from .offline import offline_mode

    reads_upstream = (data_files is None and data_dir is None and bool(builder_cls.upstreams())
                      and builder_cls.data_files_from_options(config_kwargs) is None)
    if mode is DownloadMode.FORCE_REDOWNLOAD and reads_upstream and offline_mode():
        raise ValueError(f"download_mode='force_redownload' downloads {source}'s upstream files again, which offline "
                         f"mode (HF_HUB_OFFLINE or HF_DATASETS_OFFLINE) forbids: load online to replace them, or give "
                         f"'reuse_cache_if_exists' to prepare again from the copies kept")


def _check_source_options(source: str, builder_cls: type, given: dict) -> None:
    """An option the source does not have is refused listing the source's own options, and load()'s keyword
    arguments apart (the builder's own message also lists internals such as prepare_splits)."""
    import dataclasses

    from .source import unknown_options_error

    # datasets' own BuilderConfig fields are no source options: name= would replace the config argument (raw
    # rows under config="unified", or in an export's swift file), version= and description= were ignored.
    base = {f.name for f in dataclasses.fields(BuilderConfig)}
    # prepare_splits is load()'s own way to the builder (split= sets it): given, it bypassed split= and the
    # cache choice made from it, and a string was read as split names of one letter each
    internal = {"prepare_splits"}
    unknown = set(given) - ({f.name for f in dataclasses.fields(builder_cls.BUILDER_CONFIG_CLASS)} - base - internal)
    if unknown:
        own = [p.name for p in inspect.signature(load).parameters.values() if p.kind is p.KEYWORD_ONLY]
        also = f"load() itself also takes {', '.join(own)}"
        for name in sorted(unknown & set(_LOAD_DATASET_ONLY)):
            also += f"; {name} is datasets.load_dataset's: {_LOAD_DATASET_ONLY[name]}"
        raise unknown_options_error(source, builder_cls.SOURCE_CLASS.options_class, unknown, also=also,
                                    advice=builder_cls.unknown_options_advice(unknown))


# datasets.load_dataset's arguments that load() does not take, and what does their job here: refused as no source
# option of the source, which does not tell someone porting a load_dataset call what to do instead
_LOAD_DATASET_ONLY = {
    "token": "hf:// files and Hub upstreams are read with huggingface_hub's token (`hf auth login`, or HF_TOKEN)",
    "features": "each format has its own fixed features (tooluse_datasets.features(source, config)); "
                "cast the loaded dataset to change them",
    "verification_mode": "rows are checked as they are converted (on_error= and validate= say what happens to "
                         "a bad one)",
    "trust_remote_code": "no loading script runs: the builders are this package's own",
}


# Names users reach for that are another format's
_FORMAT_ALIASES = {"sharegpt": "llamafactory", "llama_factory": "llamafactory", "llama-factory": "llamafactory",
                   "ms_swift": "swift", "ms-swift": "swift", "openai": "unified", "native": "raw"}


def check_format(source: str, config: Any) -> None:
    """datasets' "BuilderConfig 'x' not found" does not say that configs are formats, nor which one was meant."""
    if config in FORMATS:
        return
    # (the mix has no raw format: its builder refuses "raw" itself, saying why; a misspelling is not pointed to it)
    formats = [fmt for fmt in FORMATS if not (source == registry.MIX and fmt == "raw")]
    name = None
    if isinstance(config, str):
        name = _FORMAT_ALIASES.get(config.lower()) or next(iter(difflib.get_close_matches(config.lower(), formats, 1)),
                                                           None)
    hint = f" (did you mean {name!r}?)" if name in formats else ""
    raise ValueError(f"{source} has no format {config!r}{hint}; formats: {', '.join(formats)}")


def _prepared_split(builder, split: str, in_memory: bool = False) -> Dataset:
    """The prepared split; a split whose rows were all skipped is an empty dataset (datasets refuses to
    read a split without data), its skips are in the report."""
    info = builder.info.splits.get(split)
    if info is not None and info.num_examples == 0:
        features = builder.info.features
        table = pa.Table.from_batches([], schema=features.arrow_schema)
        # An explicit fingerprint: datasets would hash the table, and pickling an empty extension-type
        # (json) column fails in pyarrow.
        fingerprint = hashlib.sha1(f"{builder.cache_dir}/{split}/empty".encode()).hexdigest()[:16]
        return Dataset(table, info=copy.deepcopy(builder.info), split=split, fingerprint=fingerprint)
    return builder.as_dataset(split=split, in_memory=in_memory)


class ExactDataset(Dataset):
    """A ``Dataset`` whose plain iteration (``for row in ds``, no format set) turns Arrow into Python rows ten at
    a time with the cyclic garbage collector paused: datasets takes a one-row table per row, and on nested
    unified rows that made iteration about 1.6x slower. The rows are the same (a test compares them).
    ``shuffle``, ``sort`` and a ``select`` of scattered rows keep the class (their rows are gathered ten at a
    time through the indices mapping); other transforms (``map``, a contiguous ``select``...) return datasets'
    own ``Dataset``, which iterates as datasets does."""

    def __iter__(self):
        if self._format_type is not None or self._format_columns is not None:
            yield from super().__iter__()
            return
        from .pipeline import gc_paused  # loaded by then: a prepared split came through the pipeline

        decode = self._info.features.decode_example if self._info.features else None
        for table in self._row_tables(datasets_config.ARROW_READER_BATCH_SIZE_IN_DATASET_ITER):
            with gc_paused():  # ten rows of new containers, none in a cycle
                rows = table.to_pylist()
                if decode is not None:
                    rows = [decode(row) for row in rows]
            yield from rows

    def _row_tables(self, rows: int) -> Iterator[pa.Table]:
        if self._indices is None:
            yield from table_iter(self.data, batch_size=rows)
            return
        for start in range(0, self.num_rows, rows):  # through the indices mapping (select, shuffle)
            yield query_table(self._data, range(start, min(start + rows, self.num_rows)), indices=self._indices)

    def _new_dataset_with_indices(self, *args, **kwargs) -> "ExactDataset":
        ds = super()._new_dataset_with_indices(*args, **kwargs)
        return ExactDataset(ds._data, info=ds.info, split=ds.split, indices_table=ds._indices,
                            fingerprint=ds._fingerprint)


def exact(ds: AnyDataset) -> AnyDataset:
    """The same dataset with exact JSON decoding (metadata only: no data is rewritten). Its JSON text may come
    from any writer (a mirror read with plain ``load_dataset``, someone else's Parquet): each text is read
    exactly, integers beyond 64 bits included, whether or not this package wrote it."""
    return _exact(ds, foreign=True)


def _exact(ds: AnyDataset, foreign: bool) -> AnyDataset:
    """:func:`exact`; ``foreign=False`` for datasets this package wrote (its mark on text holding integers beyond
    64 bits spares the decoders a look at every text), unless they already decode as written by others."""
    if not isinstance(ds, (Dataset, DatasetDict, IterableDataset, IterableDatasetDict)):
        raise TypeError(f"exact() takes a datasets Dataset, IterableDataset or a dict of them, got {type(ds).__name__}")
    if isinstance(ds, (DatasetDict, IterableDatasetDict)):
        return type(ds)({name: _exact(d, foreign) for name, d in ds.items()})
    if ds.features is None:  # a stream after map() (or from_generator without features=): no JSON column is known
        raise ValueError("exact() needs the dataset's features, and this stream's are unknown (a map() output, or "
                         "from_generator without features=): call exact() before map(), or give map() features=")
    foreign = foreign and not (isinstance(ds.features, ExactFeatures) and not ds.features.foreign_text)
    cls = ForeignExactFeatures if foreign else ExactFeatures
    if foreign and (isinstance(ds.features, MappedUnifiedFeatures) or holds_mapped_messages(ds.features)):
        # a prompt/completion map of unified rows, read back (load_from_disk): its messages in the chat shape, no
        # empty media keys (TRL takes a row with "images" for vision data), as the map's own rows had them
        cls = MappedUnifiedFeatures
    features = cls(ds.features)
    info = copy.deepcopy(ds.info)
    info.features = features
    if isinstance(ds, Dataset):
        # A Dataset over the same memory-mapped table; the fingerprint changes because decoding does.
        out = ExactDataset(ds.data, info=info, split=ds.split, indices_table=ds._indices,
                           fingerprint=f"{ds._fingerprint}-exact")
        if ds._format_type is not None or ds._format_columns is not None or ds._output_all_columns:
            # its format too (columns=, a tensor format, a with_transform), which the new dataset would not have
            out.set_format(ds.format["type"], ds.format["columns"], ds.format["output_all_columns"],
                           **ds.format["format_kwargs"])
        return out
    out = ds.cast(features)
    if not isinstance(out.features, ExactFeatures):  # cast() may rebuild plain Features
        out._info.features = features
    return out


def features(source: str, config: str = "unified") -> Features:
    """The declared features of ``source`` in ``config`` (without touching any data)."""
    builder_cls = registry.builder_class(source)
    check_argument_types(config=config)
    check_format(source, config)
    return builder_cls(config_name=config, data_files={"train": []}).info.features


__all__ = ["load", "exact", "features", "sample_files"]
