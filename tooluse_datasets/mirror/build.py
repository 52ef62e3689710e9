"""Building a mirror: plan each split once, run one task per shard on an engine, merge the results in plan
order, name the files, write manifest and card, and swap the folder into place.

Read once, write many: every shard task converts its rows once into every config and feeds the statistics and
validation counts from the same pass (:mod:`.shard_task`). What a mirror holds depends only on the input and
the plan: each shard writes its own parts, and the coordinator numbers them in plan order, so a single process,
``num_proc`` workers and Ray give byte-identical files, manifest and card.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, Optional, Sequence

from datasets import Features

from .. import formats, registry
from ..dataset_card import hub_license, render_card, repo_id_problem
from ..distributions import plot_distributions
from ..errors import SkipReport, ToolUseDataError, check_on_error, json_text_bytes, one_line
from ..progress import progress
from ..shards.paths import name_as_text
from ..shards.versions import changed
from ..source import SplitPlan, splits_read
from ..stats import SplitStatistics
from ..validation import ValidationCounter
from .engines import EngineUnavailableError, ShardFailure, ShardsFailedError, check_engine, run_tasks
from .hidden_paths import staging_path
from .manifest import (MANIFEST_NAME, PATH_OPTIONS, README_NAME, ConfigEntry, DataFile, Manifest, MirrorError,
                       SplitEntry, data_file_name, write_manifest)
from .parts import ParquetLayout
from .provenance import build_provenance, display_input, hash_file, pin_hub_data_files, shared_folder
from .provenance import pin_upstream_revision as _pin_revision
from .shard_task import ShardResult, ShardTask, skipped_rows_file, slim_split, worker_runtime
from .staging import Staging, check_out_dir, check_target, recover_swap

logger = logging.getLogger("tooluse_datasets")
FIGURES_DIR = "plots"

DEFAULT_CONFIG = "unified"
# The Hub and datasets reject other split names (datasets/naming.py); checked before anything is written.
SPLIT_NAME = re.compile(r"^\w+(\.\w+)*$")


@dataclasses.dataclass
class MirrorRequest:
    """What to mirror. ``data_files=None`` reads the source's pinned upstream files. ``source_options`` are the
    source's own options (``load(source, ..., **options)``), e.g. ``shard_bytes`` or ToolMind's
    ``split_column``."""

    source: str
    configs: Sequence[str] = tuple(formats.FORMATS)
    data_files: Any = None
    split: Optional[str] = None
    on_error: str = "skip"
    revision: Optional[str] = None
    repo_id: Optional[str] = None  # only used in the card's loading snippets
    license: Optional[str] = None  # the card's license when the data is not the source's upstream (ms-swift files)
    layout: ParquetLayout = dataclasses.field(default_factory=ParquetLayout)
    source_options: dict = dataclasses.field(default_factory=dict)
    # A file to list every skipped row in (JSON lines: config, split, source, file, row, field, error, reason,
    # message); the manifest and the card keep counts and the first examples only. Not part of the mirror.
    skipped_rows: Optional[str] = None

    def __post_init__(self):
        # Wrong types are named here: they failed deep inside (split=3: 'int' object has no attribute 'split'), and a
        # str for configs was read letter by letter.
        if isinstance(self.configs, str):
            raise TypeError(f"configs must be a list of formats, e.g. [{self.configs!r}], got the str {self.configs!r}")
        # (None for these failed once read: 'NoneType' object is not iterable, asdict() of no dataclass)
        for name, kind, wanted in (("configs", Collection, "a list of formats (all of them by default)"),
                                   ("layout", ParquetLayout, "a ParquetLayout"),
                                   ("source_options", Mapping, "a dict of the source's options ({} for none)")):
            value = getattr(self, name)
            if not isinstance(value, kind):
                raise TypeError(f"{name} must be {wanted}, got {value!r:.80} ({type(value).__name__})")
        for name in ("split", "revision", "repo_id", "license"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise TypeError(f"{name} must be a str or None, got {value!r:.80} ({type(value).__name__})")
        if self.skipped_rows is not None and not isinstance(self.skipped_rows, (str, os.PathLike)):
            raise TypeError(f"skipped_rows must be a path (str or pathlib.Path) or None, got {self.skipped_rows!r:.80} "
                            f"({type(self.skipped_rows).__name__})")
        try:
            splits_read(self.split)  # an empty name ("train+", an unset variable) was "no split ''", as for a typo
        except ValueError as exc:
            raise MirrorError(str(exc)) from None
        unknown = [c for c in self.configs if c not in formats.FORMATS]
        if unknown or not self.configs:
            raise MirrorError(f"unknown configs {unknown}; choose from {list(formats.FORMATS)}")
        if len(set(self.configs)) != len(self.configs):
            raise MirrorError(f"configs are repeated: {list(self.configs)}")
        if self.source not in registry.source_names():
            raise MirrorError(f"unknown source {self.source!r}; choose from {registry.source_names()}")
        try:
            check_on_error(self.on_error)
        except ValueError as exc:
            raise MirrorError(str(exc)) from None
        if self.license is not None:
            self.license = hub_license(self.license)
        # '{source}' filled as the command line fills it: the repo id was refused as no name the Hub takes, and the
        # listing written to a file named '{source}.jsonl'
        if self.repo_id is not None:
            self.repo_id = self.repo_id.replace("{source}", self.source)
        if self.skipped_rows is not None and "{source}" in os.fspath(self.skipped_rows):
            self.skipped_rows = os.fspath(self.skipped_rows).replace("{source}", self.source)
        if self.repo_id is not None:  # the card's snippets load it: one the Hub does not take makes them all fail
            problem = repo_id_problem(self.repo_id, "the card's snippets load a dataset repo")
            if problem is not None:
                raise MirrorError(f"repo_id (--repo-id): {problem}")  # (MirrorRequest's name and the option's)


def build_mirror(request: MirrorRequest, out_dir: str | Path, *, engine: str = "local",
                 num_proc: Optional[int] = None, address: Optional[str] = None) -> Path:
    """Build ``out_dir/<source>`` (replacing a previous mirror there only once the new one is complete).

    ``engine``: ``"local"`` (this process, or a pool of ``num_proc`` processes) or ``"ray"`` (``address`` of a
    running cluster, else a local Ray with ``num_proc`` CPUs). The mirror is the same whatever runs it. A build
    that stops midway leaves the previous mirror in place, and running it again finishes it, reusing the
    shards already done (:mod:`.staging`)."""
    check_engine(engine, num_proc, address)  # before anything is read: a typo costs nothing
    return _build(plan_mirror(request, out_dir), engine=engine, num_proc=num_proc, address=address)


@dataclasses.dataclass
class MirrorPlan:
    """A request checked and planned (:func:`plan_mirror`), nothing converted or staged yet: several sources
    are all planned before any is built, so that a split or config one of them lacks stops the command
    before it has built the others."""

    request: MirrorRequest  # with its upstream revision pinned and local paths absolute
    target: Path
    features: dict[str, Features]
    builder: Any
    splits: list[SplitPlan]


class MissingSplitError(MirrorError):
    """The split asked for is not in the source's data (``available``: the splits it has)."""

    def __init__(self, source: str, split: str, available: list[str]):
        from ..builder import meant_split  # the typo hint load(), show and stats give

        self.source, self.split, self.available = source, split, available
        self.meant = meant_split(split, available)
        super().__init__(f"{source}: no split {split!r} in the data{self.hint}; its splits here: "
                         f"{', '.join(available) or 'none'}")

    @property
    def hint(self) -> str:
        return f" (did you mean {self.meant!r}?)" if self.meant else ""


