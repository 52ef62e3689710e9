"""Staging: a build writes into a hidden folder beside its target and replaces the target only when complete.

``.<source>.partial/`` (beside ``<source>/``) holds, while a build runs::

    .build.json              what the build reads and how (request, input sha256s, code version)
    .lock                    held (flock) by the process running the build
    .shards/<split>-<i>.json result of each finished shard task
    .parts/<build>/...       the parts those tasks wrote (<build>: a digest of .build.json)

A build that stops (an error, Ctrl-C, SIGKILL, a failed worker) leaves the target as it was and keeps its
staging. The next build of the same input (same ``.build.json``) reuses every finished shard whose parts are
intact and runs only the others; a build of different input starts the staging afresh. The lock keeps two
builds from writing one staging folder; the kernel releases it when its process dies, however it dies.

A complete build moves the old mirror aside (``.<source>.old-<pid>``), moves the staging folder in and deletes
the old one. A build stopped between those steps (SIGKILL, power loss) leaves no mirror at ``<source>``:
:func:`recover_swap`, run by the next build and by ``publish``, moves the staged mirror in if every file of it
matches its manifest, else the old one back, and deletes what was moved aside. Both hold the swap lock
(``.<source>.lock``, beside ``<source>/``), so a recovery never takes a live build's swap for a stopped one, nor
two builds' swaps interleave; the kernel releases it when its holder dies. ``publish`` holds it too, from
checking the files to committing them, so that a build swaps its mirror in only after the publish.
"""
from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import shutil
import uuid
from pathlib import Path
from typing import Iterator, Optional

from .hidden_paths import BUILD_FILE, LOCK_FILE, SWAP_LEFTOVER, moved_aside_paths, staging_path, swap_lock_path
from .manifest import MANIFEST_NAME, README_NAME, MirrorError, read_manifest
from .parts import WrittenPart
from .provenance import hash_file

RESULTS_DIR = ".shards"
PARTS_DIR = ".parts"

logger = logging.getLogger("tooluse_datasets")


def recover_swap(target: Path) -> None:
    """Finish the swap of a build stopped between moving the old mirror aside and moving the new one in (no
    mirror at ``target``): move the staged mirror in if it is complete, else the old mirror back; then delete
    the old mirrors moved aside. A half-written mirror is never put in place."""
    target = Path(os.path.abspath(target))  # "." has no name to put beside it
    if not moved_aside_paths(target) and (target.exists() or not staging_path(target).is_dir()):
        return  # nothing to recover: nothing is written (a mirror in a read-only folder can be published)
    with swap_lock(target):  # a build swapping now finishes first; what it leaves is then looked at afresh
        _recover_swap(target)


def _recover_swap(target: Path) -> None:
    olds = moved_aside_paths(target)
    if not target.exists():
        staged = staging_path(target)
        if _is_complete_mirror(staged):
            os.rename(staged, target)
            logger.warning("%s: a build stopped just before moving its new mirror in; moved it in now", target)
        else:
            old = next((old for old in olds if _is_complete_mirror(old)), None)
            if old is None:
                return
            os.rename(old, target)
            logger.warning("%s: a build stopped while replacing this mirror; the previous mirror was put back",
                           target)
    for old in moved_aside_paths(target):
        _delete_moved_aside(old)  # replaced, or half deleted when the build stopped


def recover_swaps_in(out_dir: Path) -> None:
    """:func:`recover_swap` for every mirror in ``out_dir`` a build may have been stopped replacing."""
    names = {m.group(1) for child in (out_dir.iterdir() if out_dir.is_dir() else ())
             for m in [SWAP_LEFTOVER.match(child.name)] if m}
    for name in sorted(names):
        recover_swap(out_dir / name)


def _is_complete_mirror(folder: Path) -> bool:
    """A finished build (no bookkeeping of a running one) whose every file matches the manifest."""
    if not folder.is_dir() or (folder / BUILD_FILE).exists() or not (folder / README_NAME).is_file():
        return False
    try:
        manifest = read_manifest(folder)
    except MirrorError:
        return False
    for f in manifest.files + manifest.figures:
        path = folder / f.path
        if not path.is_file() or path.stat().st_size != f.num_bytes or hash_file(path)[0] != f.sha256:
            return False
    return True


