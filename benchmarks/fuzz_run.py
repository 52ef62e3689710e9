"""The fuzz run at scale: 10,000 mutated rows per source over ~110 files (JSON Lines, JSON, Parquet), loaded with
``on_error="skip"`` map-style and streaming, every row accounted for.

    python benchmarks/fuzz_run.py [--rows 10000] [--files 110] [--seed 0] [--sources nestful ms_swift ...]

Rows, mutations, files and checks come from ``fuzz_rows.py`` (the same as ``tests/test_fuzz.py``, at scale and
with 1 MB huge strings). Per source it prints, for all files loaded together:

* rows in the files (the format's rows: non-blank lines, array elements, Parquet rows; a file that is not what its
  extension says counts as one), converted, reported (each with file, row and reason), whole-file failures
  (files reported as one error, and the mutated rows they held), escaped (rows lost to an exception that is not
  the package's: a raw traceback), unaccounted (rows neither converted nor reported);
* planted numbers checked bit for bit in converted rows, and any property breach (map-style and streaming rows
  or counts differing, duplicate ids, a number changed);
* slow rows: each row converted alone (the map-style Arrow path: to raw, to unified, encoded into a table)
  and timed; rows over ``--slow`` seconds are listed, with the slowest time (reading a file is timed apart: a
  JSON document is parsed whole before its first row).

Targets: zero escaped, zero unaccounted, zero breaches. If a load fails as a whole, each file is loaded alone to
attribute the failure.
"""
from __future__ import annotations

import argparse
import logging
import random
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import fuzz_rows  # noqa: E402

SHARED = HERE.parent.parent / "shared" / "data"


def split_rows(total: int, files: int, rng: random.Random) -> list[int]:
    """``total`` rows over ``files`` files, unevenly (some files small, a few empty)."""
    weights = [rng.random() ** 2 for _ in range(files)]
    counts = [int(total * w / sum(weights)) for w in weights]
    for i in rng.sample(range(files), total - sum(counts)):
        counts[i] += 1
    return counts


def row_times(source: str, specs: list) -> tuple[list[tuple[float, str, int]], float]:
    """``(seconds, file, row)`` of each row converted alone into an Arrow table (reading excluded: a JSON
    document is parsed whole before its first row), and the slowest shard read."""
    from tooluse_datasets import registry
    from tooluse_datasets.pipeline import ShardConverter
    from tooluse_datasets.shards.paths import display_path
    from tooluse_datasets.shards.shard import RawBatch

    builder = registry.builder_class(source)(config_name="unified", data_files=[s.path for s in specs],
                                             on_error="skip")
    converter = ShardConverter(builder.source, ["unified"], on_error="skip")
    times, slowest_read = [], 0.0
    for plan in builder.split_plans():
        for shard in plan.shards:
            started = time.perf_counter()
            try:
                batches = list(builder.source.read(shard, plan))
            except Exception:  # noqa: BLE001 - a whole-file error: the loads report it, nothing to time
                continue
            slowest_read = max(slowest_read, time.perf_counter() - started)
            for batch in batches:
                for item, position in zip(batch.items, batch.positions):
                    started = time.perf_counter()
                    # the per-batch step of ShardConverter.batches, on a batch of this one row
                    converter._convert(RawBatch([item], [position]), display_path(shard.file), shard.file_label,
                                       plan.name, arrow=True, keep_unified=False)
                    times.append((time.perf_counter() - started, shard.file, item[0]))
    return times, slowest_read


