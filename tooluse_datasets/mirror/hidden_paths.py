"""The hidden names a build uses beside its mirror ``DIR/<source>``: its staging folder, the old mirror it moves
aside while swapping the new one in, and the swap lock (see :mod:`.staging`). Apart from the staging module so
that reading a mirror (:mod:`.manifest`, which staging imports) can name what a stopped swap left."""
from __future__ import annotations

import re
from pathlib import Path

# What a swap leaves beside DIR/<source>: its staging folder, or the old mirror moved aside
SWAP_LEFTOVER = re.compile(r"^\.(.+)\.(?:partial|old-\d+)$")


def staging_path(target: Path) -> Path:
    return target.with_name(f".{target.name}.partial")


def swap_lock_path(target: Path) -> Path:
    return target.with_name(f".{target.name}.lock")


def moved_aside_paths(target: Path) -> list[Path]:
    """Old mirrors a build moved aside (``staging._swap_into_place``), the most recently moved first."""
    olds = [p for p in target.parent.glob(f".{target.name}.old-*") if p.is_dir()]
    return sorted(olds, key=lambda p: p.stat().st_ctime, reverse=True)  # a rename updates a folder's ctime
