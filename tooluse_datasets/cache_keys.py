"""What a prepared split's cache is keyed on beyond datasets' own key, so that it is never served stale:

* the commit an upstream branch or tag points at (ToolMind's unpinned ``main``, ``revision="main"`` of the Hub
  or of NESTFUL's GitHub repository, ``hf://datasets/<repo>@main/...`` data files): a cache keyed on the branch
  name would serve the first commit's rows for ever after the branch moved on;
* the files of a local folder the rows come from (``data_dir``, NESTFUL's ``executable_functions``): their names,
  sizes, modification and status-change times and inodes, which datasets' key does not hold;
* the sizes, status-change times and inodes of local ``data_files``: datasets keys a local file on its path and
  modification time only, so a file replaced by another with its time kept (``cp -p``, ``rsync -a``, an edit
  followed by ``touch -r``) was served from the cache of its old rows. A write always sets the status-change time
  (``st_ctime``), which no one can set back (git's index checks it for the same reason);
* the size and time of ``http(s)://`` data files: datasets keys them on their ETag only, and a server that sends
  none (Python's ``http.server``, many plain file servers) left nothing of the file in the key.

Within one load (``one_head_commit_per_load``) each branch is looked up once, so the builders of that load read
one commit.
"""
from __future__ import annotations

import contextlib
import contextvars
import hashlib
import logging
import os
from pathlib import Path
from typing import Any, Iterable, Optional

from fsspec.core import url_to_fs

from .errors import DataNotFoundError
from .network import failure_text
from .offline import cached_ref, offline_mode
from .shards.paths import COMPRESSION_SUFFIXES, HF_DATASETS, hf_url_parts
from .source import COMMIT_ID, Upstream, head_commit

logger = logging.getLogger("tooluse_datasets")

# (repo, branch or tag) -> commit, within one load (loading.load makes its builder twice: to see what is cached,
# then to prepare the splits read)
_LOAD_HEAD_COMMITS: contextvars.ContextVar[Optional[dict]] = contextvars.ContextVar("load_head_commits",
                                                                                      default=None)


@contextlib.contextmanager
def one_head_commit_per_load():
    """Builders made inside resolve each upstream branch once, to one commit."""
    token = _LOAD_HEAD_COMMITS.set({})
    try:
        yield
    finally:
        _LOAD_HEAD_COMMITS.reset(token)


def branch_commit(repo: str, revision: str, host: str = "hf") -> Optional[str]:
    """The commit a branch or tag of a Hub dataset repo (``host="hf"``) or a GitHub repository
    (``host="github"``) points at now; None where it cannot be known (offline mode, no network, no such repo or
    revision: reading the files then reports why)."""
    if offline_mode():
        return None
    known = _LOAD_HEAD_COMMITS.get()
    if known is not None and (host, repo, revision) in known:
        return known[host, repo, revision]
    try:
        commit = head_commit(host, repo, revision)
    except Exception as exc:  # huggingface_hub raises its own types when offline or not found
        logger.info("cannot resolve %s of %s to a commit: %s: %s", revision, repo, type(exc).__name__, exc)
        return None
    if not (isinstance(commit, str) and COMMIT_ID.match(commit)):
        return None
    if known is not None:
        known[host, repo, revision] = commit
    return commit


def upstream_commits(upstreams: dict[str, Upstream], revision: Optional[str]) -> tuple[dict[str, str], bool]:
    """``({source: commit}, unresolved)``: the commit each upstream (Hub or GitHub) read at a branch or tag
    (``revision``, else its own pin, else ``main``) points at now; ``unresolved``: one of them could not be
    resolved."""
    commits: dict[str, str] = {}
    unresolved = False
    for name, up in upstreams.items():
        wanted = _wanted_revision(up, revision)
        if wanted is None:
            continue
        commit = branch_commit(up.repo, wanted, up.host)
        if commit is None:
            unresolved = True
            continue
        logger.info("%s: reading %s at commit %s (%s)", name, up.repo, commit, wanted)
        commits[name] = commit
    return commits, unresolved


