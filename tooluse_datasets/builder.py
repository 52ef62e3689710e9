"""The builder every source shares: configs are output formats, splits are the source's partitions.

``ToolUseBuilder`` is a plain ``datasets.ArrowBasedBuilder``: use it directly
(``download_and_prepare`` / ``as_dataset`` / ``as_streaming_dataset``) or through
:func:`tooluse_datasets.load`, which adds exact JSON decoding and the skip report. Each data file is one
shard, so ``num_proc`` preparation and streaming worker splitting work per file.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Iterator, Optional

import datasets
import pyarrow as pa
from datasets.builder import Key

from . import registry
from .codec import RowEncoder
from .errors import (DataNotFoundError, InvalidValueError, OnError, SkipReport, ToolUseDataError,
                     check_on_error)
from .schema import UNIFIED_FEATURES
from .source import RowContext, Source

logger = logging.getLogger("tooluse_datasets")

SKIP_REPORT_GLOB = "skips-*.json"


@dataclass
class ToolUseConfig(datasets.BuilderConfig):
    """Config of every source builder; ``name`` is the output format.

    Args:
        on_error: ``"raise"`` (default) stops at the first bad row with a typed error naming file, row
            and field; ``"skip"`` drops such rows, counts them in a skip report and logs them.
        batch_size: rows per Arrow table produced.
        revision: upstream revision (commit) to read instead of the pinned one.
    """

    on_error: OnError = "raise"
    batch_size: int = 1000
    revision: Optional[str] = None

    def __post_init__(self):
        super().__post_init__()
        check_on_error(self.on_error)
        if self.name not in registry.FORMATS:
            raise ValueError(f"unknown format config {self.name!r}; choose one of {list(registry.FORMATS)}")


class ToolUseBuilder(datasets.ArrowBasedBuilder):
    """Base class; a source's builder only sets ``SOURCE`` (and optionally a config subclass)."""

    SOURCE: ClassVar[Source]
    BUILDER_CONFIG_CLASS = ToolUseConfig
    DEFAULT_CONFIG_NAME = "unified"

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if getattr(cls, "SOURCE", None) is not None:
            cls.BUILDER_CONFIGS = [cls.BUILDER_CONFIG_CLASS(name=fmt, description=registry.FORMATS[fmt])
                                   for fmt in registry.FORMATS]

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("dataset_name", self.SOURCE.name)
        if kwargs.get("hash") is None:
            kwargs["hash"] = _code_hash()
        super().__init__(*args, **kwargs)
        self.skip_report = SkipReport()
        self._skip_dir: Optional[str] = None

    # -- datasets hooks -----------------------------------------------------------------------------

    def _info(self) -> datasets.DatasetInfo:
        up = self.SOURCE.upstream
        return datasets.DatasetInfo(
            description=self.SOURCE.description,
            features=self.output_features(),
            homepage=up.homepage if up else "",
            license=up.license if up else "",
            citation=self.SOURCE.citation,
        )

    def output_features(self) -> datasets.Features:
        fmt = self.config.name
        if fmt == "unified":
            return UNIFIED_FEATURES
        if fmt == "raw":
            return self.SOURCE.raw_features
        return registry.writer(fmt).features

    def _split_generators(self, dl_manager):
        files_by_split = self._resolve_files(dl_manager)
        return [datasets.SplitGenerator(name=split, gen_kwargs=gen_kwargs)
                for split, gen_kwargs in self.SOURCE.splits(files_by_split, self.config)]

    def _resolve_files(self, dl_manager) -> dict[str, list[str]]:
        if self.config.data_files:
            return {str(split): list(files) for split, files in dl_manager.download(dict(self.config.data_files)).items()}
        if self.config.data_dir:
            return {"train": self._glob_data_dir(self.config.data_dir)}
        return self._download_upstream(dl_manager, self.SOURCE)

    def _download_upstream(self, dl_manager, source: Source) -> dict[str, list[str]]:
        """The source's pinned upstream files (or ``config.revision``); one clear error when offline."""
        up = source.upstream
        if up is None:
            raise DataNotFoundError(
                f"{source.name} has no default upstream files: pass data_files= (local paths, hf:// or https:// "
                f"URLs) or data_dir=.")
        where = up.describe(self.config.revision)
        if os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("HF_DATASETS_OFFLINE") == "1":
            raise _offline_error(source, where, "offline mode is on")
        if up.revision is None and self.config.revision is None:
            logger.warning("%s: upstream revision is not pinned; reading %s", source.name, up.describe())
        try:
            return {split: list(files) for split, files in dl_manager.download(up.urls(self.config.revision)).items()}
        except (ConnectionError, OSError, TimeoutError) as exc:
            raise _offline_error(source, where, f"{type(exc).__name__}: {exc}") from exc
        except Exception as exc:  # huggingface_hub/httpx raise their own types when there is no network
            if "offline" in type(exc).__name__.lower() or "connect" in type(exc).__name__.lower():
                raise _offline_error(source, where, str(exc)) from exc
            raise

    def _glob_data_dir(self, data_dir: str) -> list[str]:
        base = Path(data_dir)
        found = sorted({str(p) for pattern in self.SOURCE.local_patterns for p in base.glob(pattern) if p.is_file()})
        if not found:
            raise DataNotFoundError(f"{self.SOURCE.name}: no data files matching {list(self.SOURCE.local_patterns)} "
                                    f"under data_dir={data_dir!r}")
        return found

    def _prepare_split(self, split_generator, *args, **kwargs):
        # Tell _generate_tables (possibly in worker processes) where to leave per-shard skip reports.
        self._skip_dir = self._output_dir
        try:
            return super()._prepare_split(split_generator, *args, **kwargs)
        finally:
            self._skip_dir = None

    def _generate_shards(self, files, **_):
        yield from files

    def _generate_tables(self, files: list[str], **split_kwargs: Any) -> Iterator[tuple[Key, pa.Table]]:
        source, config = self.SOURCE, self.config
        convert = self._row_converter()
        encoder = RowEncoder(self.info.features)
        split = split_kwargs.get("split", "")
        report = SkipReport() if self._skip_dir else self.skip_report
        for shard_idx, path in enumerate(files):
            for batch_idx, batch in enumerate(source.read(path, config, **split_kwargs)):
                rows = []
                for row_number, item in batch:
                    ctx = RowContext(source.name, _display_path(path), row_number, split)
                    try:
                        if isinstance(item, ToolUseDataError):
                            raise item
                        rows.append(encoder.encode_row(convert(item, ctx)))
                    except Exception as exc:
                        # A reader bug or a shape no check foresaw must still name the row and follow
                        # the error policy; the original exception stays chained as the cause.
                        error = exc if isinstance(exc, ToolUseDataError) else _unexpected(exc)
                        error.at(file=ctx.file, row=row_number, source=source.name)
                        if config.on_error == "raise":
                            if error is exc:
                                raise
                            raise error from exc
                        report.add(error)
                report.count_read(len(batch))
                yield Key(shard_idx, batch_idx), encoder.table(rows)
        if self._skip_dir:
            tag = hashlib.sha1(json.dumps([split, files]).encode()).hexdigest()[:16]
            report.save(os.path.join(self._skip_dir, f"skips-{split}-{tag}.json"))
        if report.skipped:
            logger.warning("%s %s: %s", source.name, split, report.summary())

    def _row_converter(self):
        source, fmt = self.SOURCE, self.config.name
        if fmt == "raw":
            return source.to_raw
        if fmt == "unified":
            return lambda native, ctx: source.to_unified(source.to_raw(native, ctx), ctx)
        write = registry.writer(fmt).from_unified
        return lambda native, ctx: write(source.to_unified(source.to_raw(native, ctx), ctx))

    # -- helpers for load() -----------------------------------------------------------------------------

    def prepared_skip_report(self) -> SkipReport:
        """Skip counts left by ``download_and_prepare`` (also when the dataset came from the cache)."""
        report = SkipReport()
        for path in sorted(Path(self.cache_dir).glob(SKIP_REPORT_GLOB)):
            report.merge(SkipReport.load(path))
        return report


