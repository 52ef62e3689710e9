"""Offline mode, as datasets and huggingface_hub read it, and the copies of remote files that an earlier online load
downloaded, which serve offline (as huggingface_hub serves its cache offline):

* ``hf://datasets/<repo>@<revision>/<path>``: huggingface_hub's cache, where ``hf_hub_download`` kept it; a branch or
  tag is the commit the cache's ``refs/<branch>`` records (the one downloaded last), as huggingface_hub resolves it
  offline;
* ``http(s)://`` upstream files: datasets' downloads folder (builders download without ETag, so a copy is named by
  a hash of its URL alone).

A stream online downloads nothing: offline it reads the copies a map-style load left, or none.
"""
from __future__ import annotations

import os
from glob import has_magic
from typing import Any, Optional
from urllib.parse import unquote

from .network import is_network_error
from .shards.paths import hf_url_parts
from .source import COMMIT_ID

_TRUE = {"1", "ON", "YES", "TRUE"}  # huggingface_hub's and datasets' spellings of "on"


def offline_mode() -> bool:
    """Whether offline mode is on: ``HF_DATASETS_OFFLINE`` if set, else ``HF_HUB_OFFLINE`` (or
    ``TRANSFORMERS_OFFLINE``), each read now (datasets reads them when imported: a value set later counts here too)."""
    value = os.environ.get("HF_DATASETS_OFFLINE")
    if value is None:
        value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE")
    return (value or "").strip().upper() in _TRUE


def offline_hint(url: str) -> str:
    """What to do offline when no copy of the remote file ``url`` was kept: the download command fits where it
    lives (a Hub command cannot fetch NESTFUL's GitHub file)."""
    hf = hf_url_parts(url)
    if hf is None:
        how = f"download it (`curl -fLO {url}`) and pass its local path"
    else:
        how = f"download the files ({hub_download_command(*hf[:2])}) and pass their local paths"
    return f"load it once online map-style, which downloads the files (a stream downloads nothing), or {how}"


def hub_download_command(repo: str, revision: Optional[str]) -> str:
    """The ``hf download`` command for a repo at the revision an ``hf://`` URL names: spelled as the command takes
    it (``refs/pr/3``, which the URL escapes as ``refs%2Fpr%2F3``)."""
    at = f" --revision {unquote(revision)}" if revision else ""
    return f"`hf download {repo} --repo-type dataset{at}`"


def kept_copies_hint(urls: list[str], downloads_dir: Optional[str] = None) -> str:
    """What to add to "cannot reach" when the network is down but an earlier load kept a copy of every file in
    ``urls``: offline mode reads those copies (huggingface_hub and datasets fall back to them only when told to
    be offline). Empty when a copy is missing or offline mode is on already."""
    if not urls or offline_mode() or any(local_copy(url, downloads_dir) is None for url in urls):
        return ""
    # datasets reads HF_DATASETS_OFFLINE first: set to "0", HF_HUB_OFFLINE would not turn it on
    variable = "HF_HUB_OFFLINE" if os.environ.get("HF_DATASETS_OFFLINE") is None else "HF_DATASETS_OFFLINE"
    return f"; an earlier load kept copies of these files: set {variable}=1 to read them offline"


def _repo_cache(repo: str) -> str:
    from huggingface_hub import constants
    from huggingface_hub.file_download import repo_folder_name

    return os.path.join(constants.HF_HUB_CACHE, repo_folder_name(repo_id=repo, repo_type="dataset"))


def cached_ref(repo: str, revision: str) -> Optional[str]:
    """The commit huggingface_hub's cache records for a branch or tag of the dataset ``repo`` (None: none)."""
    try:
        with open(os.path.join(_repo_cache(repo), "refs", revision), encoding="utf-8") as f:
            return f.read().strip() or None
    except (OSError, ValueError):
        return None