@contextlib.contextmanager
def swap_lock(target: Path, *, reader: bool = False) -> Iterator[None]:
    """Hold the lock of ``target``'s swap (waiting for its holder), and delete its file when done. A ``reader``
    (publish, which must upload the files it verified) of a mirror in a folder it cannot write, or that does
    not exist, goes on unlocked: no build can swap a mirror in there either."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: no advisory locks; one build per folder is on the user
        yield
        return
    path = swap_lock_path(target)
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            if not (reader and exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOENT)):
                raise
            fd = None
            break
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                break
        except FileNotFoundError:
            pass
        os.close(fd)  # its holder deleted this file while we waited: lock the one now at the path
    if fd is None:
        yield
        return
    try:
        yield
    finally:
        path.unlink(missing_ok=True)  # while still held, so that no one locks the file it deletes after us
        os.close(fd)


def check_out_dir(out_dir: Path, source: str) -> None:
    """The output folder holds mirrors (``<out_dir>/<source>``); it must not be a mirror itself, nor lie inside
    one: a mirror built there would nest inside the other, where neither ``publish`` nor ``load_dataset`` of
    that mirror sees it (``mirror --out DIR/<source>`` for ``--out DIR``)."""
    folder = Path(os.path.abspath(out_dir))  # '..' resolved: DIR/<source>/<config>/../.. is DIR
    for candidate in (folder, *folder.parents):
        if candidate.exists() and not candidate.is_dir():
            raise MirrorError(f"the output folder (--out) {out_dir} cannot be made: {candidate} is a file")
    nearest = next(candidate for candidate in (folder, *folder.parents) if candidate.exists())
    if not os.access(nearest, os.W_OK | os.X_OK):  # (a bare PermissionError naming the path, once planned)
        raise MirrorError(f"the output folder (--out) {out_dir} cannot be written: {nearest} is read-only here (a "
                          f"read-only file system, or no permission): give a folder you can write")
    for candidate in (folder, *folder.parents):
        if (candidate / MANIFEST_NAME).is_file():
            inside = "is" if candidate == folder else f"is inside {candidate}, which is"
            raise MirrorError(f"the output folder (--out) {out_dir} {inside} a mirror ({MANIFEST_NAME} found), "
                              f"and a mirror built in it would be nested in that one, which neither publish nor "
                              f"load_dataset would see: the output folder is the one that holds mirrors, each in "
                              f"<folder>/<source>; give {candidate.parent} (the {source} mirror then goes to "
                              f"{candidate.parent / source})")


def check_target(target: Path) -> None:
    if target.exists() and not target.is_dir():
        raise MirrorError(f"{target} exists and is a file, not a mirror; refusing to replace it")
    if target.exists() and not (target / MANIFEST_NAME).is_file() and any(target.iterdir()):
        raise MirrorError(f"{target} exists and is not a mirror (no {MANIFEST_NAME}); refusing to replace it")


class Staging:
    """The staging folder of one build; :meth:`open` it, then :meth:`commit` or :meth:`discard` it."""

    def __init__(self, target: Path):
        self.target = target
        self.folder = staging_path(target)
        self.parts = self.folder / PARTS_DIR
        self._results = self.folder / RESULTS_DIR
        self._lock_fd: Optional[int] = None

    @classmethod
    def open(cls, target: Path, build: dict) -> "Staging":
        """Lock the staging folder of ``target``; keep what it holds if it was left by a build of ``build``
        (a JSON-able description of the input and options), else empty it."""
        staging = cls(target)
        with swap_lock(target):  # not the staging folder of a build that is moving it into place now
            staging.folder.mkdir(parents=True, exist_ok=True)
            staging._lock()
        text = json.dumps(build, indent=1, sort_keys=True, ensure_ascii=False)
        build_file = staging.folder / BUILD_FILE
        if not build_file.is_file() or build_file.read_text(encoding="utf-8") != text:
            # The build file last: a staging folder without one is a finished build (recover_swap).
            for child in sorted(staging.folder.iterdir(), key=lambda child: child.name == BUILD_FILE):
                if child.name != LOCK_FILE:
                    _delete_aside(child, target) if child.is_dir() else child.unlink()
            _write_atomically(build_file, text)
        # Parts under a folder of this build's own: a task of a stopped build left running on a Ray that goes on
        # (the caller's) writes there late, but never over the parts of another build started meanwhile.
        staging.parts = staging.folder / PARTS_DIR / hashlib.sha256(text.encode()).hexdigest()[:16]
        staging.parts.mkdir(parents=True, exist_ok=True)
        staging._results.mkdir(exist_ok=True)
        os.chmod(staging.folder, 0o755)
        return staging

    # -- shard results --------------------------------------------------------------------------------

    def saved_result(self, key: str, task_id: str) -> Optional[dict]:
        """The result a previous run saved for shard ``key`` if it was made by the same task and its parts
        are intact (present, same size and sha256); else None (the shard is run again)."""
        path = self._results / f"{key}.json"
        if not path.is_file():
            return None
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if saved.get("task") != task_id:
            return None
        for parts in saved["result"]["parts"].values():
            for part in map(lambda p: WrittenPart(**p), parts):
                file = self.parts / part.path
                if not file.is_file() or file.stat().st_size != part.file_bytes or hash_file(file)[0] != part.sha256:
                    return None
        return saved["result"]

    def save_result(self, key: str, task_id: str, result: dict) -> None:
        _write_atomically(self._results / f"{key}.json",
                          json.dumps({"task": task_id, "result": result}, ensure_ascii=False))

    # -- ending a build -------------------------------------------------------------------------------

    def commit(self) -> None:
        """Remove the bookkeeping and put the staging folder in the target's place (the old mirror, if any, is
        moved aside first and deleted once the new one is in place)."""
        # Locked from before the build file goes: from then on recover_swap would take the folder for a
        # finished build stopped mid-swap, and another build's open would empty it.
        with swap_lock(self.target):
            _delete_aside(self.folder / PARTS_DIR, self.target)
            shutil.rmtree(self._results)
            (self.folder / BUILD_FILE).unlink()
            (self.folder / LOCK_FILE).unlink()
            _swap_into_place(self.folder, self.target)
        self._unlock()

    def discard(self) -> None:
        """Delete the staging folder (the build cannot succeed on this input: nothing to resume)."""
        _delete_aside(self.folder, self.target)
        self._unlock()

    def release(self) -> None:
        """Keep the staging folder for the next run (the build stopped for a reason a re-run may not meet), if
        it holds a finished shard; else there is nothing to resume, and it goes."""
        if not any(self._results.glob("*.json")):
            _delete_aside(self.folder, self.target)
        self._unlock()

    def _lock(self) -> None:
        self._lock_fd = os.open(self.folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: no advisory locks; one build per folder is on the user
            return
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self._lock_fd)
            self._lock_fd = None
            raise MirrorError(f"another build is writing {self.target} (its staging folder {self.folder} is "
                              f"locked); wait for it to finish") from None

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor releases the flock
            self._lock_fd = None


def _delete_aside(folder: Path, target: Path) -> None:
    """Delete ``folder`` (in ``target``'s staging folder, or that folder itself), moved out of it first: a task of a
    stopped build left running on a Ray that goes on (the caller's) may still make files in it, and a deletion in
    place then failed ("Directory not empty") or left part of it, its build record gone. Moved, the folder is out of
    the task's reach: the task finds its parts folder gone and abandons its shard."""
    for earlier in target.parent.glob(f".{target.name}.deleted-*"):  # what an earlier deletion could not remove
        shutil.rmtree(earlier, ignore_errors=True)
    aside = target.with_name(f".{target.name}.deleted-{uuid.uuid4().hex[:12]}")
    try:
        os.rename(folder, aside)
    except FileNotFoundError:
        return
    except OSError:  # (not movable: deleted in place, as before)
        aside = folder
    shutil.rmtree(aside, ignore_errors=True)


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _swap_into_place(staging: Path, target: Path) -> None:
    if not target.exists():
        os.rename(staging, target)
        return
    # A directory cannot be os.replace'd over a non-empty one: move the old mirror aside first.
    old = target.with_name(f".{target.name}.old-{os.getpid()}")
    _delete_moved_aside(old)
    os.rename(target, old)
    try:
        os.rename(staging, target)
    except OSError:
        os.rename(old, target)
        raise
    _delete_moved_aside(old)


def _delete_moved_aside(old: Path) -> None:
    """Delete an old mirror moved aside. A mirror folder that was a link to a folder elsewhere was moved aside as
    the link: the link goes (rmtree refuses links, and left it behind for good), the folder it names is kept."""
    if old.is_symlink():
        old.unlink(missing_ok=True)
    else:
        shutil.rmtree(old, ignore_errors=True)
