"""Scale benchmark: every measure of the streaming/prepare table (issue "conversion at the speed of parsing") in
one run, each as a ratio to a reference measured in the same run.

    python benchmarks/bench_scale.py [--rows 279737] [--swift-rows 30000] [--rss-rows 10000,124000,279737]
                                     [--row-group-size 1000] [--quick] [--only stream,prepare,...] [--json]
                                     [--repeat 1] [--clock wall|cpu] [--code GIT_REF] [--table-from RUN.json]

Rows (names for ``--only``):

  stream          streaming unified rows/s (all seven ToolMind splits) / pyarrow iteration + orjson.loads(messages);
                  also its ceiling: that bound plus building the same unified rows at C speed (orjson.loads of
                  their JSON, on the first 20,000 rows), what a converter doing nothing else would reach
  prepare         map-style prepare (fresh cache), MB/s of messages text / the same parse bound
  rss             peak RSS of prepare at each --rss-rows size: second / first, and the largest under 1 GiB
  first_row       time to the first streamed row / pyarrow's first batch of the same file
  swift_stream    ms-swift agent JSONL: our streaming / ms-swift 4.6.0's own streaming load + preprocess
  swift_prepare   the same, map-style: our prepare / ms-swift's load_dataset + preprocessor (fresh caches)
  shards          n_shards of one streamed ToolMind split vs the row groups holding it
  split_by_node   datasets.distributed.split_dataset_by_node(world_size=2): slowest node / whole stream
  num_proc        prepare num_proc=1 time / num_proc=2 time
  resume          load_state_dict from a state taken mid-shard: rows converted and time to the next row,
                  against a fresh start (also after split_dataset_by_node); rows converted are counted as
                  calls of the source's ``to_raw`` (the Source contract's per-row step; "not countable" if a
                  stream no longer goes through it)
  stream_num_proc not in the issue's table: streaming with num_proc=2 (worker processes convert the next
                  shards ahead) / num_proc=1, ToolMind and ms-swift; rows are the ones the stream yields,
                  counted as they are read, and both runs must yield the same ids
  toolmind_jsonl  not in the issue's table: all seven ToolMind splits prepared from JSON Lines / from Parquet,
                  the same rows (at most 30,000; the JSON Lines file is written from the Parquet one): what
                  planning splits without column statistics costs (every line read once to find its split,
                  parsed only where it does not end with the split key)
  array_num_proc  not in the issue's table, no target: the ms-swift rows written as one JSON array, prepared
                  with num_proc=2 (the array cut into pieces between elements) / num_proc=1, wall time

Only public entry points are used (``tooluse_datasets.load`` streaming and map-style with ``num_proc``,
``IterableDataset.n_shards``, ``state_dict``/``load_state_dict``, ``split_dataset_by_node``), so the same run
compares the package before and after a rewrite. Every measure runs in a fresh interpreter (clean peak RSS,
no warm caches shared between measures). A failing measure prints its error in its row; the run goes on.

Data (generated on first use, kept under ``benchmarks/data/``, git-ignored): a ToolMind-format Parquet file
from ``generate_toolmind.py`` written in ``--row-group-size`` row groups (default 1000, the most our mirrors
write; the upstream layout is unknown: ``Dataset.to_parquet``/``push_to_hub`` would cut ~100 MB groups, about
11.5K rows of this data, and pandas one group for the whole file), and ms-swift agent JSONL from
``generate_ms_swift.py``. ms-swift itself runs from ``benchmarks/.venv-swift`` (``bash benchmarks/swift_env.sh``;
it needs ``datasets<4.8.5``), or the Python ``$SWIFT_PYTHON`` names; without it the ms-swift rows compare against
the parse bound of the same rows (orjson of every JSON layer: line, ``tools``, each ``tool_call``) and say so.

``--code REF`` measures the package as committed at a git ref (exported to a temporary folder laid out like
an installed package and put first on the path of every measurement) instead of the working tree, so "before"
and "after" can be measured on the same machine state: ``--code HEAD~3`` then no ``--code``.

The references (the parse bounds, pyarrow's first batch, ms-swift) run with ``ARROW_DEFAULT_MEMORY_POOL=jemalloc``
(see ``REFERENCE_ENV``); our measurements run in the environment the benchmark was started in.

Timings on a shared 2-core machine are noisy: compare the ratios of one run, not numbers across runs. Every
ratio is shown by wall time and by CPU time (``--clock`` picks the one judged against the target; CPU time
barely moves when other jobs load the machine), and ``--repeat N`` keeps the fastest of N runs per measure.
"""
from __future__ import annotations

import argparse
import atexit
import compileall
import io
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any, Callable, Optional

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT_SWIFT_PYTHON = HERE / ".venv-swift" / "bin" / "python"
SWIFT_DRIVER = HERE / "swift_driver.py"
GIB = 1024 ** 3

CHILD_ENV = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
             "TOKENIZERS_PARALLELISM": "false"}
# References (the parse bounds, pyarrow's first batch, ms-swift) allocate Arrow memory from jemalloc: under
# pyarrow's default, mimalloc, on a kernel giving transparent huge pages on request, a bare iter_batches +
# orjson.loads loop took 0.66 s in some runs and 2.9-3.1 s in others on the same 30K rows (the kernel zeroing
# refaulted 2 MiB pages), which made ratios to it measure the kernel, not the code. Our own measurements keep
# the user's default environment (the package picks its pool itself: tooluse_datasets/arrow_memory.py).
REFERENCE_ENV = {"ARROW_DEFAULT_MEMORY_POOL": "jemalloc"}
REFERENCE_KINDS = {"parquet_bound", "jsonl_bound", "pyarrow_first_batch", "output_floor"}


# --------------------------------------------------------------------------------------------------
# Child measurements: each runs in a fresh interpreter (``--child KIND --child-kwargs JSON``) and returns
# one JSON-able dict. Imports happen before the clock starts unless the import is what is measured.
# --------------------------------------------------------------------------------------------------