def plan_mirror(request: MirrorRequest, out_dir: str | Path) -> MirrorPlan:
    """Check ``request`` against its data and plan its splits (raises :class:`MirrorError`, e.g.
    :class:`MissingSplitError`); the files' names are resolved and their metadata read, no row is converted."""
    # named here: build_mirror("nestful", ...) was "'str' object has no attribute 'source'"
    if not isinstance(request, MirrorRequest):
        raise TypeError(f"request must be a MirrorRequest, e.g. MirrorRequest('nestful'), got {request!r:.80} "
                        f"({type(request).__name__})")
    if not (isinstance(out_dir, (str, os.PathLike)) and isinstance(os.fspath(out_dir), str)):
        raise TypeError(f"out_dir must be a path (str or pathlib.Path), got {out_dir!r:.80} ({type(out_dir).__name__})")
    check_out_dir(Path(out_dir), request.source)
    target = Path(out_dir) / request.source
    recover_swap(target)  # a build stopped while replacing the mirror there
    check_target(target)
    _check_listing_outside(request, target)
    _check_source_options(request)
    request = _absolute_path_options(request)
    if request.data_files is None:  # files a source option names (a LLaMA-Factory dataset_info entry)
        named = registry.builder_class(request.source).data_files_from_options(request.source_options)
        if named is not None:
            request = dataclasses.replace(request, data_files=named)
    _check_revision_reads_upstream(request)
    request = pin_hub_data_files(pin_upstream_revision(request))
    features = {config: _features(request.source, config) for config in request.configs}
    _check_options_fit_configs(request)
    builder = _builder(request)
    _check_inputs_outside(request, builder, target)
    _check_listing_is_no_input(request, builder)
    return MirrorPlan(request, target, features, builder, _split_plans(request, builder))


