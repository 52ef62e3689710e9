"""``source="all"``: every source in one schema, one ``train`` split.

Each shard is a shard of one source's file, tagged with that source; rows are read and converted by that
source's own code with its default options (the mix's `shard_bytes` and `batch_size` apply to all), so the mix adds no per-source logic. ``data_files`` maps
source name -> files (default: each source's pinned upstream files; sources without upstream files, like
ms-swift, need theirs given). The ``raw`` format does not exist here: raw rows have a different schema per
source.
"""
from __future__ import annotations

import dataclasses
import os
import re
from typing import Any, Iterator, Optional

from . import registry
from .builder import ToolUseBuilder
from .errors import DataNotFoundError, ToolUseDataError
from .shards.shard import RawBatch, Shard
from .source import RowContext, Source, SourceOptions, SplitPlan

SPLIT = "train"
_MIX_OPTIONS = frozenset(f.name for f in dataclasses.fields(SourceOptions))
MEMBER_OPTIONS_NOTE = "source 'all' reads each source with its default options:"


@dataclasses.dataclass(frozen=True)
class MemberShard(Shard):
    """A shard of one member source's file, with the member's own split it belongs to (its name and selection,
    e.g. which ToolMind split value its rows hold), so the member reads it exactly as it would alone."""

    member: str = ""
    member_split: str = ""
    selection: Any = None


class MixedSource(Source):
    name = "all"
    pretty_name = "Tool-use sources (NESTFUL, ms-swift, ToolMind)"
    description = "Every tooluse_datasets source in the unified schema; `source` and `subset` tell rows apart."
    raw_features = None  # type: ignore[assignment]

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self._members: dict[str, Source] = {}

    def member(self, name: str) -> Source:
        """A member source with its default options but the mix's shard size, batch size and trailing_results
        (created once; its rows are converted with it)."""
        if name not in self._members:
            builder_cls = registry.builder_class(name)
            # (trailing_results too, checked against the mix's format: the mix's writer trims the rows, but
            # LLaMA-Factory's reader must trim a file's row ending on results, which it refuses for its odd count)
            common = {f.name: getattr(self.options, f.name) for f in dataclasses.fields(SourceOptions)}
            fmt = getattr(self.options, "name", None) or "unified"
            self._members[name] = builder_cls.SOURCE_CLASS(builder_cls.BUILDER_CONFIG_CLASS(name=fmt, **common))
        return self._members[name]

    def split_names(self, files_by_split: dict[str, list[str]]) -> Optional[list[str]]:
        return [SPLIT]

    def plan(self, files_by_split: dict[str, list[str]]) -> list[SplitPlan]:
        """Every member's own plan of its files (its splits, in order), as the shards of one split."""
        shards = []
        for name, files in files_by_split.items():
            try:
                plans = self.member(name).plan({SPLIT: list(files)})
            except ValueError as exc:  # (ToolMind's split column refused, advising split_column=)
                raise self._member_error(exc, name)
            shards += [MemberShard(**{f.name: getattr(shard, f.name) for f in dataclasses.fields(Shard)},
                                   member=name, member_split=plan.name, selection=plan.selection)
                       for plan in plans for shard in plan.shards]
        return [SplitPlan(SPLIT, tuple(shards))]

    def read(self, shard: MemberShard, split: SplitPlan, resume: Optional[tuple[int, int]] = None
             ) -> Iterator[RawBatch]:
        name = shard.member
        try:
            for batch in self.member(name).read(shard, SplitPlan(shard.member_split, (), shard.selection), resume):
                # errors name the member source, as every other error of its rows does
                batch.items = [(row, self._member_error(item, name) if isinstance(item, ToolUseDataError)
                                else (name, item))
                               for row, item in batch.items]
                yield batch
        except GeneratorExit:  # a consumer that stopped early; named first, so that a stream left unfinished
            raise              # until interpreter exit, when module names may be gone (None), closes quietly
        except ToolUseDataError as exc:
            raise self._member_error(exc, name)

    def _member_error(self, error: ValueError, name: str) -> ValueError:
        """``error`` of member ``name``, naming it; where it advises one of the member's own options
        (``data_version='v1'``, ``columns=``), which the mix refuses, it says to load the member on its own.
        (A ValueError of another type than the typed errors and ValueError itself is left as it is.)"""
        typed = isinstance(error, ToolUseDataError)
        if typed:
            error.at(source=name)
        elif type(error) is not ValueError:
            return error
        message = error.message if typed else str(error)
        own = [f.name for f in dataclasses.fields(self.member(name).options_class)
               if f.name not in _MIX_OPTIONS and re.search(rf"\b{f.name}=", message)]
        if own and MEMBER_OPTIONS_NOTE not in message:
            message = f"{message}; {MEMBER_OPTIONS_NOTE} load {name!r} on its own to pass {', '.join(own)}"
            error.args = (message,)
            if typed:
                error.message = message
        return error

    def to_raw(self, item: tuple[str, dict], ctx: RowContext) -> tuple[str, Any]:
        name, native = item
        member_ctx = RowContext(name, ctx.file, ctx.row, ctx.split, file_label=ctx.file_label)
        try:
            raw = self.member(name).to_raw(native, member_ctx)
        except ToolUseDataError as exc:
            raise self._member_error(exc, name)
        ctx.origins = member_ctx.origins  # what the member's to_unified needs to name the file's fields
        # Errors of the row's later steps (a writer refusing it, a value its columns cannot store) name the
        # member source too, as they do when the member is loaded alone.
        ctx.source = name
        return name, raw

    def to_unified(self, item: tuple[str, Any], ctx: RowContext) -> dict:
        name, raw = item
        try:
            return self.member(name).to_unified(raw, RowContext(name, ctx.file, ctx.row, ctx.split,
                                                                origins=ctx.origins, file_label=ctx.file_label))
        except ToolUseDataError as exc:
            raise self._member_error(exc, name)

    def input_field(self, row: dict, field: str) -> Optional[str]:
        """The place in the file of the member the row came from (its ``source``), as that member names it
        when loaded alone: a writer's error about a ToolMind row names the file's own message."""
        name = row.get("source")
        if name not in registry.source_names():  # (a row rewritten by a map may name no member)
            return None
        return self.member(name).input_field(row, field)

    def from_unified(self, row):  # pragma: no cover - the mix has no raw format
        raise NotImplementedError


