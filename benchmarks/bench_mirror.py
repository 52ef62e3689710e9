"""Mirror builds by engine: one worker vs two, with a local process pool (``num_proc``) and with Ray, on generated
data; peak memory of each worker next to a single-process build; every build's files compared byte for byte.

    python benchmarks/bench_mirror.py [--toolmind-rows 30000] [--swift-rows 20000] [--configs unified raw]
                                      [--only toolmind|ms_swift] [--no-ray] [--ray-data] [--repeat 2]

Data comes from ``generate_toolmind.py`` (Parquet, 1,000-row row groups: one shard each) and
``generate_ms_swift.py`` (JSON Lines, cut into ``--shard-size`` byte ranges), the files ``bench_scale.py`` makes
and caches in ``benchmarks/data/``.
Each build runs in a fresh interpreter: times are the build alone (Ray's start-up is printed apart), memory is
sampled every 0.1 s from the process tree (pool workers, or Ray's ``default_worker`` processes). CPU seconds of the
driver and its workers, and the cores that makes per second of build, are printed with the machine's 1-minute
load average: on a shared 2-core machine, other work takes from the second worker what it leaves to the first,
and "cores used" shows how much of the machine a build really got. ``--ray-data``
also times the Ray Data form of the same engine (``from_items(tasks, override_num_blocks=len(tasks))
.map_batches(...)``) against plain Ray tasks, which the package uses.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_scale  # noqa: E402  (sibling script: the generated data files, shared with the other benchmarks)


# --------------------------------------------------------------------------------------------------
# One measure (run in a fresh interpreter)
# --------------------------------------------------------------------------------------------------


class TreeMemory:
    """Peak RSS of this process and, separately, of its worker processes (the largest one); the workers' CPU."""

    def __init__(self, worker_marks: tuple[str, ...]):
        import psutil

        self.me = psutil.Process()
        self.marks = worker_marks
        self.driver_peak = self.worker_peak = 0
        self.worker_cpu: dict[int, float] = {}  # pid -> CPU seconds last seen
        self.worker_cpu_at_start: dict[int, float] = {}  # pid -> CPU seconds before the build (Ray's start-up)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self.worker_cpu_at_start = dict(self._workers_cpu())
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    @property
    def build_worker_cpu(self) -> float:
        """Workers' CPU seconds during the build: what each had used when it started (a Ray worker may have
        started with ``ray.init``, before the clock) is taken off. Sampled: the last 0.1 s of each may be missed."""
        return sum(cpu - self.worker_cpu_at_start.get(pid, 0.0) for pid, cpu in self.worker_cpu.items())

    def _workers_cpu(self):
        """``(pid, CPU seconds)`` of each worker process now; their peak RSS is noted on the way."""
        import psutil

        for child in self.me.children(recursive=True):
            try:
                if any(mark in " ".join(child.cmdline()) for mark in self.marks):
                    self.worker_peak = max(self.worker_peak, child.memory_info().rss)
                    times = child.cpu_times()
                    yield child.pid, times.user + times.system
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass

    def _run(self):
        import psutil

        while not self._stop.is_set():
            try:
                self.driver_peak = max(self.driver_peak, self.me.memory_info().rss)
                self.worker_cpu.update(self._workers_cpu())
            except psutil.NoSuchProcess:
                pass
            self._stop.wait(0.1)


def measure(spec: dict) -> dict:
    import logging

    logging.disable(logging.WARNING)  # skipped rows are counted in the manifest; keep the output readable
    from tooluse_datasets.mirror import MirrorRequest, build_mirror, mirror_files

    request = MirrorRequest(spec["source"], configs=spec["configs"], data_files=[spec["file"]],
                            source_options={"shard_bytes": spec["shard_bytes"]})
    ray_init = 0.0
    if spec["engine"] == "ray":
        import ray

        start = time.perf_counter()
        ray.init(num_cpus=spec["num_proc"], include_dashboard=False, log_to_driver=False,
                 logging_level=logging.WARNING)
        ray_init = time.perf_counter() - start
        if spec.get("ray_data"):
            use_ray_data()
    # Ray titles its workers "ray::<task>" (or "ray::IDLE") once started; pool workers are spawned interpreters.
    marks = ("default_worker.py", "ray::") if spec["engine"] == "ray" else ("multiprocessing",)
    with TreeMemory(marks) as memory:
        start, cpu_start = time.perf_counter(), time.process_time()
        folder = build_mirror(request, spec["out"], engine=spec["engine"], num_proc=spec["num_proc"])
        seconds = time.perf_counter() - start
        cpu = time.process_time() - cpu_start
    digest = hashlib.sha256()
    for rel in mirror_files(folder):
        digest.update(rel.encode() + hashlib.sha256((folder / rel).read_bytes()).digest())
    cpu += memory.build_worker_cpu
    return {"seconds": seconds, "ray_init": ray_init, "load": os.getloadavg()[0], "cpu": cpu, "driver_mb": memory.driver_peak / 2**20,
            "worker_mb": memory.worker_peak / 2**20, "digest": digest.hexdigest()}