def build_planned_mirror(plan: MirrorPlan, *, engine: str = "local", num_proc: Optional[int] = None,
                         address: Optional[str] = None) -> Path:
    """Build the mirror :func:`plan_mirror` planned (see :func:`build_mirror`)."""
    check_engine(engine, num_proc, address)
    return _build(plan, engine=engine, num_proc=num_proc, address=address)


def _build(plan: MirrorPlan, **engine_options) -> Path:
    request, target, features, builder, plans = plan.request, plan.target, plan.features, plan.builder, plan.splits
    source = builder.source
    input_paths = _input_paths(request, builder)
    hashed_versions = _local_file_stats(input_paths)  # before hashing: what the provenance's sha256s describe
    provenance = build_provenance(source.upstream, request.revision, input_paths,
                                  from_upstream=request.data_files is None)
    if provenance.origin == "files" and isinstance(request.data_files, dict) and set(request.data_files) != {"train"}:
        names = {path: i.name for path, i in zip(input_paths, provenance.inputs)}
        provenance.split_inputs = {split: [names[str(f)] for f in files]
                                   for split, files in builder.config.data_files.items()}
    build = _build_description(request, builder, provenance, plans)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Staging.open(target, build)
    try:
        # An absolute folder: workers need not run where this process does (Ray's working_dir, other nodes).
        # Ray nodes have packages of their own: each task checks it runs the versions this build records.
        runtime = worker_runtime() if engine_options.get("engine") == "ray" else None
        tasks = [ShardTask(source, tuple(request.configs), slim_split(plan), shard, index, request.on_error,
                           request.layout, str(staging.parts.absolute()), runtime)
                 for plan in plans for index, shard in enumerate(plan.shards)]
        results = _run_shards(request.source, tasks, build, staging, **engine_options)
        _check_inputs_unchanged(request.source, plans, input_paths, hashed_versions, provenance)
        merged = {plan.name: [results[t.key] for t in tasks if t.split.name == plan.name] for plan in plans}
        if request.skipped_rows:  # before assembling: a build left with no row to mirror lists them too
            _list_skipped_rows(request, tasks, staging.parts, Path(request.skipped_rows))
        manifest = _assemble(request, features, merged, staging, provenance, source, input_paths)
        write_manifest(staging.folder, manifest)
        (staging.folder / README_NAME).write_text(render_card(manifest, request.repo_id), encoding="utf-8")
    except (ShardsFailedError, EngineUnavailableError):
        staging.release()  # the finished shards are what a retry reuses
        raise
    except (ToolUseDataError, MirrorError):
        staging.discard()  # a bad row or an unusable input: a re-run of the same input fails the same way
        raise
    except BaseException:
        staging.release()  # interrupted: the next run of the same build picks up from here
        raise
    staging.commit()
    return target


def _local_file_stats(paths: list[str]) -> dict[str, Optional[tuple]]:
    """Size, modification and status-change times of each local input (None: it cannot be read now)."""
    return {path: _file_stat(path) for path in paths if "://" not in path}


def _file_stat(path: str) -> Optional[tuple]:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns


