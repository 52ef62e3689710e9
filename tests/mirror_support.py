"""Helpers shared by the mirror, card, publish and olah tests: build a mirror from a bundled sample and read
rows back exactly, through ``datasets.load_dataset`` and through ``tooluse_datasets.load``."""
from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator, Optional, Sequence

from datasets import load_dataset

import tooluse_datasets as td
from tooluse_datasets.mirror import MirrorRequest, ParquetLayout, build_mirror
from tooluse_datasets.mirror.shard_task import convert_shard
from tooluse_datasets.formats import FORMATS


def build_sample_mirror(source: str, out: Path, configs: Sequence[str] = tuple(FORMATS),
                        layout: Optional[ParquetLayout] = None, **kwargs) -> Path:
    request = MirrorRequest(source, configs=configs, data_files=td.sample_files(source),
                            layout=layout or ParquetLayout(), **kwargs)
    return build_mirror(request, out)


def stop_a_first_build(source: str, out: Path) -> None:
    """A build of ``source``'s sample into ``out`` stopped (KeyboardInterrupt) just before its card: its staging
    folder ``.<source>.partial`` is all it leaves."""
    import pytest

    from tooluse_datasets.mirror import build as build_module

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(build_module, "render_card", interrupted)
        with pytest.raises(KeyboardInterrupt):
            build_sample_mirror(source, out, configs=["unified"])


@contextlib.contextmanager
def holding_the_build_lock(staging: Path) -> Iterator[None]:
    """``staging`` (``.<source>.partial``) locked as a running build holds it, for the ``with`` block."""
    import fcntl

    staging.mkdir(exist_ok=True)
    fd = os.open(staging / ".lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield
    finally:
        os.close(fd)


def build_on_a_callers_ray(request: MirrorRequest, out: Path) -> Path:
    """``request`` mirrored into ``out`` by the Ray engine, two workers, on a Ray the caller started (and stops);
    skips where Ray is absent."""
    import pytest

    ray = pytest.importorskip("ray", reason="Ray is the optional extra 'ray' (pip install 'tooluse-datasets[ray]')")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        return build_mirror(request, out, engine="ray", num_proc=2)
    finally:
        ray.shutdown()


def quiet(_line: str) -> None:
    """A progress callback that prints nothing."""


def reference_rows(source: str, config: str, split: str, cache_dir: str, on_error: str = "skip") -> list[dict]:
    """Rows as ``tooluse_datasets.load`` gives them from the same sample (map-style, exact decoding)."""
    return list(td.load(source, config, split=split, data_files=td.sample_files(source), on_error=on_error,
                        cache_dir=cache_dir))


def mirror_rows(folder: Path, config: str, split: str, *, streaming: bool, cache_dir: str) -> list[dict]:
    """Rows as ``datasets.load_dataset`` reads them from the mirror (all checks on), decoded exactly."""
    kwargs = {} if streaming else {"verification_mode": "all_checks"}
    ds = load_dataset(str(folder), config, split=split, streaming=streaming, cache_dir=cache_dir, **kwargs)
    return list(td.exact(ds))


def fails_unpicklably_on_shard_1(task):
    """``convert_shard``, but shard 1 fails with an exception that cannot be pickled (an HTTP error holding its
    response's headers does that): a module's function, so that a pool's workers find it (Ray's are sent it by
    value)."""
    import threading

    if task.index == 1:
        error = OSError("503 Service Unavailable")
        error.response_lock = threading.Lock()
        raise error
    return convert_shard(task)
