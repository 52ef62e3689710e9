"""Where streaming conversion spends its time: cProfile of ``td.load(SOURCE, streaming=True)`` over generated rows.

    python benchmarks/profile_conversion.py toolmind [--rows 10000] [--top 30] [--code GIT_REF]
    python benchmarks/profile_conversion.py ms_swift [--rows 10000]

Streams every row of the generated file (the same files ``bench_scale.py`` uses, made on first use) under
cProfile and prints the functions with the most own time and the most cumulative time, with seconds. torch
(which datasets imports on creating an IterableDataset) is imported before profiling starts. Profiling
slows Python code by roughly 1.5-2x, so read shares, not absolute rates. ``--pyinstrument`` uses pyinstrument
instead, if installed (a call tree; not a project dependency: ``pip install pyinstrument`` into your venv).
"""
from __future__ import annotations

import argparse
import atexit
import cProfile
import importlib.util
import io
import os
import pstats
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_scale  # noqa: E402  (sibling script: data files, --code export)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("source", choices=("toolmind", "ms_swift"))
    p.add_argument("--rows", type=bench_scale.positive_int, default=10_000)
    p.add_argument("--top", type=bench_scale.positive_int, default=30)
    p.add_argument("--row-group-size", type=bench_scale.positive_int, default=1000)
    p.add_argument("--data-dir", default=str(HERE / "data"))
    p.add_argument("--code", metavar="GIT_REF", help="profile the package as committed at this ref")
    p.add_argument("--pyinstrument", action="store_true")
    args = p.parse_args(argv)
    if args.pyinstrument and importlib.util.find_spec("pyinstrument") is None:  # not a project dependency
        p.error("--pyinstrument: pyinstrument is not installed (pip install pyinstrument into this venv)")

    if args.code:
        try:
            code_dir = bench_scale.export_code(args.code)
        except subprocess.CalledProcessError as exc:  # git's own words: unknown revision, not a repository...
            p.error(f"--code {args.code}: git archive failed: {exc.stderr.decode(errors='replace').strip()}")
        atexit.register(shutil.rmtree, code_dir, True)
        sys.path.insert(0, str(code_dir))
    for key, value in bench_scale.CHILD_ENV.items():
        os.environ.setdefault(key, value)

    data = bench_scale.Data(Path(args.data_dir), args.row_group_size, lambda m: print(m, file=sys.stderr))
    path = data.toolmind(args.rows) if args.source == "toolmind" else data.ms_swift(args.rows)
    bench_scale.preimport_for_streaming()

    def stream() -> int:
        n = 0
        for ds in bench_scale._streamed_splits(args.source, path, None if args.source == "toolmind" else "train"):
            for _ in ds:
                n += 1
        return n

    if args.pyinstrument:
        from pyinstrument import Profiler

        profiler = Profiler(interval=0.001)
        profiler.start()
        rows = stream()
        profiler.stop()
        print(profiler.output_text(unicode=True, color=False, show_all=False))
        print(f"{rows:,} rows")
        return 0

    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    rows = stream()
    profiler.disable()
    seconds = time.perf_counter() - started
    print(f"{args.source}: {rows:,} rows from {Path(path).name} in {seconds:.1f} s under cProfile "
          f"({rows / seconds:,.0f} rows/s)\n")
    for key, title in (("tottime", "own time"), ("cumulative", "cumulative time")):
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out)
        stats.strip_dirs().sort_stats(key).print_stats(args.top)
        body = out.getvalue()
        print(f"== top {args.top} by {title} ==")
        print(body[body.index("ncalls"):] if "ncalls" in body else body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
