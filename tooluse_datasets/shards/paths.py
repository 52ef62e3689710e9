"""Names of data files: the path users know, suffixes and stems without compression suffixes, and whether a
name says compressed or zip archive."""
from __future__ import annotations

import functools
import hashlib
import os
import re
from collections import Counter
from typing import Iterable, Optional

COMPRESSION_SUFFIXES = (".gz", ".zst", ".bz2", ".xz", ".lz4", ".zip")
HF_DATASETS = "hf://datasets/"
# A file huggingface_hub downloaded: <cache>/datasets--<owner>--<name>/snapshots/<commit>/<path in the repo> (repo
# ids cannot hold "--").
_HUB_CACHE_FILE = re.compile(r"(?:^|/)datasets--([^/]+)/snapshots/[^/]+/(.+)$")


def hf_url_parts(url: str) -> Optional[tuple[str, Optional[str], str]]:
    """``(repo, revision or None, path)`` of ``hf://datasets/<owner>/<name>[@<revision>]/<path>`` (or of a repo
    without owner, ``<name>@<revision>/<path>``); None for anything else."""
    if not isinstance(url, str) or not url.startswith(HF_DATASETS):
        return None
    parts = url[len(HF_DATASETS):].split("/")
    head = 1 if "@" in parts[0] else 2
    if len(parts) <= head:
        return None
    repo, _, revision = "/".join(parts[:head]).partition("@")
    return repo, revision or None, "/".join(parts[head:])


def without_query(path: str) -> str:
    """A URL without its query (``https://host/x.jsonl?download=1`` -> ``.../x.jsonl``); a local path as it is, a
    ``?`` in a file's name included (``p?1.parquet`` was taken for ``p``: no suffix, its Parquet read as JSON)."""
    return path.split("?")[0] if "://" in path else path


def display_path(path: str) -> str:
    """The real file of a path as users know it (streaming chains URLs: ``gzip://x::https://.../x.gz``). A
    member of a zip archive keeps its whole chain, ``zip://<member>::<archive>``, which names both (datasets'
    own notation, which fsspec and ``data_files`` open). A name that is not UTF-8 as :func:`name_as_text` gives
    it: errors, reports and listings that name the file are written as UTF-8."""
    if "::" not in path or is_archive_member(path):
        return name_as_text(path)
    return name_as_text(path.split("::")[-1])


def literal_folder_escaped(pattern: str, base: Optional[str] = None) -> str:
    """A local glob whose leading folders exist under names that hold ``[``, ``*`` or ``?`` (``/tmp/run[1]/*.jsonl``)
    with those folders escaped, so that only the rest is a pattern: read as a pattern, such a folder name matched
    no folder (``[1]`` is the character ``1``). As for a file of such a name, the existing path wins. A relative
    pattern is looked up under ``base`` where given (data_dir). Any other pattern comes back as it is."""
    import glob

    head, tail = os.path.split(pattern)
    if not glob.has_magic(head):
        return pattern
    folder = head
    while folder and not os.path.isdir(os.path.join(base or "", folder)):
        parent = os.path.dirname(folder)
        if parent == folder:
            return pattern
        folder = parent
    if not folder or not glob.has_magic(folder):
        return pattern  # (no leading folder of a name with magic exists: a pattern over folders, as given)
    return glob.escape(folder) + pattern[len(folder):]


def resume_name(path: str) -> str:
    """A file's name in a saved stream state: its base name, so data moved to another folder resumes; a zip
    archive's member as ``<archive's base name>/<member>``, since the archive's other files are other files."""
    if is_archive_member(path):
        member, archive = path[len("zip://"):].split("::", 1)
        return f"{os.path.basename(display_path(archive))}/{member.lstrip('/')}"
    return os.path.basename(display_path(path))


def is_archive_member(path: str) -> bool:
    """Whether ``path`` names a file inside a zip archive: ``zip://<member>::<archive>``."""
    return path.startswith("zip://") and "::" in path


def is_zip_archive(path: str) -> bool:
    """Whether ``path`` is a zip archive itself (by its name), whose files :func:`archive_files` lists."""
    return "::" not in path and without_query(path).lower().endswith(".zip")


def file_suffix(path: str) -> str:
    """Lower-case extension of a local path or URL, ignoring compression suffixes and chained URLs."""
    return os.path.splitext(_without_compression(without_query(path.split("::")[0])))[1].lower()


@functools.lru_cache(maxsize=1024)  # asked once per row by the sources that name subsets after files
def file_stem(path: str) -> str:
    """``data/agent_rows.jsonl.gz`` -> ``agent_rows``: the file's name without data and compression suffixes."""
    name = path.split("::")[0][len("zip://"):] if is_archive_member(path) else without_query(display_path(path))
    return name_as_text(os.path.splitext(_without_compression(os.path.basename(name)))[0]) or "default"


