"""The hidden names a build uses beside its mirror ``DIR/<source>``: its staging folder, the old mirror it moves
aside while swapping the new one in, the swap lock, the file that marks a staging folder unfinished and the lock a
running build holds in it (see :mod:`.staging`). Apart from the staging module so that reading a mirror
(:mod:`.manifest`, which staging imports) can name what a stopped swap or a running build left."""
from __future__ import annotations

import os
import re
import stat
from pathlib import Path

# What a swap leaves beside DIR/<source>: its staging folder, or the old mirror moved aside
SWAP_LEFTOVER = re.compile(r"^\.(.+)\.(?:partial|old-\d+)$")

# The staging folder's record of the build writing it: commit deletes it just before the swap, so a staging folder
# without it holds a finished build, and one with it a build to resume
BUILD_FILE = ".build.json"

# held (flock) by the process running the build, in its staging folder
LOCK_FILE = ".lock"


def staging_path(target: Path) -> Path:
    return target.with_name(f".{target.name}.partial")


def staged_builds(root: Path) -> dict[str, Path]:
    """``{source: staging folder}`` of the builds staged directly in ``root`` (``.<source>.partial/``), by name."""
    return {child.name[1:-len(".partial")]: child for child in sorted(root.glob(".?*.partial")) if child.is_dir()}


def swap_lock_path(target: Path) -> Path:
    return target.with_name(f".{target.name}.lock")


def moved_aside_paths(target: Path) -> list[Path]:
    """Old mirrors a build moved aside (``staging._swap_into_place``), the most recently moved first."""
    moved: list[tuple[float, Path]] = []
    for path in target.parent.glob(f".{target.name}.old-*"):
        try:  # read without the swap lock: another build's recovery may delete one between the listing and here
            info = path.stat()
        except FileNotFoundError:
            continue
        if stat.S_ISDIR(info.st_mode):
            moved.append((info.st_ctime, path))  # a rename updates a folder's ctime
    return [path for _, path in sorted(moved, key=lambda item: item[0], reverse=True)]


def stopped_swap_leftovers(target: Path) -> list[Path]:
    """What a build stopped mid-swap left beside ``target``: its staging folder if it holds a finished build, and
    the old mirrors moved aside (an unfinished staging folder is a build to run again, not a swap to recover)."""
    staged = staging_path(target)
    finished = staged.is_dir() and not (staged / BUILD_FILE).exists()
    return ([staged] if finished else []) + moved_aside_paths(target)


def build_running(staging: Path) -> bool:
    """Whether a build holds the lock of its staging folder ``staging`` (it is writing it now), without waiting."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: no advisory locks; nothing tells a running build
        return False
    try:
        fd = os.open(staging / LOCK_FILE, os.O_RDONLY)
    except OSError:  # no lock file: no build has locked it
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # (released at once by the close below)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False