class AllSourcesBuilder(ToolUseBuilder):
    SOURCE_CLASS = MixedSource
    TAKES_DATA_DIR = False

    def __init__(self, *args, **kwargs):
        if kwargs.get("data_dir") is not None:
            # Nothing of the mix reads it: the load would go on to every member's upstream files instead.
            raise ValueError(f"source 'all' takes no data_dir (its files would not say which source they are "
                             f"in); pass data_files mapping source names to files, e.g. "
                             f"{{'ms_swift': '{os.path.join(str(kwargs['data_dir']), '*.jsonl')}', ...}}")
        given = kwargs.get("data_files")
        if given is not None and not isinstance(given, dict):
            raise ValueError(f"data_files for source 'all' maps source names to files, e.g. "
                             f"{{'nestful': [...], 'toolmind': [...]}}; got {type(given).__name__} {given!r:.120}")
        if isinstance(given, dict):
            # A source's files may come as its split -> files dict (td.sample_files(name)), of its train split
            # only: the mix has that one split, and folding a test split into it would leak test rows into
            # training (and give the rows of a file listed under two splits the same ids twice).
            kwargs["data_files"] = {name: _train_files(name, files) for name, files in given.items()}
        super().__init__(*args, **kwargs)

    @classmethod
    def unknown_options_advice(cls, unknown: set[str]) -> str:
        """Which member an option is of (the mix reads every member with its default options)."""
        owners = {option: [name for name in registry.source_names() if option in {
            f.name for f in dataclasses.fields(registry.builder_class(name).SOURCE_CLASS.options_class)}]
            for option in sorted(unknown)}
        owned = [f"{option} is {' and '.join(names)}'s" for option, names in owners.items() if names]
        return f"; {', '.join(owned)}: load the source on its own to pass its options" if owned else ""

    @classmethod
    def upstreams(cls) -> dict:
        """Every member's upstream location (a load of ``all`` without ``data_files`` reads them all)."""
        return {name: up for name in registry.source_names()
                if (up := registry.builder_class(name).SOURCE_CLASS.upstream) is not None}

    def _resolve_files(self, dl_manager) -> dict[str, list[str]]:
        given = dict(self.config.data_files or {})
        unknown = set(given) - set(registry.source_names())
        if unknown:
            # each key spelled otherwise ("ms-swift", "ToolMind") is named with the source meant, as load's source is
            meant = {key: registry.meant_source(key) for key in sorted(unknown, key=str)}
            hint = "".join(f" ({key!r}: did you mean {name!r}?)" for key, name in meant.items() if name)
            raise ValueError(f"data_files for source 'all' maps source names to files; unknown keys "
                             f"{list(meant)}{hint}; sources: {registry.source_names()}")
        out: dict[str, list[str]] = {}
        for name in registry.source_names():
            if name in given:
                if not given[name]:  # a glob that matched nothing (datasets resolves it to no files, silently)
                    raise DataNotFoundError(f"source 'all': data_files match no file for {name!r} "
                                            f"(data_files={self._data_files_given!r})")
                out[name] = self._given_files(dl_manager, given[name], repr(name))
            elif not given:
                member = self.source.member(name)
                if member.upstream is None:
                    continue  # a format without a canonical dataset (ms-swift): only with data_files
                try:
                    upstream = self._download_upstream(dl_manager, member)
                except DataNotFoundError as exc:
                    raise _in_mix_terms(exc) from exc
                out[name] = [p for files in upstream.values() for p in files]
        if not out:
            raise DataNotFoundError("source 'all': no files; pass data_files={'nestful': [...], ...}")
        return out


