"""Names of data files: the path users know, suffixes and stems without compression suffixes, and whether a
name says compressed or zip archive."""
from __future__ import annotations

import functools
import os

COMPRESSION_SUFFIXES = (".gz", ".zst", ".bz2", ".xz", ".lz4", ".zip")


def display_path(path: str) -> str:
    """The real file of a path as users know it (streaming chains URLs: ``gzip://x::https://.../x.gz``). A
    member of a zip archive keeps its whole chain, ``zip://<member>::<archive>``, which names both (datasets'
    own notation, which fsspec and ``data_files`` open)."""
    if "::" not in path or is_archive_member(path):
        return path
    return path.split("::")[-1]


def is_archive_member(path: str) -> bool:
    """Whether ``path`` names a file inside a zip archive: ``zip://<member>::<archive>``."""
    return path.startswith("zip://") and "::" in path


def is_zip_archive(path: str) -> bool:
    """Whether ``path`` is a zip archive itself (by its name), whose files :func:`archive_files` lists."""
    return "::" not in path and path.split("?")[0].lower().endswith(".zip")


def file_suffix(path: str) -> str:
    """Lower-case extension of a local path or URL, ignoring compression suffixes and chained URLs."""
    return os.path.splitext(_without_compression(path.split("::")[0].split("?")[0]))[1].lower()


@functools.lru_cache(maxsize=1024)  # asked once per row by the sources that name subsets after files
def file_stem(path: str) -> str:
    """``data/agent_rows.jsonl.gz`` -> ``agent_rows``: the file's name without data and compression suffixes."""
    name = path.split("::")[0][len("zip://"):] if is_archive_member(path) else display_path(path).split("?")[0]
    return os.path.splitext(_without_compression(os.path.basename(name)))[0] or "default"


def _without_compression(name: str) -> str:
    for ext in COMPRESSION_SUFFIXES:
        if name.endswith(ext):
            name = name[: -len(ext)]
    return name


def is_compressed(path: str) -> bool:
    return "::" in path or path.split("?")[0].endswith(COMPRESSION_SUFFIXES)