def swift_python() -> Path:
    """ms-swift's Python: ``$SWIFT_PYTHON`` (a venv made with ``SWIFT_VENV=DIR bash benchmarks/swift_env.sh``; the
    same variable tests/test_ms_swift_real.py reads), else the venv swift_env.sh makes by default."""
    return Path(os.environ.get("SWIFT_PYTHON") or DEFAULT_SWIFT_PYTHON)


def peak_rss_mib() -> float:
    """Peak RSS of this process (VmHWM: Linux carries ru_maxrss over fork + exec, so a child's ru_maxrss can
    be its parent's peak) and of its waited-for children (datasets' num_proc workers)."""
    own = 0.0
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                own = int(line.split()[1]) / 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return max(own, children)


def cpu_seconds() -> float:
    """CPU time of this process (all threads) and of its waited-for children."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


class Stopwatch:
    """Wall and CPU time since creation. CPU time barely moves when other jobs compete for the cores, so
    ``--clock cpu`` gives steadier ratios on a shared machine (not for parallel speedups)."""

    def __init__(self):
        self.wall, self.cpu = time.perf_counter(), cpu_seconds()

    def read(self, prefix: str = "") -> dict:
        return {f"{prefix}seconds": time.perf_counter() - self.wall, f"{prefix}cpu_s": cpu_seconds() - self.cpu}


def id_checksum(ids) -> int:
    return sum(zlib.crc32(i.encode()) for i in ids) % (1 << 61)


def preimport_for_streaming() -> None:
    """Imports a streaming user has paid for before loading, kept off the clock: this package, and torch when
    installed (datasets imports it on creating any IterableDataset, ~2 s here; a training job has it loaded,
    and ms-swift's driver imports it with ms-swift)."""
    import importlib.util

    import tooluse_datasets  # noqa: F401

    if importlib.util.find_spec("torch") is not None:
        import torch  # noqa: F401


def _streamed_splits(source: str, path: str, split: Optional[str], rank: Optional[int] = None,
                     world_size: Optional[int] = None, num_proc: Optional[int] = None) -> list:
    import tooluse_datasets as td

    loaded = td.load(source, streaming=True, data_files=path, split=split, num_proc=num_proc)
    parts = list(loaded.values()) if hasattr(loaded, "values") else [loaded]
    if world_size:
        from datasets.distributed import split_dataset_by_node

        parts = [split_dataset_by_node(ds, rank=rank, world_size=world_size) for ds in parts]
    return parts


def child_stream(path: str, source: str = "toolmind", split: Optional[str] = None, rank: Optional[int] = None,
                 world_size: Optional[int] = None, num_proc: Optional[int] = None) -> dict:
    """Iterate every row of every split (or one split / one node's part); counts rows and tool calls.
    ``num_proc``: shards converted ahead in that many worker processes."""
    preimport_for_streaming()
    clock = Stopwatch()
    rows = calls = 0
    ids = []
    for ds in _streamed_splits(source, path, split, rank, world_size, num_proc):
        for row in ds:
            rows += 1
            calls += sum(len(m.get("tool_calls") or ()) for m in row["messages"])
            ids.append(row["id"])
    return {"rows": rows, "calls": calls, **clock.read(), "id_checksum": id_checksum(ids),
            "peak_rss_mib": peak_rss_mib()}


def child_parquet_bound(path: str) -> dict:
    """The parse bound: pyarrow iteration of the messages column + orjson.loads of every cell. pyarrow reads
    on this thread only: one column leaves its thread pool little to do, and the pool's CPU time would
    otherwise weigh on the CPU-clock bound."""
    import orjson
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    clock = Stopwatch()
    rows = nbytes = 0
    for batch in pq.ParquetFile(path).iter_batches(batch_size=1000, columns=["messages"], use_threads=False):
        column = batch.column(0)
        nbytes += pc.sum(pc.binary_length(column)).as_py() or 0
        for text in column.to_pylist():
            orjson.loads(text)
        rows += batch.num_rows
    return {"rows": rows, "text_bytes": nbytes, **clock.read(), "peak_rss_mib": peak_rss_mib()}


def child_output_floor(path: str, rows: int = 20_000) -> dict:
    """What the stream target allows, measured: building the unified rows of the first ``rows`` rows at C
    speed (``orjson.loads`` of each streamed row's JSON, made off the clock), beside ``orjson.loads`` of their
    messages. Any converter that hands out these Python rows creates at least these objects."""
    import orjson
    import pyarrow as pa
    import pyarrow.parquet as pq

    import tooluse_datasets as td

    preimport_for_streaming()
    sample = Path(tempfile.mkdtemp(prefix="bench-floor-")) / "sample.parquet"
    file = pq.ParquetFile(path)
    with pq.ParquetWriter(sample, file.schema_arrow) as writer:
        taken = 0
        for batch in file.iter_batches(batch_size=1000):
            writer.write_table(pa.Table.from_batches([batch.slice(0, rows - taken)]))
            taken += min(batch.num_rows, rows - taken)
            if taken >= rows:
                break
    texts = pq.read_table(sample, columns=["messages"]).column(0).to_pylist()
    unified = [orjson.dumps(row) for split in td.load("toolmind", data_files=str(sample), streaming=True).values()
               for row in split]
    shutil.rmtree(sample.parent, ignore_errors=True)
    clock = Stopwatch()
    for text in texts:
        orjson.loads(text)
    parse = clock.read()
    clock = Stopwatch()
    for text in unified:
        orjson.loads(text)
    build = clock.read()
    return {"rows": len(texts), "unified_rows": len(unified), **parse, **{f"build_{k}": v for k, v in build.items()}}


def child_jsonl_bound(path: str) -> dict:
    """The parse bound of ms-swift rows: orjson of every JSON layer (line, ``tools`` text, each call text)."""
    import orjson

    clock = Stopwatch()
    rows = calls = nbytes = 0
    with open(path, "rb") as f:
        for line in f:
            if not line.strip():
                continue
            nbytes += len(line)
            row = orjson.loads(line)
            if isinstance(row.get("tools"), str):
                orjson.loads(row["tools"])
            for m in row["messages"]:
                if m["role"] == "tool_call" and isinstance(m["content"], str):
                    orjson.loads(m["content"])
                    calls += 1
            rows += 1
    return {"rows": rows, "calls": calls, "text_bytes": nbytes, **clock.read(), "peak_rss_mib": peak_rss_mib()}


def child_prepare(path: str, source: str = "toolmind", num_proc: Optional[int] = None) -> dict:
    """Map-style: ``td.load`` into a fresh cache folder (download_and_prepare + as_dataset)."""
    import tooluse_datasets as td

    cache = tempfile.mkdtemp(prefix="bench-scale-cache-")
    try:
        clock = Stopwatch()
        loaded = td.load(source, data_files=path, cache_dir=cache, num_proc=num_proc)
        times = clock.read()
        rows = sum(len(ds) for ds in loaded.values())
        arrow = sum(p.stat().st_size for p in Path(cache).rglob("*.arrow"))
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    workers = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"rows": rows, **times, "arrow_mb": arrow / 1e6, "num_proc": num_proc, "worker_cpu_s": workers.ru_utime + workers.ru_stime, "peak_rss_mib": peak_rss_mib()}