def cached_upstream_commits(upstreams: dict[str, Upstream], revision: Optional[str]) -> Optional[dict[str, str]]:
    """Offline: the commit huggingface_hub's cache records for each upstream read at a branch or tag (the one an
    online load downloaded last), as huggingface_hub resolves a branch offline; None if one of them has none (a
    GitHub branch has no such record)."""
    commits: dict[str, str] = {}
    for name, up in upstreams.items():
        wanted = _wanted_revision(up, revision)
        if wanted is None:
            continue
        commit = cached_ref(up.repo, wanted) if up.host == "hf" else None
        if commit is None or not COMMIT_ID.match(commit):
            return None
        commits[name] = commit
    return commits


def _wanted_revision(up: Upstream, revision: Optional[str]) -> Optional[str]:
    """The branch or tag an upstream is read at (``revision``, else its pin, else ``main``); None: a commit."""
    wanted = revision or up.revision or "main"
    if up.host not in ("hf", "github") or COMMIT_ID.match(wanted):
        return None
    return wanted


def commits_digest(commits: dict[str, str]) -> str:
    """The part of a cache key that names the upstream commits read."""
    pins = ",".join(f"{name}@{commit}" for name, commit in sorted(commits.items()))
    return hashlib.sha1(pins.encode()).hexdigest()[:16]


def hf_files_at_commits(data_files: Any) -> Any:
    """``data_files`` with each ``hf://datasets/<repo>[@<branch or tag>]/<path>`` at the commit the branch or tag
    points at now. A URL at a commit, a revision spelled with escapes (``refs%2Fpr%2F1``), and any URL whose
    revision cannot be resolved (offline) stay as given."""
    if isinstance(data_files, dict):
        return {key: hf_files_at_commits(files) for key, files in data_files.items()}
    if isinstance(data_files, (list, tuple)):
        return [hf_files_at_commits(f) for f in data_files]
    parts = hf_url_parts(data_files)
    if parts is None:
        return data_files
    repo, revision, path = parts
    revision = revision or "main"
    if COMMIT_ID.match(revision) or "%" in revision:
        return data_files
    # offline, the commit huggingface_hub's cache records for the branch (the one an online load downloaded)
    commit = cached_ref(repo, revision) if offline_mode() else branch_commit(repo, revision)
    if commit is None or not COMMIT_ID.match(commit):
        return data_files
    return f"{HF_DATASETS}{repo}@{commit}/{path}"


def branches_read(given: Any, at_commits: Any) -> dict[tuple[str, str], str]:
    """``{(repo, branch or tag): commit}`` of the ``hf://`` data files that :func:`hf_files_at_commits` turned from
    ``given`` into ``at_commits`` (the same shape)."""
    if isinstance(given, dict):
        return {k: v for key in given for k, v in branches_read(given[key], at_commits[key]).items()}
    if isinstance(given, (list, tuple)):
        return {k: v for g, a in zip(given, at_commits) for k, v in branches_read(g, a).items()}
    before, after = hf_url_parts(given), hf_url_parts(at_commits)
    if before is None or after is None or before[1] == after[1]:
        return {}
    return {(before[0], before[1] or "main"): after[1]}


# Files a data folder may hold that are no rows: LLaMA-Factory's dataset registry (an export folder has one beside
# its JSON Lines files) and datasets' own metadata (a cache or save_to_disk folder).
NOT_DATA_FILES = frozenset({"dataset_info.json", "dataset_infos.json", "dataset_dict.json"})


