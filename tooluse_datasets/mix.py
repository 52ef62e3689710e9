"""``source="all"``: every source in one schema, one ``train`` split.

Each shard is one file of one source; rows are read and converted by that source's own code with its
default options, so the mix adds no per-source logic. ``data_files`` maps source name -> files (default:
each source's pinned upstream files; sources without upstream files, like ms-swift, need theirs given).
The ``raw`` format does not exist here: raw rows have a different schema per source.
"""
from __future__ import annotations

from typing import Any, Iterator

import datasets

from . import registry
from .builder import ToolUseBuilder, ToolUseConfig
from .errors import DataNotFoundError, ToolUseDataError
from .source import NativeItem, RowContext, Source

SHARD_SEPARATOR = "\t"


class MixedSource(Source):
    name = "all"
    pretty_name = "Tool-use sources (NESTFUL, ms-swift, ToolMind)"
    description = "Every tooluse_datasets source in the unified schema; `source` and `subset` tell rows apart."
    raw_features = None  # type: ignore[assignment]

    def __init__(self) -> None:
        self._members: dict[str, tuple[Source, Any]] = {}

    def member(self, name: str) -> tuple[Source, Any]:
        """A member source and its default config (created once; rows are converted with it)."""
        if name not in self._members:
            builder_cls = registry.builder_class(name)
            self._members[name] = (builder_cls.SOURCE, builder_cls.BUILDER_CONFIG_CLASS(name="unified"))
        return self._members[name]

    def splits(self, files_by_split, config):
        shards = [f"{name}{SHARD_SEPARATOR}{path}" for name, files in files_by_split.items() for path in files]
        return [("train", {"files": shards})]

    def read(self, path: str, config: Any, **_: Any) -> Iterator[list[NativeItem]]:
        name, _, real_path = path.partition(SHARD_SEPARATOR)
        source, source_config = self.member(name)
        for batch in source.read(real_path, source_config):
            yield [(row, item if isinstance(item, ToolUseDataError) else (name, item)) for row, item in batch]

    def to_raw(self, native, ctx):  # pragma: no cover - the mix has no raw format
        raise NotImplementedError

    def to_unified(self, item, ctx: RowContext) -> dict:
        name, native = item
        source, _ = self.member(name)
        member_ctx = RowContext(name, ctx.file, ctx.row, ctx.split)
        try:
            return source.to_unified(source.to_raw(native, member_ctx), member_ctx)
        except ToolUseDataError as exc:
            raise exc.at(source=name)

    def from_unified(self, row):  # pragma: no cover
        raise NotImplementedError


class AllSourcesBuilder(ToolUseBuilder):
    SOURCE = MixedSource()

    def _info(self) -> datasets.DatasetInfo:
        if self.config.name == "raw":
            raise ValueError("source 'all' has no 'raw' format (raw schemas differ per source); "
                             "load each source's raw format on its own")
        return super()._info()

    def _resolve_files(self, dl_manager) -> dict[str, list[str]]:
        given = dict(self.config.data_files or {})
        unknown = set(given) - set(registry.SOURCES)
        if unknown:
            raise ValueError(f"data_files for source 'all' maps source names to files; unknown keys {sorted(unknown)}")
        out: dict[str, list[str]] = {}
        for name in registry.SOURCES:
            if name in given:
                out[name] = list(dl_manager.download(list(given[name])))
            elif not given:
                source = registry.builder_class(name).SOURCE
                if source.upstream is None:
                    continue  # a format without a canonical dataset (ms-swift): only with data_files
                out[name] = [p for files in self._download_upstream(dl_manager, source).values() for p in files]
        if not out:
            raise DataNotFoundError("source 'all': no files; pass data_files={'nestful': [...], ...}")
        return out

    def _row_converter(self):
        to_unified = self.SOURCE.to_unified
        if self.config.name == "unified":
            return to_unified
        write = registry.writer(self.config.name).from_unified
        return lambda item, ctx: write(to_unified(item, ctx))


Builder = AllSourcesBuilder


def all_sample_files() -> dict[str, list[str]]:
    from .loading import sample_files

    return {name: sample_files(name)["train"] for name in registry.SOURCES}


__all__ = ["AllSourcesBuilder", "MixedSource", "all_sample_files", "ToolUseConfig"]
