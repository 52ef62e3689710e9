"""The builder every source shares: configs are output formats, splits are the source's partitions.

``ToolUseBuilder`` is a plain ``datasets.ArrowBasedBuilder``: use it directly
(``download_and_prepare`` / ``as_dataset`` / ``as_streaming_dataset``) or through
:func:`tooluse_datasets.load`, which adds exact JSON decoding and the skip report. A split's ``gen_kwargs``
hold its list of shards (file regions, :mod:`tooluse_datasets.shards`), so ``num_proc`` preparation,
``split_dataset_by_node`` and DataLoader workers divide even one large file; every shard is converted by
:class:`tooluse_datasets.pipeline.ShardConverter`, and streaming iterates :mod:`tooluse_datasets.streaming`.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import difflib
import glob
import hashlib
import json
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Iterable, Iterator, Optional

import datasets
import pyarrow as pa
from datasets.builder import Key
from datasets.data_files import sanitize_patterns
from datasets.download.streaming_download_manager import StreamingDownloadManager
from datasets.utils.file_utils import is_local_path

from . import formats
from .arguments import check_argument_types
from .arrow_memory import package_memory_pool
from .cache_keys import (branches_read, cached_upstream_commits, commits_digest, data_dir_digest, data_dir_files,
                         data_files_digest, hf_files_at_commits, upstream_commits)
from .datasets_patches import raising_typed_errors
from .errors import LOCAL_FILES_HINT, DataNotFoundError, OnError, SkipReport, check_on_error
from .network import answered_in_chain, failure_text, http_answer, hub_hint, is_network_error
from .offline import (kept_copies_hint, local_copy, offline_data_files, offline_hint, offline_mode,
                      remember_ref)
from .pipeline import UNIFIED, ShardConverter, TableGroups, config_features
from .shards.files import with_archive_files
from .shards.paths import display_path, literal_folder_escaped, output_among_inputs
from .shards.plan import balanced, cut_documents
from .shards.reading import file_gone
from .shards.shard import Shard
from .shards.versions import with_versions
from .workers import forking_workers
from .source import Source, SourceOptions, SplitPlan, Upstream, splits_read, unknown_options_error
from .streaming import ShardExamplesIterable
from .validation.filtering import rule_check
from .validation.registry import refuse_rules_of_other_sources, selection_items, sources_read

logger = logging.getLogger("tooluse_datasets")

SKIP_REPORT_GLOB = "skips-*.json"  # skips-<split>-<job tag>.json
# Beside a prepared split read at a branch's commit: touched by each load that reads it (see mark_read).
LAST_READ_FILE = "last-read"
# Beside each job's report: every row it skipped, one JSON object per line (file, row, field, reason, message).
SKIPPED_ROWS_SUFFIX = ".rows.jsonl"


@dataclass
class ToolUseConfig(datasets.BuilderConfig, SourceOptions):
    """Config of every source builder; ``name`` is the output format. A source's config class also mixes in
    the source's own options class, so one typed object carries every option to the conversions.

    Args:
        on_error: ``"raise"`` (default) stops at the first bad row with a typed error naming file, row
            and field; ``"skip"`` drops such rows, counts them in a skip report and logs them.
        batch_size: rows per converted batch (JSON rows are parsed at most 125 at a time: see shards).
        shard_bytes: uncompressed bytes per shard of a large file (Parquet row groups are grouped up to it,
            JSON Lines cut at line ends).
        revision: upstream revision (commit) to read instead of the pinned one.
        validate: validation rules (a selection as in ``validation.select_rules``) that unified rows must pass
            as they are converted; a failing row follows ``on_error`` like any bad row, with its file and row.
        prepare_splits: the splits ``download_and_prepare`` converts, or a stream plans (None: all).
            ``load(split=...)`` sets it unless every split is cached already, so that one ToolMind split does
            not cost the conversion of all seven; being a config option, it gives such a build a cache folder
            of its own. A name the data lacks is refused before any row is converted.
    """

    on_error: OnError = "raise"
    revision: Optional[str] = None
    validate: Any = None  # validation rules rows must pass (unified config): see load(validate=...)
    prepare_splits: Optional[tuple[str, ...]] = None

    def __post_init__(self):
        super().__post_init__()
        check_on_error(self.on_error)
        if self.name not in formats.FORMATS:
            raise ValueError(f"unknown format config {self.name!r}; choose one of {list(formats.FORMATS)}")


def meant_split(name: str, names: list[str]) -> Optional[str]:
    """The split of ``names`` an unknown ``name`` stands for, if one is plain: the same name in other case
    (ToolMind's ``When2Call`` as ``when2call``), the one split it begins (``xlam`` for
    ``xlam_function_calling_60k``), or a name one typo away (``tran``); else None."""
    folded = {split.casefold(): split for split in names}
    key = name.casefold()
    if key in folded:
        return folded[key]
    starting = [split for fold, split in folded.items() if fold.startswith(key)]
    if len(starting) == 1 and len(key) >= 3:
        return starting[0]
    close = difflib.get_close_matches(key, list(folded), 1, 0.75)
    return folded[close[0]] if close else None


class ToolUseBuilder(datasets.ArrowBasedBuilder):
    """Base class; a source's builder sets ``SOURCE_CLASS`` (its :class:`Source` subclass) and, if the source
    has options, ``BUILDER_CONFIG_CLASS`` (``ToolUseConfig`` mixed with the source's options class). The
    builder's ``source`` is made from its config, so options reach the conversions through one object."""

    SOURCE_CLASS: ClassVar[type[Source]]
    BUILDER_CONFIG_CLASS = ToolUseConfig
    DEFAULT_CONFIG_NAME = "unified"
    TAKES_DATA_DIR: ClassVar[bool] = True  # (a folder in data_files is refused advising data_dir where it is taken)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        source_class = getattr(cls, "SOURCE_CLASS", None)
        if source_class is not None and not issubclass(cls.BUILDER_CONFIG_CLASS, source_class.options_class):
            # The options reach the source through the config only: every load failed on the first option the
            # config lacks, with an AttributeError.
            options = source_class.options_class.__name__
            raise TypeError(f"{cls.__name__}: {source_class.__name__}.options_class {options} is not mixed into "
                            f"BUILDER_CONFIG_CLASS; declare `@dataclass class Config(ToolUseConfig, {options})` "
                            f"and set BUILDER_CONFIG_CLASS = Config on the builder")
        if source_class is not None:
            cls.BUILDER_CONFIGS = [cls.BUILDER_CONFIG_CLASS(name=fmt, description=formats.FORMATS[fmt])
                                   for fmt in formats.FORMATS]

    def __init__(self, *args, **kwargs):
        # as load() checks them: datasets made the folder ./b'x' for cache_dir=b"x", failed on config_name={} with
        # "unhashable type: 'dict'"
        check_argument_types(**{name: kwargs.get(name)
                                for name in ("config_name", "cache_dir", "data_dir", "revision")})
        from .loading import check_revision_reads_upstream  # (loading imports this module)

        # as load() refuses it: unused beside given files, yet keyed (the files prepared again into another cache)
        check_revision_reads_upstream(self.SOURCE_CLASS.name, kwargs.get("revision"), kwargs.get("data_files"),
                                      kwargs.get("data_dir"))
        kwargs.setdefault("dataset_name", self.SOURCE_CLASS.name)
        if isinstance(kwargs.get("data_files"), (str, dict)) and not kwargs["data_files"]:
            # an empty dict or string is no data files to datasets' checks below: the upstream files were read
            # instead (datasets' load_dataset refuses them as empty too)
            raise ValueError(f"data_files is empty ({kwargs['data_files']!r}): give files, or None for the "
                             f"source's upstream files")
        if isinstance(kwargs.get("data_dir"), (str, os.PathLike)):  # "~/data", as datasets' load_dataset reads it
            # absolute, as data_files are resolved: errors and skip records named "data/x.jsonl" of a relative one
            # (a URL, under which relative data_files are read, stays as it is)
            data_dir = os.path.expanduser(os.fspath(kwargs["data_dir"]))
            kwargs["data_dir"] = data_dir if "://" in data_dir or "::" in data_dir else os.path.abspath(data_dir)
            if kwargs.get("data_files") is not None and kwargs.get("base_path") is None:
                # data_files relative to data_dir, as datasets' load_dataset resolves them: they were looked for in
                # the current folder, data_dir unused (and a file of the same name there read instead)
                kwargs["base_path"] = kwargs["data_dir"]
        if kwargs.get("data_files") is not None:  # datasets takes str, not Path
            kwargs["data_files"] = _path_strings(kwargs["data_files"], kwargs.get("base_path"),
                                                 takes_dir=self.TAKES_DATA_DIR)
        if kwargs.get("data_files") is None and kwargs.get("data_dir") is None:
            # Files a source option names (LLaMA-Factory's dataset_info entry): resolved here, so that datasets
            # keys its cache on them as on data_files.
            kwargs["data_files"] = self.data_files_from_options(kwargs)
            if kwargs["data_files"] is not None:  # (files as named, as data_files= are: "rows[1].json" no glob)
                kwargs["data_files"] = _path_strings(kwargs["data_files"], takes_dir=self.TAKES_DATA_DIR)
        self._data_files_given = kwargs.get("data_files")
        self._hf_branches_read: dict[tuple[str, str], str] = {}
        if kwargs.get("data_files") is not None:
            # hf:// files at a branch are read at the commit it points at: datasets keys its cache on the URL,
            # so "main" would serve the rows of the commit first read for ever after the branch moved on.
            kwargs["data_files"] = hf_files_at_commits(kwargs["data_files"])
            self._hf_branches_read = branches_read(self._data_files_given, kwargs["data_files"])
        # Upstream files read at a branch or tag (ToolMind's `main`) are read at the commit it points at now,
        # and that commit is part of the cache key: the Arrow cache of an earlier commit would otherwise serve
        # its rows for ever after the branch moved on (while a stream read the new ones).
        self._upstream_commits: dict[str, str] = {}
        self._upstream_unresolved = False
        self._hash_parts: Optional[tuple[str, str]] = None  # (before, after) the commits' part of the key
        if kwargs.get("hash") is None:
            kwargs["hash"] = _code_hash()
            if kwargs.get("data_files") is None and kwargs.get("data_dir") is None:
                self._upstream_commits, self._upstream_unresolved = upstream_commits(
                    self.upstreams(), kwargs.get("revision"))
                self._hash_parts = (kwargs["hash"], "")
                if self._upstream_commits:
                    kwargs["hash"] += "-" + commits_digest(self._upstream_commits)
            elif kwargs.get("data_files") is None:
                # data_dir: its files are found when the splits are planned, so datasets' cache key (which holds
                # data_files with their modification times) knows none of them; a file edited or added in the
                # folder would be served from the cache of the folder as it was.
                kwargs["hash"] += "-" + data_dir_digest(kwargs["data_dir"], self.SOURCE_CLASS.local_patterns,
                                                         self.SOURCE_CLASS.local_not_data)
            local = self.local_inputs_digest(kwargs)
            if local:
                kwargs["hash"] += "-" + local
                if self._hash_parts is not None:
                    self._hash_parts = (self._hash_parts[0], "-" + local)
        try:
            if offline_mode() and kwargs.get("data_files") is not None:
                # datasets asks the Hub about each hf:// file for its cache key: offline, made from what is cached
                try:
                    kwargs["data_files"] = offline_data_files(sanitize_patterns(kwargs["data_files"]),
                                                              kwargs.get("base_path"))
                except ValueError as exc:
                    raise DataNotFoundError(f"{self.SOURCE_CLASS.name}: {exc} (data_files="
                                            f"{self._data_files_given!r})") from None
            try:
                super().__init__(*args, **kwargs)
            except OSError as exc:  # datasets makes the cache folder here: its error was said of the data files
                if not _about_cache_dir(exc, kwargs.get("cache_dir")):
                    raise
                where = (f"cache_dir={kwargs['cache_dir']!r}" if kwargs.get("cache_dir") is not None else
                         "datasets' cache folder (HF_DATASETS_CACHE, or pass cache_dir=)")
                raise ValueError(f"{where} cannot be made or written: {exc.strerror or exc}: {exc.filename!r}; "
                                 f"give a folder you can write") from exc
        except FileNotFoundError as exc:  # datasets resolving a path that does not exist: "Unable to find '...'"
            if isinstance(exc, DataNotFoundError) or self._data_files_given is None:
                raise
            raise DataNotFoundError(f"{self.SOURCE_CLASS.name}: {exc}{hub_hint(exc)}{http_answer(str(exc))} "
                                    f"(data_files={self._data_files_given!r})") from exc
        except Exception as exc:  # resolving hf:// files offline, or with the Hub unreachable
            if self._data_files_given is None or not is_network_error(exc):
                raise
            named = [f for files in sanitize_patterns(kwargs["data_files"]).values() for f in files]
            raise DataNotFoundError(f"{self.SOURCE_CLASS.name}: cannot reach the data files: {failure_text(exc)} "
                                    f"(data_files={self._data_files_given!r}); offline, pass local copies of the "
                                    f"files{kept_copies_hint(named)}") from exc
        self.skip_report = SkipReport()
        # Worker processes that convert the next shards ahead while streaming (set by load(num_proc=...)).
        self.stream_num_proc: Optional[int] = None
        self._skip_dir: Optional[str] = None

    def _create_builder_config(self, config_name=None, custom_features=None, config_id=None, **config_kwargs):
        # datasets ignores config kwargs set to None when the config name is a predefined config; options such
        # as ToolMind's split_column=None mean something, so apply them too.
        known = {f.name for f in dataclasses.fields(self.BUILDER_CONFIG_CLASS)}
        unknown = sorted(set(config_kwargs) - known)
        if unknown:
            raise unknown_options_error(self.SOURCE_CLASS.name, self.SOURCE_CLASS.options_class, unknown,
                                        advice=self.unknown_options_advice(set(unknown)))
        # datasets hashes every option passed into the cache folder's name, also one passed at its default value:
        # load() passes on_error="raise", revision=None and validate=None, so a builder made with the same data
        # (NestfulBuilder(config_name="raw", data_files=...)) prepared into another folder and load() converted
        # every row again. Options at the predefined config's own value are left out of the key.
        predefined = self.builder_configs.get(config_name if config_name is not None else self.DEFAULT_CONFIG_NAME)
        if predefined is not None:
            config_kwargs = {key: value for key, value in config_kwargs.items()
                             if key in ("data_files", "data_dir") or not _is_default(value, getattr(predefined, key))}
        data_dir = config_kwargs.get("data_dir")
        undecodable = isinstance(data_dir, str) and any("\udc80" <= c <= "\udcff" for c in data_dir)
        if undecodable:  # a folder name that is not UTF-8: datasets' cache folder name quotes it as UTF-8 and failed
            config_kwargs["data_dir"] = os.fsencode(data_dir).decode(errors="backslashreplace")
        builder_config, config_id = super()._create_builder_config(config_name, custom_features, config_id,
                                                                   **config_kwargs)
        if undecodable:
            builder_config = copy.deepcopy(builder_config)
            builder_config.data_dir = config_kwargs["data_dir"] = data_dir
        if builder_config.validate is not None and builder_config.name != UNIFIED:
            raise ValueError(f"validation rules check unified rows; validate= needs config='unified', not "
                             f"{builder_config.name!r}")
        if builder_config.validate not in (None, False) and not selection_items(builder_config.validate, "validate"):
            # validate=os.environ.get("RULES", "") selected no rule: every row kept unchecked, as --option validate=
            raise ValueError(f"validate={builder_config.validate!r} names no rule: give rule ids, globs such as "
                             "'arguments.*', error, warning or all, or None to check none")
        # toolmind.* on ms_swift rows (also an all mix of ms_swift files) dropped none of them: no row of theirs is
        # one it checks
        refuse_rules_of_other_sources(sources_read(self.SOURCE_CLASS.name, builder_config.data_files),
                                      validate=builder_config.validate)
        # The rules rows are checked against as they are converted (unknown rule names are refused here).
        self.row_check = rule_check(builder_config.validate)
        nulls = {k for k, v in config_kwargs.items() if v is None and getattr(builder_config, k, None) is not None}
        if nulls:
            builder_config = copy.deepcopy(builder_config)
            for key in nulls:
                setattr(builder_config, key, None)
            config_id = f"{config_id}-{hashlib.sha1(','.join(sorted(nulls)).encode()).hexdigest()[:8]}-none"
        # datasets sets load() options after the config's own checks, and None ones (on_error=None) are set here
        check_on_error(builder_config.on_error)
        # datasets asks for _info() right after this; the source it describes is made from this config.
        self.source = self.SOURCE_CLASS(builder_config)
        return builder_config, config_id

    @classmethod
    def data_files_from_options(cls, config_kwargs: dict) -> Optional[list[str]]:
        """The data files the source's options name, read when no data_files / data_dir are given (e.g. the
        ``file_name`` of a LLaMA-Factory ``dataset_info.json`` entry); None: the options name none."""
        return None

    @classmethod
    def data_folder_from_options(cls, config_kwargs: dict) -> Optional[str]:
        """The folder the source's options name as data, every file in it read (a LLaMA-Factory entry whose
        ``file_name`` is a folder); None: the options name none."""
        return None

    @classmethod
    def local_inputs_digest(cls, config_kwargs: dict) -> Optional[str]:
        """A digest of local files other than the data that rows are made from (a source's option naming a
        folder), for the cache key; None: there are none."""
        return None

    @classmethod
    def unknown_options_advice(cls, unknown: set[str]) -> str:
        """What to do instead of passing the ``unknown`` options, after the listing of the source's own
        (empty: nothing more to say)."""
        return ""

    @classmethod
    def upstreams(cls) -> dict[str, Upstream]:
        """The upstream locations a load without ``data_files`` / ``data_dir`` reads, by source name."""
        up = cls.SOURCE_CLASS.upstream
        return {cls.SOURCE_CLASS.name: up} if up is not None else {}

    def upstream_revision(self, source: Source) -> Optional[str]:
        """The revision ``source``'s upstream files are read at: the commit its branch or tag was resolved to,
        else the revision asked for (None: the source's pin)."""
        return self._upstream_commits.get(source.name, self.config.revision)

    def _build_cache_dir(self):
        if not getattr(self, "_data_files_keyed", False):
            # datasets keys a local data file on its path and modification time only (resolved from the globs by
            # now): its size too, so that a file replaced with its time kept is not served from the old rows' cache.
            self._data_files_keyed = True
            digest = data_files_digest(self.config.data_files)
            if digest and self.hash:
                self.hash += "-" + digest
        # Upstream commits that could not be resolved (offline, no network): the cache of this config that the
        # latest load read or prepared (at whichever commit the branch then pointed at) serves, as datasets serves
        # a Hub dataset's cache offline. Without one, preparing reports that the upstream cannot be reached.
        self.offline_cache_read_at: Optional[int] = None
        if getattr(self, "_upstream_unresolved", False) and \
                not datasets.utils.file_utils.is_remote_url(self._cache_dir_root):
            versions = Path(self._cache_dir_root, self._relative_data_dir(with_version=True, with_hash=False))
            # a folder datasets has not renamed yet (a prepare killed before its end) is no cache
            prepared = [d for d in versions.glob(f"{glob.escape(self.hash)}-*")
                        if not d.name.endswith(".incomplete") and (d / datasets.config.DATASET_INFO_FILENAME).exists()]
            if prepared:
                latest = max(prepared, key=last_read)
                self._offline_cache_note = latest  # said when that cache is read: a stream reads the files
                self.hash = latest.name
                self.offline_cache_read_at = last_read(latest)
            elif offline_mode() and self._hash_parts is not None:
                # Nothing prepared: offline, a Hub branch is the commit huggingface_hub's cache records (the one an
                # online load downloaded), as huggingface_hub resolves it; prepared from that download, into the
                # cache an online load at that commit prepares.
                cached = cached_upstream_commits(self.upstreams(), self.config.revision)
                if cached:
                    self._upstream_commits = cached
                    before, after = self._hash_parts
                    self.hash = f"{before}-{commits_digest(cached)}{after}"
        return super()._build_cache_dir()

    def download_and_prepare(self, *args, **kwargs):
        note = getattr(self, "_offline_cache_note", None)
        if note is not None:
            logger.warning("%s: upstream revision not resolved (offline?); using the cache prepared from it before "
                           "(%s)", self.SOURCE_CLASS.name, note)
        return super().download_and_prepare(*args, **kwargs)

    def mark_read(self) -> None:
        """Note that a load read this prepared cache at the upstream commit resolved now: offline, the cache the
        latest load read serves (not the one prepared last: a branch moved back to a commit whose cache was
        there already, a split read from a cache of all splits). Nothing to note for data that names no branch;
        a cache folder that cannot be written is left as it is."""
        if not self._upstream_commits or self._upstream_unresolved:
            return
        try:
            Path(self.cache_dir, LAST_READ_FILE).touch()
        except OSError:
            pass

    # -- datasets hooks -----------------------------------------------------------------------------

    def _info(self) -> datasets.DatasetInfo:
        up = self.SOURCE_CLASS.upstream
        return datasets.DatasetInfo(
            description=self.SOURCE_CLASS.description,
            features=self.output_features(),
            homepage=up.homepage if up else "",
            license=up.license if up else "",
            citation=self.SOURCE_CLASS.citation,
        )

    def output_features(self) -> datasets.Features:
        return config_features(self.source, self.config.name)

    def split_plans(self, dl_manager=None, *, divide: bool = False) -> list[SplitPlan]:
        """The splits and their shards (what ``_split_generators`` hands to datasets). ``divide``: workers will
        share the shards (prepare with ``num_proc``), so large JSON arrays are cut into pieces too."""
        files_by_split = self._resolve_files(dl_manager or StreamingDownloadManager(base_path=self.base_path))
        try:
            plans = self.source.plan(files_by_split)
            if divide:
                size = self.source.options.shard_bytes
                plans = [dataclasses.replace(plan, shards=tuple(cut_documents(list(plan.shards), size)))
                         for plan in plans]
            # Each shard records its file's version now, so a file replaced while the split is read is an error.
            return [dataclasses.replace(plan, shards=tuple(with_versions(balanced(list(plan.shards)))))
                    for plan in plans]
        except FileNotFoundError as exc:  # a file deleted or moved since it was listed (planning reads each file)
            if isinstance(exc, DataNotFoundError) or exc.filename is None:
                raise
            raise file_gone(exc.filename, exc) from None

    def _make_split_generators_kwargs(self, prepare_split_kwargs):
        return {"num_proc": prepare_split_kwargs.get("num_proc")}

    def _split_generators(self, dl_manager, num_proc: Optional[int] = None):
        plans = self.split_plans(dl_manager, divide=(num_proc or 1) > 1)
        wanted = self.config.prepare_splits
        if wanted:
            # before any row is converted (datasets would say so after preparing every split)
            self.check_split_names(wanted, [plan.name for plan in plans])
            plans = [plan for plan in plans if plan.name in wanted]
        return [datasets.SplitGenerator(name=plan.name, gen_kwargs={"shards": list(plan.shards), "split": plan})
                for plan in plans]

    def _resolve_files(self, dl_manager) -> dict[str, list[str]]:
        if self.config.data_files:
            # datasets resolves a glob that matches nothing to no files, silently: an empty split from a typo.
            empty = [str(split) for split, files in self.config.data_files.items() if not files]
            if empty:
                raise DataNotFoundError(f"{self.source.name}: data_files match no file for split "
                                        f"{', '.join(map(repr, empty))} (data_files={self._data_files_given!r})")
            return {str(split): self._given_files(dl_manager, files, f"split {str(split)!r}")
                    for split, files in self.config.data_files.items()}
        if self.config.data_dir:
            return {"train": with_archive_files(self._glob_data_dir(self.config.data_dir))}
        return {split: with_archive_files(files) for split, files in self._download_upstream(dl_manager, self.source).items()}

    def _given_files(self, dl_manager, files, where: str) -> list[str]:
        """Files given in ``data_files`` as they are read: http(s) URLs in place, others downloaded (``hf://``),
        zip archives replaced by their files. A file given twice (overlapping globs, most likely) is a
        ValueError: its rows would load twice, with the same ids."""
        try:
            if offline_mode():  # the copies an online load downloaded (checked when the builder was made)
                resolved = with_archive_files([local_copy(f) or f for f in files])
            else:
                resolved = with_archive_files(_downloaded(dl_manager, list(files)))
                if not isinstance(dl_manager, StreamingDownloadManager):
                    for (repo, branch), commit in self._hf_branches_read.items():
                        remember_ref(repo, branch, commit)  # offline, the branch is the commit downloaded
        except DataNotFoundError:
            raise
        except Exception as exc:  # a download cut short, the Hub unreachable: not a raw HTTP traceback
            if not (isinstance(exc, FileNotFoundError) or is_network_error(exc)):  # (connection errors included)
                raise
            raise DataNotFoundError(f"{self.source.name}: cannot download the data files of {where}: "
                                    f"{failure_text(exc)} (data_files={self._data_files_given!r})") from exc
        # (compared as the files they name: dup/a.jsonl, ./dup/a.jsonl and a/../dup/a.jsonl are one file, read twice;
        # by their folder's real path and their own name, not the file's: two files of a Hub repo with the same text
        # are links to one blob in huggingface_hub's cache, two files all the same)
        keys = [os.path.join(os.path.realpath(os.path.dirname(f)), os.path.basename(f))
                if "::" not in f and is_local_path(f) else f for f in resolved]
        first: dict = {}
        for name, key in zip(resolved, keys):
            if key in first:  # (both names said: the second alone, given once, read as a false claim)
                # (datasets resolves a.jsonl and ./a.jsonl to one name before this: either may be why)
                how = ("overlapping globs, or two spellings of its path such as a.jsonl and ./a.jsonl?"
                       if first[key] == name else f"also as {display_path(name)!r}, the same file")
                raise ValueError(f"{self.source.name}: data_files gives {display_path(first[key])!r} more than once "
                                 f"for {where} ({how}): its rows would load twice, with the same ids")
            first[key] = name
        return resolved

    def _download_upstream(self, dl_manager, source: Source) -> dict[str, list[str]]:
        """The source's pinned upstream files (or ``config.revision``); one clear error when offline."""
        up = source.upstream
        if up is None:
            raise DataNotFoundError(
                f"{source.name} has no default upstream files.\nPass data_files= (local paths, hf:// or https:// "
                f"URLs) or data_dir=, or try the bundled sample: data_files=tooluse_datasets.sample_files("
                f"{source.name!r})", command_hint=LOCAL_FILES_HINT)
        revision = self.upstream_revision(source)
        where = up.describe(revision)
        if offline_mode():
            return self._offline_upstream_copies(source, up.urls(revision), where)
        if up.revision is None and self.config.revision is None:
            logger.warning("%s: upstream revision is not pinned; reading %s", source.name, up.describe(revision))
        try:
            files = {split: list(files) for split, files in dl_manager.download(up.urls(revision)).items()}
            if isinstance(dl_manager, StreamingDownloadManager):
                # Streaming "downloads" nothing: without this look, an unreachable host surfaces at the first
                # row as a bare FileNotFoundError, or after datasets' 20 read retries of 5 s each.
                _check_reachable(url for urls in files.values() for url in urls)
            elif up.host == "hf" and source.name in self._upstream_commits:
                # offline, the branch is the commit these downloads were made at (see offline.remember_ref)
                remember_ref(up.repo, self.config.revision or up.revision or "main", revision)
            return files
        except Exception as exc:  # huggingface_hub/httpx raise their own types, not always OSErrors
            status = answered_in_chain(exc)
            if status is not None and status < 500:
                # the host answered, without the file: not a network problem (a 404 at this revision, or a 403
                # for a gated repo, which hub_hint words)
                what = "cannot be read" if hub_hint(exc) or status != 404 else "does not exist at that revision"
                raise DataNotFoundError(f"{source.name}: a file of the upstream data ({where}) {what}: "
                                        f"{failure_text(exc)}") from exc
            if isinstance(exc, OSError) or is_network_error(exc):
                urls = [url for files in up.urls(revision).values() for url in files]
                raise _offline_error(source, where, failure_text(exc) + kept_copies_hint(
                    urls, self._cache_downloaded_dir)) from exc
            raise

    def _offline_upstream_copies(self, source: Source, urls: dict[str, list[str]], where: str) -> dict[str, list[str]]:
        """Offline: the copies of the upstream files that an online map-style load downloaded (a stream reads
        them too); none kept, one clear error saying what to do."""
        copies = {split: [local_copy(url, self._cache_downloaded_dir) for url in files] for split, files in urls.items()}
        missing = [url for split, files in urls.items() for url, copy in zip(files, copies[split]) if copy is None]
        if missing:
            raise _offline_error(source, where, f"offline mode is on, and no copy of {missing[0]} was downloaded "
                                                f"by an earlier load ({offline_hint(missing[0])})")
        logger.info("%s: offline, reading the upstream files downloaded before (%s)", source.name, where)
        return copies

    def refuse_writing_inputs(self, outputs: dict[str, list]) -> None:
        """A ValueError if an output (argument -> the paths it writes) is one of the local files this builder reads
        (``data_files`` as resolved, a ``data_dir``'s files): written, it replaced an input (rows lost) or was read
        back as rows."""
        inputs = [str(f) for files in (self.config.data_files or {}).values() for f in files]
        if self.config.data_dir and "://" not in self.config.data_dir and "::" not in self.config.data_dir:
            inputs += data_dir_files(self.config.data_dir, self.source.local_patterns, self.source.local_not_data)
        found = output_among_inputs(inputs, outputs)
        if found is not None:
            option, path, read = found
            which = "" if path == read else f" ({read!r})"  # (another name of it: a link, a relative path)
            raise ValueError(f"{option} {path!r} is one of the data files read{which}: it would be written over or "
                             f"read back as rows; write it outside the files read")

    def _glob_data_dir(self, data_dir: str) -> list[str]:
        _check_protocols(data_dir, "data_dir")  # ("foo://x" was "no data files matching ... under data_dir='foo://x'")
        found = data_dir_files(data_dir, self.source.local_patterns, self.source.local_not_data)
        if not found:
            raise DataNotFoundError(f"{self.source.name}: no data files matching {list(self.source.local_patterns)} "
                                    f"under data_dir={data_dir!r}")
        return found

    def _download_and_prepare(self, dl_manager, *args, **kwargs):
        # datasets prepares into "<folder>.incomplete" (the builder lock held) and renames it at the end, but reuses
        # one that a killed prepare (kill -9, out of memory) left: its skip reports would be counted with the new
        # ones (another num_proc names its jobs otherwise), its Arrow files left beside the new ones.
        if self._output_dir.endswith(".incomplete") and os.path.isdir(self._output_dir):
            for entry in os.scandir(self._output_dir):
                logger.info("%s: removing %s, left by a prepare that did not finish", self.SOURCE_CLASS.name, entry.path)
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path)
                else:
                    os.remove(entry.path)
        # With num_proc, datasets forks pools of workers (downloading the files, then converting the shards): they
        # leave the caller's garbage to it and end at the pool's SIGTERM whatever handler the caller has
        # (workers.forking_workers), and with the caller: killed outright, it left them converting their shards
        # into this folder, where a next prepare counted their skip reports with its own, and then waiting for ever.
        with forking_workers(watch_parent=True) if (kwargs.get("num_proc") or 1) > 1 else contextlib.nullcontext():
            return super()._download_and_prepare(dl_manager, *args, **kwargs)

    def _prepare_split(self, split_generator, *args, **kwargs):
        # Tell _generate_tables (possibly in worker processes) where to leave per-shard skip reports.
        self._skip_dir = self._output_dir
        try:
            return super()._prepare_split(split_generator, *args, **kwargs)
        finally:
            self._skip_dir = None

    # A row's typed error leaves the builder as itself, also from a num_proc worker (see raising_typed_errors).
    _prepare_split_single = raising_typed_errors(datasets.ArrowBasedBuilder._prepare_split_single)

    def _generate_shards(self, shards: list[Shard], **_):
        yield from (shard.name for shard in shards)

    def _generate_tables(self, shards: list[Shard], split: SplitPlan) -> Iterator[tuple[Key, pa.Table]]:
        config = self.config.name
        report_path = None
        if self._skip_dir:
            # One report per job: named after the job's own shards, so jobs that share a file do not collide, and
            # first by where its shards start in the split, so the reports merge in file order whatever num_proc.
            tag = hashlib.sha1(repr([split.name, shards]).encode()).hexdigest()[:16]
            start = split.shards.index(shards[0]) if shards else 0
            report_path = os.path.join(self._skip_dir, f"skips-{split.name}-{start:06d}-{tag}.json")
            report = SkipReport(rows_path=report_path[:-len(".json")] + SKIPPED_ROWS_SUFFIX)
        else:
            report = self.skip_report
        converter = ShardConverter(self.source, [config], on_error=self.config.on_error, reports={config: report},
                                   row_check=self.row_check)
        for shard_idx, shard in enumerate(shards):
            tables = (batch.rows[config] for batch in converter.batches(split, shard, arrow=True))
            for batch_idx, table in enumerate(write_batches(tables, self.source.options.batch_size)):
                yield Key(shard_idx, batch_idx), table
        if report_path is not None:
            report.close()
            report.save(report_path)
        if report.skipped:
            # A num_proc job converts some of the split's shards: its counts are said as theirs, not the split's
            # (td.load says the whole split's once the jobs are done).
            part = f" ({len(shards)} of its {len(split.shards)} shards)" if len(shards) < len(split.shards) else ""
            logger.warning("%s %s%s: %s", self.source.name, split.name, part, report.summary())

    def _get_examples_iterable_for_split(self, split_generator: datasets.SplitGenerator) -> ShardExamplesIterable:
        kwargs = split_generator.gen_kwargs
        return ShardExamplesIterable(self.source, self.config.name, kwargs["split"], kwargs["shards"],
                                     on_error=self.config.on_error, report=self.skip_report,
                                     features=self.info.features, num_proc=self.stream_num_proc,
                                     row_check=self.row_check)

    # -- helpers for load() -----------------------------------------------------------------------------

    def check_split_names(self, wanted: Iterable[str], available: Iterable[str]) -> None:
        """Raise a ValueError naming the splits of ``wanted`` that are not ``available``, and those that are."""
        names, wanted = list(available), list(wanted)
        unknown = [name for name in wanted if name not in names]
        if unknown:
            # ('ALL' is datasets' 'all', every split as one, in other case: mirror reads it so, any case; only
            # alone: in an expression with other splits, datasets refuses 'all')
            alone = len(wanted) == 1
            meant = [close for close in (("all" if alone else None) if name.casefold() == "all"
                                         else meant_split(name, names)
                                         for name in unknown) if close]
            hint = f" (did you mean {', '.join(map(repr, meant))}?)" if len(meant) == len(unknown) else ""
            raise ValueError(f"{self.source.name} has no split {', '.join(map(repr, unknown))}{hint}; its splits "
                             f"here: {', '.join(names)}")

    def split_names(self) -> Optional[tuple[str, ...]]:
        """The splits a full build has, when the data files' names tell (nothing is read or fetched), else None
        (ToolMind's split column, NESTFUL v1's file groups)."""
        if self.config.data_files:
            files = {str(split): list(paths) for split, paths in self.config.data_files.items()}
        elif self.config.data_dir:
            files = {"train": [self.config.data_dir]}
        elif self.source.upstream is not None:
            files = self.source.upstream.urls(self.config.revision)
        else:
            return None
        names = self.source.split_names(files)
        return None if names is None else tuple(names)

    def is_prepared(self) -> bool:
        """Whether this config's splits are in the cache already (``download_and_prepare`` would read them)."""
        return os.path.exists(os.path.join(self._output_dir, datasets.config.DATASET_INFO_FILENAME))

    def prepared_skip_report(self, split: Optional[str] = None, *, with_rows: bool = False) -> SkipReport:
        """Skip counts left by ``download_and_prepare`` (also when the dataset came from the cache), of the
        splits ``split`` reads (``"train"``, ``"train[:10%]+test"``) or (None) of all; ``with_rows``: also every
        skipped row, from the files beside the reports."""
        report = SkipReport(keep_all=with_rows)
        names = splits_read(split)
        if names is None:
            paths = Path(self.cache_dir).glob(SKIP_REPORT_GLOB)
        else:  # split names are word characters and dots: no glob metacharacters
            paths = (p for name in names for p in Path(self.cache_dir).glob(f"skips-{name}-*.json"))
        for path in sorted(paths):
            job = SkipReport.load(path)
            rows_file = path.with_name(path.name[:-len(".json")] + SKIPPED_ROWS_SUFFIX)
            if with_rows and rows_file.exists():
                job.rows = [json.loads(line) for line in rows_file.read_bytes().splitlines() if line]
            report.merge(job)
        return report


