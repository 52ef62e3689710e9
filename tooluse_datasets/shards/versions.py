"""Which version of its file a shard was planned from, and whether the file is still that version.

A stream plans a file's regions (row groups, byte ranges) once, then reads them one by one, maybe over hours,
and a saved state resumes at a position in the file. A file replaced meanwhile by one of the same layout (JSON
Lines of the same length or longer, Parquet of the same row-group count) would be read as it is now, its rows
mixed with those already read from the old one. So each shard records its file's :class:`FileVersion` when the
split is planned (:func:`with_versions`), and reading a shard, or resuming a saved state, checks it
(:func:`changed`): a change is the file's ``InvalidValueError`` (field ``<file>``).

The version of a local file: its size, modification and status-change times (nothing is read when they are
unchanged; any write sets the status-change time, also one that keeps the modification time), and an
identity of its contents, read when they changed: for Parquet a digest of its footer (row-group sizes, offsets,
column statistics, the writer: another file of the same layout differs there), for JSON Lines and JSON documents
a digest of its first and last bytes as planned. A JSON Lines file may grow: rows appended to it are read (a
stream's last file, a resume), so its identity is taken over the bytes it had when planned, and a longer file
that holds them still is the same file; a JSON document (an array resumed by element index or byte offset, cut
into pieces for workers) that grew is another. A saved state keeps the identity alone (:func:`state_token`), so
data copied to another folder or machine, with new modification times, still resumes.

A file read through fsspec (an http(s) URL, a member of a zip archive, another file system) is known by what its
file system's ``info()`` says of it: its size and the strongest field of :data:`DESCRIBING_FIELDS` it gives (an
http server's content digest, else its ETag, else its Last-Modified; a zip member's CRC), one metadata request each time it is checked (a
local zip archive's directory is read once while the archive's size and times are unchanged). Its
size and that field are its version: a longer file is another (its first bytes are not compared), and a server
that gives neither size nor any of those fields leaves the file unchecked. An ``hf://`` file is not asked: it is
read at a commit, which does not change.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import struct
import zipfile
from typing import Optional

from ..errors import InvalidValueError
from .paths import display_path, is_archive_member
from .shard import LINES, PARQUET, FileVersion, Shard

# Bytes of a JSON file's start and end that identify it: a regenerated file differs there (ids, ordering).
WINDOW_BYTES = 4096


def version_of(path: str, kind: str) -> Optional[FileVersion]:
    """The version of a file read as shards of ``kind``; None where it is not checked (see the module) or cannot
    be read now (reading it reports that)."""
    local = _local_path(path)
    if local is None:
        return _described_version(path)
    try:
        stat = os.stat(local)
        return FileVersion(stat.st_size, stat.st_mtime_ns, _identity(local, kind, stat.st_size), stat.st_ctime_ns)
    except OSError:
        return None


def _local_path(path: str) -> Optional[str]:
    """The local file ``path`` names (also as a ``file://`` URL, whose version is then a local file's, so that a
    state saved from it resumes on a copy of the data as a plain path's does), or None for another file system."""
    if path.startswith("file://") and "::" not in path:
        return path[len("file://"):]
    return None if "://" in path else path


def local_archive(path: str) -> Optional[tuple[str, str]]:
    """``(member, archive)`` for a member of a zip archive on the local disk (``zip://<member>::<archive>``), else
    None."""
    if not is_archive_member(path):
        return None
    member, _, archive = path[len("zip://"):].partition("::")
    return None if "://" in archive else (member, archive)


def local_file_of(path: str) -> Optional[str]:
    """The local file whose presence says whether ``path`` is there: the file, or the local zip archive holding it;
    None for a file read by URL."""
    archived = local_archive(path)
    return archived[1] if archived is not None else _local_path(path)


def with_versions(shards: list[Shard]) -> list[Shard]:
    """``shards`` with their files' versions recorded (each file's taken once)."""
    versions: dict[tuple[str, str], Optional[FileVersion]] = {}
    out = []
    for shard in shards:
        key = (shard.file, shard.kind)
        if key not in versions:
            versions[key] = version_of(shard.file, shard.kind)
        out.append(dataclasses.replace(shard, version=versions[key]))
    return out


def check_unchanged(shard: Shard) -> None:
    """Raise the file's ``InvalidValueError`` if it is no longer the version ``shard`` was planned from (or a
    resumed state was saved from)."""
    if shard.version is None:
        return
    reason = changed(shard.file, shard.kind, shard.version)
    if reason:
        how = "was cut short" if shard.kind == LINES and reason.startswith("is shorter") else "changed"
        raise InvalidValueError(f"the file {reason}: it {how} since the stream or load was planned, or since the "
                                "state_dict resumed was saved (read it again from the start)",
                                file=display_path(shard.file), field="<file>")


def changed(path: str, kind: str, version: FileVersion) -> Optional[str]:
    """How the file at ``path`` differs from ``version`` (None: it does not, or it is a JSON Lines file that grew
    from it)."""
    local = _local_path(path)
    if local is None:
        return _changed_description(path, version)
    try:
        stat = os.stat(local)
    except OSError:
        return None  # gone or unreadable: opening it reports that
    # The status-change time too: a file replaced with its size and modification time kept (cp -p, rsync -a,
    # touch -r) has a new one, which nothing sets back (see cache_keys).
    if (stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns) == (version.size, version.mtime_ns, version.ctime_ns):
        return None
    if stat.st_size < version.size:
        return f"is shorter ({stat.st_size} bytes, {version.size} then)"
    if stat.st_size > version.size and kind != LINES:
        return f"is longer ({stat.st_size} bytes, {version.size} then)"
    try:
        now = _identity(local, kind, version.size)
    except OSError:
        return None
    if now != version.identity:
        return f"holds other contents (its {'footer' if kind == PARQUET else 'first or last bytes'} differ)"
    return None


def state_token(version: Optional[FileVersion]) -> Optional[str]:
    """What a saved state keeps of a shard's version: its size and contents' identity, not its times."""
    return None if version is None else f"{version.size}:{version.identity}"


def from_state_token(token: object) -> Optional[FileVersion]:
    """The version a saved state's token names (None: not one, e.g. a state saved before versions were kept)."""
    if not isinstance(token, str):
        return None
    size, _, identity = token.partition(":")
    if not size.isdigit() or not identity:
        return None
    return FileVersion(int(size), None, identity)


# What fsspec file systems' info() says of a file that tells one version from another, strongest first; the first
# one given is the file's version. A digest of the contents, then an ETag (a digest, or the server's own mark of a
# version), then times: a server that gives an ETag is not judged by its Last-Modified, which some servers set to
# the time of each request and which differs between the machines behind a load balancer. (Not "url": a signed URL
# after a redirect differs at every request.)
DESCRIBING_FIELDS = ("Content-MD5", "Digest", "md5", "crc32c", "checksum", "CRC", "ETag", "generation",
                     "Last-Modified", "LastModified", "last_modified", "mtime", "date_time")


def _described_version(path: str) -> Optional[FileVersion]:
    """The version of a file read through fsspec (see the module); None: not checked, or not answered now
    (reading it reports why)."""
    if path.split("::")[-1].startswith("hf://"):
        return None
    archived = local_archive(path)
    try:
        if archived is not None:
            member, archive = archived
            stat = os.stat(archive)
            info = _archive_listing(archive, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns).get(member.lstrip("/"),
                                                                                                 {})
        else:
            import fsspec

            fs, inner = fsspec.core.url_to_fs(path)
            info = fs.info(inner)
    except Exception:  # noqa: BLE001 (any file system's failure: reading the file reports it)
        return None
    size = info.get("size")
    field = next((name for name in DESCRIBING_FIELDS if info.get(name) is not None), None)
    described = {field: str(info[field])} if field is not None else {}
    if not isinstance(size, int) and not described:
        return None
    digest = hashlib.sha256(repr(sorted(described.items())).encode()).hexdigest()[:32]
    return FileVersion(size if isinstance(size, int) else -1, None, f"described-{digest}")


@functools.lru_cache(maxsize=4)
def _archive_listing(archive: str, size: int, mtime_ns: int, ctime_ns: int) -> dict[str, dict]:
    """What fsspec's zip file system says of each file of a local zip archive (its size, CRC and time), read once per
    version of the archive: the key holds its size and times, which any write changes. Asked of fsspec, each check
    of each file read the archive's whole directory again, for a stream of many small files most of its time."""
    with zipfile.ZipFile(archive) as z:
        return {i.filename: {"size": i.file_size, "CRC": i.CRC, "date_time": i.date_time} for i in z.infolist()}


def _changed_description(path: str, version: FileVersion) -> Optional[str]:
    now = _described_version(path)
    if now is None:
        return None  # not answered now: opening it reports why
    if now.size != version.size and -1 not in (now.size, version.size):  # (-1: its size was not given then or now)
        return f"is {'shorter' if now.size < version.size else 'longer'} ({now.size} bytes, {version.size} then)"
    if now.identity != version.identity:
        return "is described otherwise by its server or archive (its ETag, modification time or checksum differ)"
    return None


def _identity(path: str, kind: str, size: int) -> str:
    """A digest of the first ``size`` bytes' identifying parts (see the module)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        if kind == PARQUET:
            digest.update(_parquet_footer(f, size))
        else:
            digest.update(f.read(min(size, WINDOW_BYTES)))
            f.seek(max(0, size - WINDOW_BYTES))
            digest.update(f.read(min(size, WINDOW_BYTES)))
    return digest.hexdigest()[:32]


def _parquet_footer(f, size: int) -> bytes:
    """A Parquet file's footer (metadata) and its length; the last bytes of a file that is not Parquet."""
    if size < 12:
        f.seek(0)
        return f.read(size)
    f.seek(size - 8)
    tail = f.read(8)
    length = struct.unpack("<i", tail[:4])[0]
    if tail[4:] not in (b"PAR1", b"PARE") or not 0 < length <= size - 12:
        f.seek(max(0, size - WINDOW_BYTES))
        return f.read(WINDOW_BYTES)
    f.seek(size - 8 - length)
    return f.read(length) + tail