def remember_ref(repo: str, revision: str, commit: str) -> None:
    """Record in huggingface_hub's cache that ``revision`` of ``repo`` was read at ``commit``, whose files a load
    has just downloaded there, as ``hf_hub_download`` records a branch it downloads at: a load reads a branch at the
    commit it resolved (so that its cache is keyed on it), which leaves no such record. Nothing is recorded where the
    cache holds no files of that commit, or cannot be written."""
    folder = _repo_cache(repo)
    if not os.path.isdir(os.path.join(folder, "snapshots", commit)):
        return
    ref = os.path.join(folder, "refs", revision)
    try:
        os.makedirs(os.path.dirname(ref), exist_ok=True)
        temporary = f"{ref}.{os.getpid()}.tmp"
        with open(temporary, "w", encoding="utf-8") as f:
            f.write(commit)
        os.replace(temporary, ref)
    except OSError:
        pass


def local_copy(url: str, downloads_dir: Optional[str] = None) -> Optional[str]:
    """The local copy of the remote file ``url`` that an online load kept (None: none; a local path is its own)."""
    hf = hf_url_parts(url)
    if hf is not None:
        from huggingface_hub import try_to_load_from_cache

        repo, revision, path = hf
        try:
            found = try_to_load_from_cache(repo, path, revision=revision or "main", repo_type="dataset")
        except ValueError:  # a path huggingface_hub refuses (a glob, "..")
            return None
        return found if isinstance(found, str) and os.path.isfile(found) else None
    if url.startswith(("http://", "https://")):
        if downloads_dir is None:
            return None
        from datasets.utils.file_utils import hash_url_to_filename

        found = os.path.join(downloads_dir, hash_url_to_filename(url))
        return found if os.path.isfile(found) else None
    return url if "://" not in url and os.path.isfile(url) else None


def offline_data_files(data_files: dict[str, list[str]], base_path: Optional[str] = None) -> dict[str, Any]:
    """Offline, ``{split: files}`` as datasets' ``DataFilesList`` (files and what its cache key holds of each), made
    without asking the Hub: an ``hf://`` file at a commit is keyed on ``(repo, commit)``, as datasets keys it online
    (so a cache prepared online serves), other files as datasets resolves them. datasets asks the Hub for every
    ``hf://`` file, which fails offline. An ``hf://`` file at a branch no load downloaded, an ``hf://`` glob (only the
    Hub lists a repo's files), an http(s) file (read where it is, never kept) and a file of another remote file system
    are ValueErrors saying why; a local path that does not exist is datasets' FileNotFoundError."""
    from datasets.data_files import DataFilesList

    out = {}
    for split, patterns in data_files.items():
        files, origins = [], []
        for pattern in patterns:
            parts = hf_url_parts(pattern)
            if parts is not None:
                repo, revision, path = parts
                if has_magic(path):
                    raise ValueError(f"offline, the hf:// glob {pattern!r} cannot be listed (only the Hub lists a "
                                     f"repo's files): name the files, or download them "
                                     f"({hub_download_command(repo, revision)}) and pass local paths")
                if revision is None or not COMMIT_ID.match(revision) or local_copy(pattern) is None:
                    raise ValueError(f"offline, no copy of {pattern} was downloaded by an earlier load "
                                     f"({offline_hint(pattern)})")
                files.append(pattern)
                origins.append((repo, revision))
            elif pattern.startswith(("http://", "https://")):
                raise ValueError(f"offline, {pattern} cannot be read: http(s) data files are read where they are, "
                                 f"no copy is kept; download it and pass its local path")
            else:
                try:
                    resolved = DataFilesList.from_patterns([pattern], base_path=base_path)
                except Exception as exc:  # another remote file system (hf://buckets/, s3://): it asked the network
                    if not is_network_error(exc):
                        raise
                    raise ValueError(f"offline, {pattern} cannot be read ({type(exc).__name__}: {exc}); pass local "
                                     f"copies of the files") from None
                files.extend(resolved)
                origins.extend(resolved.origin_metadata)
        out[split] = DataFilesList(files, origins)
    return out
