"""Planning: a file cut into shards (Parquet row groups, JSON Lines byte ranges, pieces of a JSON array), shard
counts balanced for world sizes, and the smaller shards ``IterableDataset.reshard()`` asks for."""
from __future__ import annotations

import dataclasses
import os
from typing import Optional

import pyarrow.parquet as pq

from ..errors import InvalidValueError, ToolUseDataError
from . import documents  # its RUN_BYTES is read when cut_array runs, as tests and tuning set it there
from .documents import _sniffed, _streamed_array
from .files import open_text_file
from .json_text import not_json_text
from .lines import _MAX_REMEMBERED_FILES, file_version
from .parquet import open_parquet
from .paths import file_suffix, is_compressed, is_zip_archive
from .shard import DOCUMENT, LINES, PARQUET, Shard

# Shards are the unit of parallel work and of resuming: a row group of ~1,000 long conversations (~10 MB) is one
# shard on its own, smaller row groups are grouped, and a JSON Lines file is cut every 16 MiB.
DEFAULT_TARGET_BYTES = 16 << 20


def plan_file(path: str, target_bytes: int = DEFAULT_TARGET_BYTES) -> list[Shard]:
    """The shards of one file (see the package docstring). A ``.parquet`` file that is not Parquet is one
    shard that fails with a typed error naming the file when it is read, as is a zip archive left whole (one
    that cannot be read or holds no file: :func:`archive_files`)."""
    if is_zip_archive(path):
        return [Shard(path, DOCUMENT)]
    suffix = file_suffix(path)
    if suffix == ".parquet":
        try:
            with open_parquet(path) as pf:
                metadata = pf.metadata
        except InvalidValueError:
            # Not Parquet: one shard whose reading raises the same typed error, so that the error policy
            # decides (with on_error="skip" the file is one reported failure and the other files load).
            return [Shard(path, PARQUET)]
        return plan_parquet(path, metadata, target_bytes)
    if cut_at_lines(path):
        return plan_lines(path, _file_size(path), target_bytes)
    return [whole_file_shard(path)]


def cut_at_lines(path: str) -> bool:
    """Whether a file is read as byte ranges of lines (uncompressed JSON Lines), not as one shard."""
    return file_suffix(path) == ".jsonl" and not is_compressed(path)


def whole_file_shard(path: str) -> Shard:
    """One shard holding a whole JSON or JSON Lines file, read as :func:`plan_file` reads it (``.jsonl`` as
    lines, anything else as a JSON document, which falls back to lines when it is not an array)."""
    return Shard(path, LINES if file_suffix(path) == ".jsonl" else DOCUMENT)


def starts_file(shard: Shard) -> bool:
    """Whether ``shard`` begins at its file's first row (its reader meets the file's rows from the first on)."""
    if shard.kind == PARQUET:
        return not shard.row_groups or shard.row_groups[0] == 0
    return shard.start == 0


def plan_parquet(path: str, metadata: pq.FileMetaData, target_bytes: int,
                 row_groups: Optional[list[int]] = None) -> list[Shard]:
    """Row groups (of ``row_groups``, default all, in file order) grouped up to ``target_bytes`` uncompressed.
    A file without row groups is one shard that reads nothing. A split's row groups may have gaps (groups of other
    ToolMind splits): a shard reads its groups one by one, so a gap costs nothing and does not end a shard."""
    candidates = list(range(metadata.num_row_groups)) if row_groups is None else row_groups
    shards: list[Shard] = []
    group: list[int] = []
    size = 0
    for rg in candidates:
        rg_bytes = metadata.row_group(rg).total_byte_size
        if group and size + rg_bytes > target_bytes:
            shards.append(Shard(path, PARQUET, tuple(group)))
            group, size = [], 0
        group.append(rg)
        size += rg_bytes
    if group or not shards and row_groups is None:
        shards.append(Shard(path, PARQUET, tuple(group)))
    return shards


# datasets' split_dataset_by_node (and torch's DataLoader workers) give each node whole shards only when their
# number is a multiple of the world size; otherwise every node reads every row and keeps a 1/world_size slice.
# Shard counts are therefore rounded down to a multiple of the largest of these that merging can reach.
SHARD_COUNT_MULTIPLES = (12, 6, 4, 2)


