"""What a source folder provides: where its data lives, how its rows read, and how they map to unified.

A source (``builders/<name>/``) subclasses :class:`Source` and implements three conversions::

    read(path)            -> batches of (row number, native row or error)   file -> Python rows
    to_raw(native, ctx)   -> raw row (the source's own fields, JSON strings decoded)
    to_unified(raw, ctx)  -> unified row                                    (tooluse_datasets.schema)
    from_unified(row)     -> raw row; raw -> unified -> raw is exact

Everything else (configs, splits, sharding, Arrow encoding, error policy, streaming) is the shared
builder's job (:mod:`tooluse_datasets.builder`).
"""
from __future__ import annotations

import abc
import dataclasses
import os
from typing import Any, ClassVar, Iterator, Optional, Union

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from datasets import Features
from datasets.utils.file_utils import xopen

from .errors import InvalidJsonError, ToolUseDataError

NativeItem = tuple[int, Union[dict, ToolUseDataError]]


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
    note: str = ""

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


@dataclasses.dataclass
class RowContext:
    """Where a row comes from; errors raised by conversions get these filled in by the builder."""

    source: str
    file: str
    row: int
    split: str


class Source(abc.ABC):
    """One upstream dataset or format. Subclasses live in ``builders/<name>/``."""

    name: ClassVar[str]
    pretty_name: ClassVar[str]
    upstream: ClassVar[Optional[Upstream]] = None
    raw_features: ClassVar[Features]
    citation: ClassVar[str] = ""
    description: ClassVar[str] = ""
    # Glob patterns tried under ``data_dir=`` when no data_files are given.
    local_patterns: ClassVar[tuple[str, ...]] = ("**/*.jsonl", "**/*.json", "**/*.parquet")

    def splits(self, files_by_split: dict[str, list[str]], config: Any) -> list[tuple[str, dict[str, Any]]]:
        """Map data files to HF splits: ``[(split_name, gen_kwargs)]``; ``gen_kwargs["files"]`` is the shard
        list. Default: one split per data_files key. Sources with a split column override this."""
        return [(split, {"files": list(files)}) for split, files in files_by_split.items()]

    def read(self, path: str, config: Any, **split_kwargs: Any) -> Iterator[list[NativeItem]]:
        """Yield batches of ``(row_number, native_row)``; a row that cannot even be parsed is yielded as
        a :class:`ToolUseDataError` in place of the row, so the error policy decides.

        Default: Parquet by extension, else JSON Lines or a JSON array. Sources with a split column or
        special file shapes override it."""
        if file_suffix(path) == ".parquet":
            yield from read_parquet_rows(path, config.batch_size)
        else:
            yield from read_json_any(path, config.batch_size)

    @abc.abstractmethod
    def to_raw(self, native: dict, ctx: RowContext) -> dict:
        ...

    @abc.abstractmethod
    def to_unified(self, raw: dict, ctx: RowContext) -> dict:
        ...

    @abc.abstractmethod
    def from_unified(self, row: dict) -> dict:
        ...


# --------------------------------------------------------------------------------------------------
# File readers shared by sources. They open files with datasets' ``xopen`` so that the same code reads
# local paths, hf:// and https:// URLs, and streaming's chained URLs.
# --------------------------------------------------------------------------------------------------


def read_json_lines(path: str, batch_size: int) -> Iterator[list[NativeItem]]:
    """JSON Lines, one object per line; row numbers count lines from 0 (blank lines included)."""
    from .codec import loads

    batch: list[NativeItem] = []
    with xopen(path, "rb") as f:
        for row_number, line in enumerate(f):
            if not line.strip():
                continue
            try:
                value = loads(line)
            except ValueError as exc:
                value = InvalidJsonError(f"line is not valid JSON ({exc})", row=row_number, field="<line>")
            else:
                if not isinstance(value, dict):
                    value = InvalidJsonError(f"line holds a JSON {type(value).__name__}, not an object",
                                             row=row_number, field="<line>")
            batch.append((row_number, value))
            if len(batch) >= batch_size:
                yield batch
                batch = []
    if batch:
        yield batch


def read_json_array(path: str, batch_size: int) -> Iterator[list[NativeItem]]:
    """A JSON document holding an array of row objects (e.g. NESTFUL's icl_examples.json)."""
    from .codec import loads

    with xopen(path, "rb") as f:
        data = f.read()
    try:
        value = loads(data)
    except ValueError as exc:
        yield [(0, InvalidJsonError(f"file is not valid JSON ({exc})", field="<file>"))]
        return
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        yield [(0, InvalidJsonError("file holds neither a JSON array nor an object", field="<file>"))]
        return
    for start in range(0, len(value), batch_size):
        chunk = value[start:start + batch_size]
        yield [(start + i, row if isinstance(row, dict) else
                InvalidJsonError(f"element is a JSON {type(row).__name__}, not an object", row=start + i))
               for i, row in enumerate(chunk)]


def read_json_any(path: str, batch_size: int) -> Iterator[list[NativeItem]]:
    """``.jsonl``: JSON Lines. ``.json``: an array, or JSON Lines when the file is one object per line."""
    if file_suffix(path) == ".jsonl":
        yield from read_json_lines(path, batch_size)
        return
    with xopen(path, "rb") as f:
        head = f.read(1 << 16).lstrip()
    if head.startswith(b"["):
        yield from read_json_array(path, batch_size)
    else:
        yield from read_json_lines(path, batch_size)


def open_parquet(path: str) -> pq.ParquetFile:
    # pre_buffer=False: the default keeps compressed column chunks buffered until the read ends, which
    # makes peak memory grow with file size when streaming one large file; buffer_size: read a column
    # chunk in 1 MiB pieces instead of whole (a file written as one row group would otherwise be read
    # at once: 853 -> 373 MiB peak on the 280K-row benchmark file, no slowdown; see benchmarks/).
    return pq.ParquetFile(xopen(path, "rb"), pre_buffer=False, buffer_size=1 << 20)


def read_parquet_rows(path: str, batch_size: int, columns: Optional[list[str]] = None,
                      filter_fn=None) -> Iterator[list[NativeItem]]:
    """Parquet record batches as Python rows; ``filter_fn(record_batch) -> boolean mask`` runs in Arrow
    before any row is turned into Python objects. Row numbers count rows in the file."""
    pf = open_parquet(path)
    offset = 0
    for record_batch in pf.iter_batches(batch_size=batch_size, columns=columns):
        n = record_batch.num_rows
        if filter_fn is not None:
            mask = filter_fn(record_batch)
            indices = pc.indices_nonzero(mask).to_pylist() if mask is not None else list(range(n))
            if not indices:
                offset += n
                continue
            rows = record_batch.take(pa.array(indices)).to_pylist()
            yield [(offset + i, r) for i, r in zip(indices, rows)]
        else:
            yield [(offset + i, r) for i, r in enumerate(record_batch.to_pylist())]
        offset += n


def file_suffix(path: str) -> str:
    """Lower-case extension of a local path or URL, ignoring compression suffixes and chained URLs."""
    base = path.split("::")[0].split("?")[0]
    for ext in (".gz", ".zst", ".bz2", ".xz"):
        if base.endswith(ext):
            base = base[: -len(ext)]
    return os.path.splitext(base)[1].lower()