def _about_cache_dir(exc: OSError, cache_dir: Any) -> bool:
    """Whether ``exc`` is about the cache folder (``cache_dir``, else datasets' own), a folder above it (made
    with it) or a path in it."""
    if not isinstance(exc.filename, str):
        return False
    root = os.path.abspath(os.path.expanduser(os.fspath(cache_dir or datasets.config.HF_DATASETS_CACHE)))
    path = os.path.abspath(exc.filename)
    return path == root or root.startswith(path.rstrip(os.sep) + os.sep) or path.startswith(root + os.sep)


def _is_default(value: Any, default: Any) -> bool:
    """Whether an option's ``value`` is its ``default`` (same type too: ``True`` is not a default of ``1``)."""
    if value is None or default is None:
        return value is None and default is None
    try:
        return type(value) is type(default) and bool(value == default)
    except Exception:  # a value that does not compare (an array): keep it in the key
        return False


def last_read(folder: Path) -> int:
    """When a load last read or prepared the cache ``folder`` (nanoseconds; 0 if unknown)."""
    times = [0]
    for name in (LAST_READ_FILE, datasets.config.DATASET_INFO_FILENAME):
        try:
            times.append(Path(folder, name).stat().st_mtime_ns)
        except OSError:
            pass
    return max(times)