def _check_inputs_unchanged(source: str, plans: list[SplitPlan], input_paths: list[str],
                            hashed: dict[str, Optional[tuple]], provenance) -> None:
    """Refuse the mirror if a local input changed while it was built (rewritten, appended to, cut short): its
    rows would come from two versions, and the card would name one. A shard reading another version than it was
    planned from counts one skipped item for all its rows (as a load does), so the build would otherwise go on
    without them; and a file changed after it was hashed is no longer the file the card's sha256 names. A
    stat call per file; a file is read again only when its times changed and its size did not."""
    problems = {}
    for shard in {(s.file, s.kind): s for plan in plans for s in plan.shards}.values():
        version = shard.version
        if version is None:
            continue
        if "://" in shard.file:  # a URL, an archive's member: what its file system says of it
            reason = changed(shard.file, shard.kind, version)
            if reason:
                problems.setdefault(shard.file, f"since the build was planned it {reason}")
            continue
        now = _file_stat(shard.file)
        reason = "is gone" if now is None else changed(shard.file, shard.kind, version)
        if reason is None and now[0] != version.size:
            reason = f"is longer ({now[0]} bytes, {version.size} then)"
        if reason:
            problems.setdefault(shard.file, f"since the build was planned it {reason}")
    for path, fingerprint in zip(input_paths, provenance.inputs):
        if path in problems or path not in hashed or _file_stat(path) == hashed[path]:
            continue
        now = _file_stat(path)
        if now is None or now[0] != fingerprint.num_bytes or hash_file(path)[0] != fingerprint.sha256:
            problems[path] = "it is no longer the file hashed when the build started"
    if problems:
        path, why = next(iter(problems.items()))
        more = f" (and {len(problems) - 1} other input files)" if len(problems) > 1 else ""
        raise MirrorError(f"{source}: the input file {display_input(path)}{more} changed while the mirror was "
                          f"built ({why}): its rows would come from two versions, so no mirror was written; run "
                          f"the build again once the files are final")


def _partial_listing(out: Path) -> Path:
    """Where the skipped rows' listing ``out`` is written until it is complete."""
    return out.with_name(out.name + ".partial")


def _list_skipped_rows(request: MirrorRequest, tasks: list[ShardTask], parts_dir: Path, out: Path) -> None:
    """Every row a shard task skipped, config by config in plan order, into one JSON lines file (written under a
    ``.partial`` name and renamed when complete: a listing cut off midway must not pass for the whole one)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = _partial_listing(out)
    try:
        with open(partial, "wb") as f:
            for config in request.configs:
                for task in tasks:
                    path = skipped_rows_file(parts_dir, config, task.key)
                    if path.is_file():
                        for line in path.read_bytes().splitlines():
                            record = {"config": config, "split": task.split.name, **json.loads(line)}
                            f.write(json_text_bytes(record) + b"\n")
        os.replace(partial, out)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def _run_shards(source: str, tasks: list[ShardTask], build: dict, staging: Staging,
                **engine_options) -> dict[str, ShardResult]:
    """Every task's result: saved by an earlier run of the same build (and its parts intact), or run now on the
    engine and saved as it arrives. Raises :class:`ShardsFailedError` naming the shards that failed."""
    task_ids = {task.key: _task_id(build, task) for task in tasks}
    results = {task.key: staging.saved_result(task.key, task_ids[task.key]) for task in tasks}
    todo = [task for task in tasks if results[task.key] is None]
    if len(todo) < len(tasks):
        logger.info("%s: reusing %d of %d shards finished by an earlier run", source, len(tasks) - len(todo),
                    len(tasks))
    failures = []
    start = time.monotonic()
    outcomes = run_tasks(todo, **engine_options)
    try:
        for finished, (task, outcome) in enumerate(progress(outcomes, f"mirror {source}", len(todo)), 1):
            if isinstance(outcome, ShardFailure):
                failures.append(outcome)
                continue
            staging.save_result(task.key, task_ids[task.key], outcome)
            results[task.key] = outcome
            logger.info("%s: %d/%d shards done (%s shard %d) after %.1fs", source, finished, len(todo),
                        task.split.name, task.index, time.monotonic() - start)
    finally:
        # Stopped here (a result that cannot be saved, Ctrl-C): the engine cancels its tasks and stops the Ray or
        # pool it started now, not whenever the error (which holds this frame) is let go of.
        close = getattr(outcomes, "close", None)
        if close is not None:
            close()
    if failures:
        raise ShardsFailedError(f"{source}: {len(failures)} of {len(tasks)} shards failed; the others are kept in "
                                f"{staging.folder} and running the same build again retries only the failed "
                                f"ones:\n  " + "\n  ".join(f.describe() for f in failures))
    return {key: ShardResult.from_dict(result) for key, result in results.items()}


def pin_upstream_revision(request: MirrorRequest, resolve=None) -> MirrorRequest:
    """The request with an explicit upstream revision when it reads an unpinned Hub upstream (see
    :func:`.provenance.pin_upstream_revision`)."""
    return _pin_revision(request, _upstream(request.source), resolve)


# --------------------------------------------------------------------------------------------------
# Planning
# --------------------------------------------------------------------------------------------------


def _check_source_options(request: MirrorRequest) -> None:
    """``source_options`` are the source's own options: anything else (the builder's ``revision``, given twice, or
    datasets' ``name``, silently ignored) is refused listing them, as ``load`` refuses it."""
    from ..source import unknown_options_error

    options_class = registry.builder_class(request.source).SOURCE_CLASS.options_class
    unknown = set(request.source_options) - {f.name for f in dataclasses.fields(options_class)}
    if unknown:
        raise unknown_options_error(request.source, options_class, unknown,
                                    also="the mirror's revision, on_error, split and configs are its own arguments")


