"""What a shard is (:class:`Shard`: one data file and a region of it, of one of three kinds) and what reading
it yields (:class:`RawBatch`)."""
from __future__ import annotations

import dataclasses
from typing import Optional, Union

from ..errors import ToolUseDataError
from .paths import display_path, file_stem

NativeItem = tuple[int, Union[dict, ToolUseDataError]]

PARQUET, LINES, DOCUMENT = "parquet", "lines", "document"


@dataclasses.dataclass(frozen=True)
class FileVersion:
    """A file's version (:mod:`.versions`): ``size`` in bytes, ``mtime_ns`` and ``ctime_ns`` (its modification and
    status-change times; None in a saved state's version, whose contents are compared instead) and ``identity``, a
    digest of the contents that tell it apart. The times only spare reading the file when it is unchanged: they
    are no part of what the version is (its equality, or the repr that keys a mirror's staged shards, which a file
    touched or copied again still serves)."""

    size: int
    mtime_ns: Optional[int] = dataclasses.field(compare=False, repr=False)
    identity: str
    ctime_ns: Optional[int] = dataclasses.field(default=None, compare=False, repr=False)


@dataclasses.dataclass(frozen=True)
class Shard:
    """A region of one data file. ``row_groups`` for Parquet; ``start``/``stop`` (bytes) for JSON Lines
    (``stop=None``: to the end; ``first_row``: the row number of the line at ``start``, when the planner
    knows it); a ``DOCUMENT`` shard is the whole file. ``label``: the file's name in row ids and subsets, decided
    where the load's files are planned (:func:`~.paths.file_labels`; None: its stem), so every reader of the
    shard (a worker, a resumed stream, another node) names its rows alike. ``version``: the file's version it was
    planned from, checked when it is read (:mod:`.versions`; None: not checked)."""

    file: str
    kind: str
    row_groups: tuple[int, ...] = ()
    start: int = 0
    stop: Optional[int] = None
    first_row: Optional[int] = None
    label: Optional[str] = None
    version: Optional["FileVersion"] = None

    @property
    def file_label(self) -> str:
        """The file's name in row ids and subsets: ``label``, else the file's stem."""
        return self.label if self.label is not None else file_stem(self.file)

    @property
    def name(self) -> str:
        """Human-readable, for progress and error messages."""
        where = display_path(self.file)
        if self.kind == PARQUET and self.row_groups:
            groups = self.row_groups
            contiguous = groups[-1] - groups[0] == len(groups) - 1
            span = f"{groups[0]}-{groups[-1]}" if contiguous and len(groups) > 1 else ", ".join(map(str, groups))
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