def _path_strings(data_files, base: Optional[str] = None, top: bool = True, takes_dir: bool = True,
                  where: str = "data_files"):
    """``data_files`` with every path object (``pathlib.Path``...) as its string, in lists and split dicts too.
    A value that is no path (None, a number) or a folder is refused here, naming it: datasets would raise a
    TypeError from deep inside, or say it cannot find ``folder/``. Relative paths are looked up under ``base``
    (data_dir), where datasets reads them. ``takes_dir``: a folder's error advises data_dir too. ``where``: how the
    errors name the value (``data_files['nestful']``: the key of a dict, a split's or in source "all" a source's)."""
    if isinstance(data_files, dict) and top:
        reserved = [split for split in data_files if isinstance(split, str) and split.lower() == "all"]
        if reserved:  # datasets' keyword for the union of the splits: it refuses the name from deep inside
            raise ValueError(f"data_files names a split {reserved[0]!r}, which datasets reserves for the union of "
                             f"all splits; give that split another name")
        return {split: _path_strings(files, base, False, takes_dir, f"{where}[{split!r}]")
                for split, files in data_files.items()}
    if isinstance(data_files, (list, tuple)):
        return [_path_strings(f, base, False, takes_dir, where) for f in data_files]
    if not isinstance(data_files, (str, os.PathLike)):
        raise ValueError(f"{where} holds {data_files!r:.80} ({type(data_files).__name__}); give local paths, "
                         f"globs or hf:// / https:// URLs: one, a list, or a dict of split -> them")
    path = os.fspath(data_files)
    if not path.strip():  # an unset shell variable: datasets looked for the current folder as a file
        raise ValueError(f"{where} holds an empty path ({path!r}): give a file, a glob or a URL")
    if path.startswith("~"):  # datasets would look for a folder named "~" in the current one
        path = os.path.expanduser(path)
    # Only a local path is checked below. (Once a stream has been built, datasets has patched this module's
    # os.path.isdir for streaming, and its version asks an http(s) server to list a URL it has cut the scheme
    # from: a second load of an https:// file failed with aiohttp's NonHttpUrlClientError.)
    if "::" in path and path.rsplit("::", 1)[1].startswith("file://"):
        # A local archive named as a file:// URL (zip://rows.jsonl::file:///data/a.zip): datasets' xopen opens it
        # at the current folder joined with the path; named as the path it is, it is read where it is.
        head, archive = path.rsplit("::", 1)
        path = f"{head}::{archive[len('file://'):]}"
    if "://" in path or "::" in path:
        _check_protocols(path)
        return path
    if base is not None and ("://" in base or "::" in base):
        base = None  # (a remote data_dir: the files under it are not looked up here)
    local = os.path.join(base, path) if base is not None else path  # (an absolute path stays as it is)
    if os.path.isdir(local):
        instead = f"data_dir={local!r}, or " if takes_dir else ""
        raise ValueError(f"data_files names the folder {path!r}; pass {instead}a glob such as "
                         f"{os.path.join(path, '*.jsonl')!r}")
    if os.path.exists(local) and not os.path.isfile(local):
        # a pipe or a device (/dev/stdin, a shell's <(...)): datasets said "Unable to find", as if it were missing
        raise ValueError(f"data_files names {path!r}, which is not a regular file (a pipe or a device): save the "
                         f"rows to a file and pass its path")
    if glob.has_magic(path) and os.path.isfile(local):
        # A file whose name holds [, * or ? ("rows [v2].jsonl"): datasets reads every path as a glob, so the name
        # matched no file (or "a*.jsonl" other files too); the file named is read, as the name says
        path = glob.escape(path)
    else:
        path = literal_folder_escaped(path, base)  # (`/tmp/run[1]/*.jsonl`: the folder as named, the rest a pattern)
    if base is not None and glob.has_magic(base) and not os.path.isabs(path):
        # datasets joins data_dir and a relative name into one pattern: data_dir="run[1]" matched no folder
        return os.path.join(glob.escape(base), path)
    return path