def balanced(shards: list[Shard], *, gaps: bool = True) -> list[Shard]:
    """``shards`` with some adjacent shards of the same file merged (row groups in file order, byte ranges in
    file order), so that their number is a multiple of 12, 6, 4 or 2: the largest of these that the possible
    merges reach (a run of k mergeable shards can become anything from k shards to one). Merges are spread
    over the list; where no multiple is reachable, the shards stay as they are. ``gaps``: JSON Lines ranges also
    merge across the bytes between them, as a split's planned ranges may (only other splits' lines lie there);
    not ranges of part of a split's shards (``IterableDataset.shard``), where other shards' rows lie there."""
    mergeable = [i for i in range(len(shards) - 1) if _merged(shards[i], shards[i + 1], gaps) is not None]
    excess = next((len(shards) % m for m in SHARD_COUNT_MULTIPLES
                   if m <= len(shards) and len(shards) % m <= len(mergeable)), 0)
    if not excess:
        return shards
    step = len(mergeable) / excess  # >= 1: the chosen joins are distinct; two that touch chain three shards
    joins = {mergeable[int(k * step)] for k in range(excess)}
    out: list[Shard] = [shards[0]]
    for i in range(1, len(shards)):
        out[-1:] = [_merged(out[-1], shards[i], gaps)] if i - 1 in joins else [out[-1], shards[i]]
    return out


_REGION_FIELDS = frozenset({"row_groups", "start", "stop", "first_row"})


def _merged(a: Shard, b: Shard, gaps: bool) -> Optional[Shard]:
    if type(a) is not type(b) or any(getattr(a, f.name) != getattr(b, f.name) for f in dataclasses.fields(a)
                                     if f.name not in _REGION_FIELDS):
        return None  # other files, or shards a subclass tells apart (e.g. the mix's member splits)
    if a.kind == PARQUET and a.row_groups and b.row_groups and a.row_groups[-1] < b.row_groups[0]:  # (gaps: above)
        return dataclasses.replace(a, row_groups=a.row_groups + b.row_groups)
    if a.kind in (LINES, DOCUMENT) and a.stop is not None and a.stop == b.start:
        return dataclasses.replace(a, stop=b.stop)
    # A ToolMind split's JSON Lines ranges may have gaps (other splits' lines, which its reader skips unparsed, as
    # it does within a range): reading one costs less than every node converting every row.
    if gaps and a.kind == LINES and a.stop is not None and a.stop < b.start:
        return dataclasses.replace(a, stop=b.stop)
    return None


def plan_lines(path: str, size: Optional[int], target_bytes: int) -> list[Shard]:
    if not size or size <= target_bytes:
        return [Shard(path, LINES)]
    bounds = list(range(0, size, target_bytes)) + [size]
    return [Shard(path, LINES, start=a, stop=None if b == size else b) for a, b in zip(bounds, bounds[1:])]


def cut_documents(shards: list[Shard], target_bytes: int) -> list[Shard]:
    """``shards`` with every whole JSON array file (local, uncompressed) larger than ``target_bytes`` cut into
    pieces of about that size, each beginning after an element's comma, for workers to divide. Finding the cuts
    reads the array once (about 2.3 s a GB): planning a stream does not, so its first row does not wait for it.
    The cuts of a file are kept for this process (one ToolMind split after another)."""
    out: list[Shard] = []
    for shard in shards:
        whole = shard.kind == DOCUMENT and shard.start == 0 and shard.stop is None
        if whole and "://" not in shard.file and not is_compressed(shard.file) and _larger(shard.file, target_bytes):
            key = (file_version(shard.file), target_bytes)
            if key not in _ARRAY_CUTS:
                if len(_ARRAY_CUTS) >= _MAX_REMEMBERED_FILES:
                    _ARRAY_CUTS.pop(next(iter(_ARRAY_CUTS)))
                try:
                    _ARRAY_CUTS[key] = cut_array(shard.file, target_bytes)
                except ToolUseDataError:  # unreadable (permissions, a read error): reading the shard reports it
                    out.append(shard)
                    continue
            out += [dataclasses.replace(shard, start=p.start, stop=p.stop, first_row=p.first_row)
                    for p in _ARRAY_CUTS[key]]
        else:
            out.append(shard)
    return out


_ARRAY_CUTS: dict[tuple, list[Shard]] = {}