def _check_revision_reads_upstream(request: MirrorRequest) -> None:
    """A revision is the upstream's: data files (the sample included) are read as they are, and the card would
    name the upstream at that revision as the mirror's origin, which it is not."""
    if request.revision is not None and request.data_files is not None:
        raise MirrorError(f"{request.source}: revision (--revision) {request.revision} picks the upstream revision to "
                          f"read, but the data files given (data_files / --data-files, --sample or a source option "
                          f"naming them) are read as they are: leave the revision out, or the data files to read the "
                          f"upstream at it")


def _check_listing_outside(request: MirrorRequest, target: Path) -> None:
    """The ``skipped_rows`` listing must lie outside the mirror's folder (and its staging): the build replaces
    that folder whole, and the listing would go with the old mirror."""
    if request.skipped_rows is None:
        return
    listing, folder = Path(os.path.abspath(request.skipped_rows)), Path(os.path.abspath(target))
    if listing.is_dir():  # (it failed renaming the listing there, once every row had been converted)
        raise MirrorError(f"skipped_rows (--skipped-rows) {os.fspath(request.skipped_rows)!r} is a folder: give a "
                          f"file, e.g. {listing / 'skipped-rows.jsonl'}")
    if _partial_listing(listing).is_dir():  # (the same, where the listing is written first)
        raise MirrorError(f"skipped_rows (--skipped-rows) {os.fspath(request.skipped_rows)!r}: "
                          f"{str(_partial_listing(listing))!r}, where the listing is written first, is a folder: move "
                          f"it away or give another file")
    if listing.is_relative_to(folder) or listing.is_relative_to(staging_path(folder)):
        raise MirrorError(f"skipped_rows (--skipped-rows) {request.skipped_rows} is inside the mirror folder {target}, "
                          f"which the build replaces whole (the listing would be deleted with the old mirror): write "
                          f"it outside that folder, e.g. {folder.parent / (folder.name + '-skipped.jsonl')}")


def _check_inputs_outside(request: MirrorRequest, builder, target: Path) -> None:
    """No data file may lie inside a mirror of the output folder: a glob such as ``DIR/**/*.parquet`` with
    ``--out DIR`` reads the mirrors' own files as rows (their ``toolmind`` config is ToolMind's input format), so
    every rebuild would hold its rows once more, and another source's mirror would pass for input (and may be
    replaced by the same command while it is read)."""
    if request.data_files is None:
        return
    out_dir = target.parent
    mirrors = [target, staging_path(target)] + sorted(
        child for child in (out_dir.iterdir() if out_dir.is_dir() else ()) if (child / MANIFEST_NAME).is_file())
    folders = [Path(os.path.realpath(folder)) for folder in mirrors]
    for path in _input_paths(request, builder):
        if "://" in path:
            continue
        inside = next((folder for folder in folders if Path(os.path.realpath(path)).is_relative_to(folder)), None)
        if inside is not None:
            what = (f"the mirror folder {target}, which this build replaces" if inside in folders[:2]
                    else f"the mirror {inside} in the output folder")
            raise MirrorError(f"{request.source}: the data file {path} lies inside {what}: it would be read as "
                              f"rows of the new mirror (a rebuild would hold a mirror's rows once more); narrow "
                              f"data_files (--data-files) to your input files, or build the mirror outside the folder "
                              f"they are in (--out)")