def _unexpected(exc: Exception) -> InvalidValueError:
    return InvalidValueError(f"row could not be converted ({type(exc).__name__}: {exc})")


def _display_path(path: str) -> str:
    # Streaming chains URLs ("zip://x::https://..."); show the outermost real file.
    return path.split("::")[-1] if "::" in path else path


def _offline_error(source: Source, where: str, why: str) -> DataNotFoundError:
    return DataNotFoundError(
        f"{source.name}: cannot reach the upstream data ({where}): {why}.\n"
        f"Point at local files instead, for example:\n"
        f"    tooluse_datasets.load({source.name!r}, data_files='path/to/file')\n"
        f"    tooluse_datasets.load({source.name!r}, data_dir='path/to/folder')\n"
        f"or try the bundled sample: tooluse_datasets.load({source.name!r}, data_files=tooluse_datasets.sample_files({source.name!r}))")


_CODE_HASH: Optional[str] = None


def _code_hash() -> str:
    """Hash of the package source, so a code change invalidates cached Arrow files (datasets keys its
    cache on ``hash``; with None a code change would silently reuse stale data)."""
    global _CODE_HASH
    if _CODE_HASH is None:
        import tooluse_datasets.builders as builders_pkg

        digest = hashlib.sha256()
        for root in (Path(__file__).parent, Path(builders_pkg.__path__[0])):
            for p in sorted(root.rglob("*.py")):
                digest.update(p.read_bytes())
        _CODE_HASH = digest.hexdigest()[:16]
    return _CODE_HASH
