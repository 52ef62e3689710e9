"""One shard task: convert one shard of one split once, write that shard's Parquet parts for every config, and
return everything the coordinator merges.

:func:`convert_shard` is pure in the sense engines need: its output depends only on its :class:`ShardTask`
(the source with its options, the split, the shard and its index, the configs, the layout), it writes only
its own part files (named after the split and the shard's index) and it returns a plain JSON-able dict, so a
local loop, a process pool and Ray tasks all run the same function and the coordinator gets the same results.

One pass feeds everything: each row is read and converted once (:class:`~tooluse_datasets.pipeline.ShardConverter`
with every config at once), and the unified rows it keeps feed the statistics and the validation counts.
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Optional

from ..builder import ROW_DECIDING_LIBRARIES
from ..exact_features import ExactFeatures
from ..errors import SkipReport
from ..pipeline import UNIFIED, ShardConverter, config_features
from ..shards.shard import Shard
from ..source import Source, SplitPlan
from ..stats import SplitStatistics
from ..validation import ValidationCounter
from .examples import first_example
from .manifest import MirrorError
from .parts import Attempt, ParquetLayout, PartWriter, WrittenPart, make_folder_below


@dataclasses.dataclass(frozen=True)
class ShardTask:
    """Everything one shard task needs; picklable (process pools with spawn, Ray)."""

    source: Source  # the source object, with its options
    configs: tuple[str, ...]  # formats to write
    split: SplitPlan  # name and selection; its shard list is left out (each task carries its own shard)
    shard: Shard
    index: int  # the shard's position in its split's plan
    on_error: str
    layout: ParquetLayout
    parts_dir: str  # parts go to <parts_dir>/<config>/<split>-<index>-<k>.parquet
    # The coordinator's worker_runtime(), checked where the task runs (Ray nodes have packages of their own);
    # None: not checked (the task runs on this machine's installation).
    runtime: Optional[tuple] = None

    @property
    def key(self) -> str:
        """Name of the task's results and parts: unique in a build, fixed by the plan."""
        return f"{self.split.name}-{self.index:05d}"


@dataclasses.dataclass
class ShardResult:
    """What one shard task produced, mergeable in plan order."""

    split: str
    index: int
    parts: dict[str, list[WrittenPart]]  # config -> parts written (paths relative to parts_dir)
    skips: dict[str, SkipReport]  # config -> rows read and skipped
    statistics: SplitStatistics  # of the unified rows
    validation: ValidationCounter  # of the unified rows
    examples: dict[str, Any]  # config -> first row (decoded, shortened), None without rows

    def to_dict(self) -> dict:
        return {"split": self.split, "index": self.index,
                "parts": {c: [dataclasses.asdict(p) for p in parts] for c, parts in self.parts.items()},
                "skips": {c: r.to_dict() for c, r in self.skips.items()},
                "statistics": self.statistics.to_state(), "validation": self.validation.to_dict(),
                "examples": self.examples}

    @classmethod
    def from_dict(cls, data: dict) -> "ShardResult":
        return cls(split=data["split"], index=data["index"],
                   parts={c: [WrittenPart(**p) for p in parts] for c, parts in data["parts"].items()},
                   skips={c: SkipReport.from_dict(r) for c, r in data["skips"].items()},
                   statistics=SplitStatistics.from_state(data["statistics"]),
                   validation=ValidationCounter.from_dict(data["validation"]),
                   examples=data["examples"])


