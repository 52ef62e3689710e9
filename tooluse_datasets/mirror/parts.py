"""Parquet parts: the data files one shard task writes for one config, within the mirror's size bounds.

Parquet layout, chosen for streaming (see :class:`ParquetLayout`): row groups of at most 1000 rows and 64 MB of
uncompressed Arrow data (a streaming reader holds one row group per column chunk in memory, and resuming
re-reads at most one group), files of at most 500 MB of uncompressed Arrow data (``push_to_hub``'s
``max_shard_size`` rule; more files = more streaming workers), zstd compression, content-defined chunking (Xet
deduplicates unchanged pages when a mirror is re-published) and a page index. Tables come from the converter
as Arrow batches and go to Parquet as they are.

Every shard of the input starts new parts, so what a part holds depends only on the input and the plan,
never on which worker wrote it or how many ran.
"""
from __future__ import annotations

import dataclasses
import os
import uuid
from pathlib import Path
from typing import Optional

import pyarrow as pa
import pyarrow.parquet as pq
from datasets import Features

from ..pipeline import TableGroups
from .manifest import MirrorError
from .provenance import sha256_file

# Same options datasets uses for push_to_hub (config.DEFAULT_CDC_OPTIONS): Xet-friendly page boundaries.
CDC_OPTIONS = {"min_chunk_size": 256 * 1024, "max_chunk_size": 1024 * 1024, "norm_level": 0}


@dataclasses.dataclass(frozen=True)
class ParquetLayout:
    """Row-group and file bounds (uncompressed Arrow bytes, like datasets' own size rules)."""

    row_group_rows: int = 1000
    row_group_bytes: int = 64 * 10**6
    shard_bytes: int = 500 * 10**6
    compression: str = "zstd"

    def __post_init__(self):
        if self.row_group_rows < 1 or self.row_group_bytes < 1 or self.shard_bytes < 1:
            raise MirrorError(f"row group and shard bounds must be positive: {self}")


class Attempt:
    """Files one attempt at a shard writes under names of its own (``<name>.<attempt id>``) and gives their names
    once the shard is done: a task of a stopped build converting the same shard (left running on the caller's Ray)
    neither truncates, nor appends to, nor, failing or starting late, deletes them."""

    def __init__(self) -> None:
        self.id = uuid.uuid4().hex

    def path(self, final: Path) -> Path:
        return final.with_name(f"{final.name}.{self.id}")

    def done(self, final: Path, *, missing_ok: bool = False) -> None:
        """Give ``final`` this attempt's file; ``missing_ok``: where this attempt wrote none, ``final`` goes too
        (an earlier attempt's file does not outlive it)."""
        if missing_ok and not self.path(final).exists():
            final.unlink(missing_ok=True)
            return
        os.replace(self.path(final), final)

    def drop(self, final: Path) -> None:
        self.path(final).unlink(missing_ok=True)


def make_folder_below(root: Path, folder: Path) -> None:
    """Make ``folder`` and the folders between it and ``root``, never ``root`` itself: a task of a stopped build
    whose staging folder was deleted must not make it again (without its build record it passes for a stopped
    swap)."""
    for level in [*reversed(folder.relative_to(root).parents), folder.relative_to(root)][1:]:
        (root / level).mkdir(exist_ok=True)


@dataclasses.dataclass
class WrittenPart:
    path: str  # posix path relative to the folder the parts were written under
    num_rows: int
    num_bytes: int  # uncompressed Arrow bytes
    sha256: str = ""
    file_bytes: int = 0  # size on disk


class PartWriter:
    """Writes the rows of one config from one shard as ``<stem>-000.parquet``, ``<stem>-001.parquet``, ... under
    ``root``: a new part starts before a row group would push the current one past ``layout.shard_bytes``."""

    def __init__(self, root: Path, stem: str, features: Features, layout: ParquetLayout):
        self.root = root
        self.stem = stem
        self.schema = features.arrow_schema  # carries the "huggingface" metadata: Json() survives the round trip
        self.layout = layout
        # A file holds whole row groups: one larger than a file may be would make a file that large.
        self._row_groups = TableGroups(layout.row_group_rows, min(layout.row_group_bytes, layout.shard_bytes))
        self._writer: Optional[pq.ParquetWriter] = None
        self._parts: list[WrittenPart] = []
        self._attempt = Attempt()

    def write(self, table: pa.Table) -> None:
        table = self._conform(table)
        if table.num_rows == 0:
            return
        for group in self._row_groups.add(table):
            self._write_row_group(group)

    def finish(self) -> list[WrittenPart]:
        """Close the last part and name every part; each with its sha256 and size on disk."""
        for group in self._row_groups.finish():
            self._write_row_group(group)
        self._close_part()
        for part in self._parts:
            path = self._written(part)
            part.sha256, part.file_bytes = sha256_file(path), path.stat().st_size
            self._attempt.done(self.root / part.path)
        return self._parts

    def abort(self) -> None:
        """Close and delete what was written (the shard failed)."""
        self._close_part()
        for part in self._parts:
            self._attempt.drop(self.root / part.path)
        self._parts = []

    def _written(self, part: WrittenPart) -> Path:
        return self._attempt.path(self.root / part.path)

    def _conform(self, table: pa.Table) -> pa.Table:
        table = table.replace_schema_metadata(self.schema.metadata)
        if table.schema.equals(self.schema, check_metadata=True):
            return table
        try:
            return table.select(self.schema.names).cast(self.schema)
        except (KeyError, pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise MirrorError(f"{self.stem}: a batch does not match the declared features ({exc}); "
                              f"got schema {table.schema}") from exc

    def _write_row_group(self, group: pa.Table) -> None:
        current = self._parts[-1] if self._writer is not None else None
        if current is not None and current.num_rows and current.num_bytes + group.nbytes > self.layout.shard_bytes:
            self._close_part()
            current = None
        if current is None:
            current = self._open_part()
        # One write_table call with row_group_size >= its rows = exactly one row group.
        self._writer.write_table(group, row_group_size=max(group.num_rows, 1))
        current.num_rows += group.num_rows
        current.num_bytes += group.nbytes

    def _open_part(self) -> WrittenPart:
        part = WrittenPart(f"{self.stem}-{len(self._parts):03d}.parquet", 0, 0)
        path = self._written(part)
        make_folder_below(self.root, path.parent)
        self._writer = pq.ParquetWriter(path, self.schema, compression=self.layout.compression,
                                        use_content_defined_chunking=CDC_OPTIONS, write_page_index=True)
        self._parts.append(part)
        return part

    def _close_part(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