def _check_protocols(path: str, what: str = "data file") -> None:
    """Each protocol of a data file URL (``foo://``, every part of a ``zip://...::...`` chain) that fsspec cannot
    open, refused naming the file and the protocols that work: fsspec said "Protocol not known: foo", or "Install
    s3fs to access S3" (an ImportError), naming neither."""
    from fsspec.registry import known_implementations

    for protocol in (part.split("://", 1)[0] for part in path.split("::") if "://" in part):
        exc = _protocol_error(protocol)
        if exc is not None:
            problem = "is not known" if isinstance(exc, ValueError) else f"needs a package not installed ({exc})"
            installed = [name for name in sorted(known_implementations) if _protocol_error(name) is None]
            raise ValueError(f"{what} {path!r}: protocol {protocol!r} {problem}; data files are local paths, "
                             f"http(s):// or hf:// URLs, or URLs of another fsspec protocol installed "
                             f"({', '.join(installed)})")


def _protocol_error(protocol: str) -> Optional[Exception]:
    """Why fsspec cannot open ``protocol`` URLs (unknown: ValueError; its package missing: ImportError), or None."""
    import fsspec

    try:
        fsspec.get_filesystem_class(protocol)
    except (ValueError, ImportError) as exc:
        return exc
    return None


def _downloaded(dl_manager, files: list[str]) -> list[str]:
    """``files`` as the download manager gives them, but http(s) URLs and chained paths (a file of a zip archive,
    ``zip://<file>::<archive>``) as they are: read where they are, as a stream reads them (datasets would
    download one to a file named by a hash, without the name's suffix that says how to read it and the stem
    that ids are made of)."""
    in_place = ["::" in f or f.startswith(("http://", "https://")) for f in files]
    fetched = dl_manager.download([f for f, keep in zip(files, in_place) if not keep])
    if isinstance(dl_manager, StreamingDownloadManager):
        # datasets' map-style download gives a local file as its absolute, normalized path; the stream gave it as
        # resolved from the pattern (/data/./a/x.jsonl): ids, subsets and skip records named it otherwise
        fetched = [os.path.abspath(f) if "://" not in f and is_local_path(f) else f for f in fetched]
    fetched = iter(fetched)
    return [f if keep else next(fetched) for f, keep in zip(files, in_place)]