def convert_shard(task: ShardTask) -> dict:
    """Run ``task``: its parts are written and its :class:`ShardResult` is returned as a dict. A bad row raises
    its typed error under ``on_error="raise"``; on any failure the parts written so far are deleted."""
    if task.runtime is not None:
        _check_runtime(dict(task.runtime))
    source, configs = task.source, list(task.configs)
    # The unified rows feed the statistics, so unified is converted even when it is not written; its table
    # also says which unified rows could be stored.
    converted = configs if UNIFIED in configs else [*configs, UNIFIED]
    root = Path(task.parts_dir)
    # Each attempt lists its skipped rows in files of its own (see Attempt).
    try:  # (their folders are made below root, never root itself: see abandoned)
        listings = {c: skipped_rows_file(root, c, task.key, made=True) for c in converted}
    except FileNotFoundError:
        if root.is_dir():
            raise
        return abandoned(root)
    attempt = Attempt()
    reports = {c: SkipReport(rows_path=attempt.path(path)) for c, path in listings.items()}
    converter = ShardConverter(source, converted, on_error=task.on_error, counted_only=set(converted) - set(configs),
                               reports=reports)
    features = {c: config_features(source, c) for c in converted}
    decoders = {c: ExactFeatures(f) for c, f in features.items()}
    writers = {c: PartWriter(root, f"{c}/{task.key}", features[c], task.layout) for c in configs}
    examples: dict[str, Any] = {c: None for c in configs}
    statistics, validation = SplitStatistics(), ValidationCounter(source=source.name)
    try:
        for batch in converter.batches(task.split, task.shard, arrow=True, keep_unified=True):
            for config in configs:
                table = batch.rows[config]
                writers[config].write(table)
                if examples[config] is None:
                    examples[config] = first_example(table, decoders[config])
            for row in _stored_unified_rows(batch, decoders[UNIFIED]):
                statistics.add(row)
                validation.check(row)
        parts = {c: w.finish() for c, w in writers.items()}
    except BaseException as exc:
        for writer in writers.values():
            writer.abort()
        for config, path in listings.items():
            reports[config].close()
            attempt.drop(path)
        if isinstance(exc, FileNotFoundError) and (not root.is_dir() or (
                isinstance(exc.filename, (str, bytes)) and Path(os.fsdecode(exc.filename)).is_relative_to(root))):
            return abandoned(root)
        raise
    for config, path in listings.items():
        reports[config].close()
        attempt.done(path, missing_ok=True)  # none skipped: an earlier attempt's listing goes
    skips = {c: converter.reports[c] for c in configs}
    return ShardResult(task.split.name, task.index, parts, skips, statistics, validation, examples).to_dict()


ABANDONED = "abandoned"


def abandoned(root: Path) -> dict:
    """What a task returns when its parts folder is gone (or was never there where it runs): on a Ray that goes on
    (the caller's), the task of a stopped build whose staging folder was deleted, or emptied by the next build,
    raised a FileNotFoundError that no one waits for, which Ray printed as a raw traceback in the caller's process
    later. A build still waiting for it names it as a failed shard (:func:`.engines.outcome`)."""
    return {ABANDONED: f"its parts folder {root} is gone or not there where it ran (the staging folder was deleted "
                       f"during the build, or, with Ray on several machines, --out is on no filesystem every node "
                       f"shares)"}


def worker_runtime() -> tuple:
    """The versions that decide a shard's files besides its task: this package's, those of the libraries that
    decide rows, and datasets' and pyarrow's (they write the Parquet)."""
    import importlib.metadata

    from .. import __version__

    return (("tooluse-datasets", __version__),
            *((name, importlib.metadata.version(name)) for name in ("datasets", "pyarrow", *ROW_DECIDING_LIBRARIES)))


def _check_runtime(wanted: dict) -> None:
    """Refuse to convert with other versions than the build records (a Ray node with another image would write
    other files than its card describes, silently)."""
    here = dict(worker_runtime())
    differ = [f"{name} {here.get(name)} (the build has {version})" for name, version in wanted.items()
              if here.get(name) != version]
    if differ:
        raise MirrorError(f"this worker runs {', '.join(differ)}: install the same versions on every node")


def skipped_rows_file(parts_dir: Path, config: str, key: str, *, made: bool = False) -> Path:
    """Where a shard task lists every row it skipped in ``config`` (JSON lines; written only if one was);
    ``made``: its folder is made."""
    path = parts_dir / "skipped" / config / f"{key}.jsonl"
    if made:
        make_folder_below(parts_dir, path.parent)
    return path


def _stored_unified_rows(batch, decoder: ExactFeatures) -> list[dict]:
    """The unified rows of a batch that were stored: the converter's Python rows when every one of them made
    it into the unified table (the usual case), else the table's rows decoded (a value Arrow could not store
    dropped a row, and statistics describe the rows a mirror holds)."""
    table = batch.rows[UNIFIED]
    if len(batch.unified) == table.num_rows:
        return batch.unified
    return [decoder.decode_example(row) for row in table.to_pylist()]


def slim_split(split: SplitPlan) -> SplitPlan:
    """The split without its shard list (each task carries only its own shard)."""
    return dataclasses.replace(split, shards=())