# Where a member's upstream files cannot be reached, the advice is for "all": each source's files by name, or the
# samples of every source (the member's own advice named load(member, ...) and a bare --data-files PATH).
MIX_LOCAL_FILES = ("Point at each source's local files instead, for example:\n"
                   "    tooluse_datasets.load('all', data_files={'nestful': 'n.jsonl', 'ms_swift': 'a.jsonl'})\n"
                   "or try the bundled samples: "
                   "tooluse_datasets.load('all', data_files=tooluse_datasets.sample_files('all'))")
MIX_LOCAL_FILES_HINT = ("Give each source's local files with {files} SOURCE=PATH... "
                        "(nestful=n.jsonl ms_swift=a.jsonl), or the bundled samples with --sample")


def _in_mix_terms(error: DataNotFoundError) -> DataNotFoundError:
    """A member's missing-upstream error with the advice of source 'all' (its first line, naming the member and
    why, kept)."""
    if error.command_hint is None:  # (a file the host answered without: no advice to replace)
        return error
    return DataNotFoundError(f"{str(error).splitlines()[0]}\n{MIX_LOCAL_FILES}", command_hint=MIX_LOCAL_FILES_HINT)


def _train_files(name: Any, files: Any) -> Any:
    """A member's files: as given, or the ``train`` files of its ``{split: files}`` dict (any other split is
    a ValueError saying what ``"all"`` takes)."""
    if not isinstance(files, dict):
        return files
    others = sorted(map(str, set(files) - {SPLIT}))
    if others:
        raise ValueError(f"source 'all' has one split, {SPLIT!r}: data_files[{name!r}] may give a source's files "
                         f"(a path, a glob, a list) or {{{SPLIT!r}: files}}, not its splits {others}; load a "
                         f"source's other splits on their own, e.g. td.load({name!r}, data_files=..., "
                         f"split={others[0]!r})")
    if not files:  # (named as the empty dict it is, not as the None its missing train files would hand on)
        raise ValueError(f"data_files[{name!r}] for source 'all' is empty ({{}}): give the source's files (a path, "
                         f"a glob, a list) or {{{SPLIT!r}: files}}, or leave {name!r} out")
    return files[SPLIT]


Builder = AllSourcesBuilder

__all__ = ["AllSourcesBuilder", "MixedSource", "MemberShard"]