def name_as_text(name: str) -> str:
    """A name from a file's path as text: the bytes of a name that is not UTF-8 (``caf\xe9.jsonl``, which Python
    reads as lone surrogates) as ``\xe9`` escapes. Row ids and subsets hold the name, and Arrow and JSON writers
    refuse lone surrogates: every row of such a file failed to be stored."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def file_labels(paths: Iterable[str]) -> dict[str, str]:
    """The name each file of one load has in row ids and subsets (ms-swift, LLaMA-Factory, ToolMind): its stem,
    unless another file of the load shares that stem (``a/data.jsonl`` and ``b/data.jsonl``, one name in two
    zip archives or two hf:// repo folders). Those are named by their path below the folder they share, without
    data and compression suffixes (``a/data``, ``b/data``); where that still leaves two names alike, their path
    below it as written, then (paths differing in a URL query alone) with a digest of the path. So the names
    are unique and depend on the paths alone, not on their order. A path given twice (one file feeding two
    splits) is one file, with one name."""
    files = list(dict.fromkeys(paths))
    shown = {path: _named_path(path) for path in files}
    stems = Counter(file_stem(where) for where in set(shown.values()))
    labels = {path: file_stem(where) for path, where in shown.items()}
    sharing = [path for path in files if stems[labels[path]] > 1]
    if not sharing:
        return labels
    labels.update(_below_common_folder({path: shown[path] for path in sharing}, keep_suffixes=False))
    repeated = _repeated(labels, shown)
    if repeated:  # e.g. data.json and data.jsonl in one folder
        labels.update(_below_common_folder({path: shown[path] for path in repeated}, keep_suffixes=True))
        repeated = _repeated(labels, shown)
    for path in repeated:  # URLs that differ in their query alone
        labels[path] += "-" + hashlib.sha1(shown[path].encode(errors="surrogatepass")).hexdigest()[:8]
    return labels


def _named_path(path: str) -> str:
    """The path a file's name is taken from: a zip archive's member as a file in a folder named after the
    archive (``<archive>/<member>``); a Hub file as ``hf://datasets/<repo>/<path>``, whether streamed from its URL
    or downloaded into huggingface_hub's cache (as prepare does), and without the revision, so that the name does
    not change with the commit a branch points at."""
    if is_archive_member(path):
        member, archive = path[len("zip://"):].split("::", 1)
        return f"{_named_path(archive)}/{member.lstrip('/')}"
    where = display_path(path)
    hub_file = hf_url_parts(where)
    if hub_file is not None:
        repo, _revision, file_path = hub_file
        return f"{HF_DATASETS}{repo}/{file_path}"
    cached = _HUB_CACHE_FILE.search(where)
    if cached:
        return f"{HF_DATASETS}{cached.group(1).replace('--', '/')}/{cached.group(2)}"
    return where


def _below_common_folder(paths: dict[str, str], keep_suffixes: bool) -> dict[str, str]:
    """Each path's part below the deepest folder all of ``paths`` (file -> named path) share; without data and
    compression suffixes (in folder names too: a zip archive's) unless ``keep_suffixes``."""
    parts = {path: without_query(where).split("/") if not keep_suffixes else where.split("/")
             for path, where in paths.items()}
    common = len(os.path.commonprefix([p[:-1] for p in parts.values()]))
    out = {}
    for path, p in parts.items():
        below = p[common:]
        if not keep_suffixes:
            below = [_without_compression(folder) for folder in below[:-1]] + [file_stem(paths[path])]
        out[path] = name_as_text("/".join(below).lstrip("/"))  # a local path beside a URL: no leading "/"
    return out


def _repeated(labels: dict[str, str], shown: dict[str, str]) -> list[str]:
    """The files whose label another file (another named path) has too."""
    holders: dict[str, set] = {}
    for path, label in labels.items():
        holders.setdefault(label, set()).add(shown[path])
    return [path for path, label in labels.items() if len(holders[label]) > 1]


def _without_compression(name: str) -> str:
    for ext in COMPRESSION_SUFFIXES:
        if name.endswith(ext):
            name = name[: -len(ext)]
    return name


def is_compressed(path: str) -> bool:
    return "::" in path or without_query(path).endswith(COMPRESSION_SUFFIXES)


def file_identity(path: str | os.PathLike) -> Optional[tuple[int, int]]:
    """A local file's device and inode, the same whatever name it is given by (a symbolic or hard link, ``./a``);
    None if it cannot be read."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


def output_among_inputs(inputs: Iterable[str], outputs: dict[str, Iterable]) -> Optional[tuple[str, str, str]]:
    """The first output (option -> the paths it writes) that is one of the local files ``inputs``: (option, path,
    input). Compared by real path and, for files that exist, by device and inode (a hard link has a real path of
    its own). Written, such an output replaced an input (the rows were lost) or was read back as rows."""
    local = [os.fspath(p) for p in inputs if "://" not in os.fspath(p) and "::" not in os.fspath(p)]
    by_path = {os.path.realpath(p): p for p in local}
    by_identity = {identity: p for p in local if (identity := file_identity(p)) is not None}
    for option, paths in outputs.items():
        for path in paths:
            if not path:
                continue
            found = by_path.get(os.path.realpath(path)) or by_identity.get(file_identity(path))
            if found is not None:
                return option, os.fspath(path), found
    return None


def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether two names name one file: the same real path (also for a file not made yet) or, for files that
    exist, the same device and inode (a hard link has a real path of its own)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    identity = file_identity(a)
    return identity is not None and identity == file_identity(b)
