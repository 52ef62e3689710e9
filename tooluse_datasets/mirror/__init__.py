"""Parquet mirrors: a folder per source that ``datasets.load_dataset(folder, config)`` reads as it is and that
``tooluse-datasets publish`` pushes to the Hub unchanged.

Modules, one job each:

* :mod:`.manifest`: the manifest (what a mirror holds) and the names of its files;
* :mod:`.parts`: Parquet parts within the layout's bounds;
* :mod:`.shard_task`: converting one shard into every config's parts, statistics and validation counts;
* :mod:`.engines`: running shard tasks here, in a process pool or on Ray;
* :mod:`.staging`: the hidden staging folder, resuming, and the atomic swap (and its recovery);
* :mod:`.hidden_paths`: the hidden names a build uses beside a mirror;
* :mod:`.provenance`: upstream pin, input checksums, versions;
* :mod:`.build`: ``build_mirror``, which plans, runs, merges and writes the card.

Names are resolved on first use, so importing :mod:`.manifest` (the dataset card does) loads nothing of the build.
"""
from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "build_mirror": "build", "MirrorRequest": "build", "pin_upstream_revision": "build",
    "plan_mirror": "build", "build_planned_mirror": "build", "MirrorPlan": "build", "MissingSplitError": "build",
    "ENGINES": "engines", "ShardsFailedError": "engines",
    "MANIFEST_NAME": "manifest", "README_NAME": "manifest", "SHARD_FILE": "manifest", "Manifest": "manifest",
    "MirrorError": "manifest", "read_manifest": "manifest", "mirror_files": "manifest",
    "StoppedSwapError": "manifest", "recover_swap": "staging",
    "ParquetLayout": "parts",
    "sha256_file": "provenance", "hash_file": "provenance",
    "shorten": "examples",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