def _check_reachable(urls: Iterable[str]) -> None:
    """One metadata request a file (no retries): raises what the file system raises when a file cannot be had."""
    from fsspec.core import url_to_fs

    for url in urls:
        fs, path = url_to_fs(url)
        fs.info(path)


# Rows are converted a few dozen at a time (see shards.reading.JSON_BATCH_ROWS), but each table handed to datasets is
# one record batch of the cache file, and reading the file back (memory-mapped) maps ~64 KB of it into the process
# for every batch: 64-row tables put 156 MB more into RSS than 1,000-row ones for 124K ToolMind rows.
WRITE_BATCH_BYTES = 8 << 20


def write_batches(tables: Iterable[pa.Table], rows: int) -> Iterator[pa.Table]:
    """``tables`` regrouped into tables of ``rows`` rows (or about WRITE_BATCH_BYTES), each one record batch."""
    groups = TableGroups(rows, WRITE_BATCH_BYTES)
    # Joined in the package's pool, as the tables were built: under mimalloc (pyarrow's default on Linux) each
    # batch's copy refaulted huge pages the kernel zeroed (mimalloc's page faults were 3% of ms-swift prepare).
    pool = package_memory_pool()
    for table in tables:
        if table.num_rows:
            yield from (group.combine_chunks(memory_pool=pool) for group in groups.add(table))
    yield from (group.combine_chunks(memory_pool=pool) for group in groups.finish())