def _check_listing_is_no_input(request: MirrorRequest, builder) -> None:
    """The ``skipped_rows`` listing must not be a data file the build reads: it was written over that file once the
    rows were read, and the input was lost (the command line refuses it before this; a link to the file too). The
    check load() and validate() make of their outputs."""
    try:
        builder.refuse_writing_inputs({"skipped_rows": [request.skipped_rows]})
    except ValueError as error:
        raise MirrorError(f"{request.source}: {error}") from None


def _absolute_path_options(request: MirrorRequest) -> MirrorRequest:
    """The request with its local path options (:data:`PATH_OPTIONS`) absolute: they are read by the shard tasks,
    and workers may run in another folder (Ray's runtime_env working_dir, other nodes), as --out and the data
    files are."""
    options = dict(request.source_options)
    for name in PATH_OPTIONS:
        value = options.get(name)
        if isinstance(value, (str, os.PathLike)) and "://" not in os.fspath(value):
            options[name] = os.path.abspath(os.path.expanduser(os.fspath(value)))
    return request if options == request.source_options else dataclasses.replace(request, source_options=options)


def _builder(request: MirrorRequest):
    """The builder whose source converts every config: made for one the mirror writes (unified where it is one;
    the options hold for each, :func:`_check_options_fit_configs`)."""
    builder_cls = registry.builder_class(request.source)
    config = DEFAULT_CONFIG if DEFAULT_CONFIG in request.configs else request.configs[0]
    return builder_cls(config_name=config, data_files=request.data_files, on_error=request.on_error,
                       revision=request.revision, **request.source_options)


def _check_options_fit_configs(request: MirrorRequest) -> None:
    """The source options hold for every config the mirror writes, as ``load`` of that config checks them:
    NESTFUL's ``execute=True`` has no place in ``raw``, nor ``trailing_results="drop"`` in a format other than
    ``llamafactory``; such a config would be written ignoring the option beside the configs that apply it. An
    option wrong whatever the config is raised as ``load`` raises it."""
    builder_cls = registry.builder_class(request.source)
    builder_cls.SOURCE_CLASS(builder_cls.SOURCE_CLASS.options_class(**request.source_options))  # no config named
    for config in request.configs:
        try:
            builder_cls.SOURCE_CLASS(builder_cls.BUILDER_CONFIG_CLASS(name=config, **request.source_options))
        except ValueError as exc:
            raise MirrorError(f"{request.source}, config {config}: {exc} (mirror the other configs with "
                              f"configs / --configs)") from None


def _split_plans(request: MirrorRequest, builder) -> list[SplitPlan]:
    # Large JSON arrays cut too, whatever the engine: the plan, and so the mirror, must not depend on it.
    plans = builder.split_plans(divide=True)
    if request.split is not None:
        # `a+b` names several splits, as every command reads it; each stays a split of its own in the mirror
        wanted = request.split.split("+")
        if any(name.casefold() == "all" for name in wanted):
            # datasets' keyword for the union of the splits: a mirror keeps every split, each of its own
            raise MirrorError(f"split (--split) {request.split!r}: 'all' names every split, which a mirror "
                              f"holds when no split is given: leave it out to mirror them all (each a split of its "
                              f"own), or name the ones to mirror, a+b")
        lacking = [name for name in wanted if name not in {p.name for p in plans}]
        if lacking:
            raise MissingSplitError(request.source, lacking[0], [p.name for p in plans])
        plans = [p for p in plans if p.name in wanted]
    bad = [p.name for p in plans if not SPLIT_NAME.match(p.name)]
    if bad:
        raise MirrorError(f"{request.source}: split names {bad} are not valid Hub split names "
                          f"(letters, digits, _ and .)")
    return plans


def _input_paths(request: MirrorRequest, builder) -> list[str]:
    if request.data_files is None:
        up = builder.source.upstream
        return [url for urls in up.urls(request.revision).values() for url in urls]
    # The builder resolved globs and relative paths exactly as loading does. In the order it reads them (rows
    # follow it): the card's rebuild command lists them so.
    return list(dict.fromkeys(str(f) for files in builder.config.data_files.values() for f in files))