def _first_and_second(action: Callable[[], Any]) -> dict:
    """Time ``action`` twice in this process: the first call pays one-time setup (lazy imports, caches), the
    second only what every load does."""
    times: dict = {}
    for prefix in ("first_", "second_"):
        clock = Stopwatch()
        action()
        times.update(clock.read(prefix))
    return times


def child_first_row(path: str, split: str) -> dict:
    import tooluse_datasets as td

    preimport_for_streaming()
    return _first_and_second(lambda: next(iter(td.load("toolmind", streaming=True, data_files=path, split=split))))


def child_pyarrow_first_batch(path: str) -> dict:
    import pyarrow.parquet as pq

    return _first_and_second(lambda: next(pq.ParquetFile(path).iter_batches(batch_size=1000)))


def child_shards(path: str) -> dict:
    """n_shards of every streamed split, and how many row groups hold rows of that split."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    import tooluse_datasets as td

    try:
        from tooluse_datasets.builders.toolmind.upstream import hf_split_name
    except ImportError:  # the HF split name of a `split` value, as the README's table gives it
        def hf_split_name(value):
            return value.replace("-", "_")

    pf = pq.ParquetFile(path)
    groups: dict[str, int] = {}
    for i in range(pf.num_row_groups):
        for value in pc.unique(pf.read_row_group(i, columns=["split"]).column(0)).to_pylist():
            name = hf_split_name(value)
            groups[name] = groups.get(name, 0) + 1
    streamed = td.load("toolmind", streaming=True, data_files=path)
    return {"row_groups": pf.num_row_groups,
            "splits": {name: {"n_shards": ds.n_shards, "row_groups": groups.get(name, 0)}
                       for name, ds in streamed.items()}}


def _count_converted_rows() -> list:
    """Count rows converted, as calls of the sources' ``to_raw`` (the per-row step of the Source contract:
    read -> to_raw -> to_unified). Returns a one-item list the caller resets. A stream that yields rows while
    the count stays 0 no longer converts through ``to_raw``: the caller reports "not countable"."""
    from tooluse_datasets import registry
    from tooluse_datasets.source import Source

    registry.builder_class("toolmind")  # imports the source's module
    counter = [0]
    depth = [0]  # a subclass's to_raw calling its parent's counts once

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    for cls in set(subclasses(Source)):
        original = vars(cls).get("to_raw")
        if original is None:
            continue

        def counting(self, *args, _original=original, **kwargs):
            if depth[0] == 0:
                counter[0] += 1
            depth[0] += 1
            try:
                return _original(self, *args, **kwargs)
            finally:
                depth[0] -= 1

        cls.to_raw = counting
    return counter


def child_resume(path: str, split: str, position: int, rank: Optional[int] = None,
                 world_size: Optional[int] = None) -> dict:
    """Take ``state_dict()`` after ``position`` rows, then resume a new dataset from it: the rows converted
    and the time until the first resumed row, against a fresh start measured the same way (warm process)."""
    preimport_for_streaming()
    counter = _count_converted_rows()

    def dataset():
        return _streamed_splits("toolmind", path, split, rank, world_size)[0]

    ds = dataset()
    it = iter(ds)
    for consumed in range(position):
        next(it)
    state = ds.state_dict()
    expected = next(it)["id"]

    counter[0] = 0
    clock = Stopwatch()
    resumed = dataset()
    resumed.load_state_dict(state)
    got = next(iter(resumed))["id"]
    resume_times, resume_rows = clock.read("resume_"), counter[0]

    counter[0] = 0
    clock = Stopwatch()
    fresh_id = next(iter(dataset()))["id"]
    fresh_times, fresh_rows = clock.read("fresh_"), counter[0]
    if fresh_rows == 0:  # a row came out without to_raw: conversion goes another way, nothing to count
        resume_rows = fresh_rows = None
    return {"position": position, "expected_id": expected, "resumed_id": got, "fresh_first_id": fresh_id,
            "resumed_at_next_row": got == expected, **resume_times, **fresh_times,
            "resume_converted_rows": resume_rows, "fresh_converted_rows": fresh_rows,
            "state": json.dumps(state)[:400]}


# Kinds whose result is a time: repeated with --repeat, fastest kept.
TIMED = {"stream", "parquet_bound", "jsonl_bound", "prepare"}

CHILDREN: dict[str, Callable[..., dict]] = {
    "stream": child_stream, "parquet_bound": child_parquet_bound, "jsonl_bound": child_jsonl_bound,
    "prepare": child_prepare, "first_row": child_first_row, "pyarrow_first_batch": child_pyarrow_first_batch,
    "shards": child_shards, "resume": child_resume, "output_floor": child_output_floor,
}


class MeasureError(RuntimeError):
    pass


def run_child(kind: str, timeout: float, **kwargs) -> dict:
    cmd = [sys.executable, __file__, "--child", kind, "--child-kwargs", json.dumps(kwargs)]
    return _run_json(cmd, timeout, f"{kind}({', '.join(f'{k}={v}' for k, v in kwargs.items())})",
                     reference=kind in REFERENCE_KINDS)


def _run_json(cmd: list[str], timeout: float, what: str, reference: bool = False) -> dict:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO,
                             env={**os.environ, **CHILD_ENV, **CODE_ENV, **(REFERENCE_ENV if reference else {})})
    except subprocess.TimeoutExpired:
        raise MeasureError(f"{what}: no result after {timeout:.0f} s") from None
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        tail = [line for line in out.stderr.strip().splitlines() if line.strip()][-1:] or ["no output"]
        raise MeasureError(f"{what} failed (exit {out.returncode}): {tail[0][:300]}")
    return json.loads(lines[-1])


# Set by --code: PYTHONPATH of every measurement (ms-swift's driver imports nothing of ours).
CODE_ENV: dict[str, str] = {}


def export_code(ref: str) -> Path:
    """The package as committed at ``ref``, laid out as installed (builders/ and cards/ inside it)."""
    dest = Path(tempfile.mkdtemp(prefix="bench-scale-code-"))
    staging = dest / "staging"
    archive = subprocess.run(["git", "archive", "--format=tar", ref, "tooluse_datasets", "builders", "cards"],
                             capture_output=True, cwd=REPO, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(staging, filter="data")
    package = staging / "tooluse_datasets"
    for sub in ("builders", "cards"):
        (staging / sub).rename(package / sub)
    package.rename(dest / "tooluse_datasets")
    staging.rmdir()
    return dest


# --------------------------------------------------------------------------------------------------
# Data files
# --------------------------------------------------------------------------------------------------


class Data:
    """Generated inputs, cached under ``data_dir`` with their statistics beside them."""

    def __init__(self, data_dir: Path, row_group_size: int, log: Callable[[str], None]):
        self.dir = data_dir
        self.row_group_size = row_group_size
        self.log = log
        self._warm: set[Path] = set()
        data_dir.mkdir(parents=True, exist_ok=True)

    def toolmind(self, rows: int) -> str:
        import generate_toolmind as gen

        path = self.dir / f"toolmind-{rows}-seed0-rg{self.row_group_size}.parquet"
        return self._ensure(path, lambda: gen.write_parquet(str(path), rows, gen.GeneratorOptions(),
                                                            row_group_size=self.row_group_size,
                                                            workers=os.cpu_count() or 1))

    def ms_swift(self, rows: int) -> str:
        import generate_ms_swift as gen

        path = self.dir / f"ms_swift-{rows}-seed0.jsonl"
        return self._ensure(path, lambda: gen.write_jsonl(str(path), rows))

    def ms_swift_array(self, rows: int) -> str:
        """The rows of ``ms_swift(rows)`` as one JSON array, an element a line."""
        source = self.ms_swift(rows)
        path = self.dir / f"ms_swift-{rows}-seed0-array.json"

        def write() -> dict:
            with open(source, "rb") as lines, open(path, "wb") as f:
                f.write(b"[\n" + b",\n".join(line.rstrip(b"\n") for line in lines if line.strip()) + b"\n]\n")
            return {"rows": rows, "bytes": path.stat().st_size}

        return self._ensure(path, write)

    def toolmind_jsonl(self, rows: int) -> str:
        """The rows of ``toolmind(rows)`` as JSON Lines, in the same order (grouped by split, as upstream)."""
        import orjson
        import pyarrow.parquet as pq

        source = self.toolmind(rows)
        path = self.dir / f"toolmind-{rows}-seed0.jsonl"

        def write() -> dict:
            with open(path, "wb") as f:
                for batch in pq.ParquetFile(source).iter_batches(batch_size=1000):
                    f.writelines(orjson.dumps(row) + b"\n" for row in batch.to_pylist())
            return {"rows": rows, "bytes": path.stat().st_size}

        return self._ensure(path, write)

    def stats(self, path: str) -> dict:
        return json.loads(self._stats_path(Path(path)).read_text())

    @staticmethod
    def _stats_path(path: Path) -> Path:
        return path.with_suffix(".stats.json" if path.suffix == ".json" else ".json")

    def _ensure(self, path: Path, write: Callable[[], dict]) -> str:
        stats_path = self._stats_path(path)
        if not (path.exists() and stats_path.exists()):
            self.log(f"generating {path.name} ...")
            stats_path.write_text(json.dumps(write()))
        if path not in self._warm:
            warm_page_cache(str(path))
            self._warm.add(path)
        return str(path)


def warm_page_cache(path: str) -> None:
    """Read the file once so that no measurement pays for the disk alone."""
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


# --------------------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------------------


class Bench:
    def __init__(self, args, log: Callable[[str], None]):
        self.args = args
        self.log = log
        self.data = Data(Path(args.data_dir), args.row_group_size, log)
        self.timeout = args.timeout
        self._memo: dict[str, dict] = {}

    def t(self, r: dict, prefix: str = "") -> float:
        """The chosen clock's seconds of a measurement (``--clock``)."""
        return r[f"{prefix}cpu_s"] if self.args.clock == "cpu" else r[f"{prefix}seconds"]

    def rate(self, r: dict) -> float:
        return r["rows"] / self.t(r)

    def measure(self, kind: str, **kwargs) -> dict:
        """A child measurement, made once per run and shared by the rows that need it. Timed kinds run
        ``--repeat`` times and keep the fastest run (on a shared machine the minimum is the least disturbed)."""
        key = json.dumps([kind, kwargs], sort_keys=True)
        if key not in self._memo:
            self.log(f"  measuring {kind} {kwargs}")
            runs = [run_child(kind, self.timeout, **kwargs) for _ in range(self.args.repeat if kind in TIMED else 1)]
            self._memo[key] = min(runs, key=lambda r: self.t(r) if "seconds" in r else 0)
        return self._memo[key]

    def parquet_bound(self, path: str) -> dict:
        return self.measure("parquet_bound", path=path)

    @property
    def toolmind_file(self) -> str:
        return self.data.toolmind(self.args.rows)

    @property
    def swift_file(self) -> str:
        return self.data.ms_swift(self.args.swift_rows)

    def swift_tool(self, streaming: bool) -> dict:
        """ms-swift 4.6.0's own load + preprocess of the same file, in its own venv (fastest of ``--repeat``)."""
        key = f"swift-tool-{streaming}"
        if key not in self._memo:
            python = swift_python()
            if not python.exists():
                raise MeasureError(f"no ms-swift venv at {python}; bash benchmarks/swift_env.sh makes it "
                                   "(one made elsewhere: set SWIFT_PYTHON to its Python)")
            self.log(f"  measuring ms-swift {'streaming' if streaming else 'map-style'}")
            cmd = [str(python), str(SWIFT_DRIVER), self.swift_file] + (["--streaming"] if streaming else [])
            runs = [_run_json(cmd, self.timeout, "ms-swift driver", reference=True) for _ in range(self.args.repeat)]
            self._memo[key] = min(runs, key=self.t)
        return self._memo[key]

    # -- rows -------------------------------------------------------------------------------------------

    def row_stream(self) -> dict:
        path = self.toolmind_file
        bound = self.parquet_bound(path)
        ours = self.measure("stream", path=path)
        ratio = self.rate(ours) / self.rate(bound)
        detail = (f"{self.rate(ours):,.0f} vs {self.rate(bound):,.0f} rows/s ({ours['rows']:,} rows, "
                  f"{ours['calls']:,} calls; bound read {bound['rows']:,})")
        try:
            floor = self.measure("output_floor", path=path, rows=min(20_000, self.args.rows))
            bound_us, build_us = 1e6 / self.rate(bound), self.t(floor, "build_") / floor["rows"] * 1e6
            detail += (f"; ceiling for any converter handing out these rows: the bound plus building them at C "
                       f"speed (orjson.loads of their JSON, {build_us:.0f} us a row on the first {floor['rows']:,} "
                       f"rows, against {bound_us:.0f} for the bound) = {bound_us / (bound_us + build_us):.2f}x")
        except MeasureError as exc:
            detail += f"; ceiling not measured ({exc})"
        return result(ratio, ">= 0.5x", ratio >= 0.5, detail, check=ours["rows"] == bound["rows"])

    def row_prepare(self) -> dict:
        path = self.toolmind_file
        bound = self.parquet_bound(path)
        ours = self.measure("prepare", path=path, num_proc=1)
        mb_per_s, bound_mb_per_s = (bound["text_bytes"] / self.t(r) / 1e6 for r in (ours, bound))
        ratio = mb_per_s / bound_mb_per_s
        return result(ratio, ">= 0.33x", ratio >= 0.33,
                      f"{mb_per_s:,.1f} vs {bound_mb_per_s:,.1f} MB/s of messages text; {self.rate(ours):,.0f} "
                      f"rows/s, {self.t(ours):.1f} s, {ours['arrow_mb']:,.0f} MB Arrow",
                      check=ours["rows"] == bound["rows"])

    def row_rss(self) -> dict:
        sizes = sorted(set(self.args.rss_rows))
        peaks = {}
        for n in sizes:
            peaks[n] = self.measure("prepare", path=self.data.toolmind(n), num_proc=1)["peak_rss_mib"]
        small, mid, large = sizes[0], sizes[1] if len(sizes) > 1 else sizes[0], sizes[-1]
        ratio = peaks[mid] / peaks[small]
        under = peaks[large] * 1024 ** 2 < GIB
        detail = ", ".join(f"{n:,} rows {peaks[n]:,.0f} MiB" for n in sizes)
        if large != mid:
            detail += f"; {large:,}/{small:,}: {peaks[large] / peaks[small]:.2f}x"
        return result(ratio, f"<= 1.2x ({mid:,}/{small:,} rows) and < 1 GiB at {large:,}", ratio <= 1.2 and under,
                      detail)

    def row_first_row(self) -> dict:
        path = self.toolmind_file
        reps = max(self.args.repeat, 1 if self.args.quick else 3)

        def median(kind: str, **kwargs) -> dict:
            key = json.dumps(["median", kind, kwargs], sort_keys=True)
            if key not in self._memo:
                self.log(f"  measuring {kind} {kwargs} x{reps}")
                self._memo[key] = [run_child(kind, self.timeout, **kwargs) for _ in range(reps)]
            return {k: statistics.median(self.t(r, k) for r in self._memo[key]) for k in ("first_", "second_")}

        pyarrow = median("pyarrow_first_batch", path=path)
        first = median("first_row", path=path, split="synthetic")
        last = median("first_row", path=path, split="tau_train")
        ratio = first["second_"] / pyarrow["second_"]
        ms = lambda s: f"{s * 1e3:,.0f} ms"  # noqa: E731
        return result(ratio, "<= 2x", ratio <= 2,
                      f"split synthetic (first in the file) {ms(first['second_'])} vs pyarrow {ms(pyarrow['second_'])}; "
                      f"tau_train (last) {ms(last['second_'])} = {last['second_'] / pyarrow['second_']:.1f}x; first "
                      f"load in a process (one-time setup) {ms(first['first_'])} vs {ms(pyarrow['first_'])} = "
                      f"{first['first_'] / pyarrow['first_']:.1f}x (second loads compared; median of {reps}; imports "
                      f"and torch off the clock)")

    def _swift_reference(self, streaming: bool) -> tuple[dict, str]:
        try:
            return self.swift_tool(streaming), "ms-swift 4.6.0"
        except MeasureError as exc:
            self.log(f"  ms-swift unavailable ({exc}); comparing with the parse bound")
            return self.measure("jsonl_bound", path=self.swift_file), f"parse bound (ms-swift not run: {exc})"

    @staticmethod
    def _swift_target(ref: dict, ratio: float) -> tuple[str, Optional[bool]]:
        if "mode" in ref:  # ms-swift's own run
            return ">= 3x", ratio >= 3
        # no target, as array_num_proc: "-" in the table, left out of "N of M targets met"
        return "none (ms-swift not run: ratio to the parse bound)", None

    @staticmethod
    def _swift_measure(ref: dict, without_swift: str, row: dict) -> dict:
        """The row's measure names the reference it was divided by: ROWS' title names ms-swift."""
        if "mode" not in ref:
            row["measure"] = without_swift
        return row

    def row_swift_stream(self) -> dict:
        path = self.swift_file
        ours = self.measure("stream", path=path, source="ms_swift", split="train")
        ref, name = self._swift_reference(streaming=True)
        bound = self.measure("jsonl_bound", path=path)
        ratio = self.rate(ours) / self.rate(ref)
        target, met = self._swift_target(ref, ratio)
        row = result(ratio, target, met,
                     f"ours {self.rate(ours):,.0f} rows/s vs {name} {self.rate(ref):,.0f} rows/s "
                     f"({ref.get('mode', 'orjson layers')}); parse bound {self.rate(bound):,.0f} rows/s, ours "
                     f"{self.rate(ours) / self.rate(bound):.2f}x of it; {ours['rows']:,} rows, {ours['calls']:,} calls",
                     check=ours["rows"] == ref["rows"] == bound["rows"])
        return self._swift_measure(ref, "ms-swift agent JSONL: our streaming / parse bound (ms-swift not run)", row)

    def row_swift_prepare(self) -> dict:
        path = self.swift_file
        ours = self.measure("prepare", path=path, source="ms_swift", num_proc=1)
        ref, name = self._swift_reference(streaming=False)
        ratio = self.rate(ours) / self.rate(ref)
        target, met = self._swift_target(ref, ratio)
        row = result(ratio, target, met,
                     f"ours {self.rate(ours):,.0f} rows/s ({self.t(ours):.1f} s) vs {name} "
                     f"{self.rate(ref):,.0f} rows/s ({ref.get('mode', 'orjson layers')})",
                     check=ours["rows"] == ref["rows"])
        return self._swift_measure(ref, "the same, prepare / parse bound (ms-swift not run)", row)

    def row_shards(self) -> dict:
        shards = self.measure("shards", path=self.toolmind_file)
        largest = max(shards["splits"].items(), key=lambda kv: kv[1]["row_groups"])
        name, s = largest
        total = sum(v["n_shards"] for v in shards["splits"].values())
        met = s["n_shards"] >= min(2, s["row_groups"]) and s["n_shards"] <= max(s["row_groups"], 1)
        return result(float(s["n_shards"]), "one per row group (or group of row groups)", met,
                      f"split {name}: {s['n_shards']} shard(s) for {s['row_groups']} row groups; all splits: {total} "
                      f"shards, file {shards['row_groups']} row groups of {self.args.row_group_size:,} rows", unit="")

    def row_split_by_node(self) -> dict:
        path = self.toolmind_file
        whole = self.measure("stream", path=path)
        nodes = [self.measure("stream", path=path, rank=r, world_size=2) for r in (0, 1)]
        slowest = max(self.t(n) for n in nodes)
        ratio = slowest / self.t(whole)
        partition = (sum(n["rows"] for n in nodes) == whole["rows"]
                     and sum(n["id_checksum"] for n in nodes) % (1 << 61) == whole["id_checksum"])
        return result(ratio, "<= 0.6x", ratio <= 0.6,
                      f"node 0 {self.t(nodes[0]):.1f} s ({nodes[0]['rows']:,} rows), node 1 {self.t(nodes[1]):.1f} s "
                      f"({nodes[1]['rows']:,} rows), whole {self.t(whole):.1f} s; nodes partition the rows: "
                      f"{'yes' if partition else 'NO'}", check=partition)

    def row_num_proc(self) -> dict:
        path = self.toolmind_file
        one = self.measure("prepare", path=path, num_proc=1)
        two = self.measure("prepare", path=path, num_proc=2)
        ratio = one["seconds"] / two["seconds"]  # a parallel speedup: wall time whatever --clock says
        return result(ratio, f">= 1.6x on {os.cpu_count()} cores", ratio >= 1.6,
                      f"wall time num_proc=1 {one['seconds']:.1f} s, num_proc=2 {two['seconds']:.1f} s, of which "
                      f"{two['worker_cpu_s']:.1f} s CPU in worker processes (0: datasets ran it in one process); "
                      f"peak RSS {one['peak_rss_mib']:,.0f} / {two['peak_rss_mib']:,.0f} MiB",
                      check=one["rows"] == two["rows"] and two["worker_cpu_s"] > 0,
                      check_failed="row counts differ, or no worker process did any work: the ratio is noise")

    def row_stream_num_proc(self) -> dict:
        """Not a row of the issue's table: what streaming gains from worker processes on this machine, for
        ToolMind and for the ms-swift comparison (wall time, as any parallel speedup)."""
        out = []
        for label, kwargs in (("ToolMind", {"path": self.toolmind_file}),
                              ("ms-swift", {"path": self.swift_file, "source": "ms_swift", "split": "train"})):
            one = self.measure("stream", **kwargs)
            two = self.measure("stream", **kwargs, num_proc=2)
            out.append((label, one, two, one["seconds"] / two["seconds"]))
        detail = "; ".join(f"{label}: {one['rows'] / one['seconds']:,.0f} -> {two['rows'] / two['seconds']:,.0f} rows/s "
                           f"(wall)" for label, one, two, _ in out)
        ratio = out[0][3]
        return result(ratio, f">= 1.6x on {os.cpu_count()} cores", ratio >= 1.6, detail,
                      check=all(one["rows"] == two["rows"] and one["id_checksum"] == two["id_checksum"]
                                for _, one, two, _ in out),
                      check_failed="worker processes streamed other rows than one process")

    def row_resume(self) -> dict:
        path = self.toolmind_file
        shards = self.measure("shards", path=path)["splits"]
        split = max(shards, key=lambda name: shards[name]["row_groups"])
        n_rows = self.measure("stream", path=path, split=split)["rows"]
        # Mid-split and mid-row-group: the middle row group's middle row (row groups start at file row 0 and
        # the largest split comes first in the generated file).
        group = self.args.row_group_size
        position = min(max(n_rows // 2 // group * group + group // 2, 1), n_rows - 1)
        plain = self.measure("resume", path=path, split=split, position=position)
        node = self.measure("resume", path=path, split=split, position=max(position // 2, 1), rank=0, world_size=2)

        def part(r: dict) -> str:
            rows = (f"{r['resume_converted_rows']:,} rows converted vs {r['fresh_converted_rows']:,} for a fresh start"
                    if r["resume_converted_rows"] is not None else "rows converted: not countable")
            at = "at the next row" if r["resumed_at_next_row"] else f"WRONG ROW ({r['resumed_id']} != {r['expected_id']})"
            return (f"after {r['position']:,} rows: {rows}, next row in {self.t(r, 'resume_') * 1e3:,.0f} ms vs "
                    f"{self.t(r, 'fresh_') * 1e3:,.0f} ms, {at}")

        ratio = self.t(plain, "resume_") / self.t(plain, "fresh_")
        reread_ok = all(r["resume_converted_rows"] is None
                        or r["resume_converted_rows"] <= r["fresh_converted_rows"] + group for r in (plain, node))
        correct = plain["resumed_at_next_row"] and node["resumed_at_next_row"]
        return result(ratio, "resumes at the next row without re-reading (<= 2x a fresh start)",
                      ratio <= 2 and reread_ok and correct,
                      f"split {split}: {part(plain)}; after split_dataset_by_node rank 0/2: {part(node)}",
                      check=correct)

    def row_toolmind_jsonl(self) -> dict:
        """Not a row of the issue's table: ToolMind in JSON Lines, where no statistics tell the splits apart."""
        rows = min(self.args.rows, 30_000)
        lines = self.measure("prepare", path=self.data.toolmind_jsonl(rows), num_proc=1)
        parquet = self.measure("prepare", path=self.data.toolmind(rows), num_proc=1)
        ratio = self.t(lines) / self.t(parquet)
        return result(ratio, "<= 1.2x", ratio <= 1.2,
                      f"all seven splits of {rows:,} rows: JSON Lines {self.t(lines):.1f} s "
                      f"({self.data.stats(self.data.toolmind_jsonl(rows))['bytes'] / 1e6:,.0f} MB), Parquet "
                      f"{self.t(parquet):.1f} s", check=lines["rows"] == parquet["rows"])

    def row_array_num_proc(self) -> dict:
        """Not a row of the issue's table: the ms-swift rows as one JSON array, prepared by two processes (the
        array cut into pieces between elements first) against one."""
        path = self.data.ms_swift_array(self.args.swift_rows)
        one = self.measure("prepare", path=path, source="ms_swift", num_proc=1)
        two = self.measure("prepare", path=path, source="ms_swift", num_proc=2)
        ratio = one["seconds"] / two["seconds"]  # a parallel speedup: wall time whatever --clock says
        return result(ratio, "(no target)", None,
                      f"{self.data.stats(path)['bytes'] / 1e6:,.0f} MB array: wall time num_proc=1 "
                      f"{one['seconds']:.1f} s, num_proc=2 {two['seconds']:.1f} s ({two['worker_cpu_s']:.1f} s CPU in "
                      f"worker processes; 0: one process did it all)",
                      check=one["rows"] == two["rows"], check_failed="row counts differ")

    ROWS: dict[str, tuple[str, str]] = {
        "stream": ("streaming unified rows / (pyarrow + orjson.loads(messages))", "row_stream"),
        "prepare": ("prepare (map-style), MB/s of messages text / the same parse bound", "row_prepare"),
        "rss": ("peak RSS of prepare, larger / smaller file", "row_rss"),
        "first_row": ("first streamed row / pyarrow's first batch", "row_first_row"),
        "swift_stream": ("ms-swift agent JSONL: our streaming / ms-swift 4.6.0 streaming load+preprocess",
                         "row_swift_stream"),
        "swift_prepare": ("the same, prepare / ms-swift map-style load+preprocess", "row_swift_prepare"),
        "shards": ("one ToolMind file, streamed: n_shards of its largest split", "row_shards"),
        "split_by_node": ("split_dataset_by_node(world_size=2): slowest node / whole stream", "row_split_by_node"),
        "num_proc": ("prepare num_proc=1 time / num_proc=2 time", "row_num_proc"),
        "resume": ("resume from state_dict mid-shard: next row / fresh first row", "row_resume"),
        "stream_num_proc": ("streaming num_proc=2 / num_proc=1 (ToolMind; ms-swift in the detail)",
                            "row_stream_num_proc"),
        "toolmind_jsonl": ("ToolMind prepare, JSON Lines / Parquet (same rows)", "row_toolmind_jsonl"),
        "array_num_proc": ("ms-swift rows in one JSON array: prepare num_proc=1 time / num_proc=2 time",
                           "row_array_num_proc"),
    }

    def with_other_clock(self, method: str) -> str:
        """The same row by the other clock, from the same measurements (nothing is run again; the fastest
        repetition was picked by the main clock)."""
        main = self.args.clock
        self.args.clock = "cpu" if main == "wall" else "wall"
        try:
            return getattr(self, method)()["shown"]
        finally:
            self.args.clock = main

    def run(self, only: list[str]) -> list[dict]:
        rows = []
        for name in only:
            title, method = self.ROWS[name]
            self.log(f"[{name}] {title}")
            started = time.perf_counter()
            try:
                row = getattr(self, method)()
                row["other_clock"] = self.with_other_clock(method)
            except Exception as exc:  # one failing measure must not cost the others
                row = {"value": None, "shown": "FAILED", "target": "", "met": False, "other_clock": "",
                       "detail": f"{type(exc).__name__}: {exc}"}
            row.update(name=name, measure=row.get("measure", title), seconds=round(time.perf_counter() - started, 1))
            self.log(f"  -> {row['shown']} ({row['detail']})")
            rows.append(row)
        return rows


def result(value: float, target: str, met: bool, detail: str, unit: str = "x", check: bool = True,
           check_failed: str = "row counts or ids differ") -> dict:
    """One table row. ``check`` is a sanity condition (same rows on both sides, right resume row...); a
    failed check marks the row unmet whatever the ratio, saying ``check_failed``."""
    shown = f"{value:.2f}{unit}" if unit else f"{value:g}"
    if not check:
        detail = f"SANITY CHECK FAILED ({check_failed}); " + detail
    met = None if met is None and check else bool(met and check)  # None: a row with no target
    return {"value": value, "shown": shown, "target": target, "met": met, "detail": detail}


def environment(code_ref: Optional[str]) -> dict:
    import datasets
    import pyarrow

    def git(*cmd: str) -> str:
        try:
            return subprocess.run(["git", *cmd], capture_output=True, text=True, cwd=REPO).stdout.strip()
        except OSError:
            return ""

    if code_ref:
        code = f"{git('rev-parse', '--short', code_ref)} (--code {code_ref})"
    else:
        dirty = git("status", "--porcelain", "--", "tooluse_datasets", "builders")
        code = git("rev-parse", "--short", "HEAD") + (" + uncommitted changes (working tree)" if dirty else "")
    return {"code": code,
            "python": sys.version.split()[0], "datasets": datasets.__version__, "pyarrow": pyarrow.__version__,
            "cpus": os.cpu_count(), "load_average": [round(x, 2) for x in os.getloadavg()]}


def print_table(rows: list[dict], env: dict, files: dict) -> None:
    print(f"code {env['code']}; python {env['python']}, datasets {env['datasets']}, pyarrow {env['pyarrow']}, "
          f"{env['cpus']} cores, load average {env['load_average']} at start, {env['load_average_end']} at the end; "
          f"{env['clock']} clock")
    for name, stats in files.items():
        print(f"{name}: " + ", ".join(f"{k} {v:,}" for k, v in stats.items() if isinstance(v, int)))
    print()
    other = "cpu" if env["clock"] == "wall" else "wall"
    print(f"| measure | now ({env['clock']} clock) | target | met | {other} clock | detail |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        met = "-" if r["met"] is None else "yes" if r["met"] else "no"
        print(f"| {r['measure']} | {r['shown']} | {r['target']} | {met} | {r['other_clock']} | {r['detail']} |")


def positive_int(text: str) -> int:
    """A count or size: 0 or less is refused (a 0 once meant the 279,737-row default, minutes of generating)."""
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def positive_seconds(text: str) -> float:
    """A time limit: 0 or less failed every measurement, after the data was generated."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text}")
    return value


def parse_sizes(text: str) -> list[int]:
    return [positive_int(x) for x in text.split(",") if x.strip()]


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 2)[2])
    p.add_argument("--rows", type=positive_int, default=None, help="ToolMind rows (default 279737, the card's total)")
    p.add_argument("--swift-rows", type=positive_int, default=None, help="ms-swift rows (default 30000)")
    p.add_argument("--rss-rows", type=parse_sizes, default=None,
                   help="comma-separated file sizes for the rss row (default 10000,124000,279737)")
    p.add_argument("--row-group-size", type=positive_int, default=1000)
    p.add_argument("--quick", action="store_true", help="small sizes, one repetition: a smoke run of a minute or two")
    p.add_argument("--only", default=",".join(Bench.ROWS), help=f"comma-separated rows: {', '.join(Bench.ROWS)}")
    p.add_argument("--json", action="store_true", help="print the results as JSON instead of the table")
    p.add_argument("--table-from", metavar="FILE", help="print the table of a run saved with --json, and exit")
    p.add_argument("--data-dir", default=str(HERE / "data"))
    p.add_argument("--timeout", type=positive_seconds, default=3600, help="seconds per measurement subprocess")
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="time ratios by wall time (default) or CPU time (steadier on a busy shared machine; the "
                        "num_proc speedup is always wall time)")
    p.add_argument("--repeat", type=positive_int, default=1,
                   help="run each timed measurement this many times and keep the fastest (noisy machines)")
    p.add_argument("--code", metavar="GIT_REF", help="measure the package as committed at this ref, not the working tree")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--child-kwargs", default="{}", help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    sys.path.insert(0, str(HERE))
    if args.code and not args.child:
        try:
            code_dir = export_code(args.code)
        except subprocess.CalledProcessError as exc:  # git's own words: unknown revision, not a repository...
            p.error(f"--code {args.code}: git archive failed: {exc.stderr.decode(errors='replace').strip()}")
        atexit.register(shutil.rmtree, code_dir, True)
        compileall.compile_dir(str(code_dir), quiet=1)  # else the first measurement pays for the bytecode
        sys.path.insert(0, str(code_dir))  # the generators import the package too
        CODE_ENV["PYTHONPATH"] = os.pathsep.join([str(code_dir)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    if args.child:
        print(json.dumps(CHILDREN[args.child](**json.loads(args.child_kwargs))))
        return 0

    if args.table_from:
        try:
            saved = json.loads(Path(args.table_from).read_text())
            rows, env, files = saved["rows"], saved["environment"], saved["files"]
        except (OSError, ValueError, KeyError, TypeError) as exc:  # a missing file, or not a --json run's output
            p.error(f"--table-from {args.table_from}: not a run saved with --json ({type(exc).__name__}: {exc})")
        print_table(rows, env, files)
        return 0
    args.rows = args.rows or (6_000 if args.quick else 279_737)
    args.swift_rows = args.swift_rows or (3_000 if args.quick else 30_000)
    args.rss_rows = args.rss_rows or ([2_000, args.rows] if args.quick else [10_000, 124_000, 279_737])
    only = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = [name for name in only if name not in Bench.ROWS]
    if unknown:
        p.error(f"unknown rows {unknown}; choose from {', '.join(Bench.ROWS)}")
    if not only:
        p.error(f"--only names no row; choose from {', '.join(Bench.ROWS)}")

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    env = environment(args.code)
    env["clock"] = args.clock
    bench = Bench(args, log)
    started = time.perf_counter()
    rows = bench.run(only)
    files = {}
    for path in (bench.data.dir / f"toolmind-{args.rows}-seed0-rg{args.row_group_size}.parquet",
                 bench.data.dir / f"ms_swift-{args.swift_rows}-seed0.jsonl"):
        if path.with_suffix(".json").exists():
            files[path.name] = bench.data.stats(str(path))
    env["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    if args.json:
        print(json.dumps({"environment": env, "files": files, "rows": rows,
                          "seconds": round(time.perf_counter() - started, 1)}, indent=1))
    else:
        print_table(rows, env, files)
        targets = [r for r in rows if r["met"] is not None]
        print(f"\n{sum(r['met'] for r in targets)} of {len(targets)} targets met; {time.perf_counter() - started:,.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
