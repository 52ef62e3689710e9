"""Where a mirror's data came from: the upstream pin (resolved to a commit when it is not pinned), sha256 and
size of every input file, checked against the checksums a source pins, and the package versions.

:func:`hash_file` is the package's one chunked file hasher (mirror data files, inputs, publish's git blob ids).
"""
from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
from importlib import resources
from pathlib import Path
from typing import IO, TYPE_CHECKING, Callable, Optional, Union

from ..cache_keys import branches_read, hf_files_at_commits, one_head_commit_per_load
from ..errors import DataNotFoundError
from ..offline import cached_ref, local_copy, offline_mode
from ..shards.paths import hf_url_parts, name_as_text
from ..source import COMMIT_ID, head_commit
from .manifest import SAMPLE_PREFIX, InputFile, MirrorError, Provenance

if TYPE_CHECKING:
    from ..source import UpstreamFile

logger = logging.getLogger("tooluse_datasets")

CHUNK_BYTES = 1 << 20


def hash_file(source: Union[str, Path, IO[bytes]], digest: Optional["hashlib._Hash"] = None) -> tuple[str, int]:
    """``(hex digest, size)`` of a file read in 1 MiB chunks (sha256 unless another ``digest`` object is
    given, e.g. git's sha1 already fed with its blob header). ``source``: a path or an open binary file."""
    digest = digest if digest is not None else hashlib.sha256()
    size = 0
    if isinstance(source, (str, Path)):
        with open(source, "rb") as f:
            return hash_file(f, digest)
    for chunk in iter(lambda: source.read(CHUNK_BYTES), b""):
        digest.update(chunk)
        size += len(chunk)
    return digest.hexdigest(), size


def sha256_file(path: Union[str, Path]) -> str:
    return hash_file(path)[0]


def display_input(path: str) -> str:
    """A name for an input that does not depend on the machine: URLs as they are, bundled samples relative
    to the package, other local files by file name (their sha256 identifies them)."""
    if "://" in path:
        return path
    builders_root = Path(str(resources.files("tooluse_datasets.builders"))).resolve()
    resolved = Path(path).resolve()
    if resolved.is_relative_to(builders_root):
        return SAMPLE_PREFIX + resolved.relative_to(builders_root).as_posix()
    # The name given, not a link's target: huggingface_hub's snapshot files link to blobs named by their hash,
    # and the rows' ids and subsets name the file as given.
    return name_as_text(Path(os.path.abspath(path)).name)  # (the manifest, card and build file are UTF-8)


def fingerprint_input(path: str) -> InputFile:
    """sha256 and size of an input file, local or remote (``hf://`` files: the Hub's LFS sha256 when it has one,
    so a large upstream file is not downloaded twice)."""
    if "://" not in path:
        try:
            sha, size = hash_file(path)
        except FileNotFoundError:  # listed when the build was planned: named as a missing input, not Python's error
            raise DataNotFoundError(f"{name_as_text(path)}: the input file is not there any more: it was deleted or "
                                    f"moved since the mirror was planned; nothing was built: build it again with the "
                                    f"file where it is now") from None
        return InputFile(display_input(path), sha, size)
    if offline_mode():
        from datasets import config

        # the Hub and other hosts cannot be asked: the copy an earlier load kept is what the rows are read from
        kept = local_copy(path, str(config.DOWNLOADED_DATASETS_PATH))
        if kept is not None:
            sha, size = hash_file(kept)
            return InputFile(path, sha, size)
    if path.startswith("hf://"):
        from huggingface_hub import HfFileSystem

        info = HfFileSystem().info(path)
        lfs = info.get("lfs") or {}
        if lfs.get("sha256"):
            return InputFile(path, lfs["sha256"], int(info["size"]))
    import fsspec

    with fsspec.open(path, "rb") as f:
        sha, size = hash_file(f)
    return InputFile(path, sha, size)


def check_pinned_checksums(pinned: list[tuple[str, "UpstreamFile"]], inputs: dict[str, InputFile]) -> None:
    """Every pinned upstream file (``(location, UpstreamFile)``) whose ``sha256``/``num_bytes`` is set must
    match the fingerprint of what was read from that location; a mismatch means the data changed at a pinned
    revision (or a download was cut), and nothing is built from it."""
    for location, upstream_file in pinned:
        got = inputs.get(location)
        if got is None:
            continue
        if upstream_file.sha256 and got.sha256 != upstream_file.sha256:
            raise MirrorError(f"upstream file {location} has sha256 {got.sha256}, but {upstream_file.sha256} is "
                              f"pinned: the upstream data changed at a pinned revision")
        if upstream_file.num_bytes is not None and got.num_bytes != upstream_file.num_bytes:
            raise MirrorError(f"upstream file {location} has {got.num_bytes} bytes, but {upstream_file.num_bytes} "
                              f"are pinned: the upstream data changed at a pinned revision (or was cut short)")


def upstream_locations(up, revision: Optional[str]) -> list[tuple[str, "UpstreamFile"]]:
    """``(URL, UpstreamFile)`` of every pinned upstream file, in the order ``Upstream.urls`` lists them."""
    urls = up.urls(revision)
    by_split: dict[str, list] = {}
    for f in up.files:
        by_split.setdefault(f.split, []).append(f)
    return [(url, f) for split, files in by_split.items() for url, f in zip(urls[split], files)]