def _offline_error(source: Source, where: str, why: str) -> DataNotFoundError:
    return DataNotFoundError(
        f"{source.name}: cannot reach the upstream data ({where}): {why}.\n"
        f"Point at local files instead, for example:\n"
        f"    tooluse_datasets.load({source.name!r}, data_files='path/to/file')\n"
        f"    tooluse_datasets.load({source.name!r}, data_dir='path/to/folder')\n"
        f"or try the bundled sample: tooluse_datasets.load({source.name!r}, data_files=tooluse_datasets.sample_files({source.name!r}))",
        command_hint=LOCAL_FILES_HINT)


_CODE_HASH: Optional[str] = None


# Libraries whose version decides what rows hold: orjson reads every JSON value; jsonschema, referencing and
# regex decide what `validate=` keeps.
ROW_DECIDING_LIBRARIES = ("orjson", "jsonschema", "referencing", "regex")


def _code_hash() -> str:
    """Hash of the package source and of the versions of :data:`ROW_DECIDING_LIBRARIES`, so a code change or an
    upgrade invalidates cached Arrow files (datasets keys its cache on ``hash``; with None a code change would
    silently reuse stale data)."""
    global _CODE_HASH
    if _CODE_HASH is None:
        import importlib.metadata

        import tooluse_datasets.builders as builders_pkg

        digest = hashlib.sha256()
        for root in (Path(__file__).parent, Path(builders_pkg.__path__[0])):
            for p in sorted(root.rglob("*.py")):
                digest.update(p.read_bytes())
        for name in ROW_DECIDING_LIBRARIES:
            digest.update(f"\0{name}=={importlib.metadata.version(name)}".encode())
        _CODE_HASH = digest.hexdigest()[:16]
    return _CODE_HASH