def use_ray_data() -> None:
    """Swap the package's Ray engine for the Ray Data form of it (timing comparison only)."""
    import ray

    from tooluse_datasets.mirror import engines

    def run_with_ray_data(tasks, num_proc, address):
        dataset = ray.data.from_items([{"task": t} for t in tasks], override_num_blocks=len(tasks))
        results = dataset.map_batches(lambda batch: {"result": [engines.convert_shard(t) for t in batch["task"]],
                                                     "key": [t.key for t in batch["task"]]},
                                      batch_size=1, concurrency=num_proc)
        by_key = {t.key: t for t in tasks}
        for row in results.iter_rows():
            yield by_key[row["key"]], row["result"]

    engines._run_ray = run_with_ray_data


# --------------------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------------------


def run_fresh(spec: dict) -> dict:
    done = subprocess.run([sys.executable, __file__, "--measure", json.dumps(spec)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"measure {spec} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--toolmind-rows", type=bench_scale.positive_int, default=30_000)
    p.add_argument("--swift-rows", type=bench_scale.positive_int, default=20_000)
    from tooluse_datasets.formats import FORMATS

    # an unknown name failed in the first build's interpreter, a traceback, after the data was generated
    p.add_argument("--configs", nargs="+", default=["unified", "raw", "swift", "toolmind"], choices=list(FORMATS))
    p.add_argument("--shard-size", type=bench_scale.positive_int, default=8 << 20,
                   help="bytes per JSON Lines shard (ms-swift)")
    p.add_argument("--only", choices=["toolmind", "ms_swift"])
    p.add_argument("--no-ray", action="store_true")
    p.add_argument("--ray-data", action="store_true", help="also time Ray Data's map_batches form")
    p.add_argument("--repeat", type=bench_scale.positive_int, default=1,
                   help="runs per measure; the fastest is kept (shared machines)")
    p.add_argument("--out", default="/tmp/bench_mirror")
    p.add_argument("--measure", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.measure:
        print(json.dumps(measure(json.loads(args.measure))))
        return

    runs = [("local, 1 process", "local", 1, False), ("local, num_proc=2", "local", 2, False)]
    if not args.no_ray:
        runs += [("ray, 1 worker", "ray", 1, False), ("ray, 2 workers", "ray", 2, False)]
        if args.ray_data:
            runs += [("ray data, 1 worker", "ray", 1, True), ("ray data, 2 workers", "ray", 2, True)]
    sources = [("toolmind", args.toolmind_rows), ("ms_swift", args.swift_rows)]
    data = bench_scale.Data(HERE / "data", row_group_size=1000, log=lambda message: print(message, flush=True))
    for source, rows in sources:
        if args.only and source != args.only:
            continue
        file = Path(data.toolmind(rows) if source == "toolmind" else data.ms_swift(rows))
        print(f"\n{source}: {file.name} ({file.stat().st_size / 1e6:.0f} MB), configs {' '.join(args.configs)}")
        print(f"{'engine':<22}{'build s':>9}{'CPU s':>8}{'cores used':>12}{'ray init s':>12}{'driver MB':>11}"
              f"{'worker MB':>11}{'load 1m':>9}")
        results = {}
        for label, engine, num_proc, ray_data in runs:
            spec = {"source": source, "file": str(file), "configs": args.configs, "engine": engine,
                    "num_proc": num_proc, "ray_data": ray_data, "shard_bytes": args.shard_size if source == "ms_swift"
                    else 1, "out": f"{args.out}/{source}-{engine}-{num_proc}{'-data' if ray_data else ''}"}
            r = results[label] = min((run_fresh(spec) for _ in range(args.repeat)), key=lambda m: m["seconds"])
            worker = f"{r['worker_mb']:.0f}" if r["worker_mb"] else "-"
            init = f"{r['ray_init']:.1f}" if engine == "ray" else "-"
            print(f"{label:<22}{r['seconds']:>9.1f}{r['cpu']:>8.1f}{r['cpu'] / r['seconds']:>12.2f}{init:>12}"
                  f"{r['driver_mb']:>11.0f}{worker:>11}{r['load']:>9.1f}", flush=True)
        base = results["local, 1 process"]
        print(f"num_proc=2 vs 1 process: {base['seconds'] / results['local, num_proc=2']['seconds']:.2f}x")
        if "ray, 2 workers" in results:
            print(f"ray 2 workers vs 1: {results['ray, 1 worker']['seconds'] / results['ray, 2 workers']['seconds']:.2f}x")
        if "ray data, 2 workers" in results:
            print(f"ray data 2 workers vs 1: "
                  f"{results['ray data, 1 worker']['seconds'] / results['ray data, 2 workers']['seconds']:.2f}x; "
                  f"ray tasks vs ray data, 2 workers: "
                  f"{results['ray data, 2 workers']['seconds'] / results['ray, 2 workers']['seconds']:.2f}x")
        same = len({r["digest"] for r in results.values()}) == 1
        print(f"every engine wrote the same files: {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