def _build_description(request: MirrorRequest, builder, provenance, plans: list[SplitPlan]) -> dict:
    """What makes two builds the same (their staging can be shared): the request, the source's options and the
    local files they name, the inputs' sha256, the plan and the code."""
    from ..builder import _code_hash

    options = builder.source.options
    return {
        "source": request.source, "configs": list(request.configs), "split": request.split,
        "on_error": request.on_error, "revision": request.revision, "layout": dataclasses.asdict(request.layout),
        "options": {f.name: repr(getattr(options, f.name)) for f in dataclasses.fields(builder.source.options_class)},
        # local files an option names (NESTFUL's functions, a LLaMA-Factory entry), edited under the same path
        "local_inputs": type(builder).local_inputs_digest(request.source_options),
        "inputs": [dataclasses.asdict(i) for i in provenance.inputs],
        "plan": hashlib.sha256(repr(plans).encode()).hexdigest(),
        "code": _code_hash(), "versions": provenance.versions,
    }


def _task_id(build: dict, task: ShardTask) -> str:
    text = json.dumps(build, sort_keys=True) + repr((task.split, task.shard, task.index))
    return hashlib.sha256(text.encode()).hexdigest()


def _features(source: str, config: str) -> Features:
    from ..loading import features

    try:
        return Features(features(source, config))
    except ImportError as exc:
        raise MirrorError(f"{source}: the {config!r} format cannot be imported ({exc}); "
                          f"leave it out of configs (--configs)") from exc


def _upstream(source: str):
    """The source's pinned upstream (None for formats without a canonical dataset)."""
    try:
        return registry.builder_class(source).SOURCE_CLASS.upstream
    except ImportError as exc:
        raise MirrorError(f"source {source!r} is registered ({registry.SOURCES[source]}) but cannot be imported: "
                          f"{exc}") from exc


# --------------------------------------------------------------------------------------------------
# Merging shard results
# --------------------------------------------------------------------------------------------------


def _assemble(request: MirrorRequest, features: dict[str, Features], results: dict[str, list[ShardResult]],
              staging: Staging, provenance, source, input_paths: list[str]) -> Manifest:
    """Merge the shard results of every split in plan order, move the parts to their final names and describe
    the mirror."""
    configs: dict[str, ConfigEntry] = {}
    omitted: dict[str, str] = {}
    files: list[DataFile] = []
    for config in request.configs:
        entry, config_files, why_empty = _config_entry(config, features[config], results, staging)
        if entry.splits:
            configs[config] = entry
            files += config_files
        else:
            omitted[config] = why_empty
    if not configs:  # one error: the configs' counts are often the same (an empty file, every row unreadable)
        why = next(iter(omitted.values())) if len(set(omitted.values())) == 1 else \
            "; ".join(f"{config}: {why_empty}" for config, why_empty in omitted.items())
        raise MirrorError(f"{request.source}: no config has any row: {why}")
    for config, why_empty in omitted.items():
        logger.warning("%s/%s: no rows left (%s); the config is left out of the mirror", request.source, config,
                       one_line(why_empty))  # (a reason may quote a key of the data, line breaks included)
    statistics, validation, distributions = {}, {}, {}
    for split, shard_results in results.items():
        stats, counter = SplitStatistics(), ValidationCounter([])
        for result in shard_results:
            stats.merge(result.statistics)
            counter.merge(result.validation)
        statistics[split], validation[split] = stats.result(), counter.to_dict()
        distributions[split] = stats.distributions
    options = _portable_options(request, provenance, input_paths)
    pretty_name = source.pretty_name_for(options)  # NESTFUL v1's data is named so
    return Manifest(
        figures=_figures(distributions, staging.folder, pretty_name),
        source=request.source,
        pretty_name=pretty_name,
        default_config=DEFAULT_CONFIG if DEFAULT_CONFIG in configs else next(iter(configs)),
        configs=configs,
        omitted_configs=omitted,
        statistics=statistics,
        validation=validation,
        provenance=provenance,
        parquet=dataclasses.asdict(request.layout),
        license=request.license,
        files=files,
        selection=_selection(request),
        options=options,
    )