def run_source(source: str, args: argparse.Namespace, folder: Path) -> dict:
    rng = random.Random(f"{args.seed}/{source}")
    seeds = fuzz_rows.seed_rows(source, SHARED)
    counts = split_rows(args.rows, args.files, rng)
    started = time.perf_counter()
    specs = fuzz_rows.make_files(source, seeds, folder, rng, files=args.files, rows_per_file=0, row_counts=counts,
                                 huge_chars=args.huge_chars)
    generated_in = time.perf_counter() - started
    started = time.perf_counter()
    mapped = fuzz_rows.load_case(source, specs, streaming=False, cache_dir=str(folder / "cache"))
    map_seconds = time.perf_counter() - started
    started = time.perf_counter()
    streamed = fuzz_rows.load_case(source, specs, streaming=True)
    stream_seconds = time.perf_counter() - started
    check = fuzz_rows.check_case(source, specs, mapped, streamed)
    failing_files = []
    if mapped.error is not None or streamed.error is not None:  # attribute the failure to files
        for spec in specs:
            alone = fuzz_rows.check_case(source, [spec],
                                         fuzz_rows.load_case(source, [spec], streaming=False,
                                                             cache_dir=str(folder / f"cache-{Path(spec.path).stem}")),
                                         fuzz_rows.load_case(source, [spec], streaming=True))
            if alone.escaped or alone.typed_failures or alone.problems:
                failing_files.append((Path(spec.path).name, alone.problems[:1]))
    times, slowest_read = row_times(source, specs) if not args.no_timing else ([], 0.0)
    slow = sorted((t for t in times if t[0] > args.slow), reverse=True)
    whole_files = [s for s in specs if s.whole_file_error]
    return {
        "source": source, "files": len(specs), "generated": sum(s.generated for s in specs),
        "items": check.items, "converted": check.converted, "reported": check.reported,
        "file_errors": check.file_errors, "whole_file_rows": sum(s.generated for s in whole_files),
        "escaped": check.escaped, "typed_failures": check.typed_failures, "unaccounted": check.unaccounted,
        "numbers": check.numbers_checked, "problems": check.problems, "failing_files": failing_files,
        "slow": slow, "slowest": max(times, default=(0.0, "", 0))[0], "timed_rows": len(times),
        "slowest_read": slowest_read,
        "seconds": {"generate": generated_in, "map-style": map_seconds, "streaming": stream_seconds},
    }


def at_least(low: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        return value
    return parse


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # 0 files or fewer than 0 rows ended in random.sample's ValueError once the seed rows were read
    parser.add_argument("--rows", type=at_least(0), default=10_000, help="mutated rows per source (default 10000)")
    parser.add_argument("--files", type=at_least(1), default=110, help="files per source (default 110)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sources", nargs="+", default=list(fuzz_rows.SOURCES), choices=fuzz_rows.SOURCES)
    parser.add_argument("--huge-chars", type=int, default=1_000_000, help="length of huge strings (default 1M)")
    parser.add_argument("--slow", type=float, default=1.0, help="seconds a row may take (default 1.0)")
    parser.add_argument("--no-timing", action="store_true", help="skip the per-row timing pass")
    parser.add_argument("--keep", metavar="DIR", help="write the files here and keep them (default: a temp dir)")
    args = parser.parse_args(argv)

    logging.getLogger("tooluse_datasets").setLevel(logging.ERROR)  # thousands of skipped rows
    import datasets

    datasets.disable_progress_bars()
    results = []
    for source in args.sources:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(args.keep) / source if args.keep else Path(tmp)
            folder.mkdir(parents=True, exist_ok=True)
            result = run_source(source, args, folder)
        results.append(result)
        seconds = ", ".join(f"{k} {v:.0f} s" for k, v in result["seconds"].items())
        print(f"{source}: {result['generated']:,} mutated rows in {result['files']} files, {result['items']:,} rows "
              f"in the files; converted {result['converted']:,}, reported {result['reported']:,} (whole files: "
              f"{result['file_errors']}, holding {result['whole_file_rows']} mutated rows), escaped "
              f"{result['escaped']}, typed load failures {result['typed_failures']}, unaccounted "
              f"{result['unaccounted']}; {result['numbers']} planted numbers bit-exact; slowest row "
              f"{result['slowest'] * 1000:.0f} ms of {result['timed_rows']:,} timed, {len(result['slow'])} over "
              f"{args.slow:g} s, slowest file read {result['slowest_read']:.1f} s ({seconds})", flush=True)
        for problem in result["problems"][:10]:
            print(f"  BREACH {problem}")
        for name, problems in result["failing_files"]:
            print(f"  FAILING FILE {name}: {problems}")
        for elapsed, file, row in result["slow"][:5]:
            print(f"  SLOW {elapsed:.2f} s: {Path(file).name} row {row}")

    print()
    print("| source | mutated rows (files) | rows in the files | converted | reported | whole-file failures "
          "(mutated rows in them) | escaped | unaccounted | numbers checked | slow (> %g s) | slowest row |"
          % args.slow)
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['source']} | {r['generated']:,} ({r['files']}) | {r['items']:,} | {r['converted']:,} | "
              f"{r['reported']:,} | {r['file_errors']} ({r['whole_file_rows']}) | {r['escaped']} | "
              f"{r['unaccounted']} | {r['numbers']} | {len(r['slow'])} | {r['slowest'] * 1000:.0f} ms |")
    bad = [r["source"] for r in results if r["escaped"] or r["unaccounted"] or r["problems"] or r["typed_failures"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