def build_provenance(up, revision: Optional[str], input_paths: list[str], *, from_upstream: bool) -> Provenance:
    """Provenance of a build reading ``input_paths``; upstream reads are checked against the pinned checksums."""
    import datasets
    import pyarrow as pa

    from .. import __version__

    upstream = None
    if up is not None:
        upstream = {"host": up.host, "repo": up.repo, "revision": revision or up.revision,
                    "homepage": up.homepage, "license": up.license, "url": upstream_url(up)}
    fingerprints = {path: fingerprint_input(path) for path in input_paths}
    for path, name in _local_names(input_paths).items():
        fingerprints[path] = dataclasses.replace(fingerprints[path], name=name)
    if from_upstream:
        origin = "upstream"
        check_pinned_checksums(upstream_locations(up, revision), fingerprints)
    elif all(i.name.startswith(SAMPLE_PREFIX) for i in fingerprints.values()):
        origin = "sample"
    else:
        origin = "files"
    versions = {"tooluse_datasets": __version__, "datasets": datasets.__version__, "pyarrow": pa.__version__}
    return Provenance(origin=origin, upstream=upstream, inputs=list(fingerprints.values()), versions=versions)


def _local_names(paths: list[str]) -> dict[str, str]:
    """Local inputs (not bundled samples) named by their path relative to the folder they all share, so that
    two files of the same name in different folders stay apart; a single file keeps its bare name."""
    local = {p: Path(os.path.abspath(p)) for p in paths  # links not followed, as display_input
             if "://" not in p and not display_input(p).startswith(SAMPLE_PREFIX)}
    if len(local) < 2:
        return {}
    root = shared_folder(list(local))
    return {p: name_as_text(r.relative_to(root).as_posix()) for p, r in local.items()}


def shared_folder(paths: list[str]) -> str:
    """The folder local ``paths`` share (a single file's own folder), links not followed: the card names local
    inputs relative to it, and its rebuild command runs there."""
    return os.path.commonpath([os.path.dirname(os.path.abspath(p)) for p in paths])


def upstream_url(up) -> str:
    if up.host == "hf":
        return f"https://huggingface.co/datasets/{up.repo}"
    if up.host == "github":
        return f"https://github.com/{up.repo}"
    return up.homepage


def pin_upstream_revision(request, upstream, resolve: Optional[Callable[..., str]] = None):
    """``request`` reading an upstream (Hub or GitHub) at a commit: the commit ``main`` points at now when
    neither the request nor the source pins a revision, the commit a branch or tag name given as the request's
    revision points at now; a full commit id is used as it is. Every config and split then reads the same commit, a
    resumed build reads the same data, and the card names the commit.

    ``resolve(repo, revision)``, the commit a branch or tag points at: default :func:`.source.head_commit`,
    which asks the upstream's host (the Hub, or GitHub for NESTFUL)."""
    up = upstream
    if request.data_files is not None or up is None:
        return request
    if request.revision is None and up.revision is not None:
        return request  # the source's own pin
    if request.revision is not None and COMMIT_ID.match(request.revision):
        return request
    wanted = request.revision or "main"
    if up.host not in ("hf", "github"):
        logger.warning("%s: upstream %s is read at %s, which cannot be resolved to a commit", request.source,
                       up.describe(request.revision), wanted)
        return request
    # offline, a Hub branch is the commit huggingface_hub's cache records for it (the one downloaded last), as
    # a load resolves it: the host cannot be asked
    cached = cached_ref(up.repo, wanted) if resolve is None and up.host == "hf" and offline_mode() else None
    if cached is not None and COMMIT_ID.match(cached):
        logger.info("%s: offline, reading %s at %s, the commit of %s downloaded last", request.source, up.repo,
                    cached, wanted)
        return dataclasses.replace(request, revision=cached)
    try:
        commit = resolve(up.repo, wanted) if resolve is not None else head_commit(up.host, up.repo, wanted)
    except Exception as exc:  # huggingface_hub and urllib raise their own types when offline or not found
        hint = "pass revision (--revision) or local data_files (--data-files)" if request.revision is None else \
            "pass a full commit id as revision (--revision), or local data_files (--data-files)"
        raise MirrorError(f"{request.source}: cannot resolve {wanted!r} of {up.describe()} to a commit "
                          f"({type(exc).__name__}: {exc}); {hint}") from exc
    logger.info("%s: reading %s at %s (%s)", request.source, up.repo, commit, wanted)
    return dataclasses.replace(request, revision=commit)


def pin_hub_data_files(request):
    """``request`` with each ``hf://`` data file given at a branch or tag (or at none: ``main``) read at the commit
    it points at now, as :func:`pin_upstream_revision` pins the upstream: every config and split, every Ray worker
    and a resumed build then read the same files, and the manifest names the commit. (Each builder resolves a
    branch by itself when it is made: a push between two of them would mix two commits in one mirror.) A file
    whose revision cannot be resolved (no network) stays as given, with a warning; reading it says what fails."""
    if request.data_files is None:
        return request
    with one_head_commit_per_load():  # one commit per branch, however many files name it
        pinned = hf_files_at_commits(request.data_files)
    for (repo, branch), commit in sorted(branches_read(request.data_files, pinned).items()):
        logger.info("%s: reading hf://datasets/%s at %s (%s)", request.source, repo, commit, branch)
    for url in flat_data_files(pinned):
        parts = hf_url_parts(url)
        if parts is not None and not COMMIT_ID.match(parts[1] or ""):
            logger.warning("%s: %s is read at a branch or tag that cannot be resolved to a commit: the mirror's "
                           "files may mix two commits if the repository is pushed to meanwhile", request.source, url)
    return dataclasses.replace(request, data_files=pinned)


def flat_data_files(data_files) -> list:
    """Every file ``data_files`` names (a path, a list, or a dict by split of either)."""
    if isinstance(data_files, dict):
        return [f for files in data_files.values() for f in flat_data_files(files)]
    if isinstance(data_files, (list, tuple)):
        return [f for files in data_files for f in flat_data_files(files)]
    return [data_files]