def data_dir_files(data_dir: str, patterns: Iterable[str], not_data: frozenset[str] = frozenset()) -> list[str]:
    """The data files of a ``data_dir`` folder: those matching the source's patterns (also compressed, and zip
    archives, whose files are read as the source reads them), sorted; not the files of
    :data:`NOT_DATA_FILES` or named in ``not_data`` (the source's own, ``Source.local_not_data``), nor those under
    a name starting with ``.`` or ``__`` (a mirror's manifest, a cache folder, ``__pycache__``), as datasets leaves
    them out of a data folder."""
    base = Path(data_dir)
    # Compressed and zipped files too (a.jsonl.gz, b.zip), as datasets reads a data_dir: they were left out unsaid
    patterns = [*patterns, *(f"{pattern}{suffix}" for pattern in patterns for suffix in COMPRESSION_SUFFIXES
                             if suffix != ".zip"), "**/*.zip"]
    found = {p for pattern in patterns for p in base.glob(pattern) if p.is_file()}
    return sorted(str(p) for p in found if p.name not in NOT_DATA_FILES and p.name not in not_data
                  and not any(part.startswith((".", "__")) for part in p.relative_to(base).parts))


def files_digest(paths: Iterable[str]) -> str:
    """A digest of files' names, sizes, modification and status-change times and inodes; unreadable ones end it
    (the reader says why)."""
    digest = hashlib.sha1()
    for path in paths:
        stamp = _local_stamp(path)
        if stamp is None:
            break
        digest.update(f"{stamp}\n".encode(errors="surrogateescape"))  # (a name that is not UTF-8 keeps its bytes)
    return digest.hexdigest()[:16]


def _local_stamp(path: Any) -> Optional[str]:
    """A local file's name, size, modification and status-change times and inode; None if it cannot be looked
    at. The status-change time tells a file rewritten with its size and modification time kept: any write sets
    it, and it cannot be set back (a chmod sets it too: that file is prepared again, never served stale). The
    inode tells a link pointed at another file: the times are kept to a clock tick (about 4 ms on Linux), so two
    files of one size written in the same tick with their modification time set alike had the same stamp."""
    try:
        st = os.stat(path)
    except (OSError, TypeError, ValueError):
        return None
    return f"{path}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_ino}"


def data_files_digest(data_files: Any) -> Optional[str]:
    """A digest of what datasets' key leaves out of resolved ``data_files`` (a dict of split -> paths), in their
    order: a local file's size and times (modification and status change), an http(s) file's size, time and ETag
    (one metadata request each, none offline; one that fails is a DataNotFoundError); None: no such file
    (``hf://`` and other file systems are keyed by datasets on their commit or ETag). A local file that cannot be
    looked at is left out: reading it reports why."""
    stamps = [stamp for files in (data_files or {}).values() for path in files
              if (stamp := _file_stamp(str(path).rsplit("::", 1)[-1])) is not None]  # a zip:// file: its archive
    return hashlib.sha1("\n".join(stamps).encode(errors="surrogateescape")).hexdigest()[:16] if stamps else None


def _file_stamp(path: str) -> Optional[str]:
    if path.startswith(("http://", "https://")):
        if offline_mode():
            return None
        try:
            fs, fs_path = url_to_fs(path)
            info = fs.info(fs_path)
        except Exception as exc:
            # datasets has just looked at the file: this look failing is a flaky server. Left out, the file would
            # be keyed as in every load whose look failed, and served the rows it held at the first of them.
            raise DataNotFoundError(f"cannot ask the server of {path} for its size, time and ETag (the cache key): "
                                    f"{failure_text(exc.__cause__ or exc)}; try again") from exc
        return f"{path}\0{info.get('size')}\0{info.get('Last-Modified')}\0{info.get('ETag')}"
    return None if "://" in path else _local_stamp(path)


def tree_digest(folder: Any) -> str:
    """:func:`files_digest` of every file under ``folder``."""
    def walked() -> Iterable[str]:
        for root, dirs, files in os.walk(os.fspath(folder)):
            dirs.sort()
            for name in sorted(files):
                yield os.path.join(root, name)

    return files_digest(walked())


def data_dir_digest(data_dir: Any, patterns: Iterable[str], not_data: frozenset[str] = frozenset()) -> str:
    """:func:`files_digest` of the data files a ``data_dir`` load reads: any file edited, added or removed
    gives another."""
    try:
        paths = data_dir_files(os.fspath(data_dir), patterns, not_data)
    except (OSError, TypeError, ValueError):  # not a readable folder: planning the splits says so
        paths = []
    return files_digest(paths)
