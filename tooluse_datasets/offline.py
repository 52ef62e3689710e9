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
from typing import Optional

HF_DATASETS = "hf://datasets/"
_TRUE = {"1", "ON", "YES", "TRUE"}  # huggingface_hub's and datasets' spellings of "on"

# What to do offline when no copy of a remote file was kept
OFFLINE_HINT = ("load it once online map-style (td.load(..., streaming=False) downloads the files; a stream downloads "
                "nothing), or download the files (`hf download <repo> --repo-type dataset`) and pass local paths as "
                "data_files=")


def offline_mode() -> bool:
    """Whether offline mode is on: ``HF_DATASETS_OFFLINE`` if set, else ``HF_HUB_OFFLINE`` (or
    ``TRANSFORMERS_OFFLINE``), each read now (datasets reads them when imported: a value set later counts here too)."""
    value = os.environ.get("HF_DATASETS_OFFLINE")
    if value is None:
        value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE")
    return (value or "").strip().upper() in _TRUE


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