# IterableDataset.reshard() cuts byte ranges and JSON arrays into pieces of target_bytes / RESHARD_DIVISOR.
RESHARD_DIVISOR = 4


def resharded(shards: list[Shard], target_bytes: int) -> list[Shard]:
    """``shards`` cut further, for datasets' ``IterableDataset.reshard()`` (more DataLoader workers or nodes than
    shards): Parquet into single row groups, as datasets reshards Parquet; JSON Lines ranges into pieces of about
    ``target_bytes / RESHARD_DIVISOR``; a whole JSON array (local, uncompressed) into pieces of that size, which
    reads it once to find its elements. Compressed files stay whole. Balanced as plans are (:func:`balanced`), not
    across gaps: ``shards`` may be a stream's part (``IterableDataset.shard``); unless that leaves no more shards
    than ``shards``: 3 row groups, a split's 2 shards, were merged back to 2."""
    piece = max(1, target_bytes // RESHARD_DIVISOR)
    out: list[Shard] = []
    for shard in cut_documents(shards, piece):
        if shard.kind == PARQUET and len(shard.row_groups) > 1:
            out += [dataclasses.replace(shard, row_groups=(group,)) for group in shard.row_groups]
        elif shard.kind == LINES and cut_at_lines(shard.file):
            out += _cut_range(shard, piece)
        else:
            out.append(shard)
    # reshard() is asked for when workers or nodes outnumber the shards: more shards serve them, a multiple does not
    even = balanced(out, gaps=False)
    return even if len(even) > len(shards) else out


def _cut_range(shard: Shard, piece: int) -> list[Shard]:
    """A JSON Lines range in pieces of about ``piece`` bytes (each owns the lines that start in it)."""
    try:
        stop = shard.stop if shard.stop is not None else _file_size(shard.file)
    except OSError:  # not there: reading the shard reports it
        stop = None
    if stop is None or stop - shard.start <= piece:
        return [shard]
    bounds = list(range(shard.start, stop, piece)) + [stop]
    if bounds[-1] - bounds[-2] < piece // 2 and len(bounds) > 2:
        del bounds[-2]  # no sliver at the end
    cuts = [dataclasses.replace(shard, start=a, stop=b, first_row=None) for a, b in zip(bounds, bounds[1:])]
    cuts[0] = dataclasses.replace(cuts[0], first_row=shard.first_row)
    cuts[-1] = dataclasses.replace(cuts[-1], stop=shard.stop)
    return cuts


def _larger(path: str, size: int) -> bool:
    try:
        return (_file_size(path) or 0) > size
    except OSError:  # not there: reading the file reports it
        return False


def cut_array(path: str, target_bytes: int) -> list[Shard]:
    """The pieces of a JSON array file: byte ranges of about ``target_bytes``, each ending just after the comma
    of an element (the next piece's first element is its ``first_row``). A file that is not an array, or one
    element, is one piece; an array that cannot be delimited to its end (a string that never ends) is cut up
    to there, and its last piece reports the rest."""
    whole = [whole_file_shard(path)]
    with open_text_file(path) as f:
        head = _sniffed(f)
        if not head.lstrip().startswith(b"[") or not_json_text(head):
            return whole  # (binary data: one shard, which reports it)
        after_bracket = f.tell() - len(head) + head.index(b"[") + 1
        f.seek(after_bracket)
        pieces: list[Shard] = []
        start, first = 0, 0
        # Runs of a quarter of the target at most: a piece ends at the first run end past the target.
        for index, _, resume_at in _streamed_array(f, [], after_bracket, 0, None, parse=False,
                                                   run_bytes=min(documents.RUN_BYTES, max(1, target_bytes // 4))):
            # (<= 0: inside a run of elements parsed together, the array's end, or the undelimitable rest)
            if resume_at > 0 and resume_at - start >= target_bytes:
                pieces.append(Shard(path, DOCUMENT, start=start, stop=resume_at, first_row=first))
                start, first = resume_at, index + 1
    if not pieces:
        return whole
    return pieces + [Shard(path, DOCUMENT, start=start, first_row=first)]


def _file_size(path: str) -> Optional[int]:
    if "://" not in path:
        return os.path.getsize(path)
    import fsspec

    try:
        fs, inner = fsspec.core.url_to_fs(path)
        return fs.size(inner)
    except Exception:  # a server that does not report sizes: read the file as one shard
        return None