def _selection(request: MirrorRequest) -> dict:
    """What part of the data the request asked for, when not all of it (see ``Manifest.selection``)."""
    selection: dict = {}
    if request.split is not None:
        selection["split"] = request.split
    if set(request.configs) != set(formats.FORMATS):
        selection["configs"] = list(request.configs)
    return selection


def _portable_options(request: MirrorRequest, provenance, input_paths: list[str]) -> dict:
    """The source options of the request, in name order, local paths (a LLaMA-Factory ``dataset_info``, NESTFUL's
    ``executable_functions``) relative to the folder the local input files share, as the card names them, so that
    the card's rebuild command run there reads them; else by their name (the manifest, and so the card, must not
    depend on the machine)."""
    options = {}
    for name, value in sorted(request.source_options.items()):
        if name in PATH_OPTIONS and isinstance(value, (str, os.PathLike)):
            value = _relative_to_inputs(os.fspath(value), provenance, input_paths) or display_input(os.fspath(value))
        options[name] = value
    return options


def _relative_to_inputs(path: str, provenance, input_paths: list[str]) -> Optional[str]:
    """``path`` relative to the folder the input files share (the folder of a single one), or None when it names a
    URL or they are not all local files given to the build (a bundled sample is not run from). The files read,
    not the data_files given: a glob's folder (``*/x.json``) is none the card names them from."""
    if "://" in path or not provenance.local_files_given():
        return None
    return name_as_text(Path(os.path.relpath(os.path.abspath(path), shared_folder(input_paths))).as_posix())


def _figures(distributions: dict, folder: Path, title: str) -> list[DataFile]:
    """PNG plots of the distributions the card embeds (``plots/<measure>.png``); none without matplotlib
    (the ``plots`` extra), and the card then says how to get them."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        logger.info("matplotlib is not installed (the plots extra): the card has no distribution plots")
        return []
    written = plot_distributions(distributions, folder / FIGURES_DIR, title=title)
    return [DataFile(path.relative_to(folder).as_posix(), *hash_file(path), 0) for path in written]


def _config_entry(config: str, features: Features, results: dict[str, list[ShardResult]],
                  staging: Staging) -> tuple[ConfigEntry, list[DataFile], str]:
    splits, omitted, files = {}, {}, []
    total = SkipReport()
    example = None
    for split, shard_results in results.items():
        report = SkipReport()
        for result in shard_results:
            report.merge(result.skips[config])
        total.merge(report)
        parts = [part for result in shard_results for part in result.parts[config]]
        if not parts:
            # A split left empty (all rows skipped) is not published, nothing to train on; its skip counts
            # stay in the manifest and the card.
            omitted[split] = _portable_skips(report)
            continue
        names = [data_file_name(config, split, i, len(parts)) for i in range(len(parts))]
        for part, name in zip(parts, names):
            _move_part(staging, part.path, name)
            files.append(DataFile(path=name, sha256=part.sha256, num_bytes=part.file_bytes, num_rows=part.num_rows))
        splits[split] = SplitEntry(num_examples=sum(p.num_rows for p in parts),
                                   num_bytes=sum(p.num_bytes for p in parts), files=names,
                                   skipped=_portable_skips(report))
        if example is None:
            example = next((r.examples[config] for r in shard_results if r.examples[config] is not None), None)
    entry = ConfigEntry(description=formats.FORMATS[config], features=features.to_dict(), splits=splits,
                        example=example, omitted_splits=omitted)
    return entry, files, total.summary()


def _move_part(staging: Staging, part: str, name: str) -> None:
    source, destination = staging.parts / part, staging.folder / name
    if not source.is_file():
        raise MirrorError(f"part {source} is missing: a worker wrote it where this process cannot see it "
                          f"(with Ray on several machines, --out must be on a filesystem every node shares)")
    destination.parent.mkdir(parents=True, exist_ok=True)
    source.replace(destination)


def _portable_skips(report: SkipReport, max_examples: int = 5) -> dict:
    """The skip report without machine-specific paths, so that the same input gives the same manifest."""
    data = report.to_dict()
    data["examples"] = [{**e, "file": display_input(e["file"]) if e["file"] else None}
                        for e in data["examples"][:max_examples]]
    return data
