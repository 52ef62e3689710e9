"""Where the executable functions come from: a folder the user names, or the pinned upstream revision.

The pinned folder is ``data_v2/executable_functions/`` of GitHub ``IBM/NESTFUL`` at the revision the data
is pinned to (4,350 files). It is fetched the way the data is: through datasets' download manager, as
GitHub's archive of that commit, cached and extracted once (``~/.cache/huggingface/datasets/downloads``
unless ``cache_dir`` says otherwise). This module only locates and checks files; nothing here imports them.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Optional

from tooluse_datasets.errors import DataNotFoundError, json_kind
from tooluse_datasets.offline import local_copy, offline_mode

from ..upstream import UPSTREAM

FUNCTIONS_PATH = "data_v2/executable_functions"
REQUIRED_FILES = ("basic_functions.py", "func_file_map.json")
# sha256 of func_file_map.json at the pinned revision (4,416 names -> 4,344 files).
FUNC_FILE_MAP_SHA256 = "416bac2b1ac39a84eb159cdfbb0373bf62681e368b9eac10ed33aa8a8f157bf0"


def archive_url(revision: Optional[str] = None) -> str:
    """GitHub's tar.gz of the whole repository at ``revision`` (default: the pinned one)."""
    return f"https://github.com/{UPSTREAM.repo}/archive/{revision or UPSTREAM.revision}.tar.gz"


def one_folder(executable_functions: object, older: object, older_name: str) -> object:
    """The functions folder a call names as ``executable_functions`` (the name ``load``'s option and the commands'
    ``--executable-functions`` give it) or by the function's older keyword ``older_name`` (``functions_dir``...):
    both is a TypeError, as the two could name different folders."""
    if executable_functions is not None and older is not None:
        raise TypeError(f"the functions folder is given twice, as executable_functions= and {older_name}=: give one")
    return older if executable_functions is None else executable_functions


def check_functions_dir(path: str | os.PathLike) -> Path:
    """``path`` if it is an executable_functions folder, else a DataNotFoundError saying what is missing or
    broken. Only ``func_file_map.json`` is read, and ``basic_functions.py`` as bytes (the functions' code is never
    run here): a folder the sandbox could not read would otherwise fail every row as if the rows were at
    fault."""
    if not isinstance(path, (str, os.PathLike)):  # (pathlib's own TypeError names neither the option nor the value)
        raise TypeError(f"the executable_functions folder must be a path (str or os.PathLike), got "
                        f"{type(path).__name__} {path!r:.80}")
    folder = Path(path).expanduser().resolve()
    missing = [name for name in REQUIRED_FILES if not (folder / name).is_file()]
    if missing:
        raise DataNotFoundError(f"nestful: {folder} is not a NESTFUL executable_functions folder (missing "
                                f"{', '.join(missing)}); point at data_v2/executable_functions of IBM/NESTFUL")
    for name, problem in (("func_file_map.json", _file_map_problem(folder / "func_file_map.json")),
                          ("basic_functions.py", _text_problem(folder / "basic_functions.py"))):
        if problem:
            raise DataNotFoundError(f"nestful: {folder} is not a usable NESTFUL executable_functions folder: {name} "
                                    f"{problem}; point at data_v2/executable_functions of IBM/NESTFUL")
    return folder


def _text_problem(path: Path) -> Optional[str]:
    """Why a file the sandbox reads as UTF-8 text cannot be read so (it is read here as bytes, never run)."""
    try:
        path.read_bytes().decode("utf-8")
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    except UnicodeDecodeError as exc:
        return f"is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at {exc.start})"
    return None


def _file_map_problem(path: Path) -> Optional[str]:
    """What is wrong with a ``func_file_map.json`` as the sandbox reads it (UTF-8 JSON, with the stdlib: an
    object of function name -> file name), or None."""
    problem = _text_problem(path)
    if problem:
        return problem
    try:
        file_map = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as exc:
        return f"is not JSON ({exc})" if not isinstance(exc, RecursionError) else "is nested too deeply to read"
    if not isinstance(file_map, dict):
        return f"holds a JSON {json_kind(file_map)}, not an object of function name -> file name"
    for name, file_name in file_map.items():
        if not isinstance(file_name, str):
            return f"maps {name!r} to {file_name!r:.60}, not a file name"
    return None


def executable_functions(path: str | os.PathLike | None = None, *, revision: Optional[str] = None,
                         archive: Optional[str] = None, cache_dir: Optional[str] = None) -> Path:
    """The executable_functions folder to run calls with.

    Args:
        path: a local folder (``.../data_v2/executable_functions``); used as it is.
        revision: upstream commit to fetch instead of the pinned one (no checksum is known for it).
        archive: the archive to fetch instead of GitHub's (a local ``.tar.gz`` or URL of the same layout:
            ``<top>/data_v2/executable_functions/``), e.g. a mirror.
        cache_dir: datasets cache folder for the download and its extraction.
    """
    if path is not None:
        return check_functions_dir(path)
    url = archive or archive_url(revision)
    remote = "://" in url and not url.startswith("file://")
    from datasets import DownloadConfig, DownloadManager, config

    # An archive at a URL is taken as immutable (the pinned one is a commit's, its map checked below): without
    # ETags a download made once is used again without a request, and offline that copy serves.
    if remote and offline_mode() and local_copy(url, cache_dir or str(config.DOWNLOADED_DATASETS_PATH)) is None:
        raise _offline(url, "offline mode is on, and no earlier load downloaded it")
    manager = DownloadManager(dataset_name="nestful",
                              download_config=DownloadConfig(cache_dir=cache_dir, use_etag=False))
    try:
        extracted = Path(manager.download_and_extract(url))
    except (ConnectionError, OSError, TimeoutError) as exc:
        raise _offline(url, f"{type(exc).__name__}: {exc}") from exc
    found = sorted(p for p in extracted.glob(f"*/{FUNCTIONS_PATH}") if p.is_dir())
    if not found and (extracted / FUNCTIONS_PATH).is_dir():
        found = [extracted / FUNCTIONS_PATH]
    if len(found) != 1:
        raise DataNotFoundError(f"nestful: {url} holds no single {FUNCTIONS_PATH} folder")
    folder = check_functions_dir(found[0])
    if revision is None or revision == UPSTREAM.revision:
        digest = hashlib.sha256((folder / "func_file_map.json").read_bytes()).hexdigest()
        if digest != FUNC_FILE_MAP_SHA256:
            # a kept download is read again by every later load: say which files to delete, or the error repeats
            kept = local_copy(url, cache_dir or str(config.DOWNLOADED_DATASETS_PATH)) if remote else None
            redo = (f"; delete the copy an earlier load kept ({kept}) and its extraction ({extracted}), then load "
                    f"again online" if kept else "")
            raise _offline(url, f"{folder}/func_file_map.json is not the pinned one (sha256 {digest}, expected "
                                f"{FUNC_FILE_MAP_SHA256}){redo}",
                           "the executable functions are not the pinned revision's")
    return folder


def _offline(url: str, why: str, what: str = "cannot fetch the executable functions") -> DataNotFoundError:
    return DataNotFoundError(
        f"nestful: {what} ({url}): {why}.\n"
        f"Point at a local copy of data_v2/executable_functions instead, e.g.\n"
        f"    executable_functions='path/to/NESTFUL/data_v2/executable_functions'\n"
        f"    (command line: verify and score --executable-functions DIR; export, mirror and the other commands "
        f"--option executable_functions=DIR)",
        command_hint="Point at a local copy of data_v2/executable_functions: --executable-functions DIR (verify, "
                     "score) or --option executable_functions=DIR (the other commands)")
