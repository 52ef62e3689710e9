"""ms-swift's own load + preprocess of an agent JSONL file, timed; run with ms-swift's Python, not ours.

    benchmarks/.venv-swift/bin/python benchmarks/swift_driver.py ROWS.jsonl [--streaming] [--num-proc N]

This is what ``swift sft --dataset ROWS.jsonl`` does before tokenizing: ``swift.dataset.load_dataset``
reads the file with ``datasets``' json builder (``streaming`` as given), runs ms-swift's automatic
preprocessor (``AutoPreprocessor`` -> ``MessagesPreprocessor`` for a ``messages`` column: role aliases,
provider formats, row checks, ``tools`` normalization) and drops unused columns. Map-style runs write a
fresh Arrow cache (a new temporary cache folder, ``load_from_cache_file=False``); streaming runs iterate
every preprocessed row. Prints one JSON line: rows in and out, wall and CPU seconds (imports excluded), rows/s, peak RSS.
Kept free of this package's imports: ms-swift 4.6 needs ``datasets<4.8.5``, which cannot share our venv
(``bench_scale``, beside this script, imports nothing but the standard library at module level).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

from bench_scale import cpu_seconds, peak_rss_mib  # its module-level imports are the standard library's only


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("path")
    p.add_argument("--streaming", action="store_true")
    p.add_argument("--num-proc", type=int, default=1)
    args = p.parse_args()

    cache = tempfile.mkdtemp(prefix="swift-bench-cache-")
    # Before importing ms-swift/modelscope/datasets: they read these once.
    os.environ.update({"MODELSCOPE_CACHE": cache, "HF_DATASETS_CACHE": os.path.join(cache, "hf"),
                       "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "USE_HF": "1"})
    try:
        started = time.perf_counter()
        from importlib.metadata import version

        from swift.dataset import load_dataset

        import_seconds = time.perf_counter() - started
        with open(args.path, "rb") as f:
            rows_in = sum(1 for line in f if line.strip())

        started, started_cpu = time.perf_counter(), cpu_seconds()
        train, _ = load_dataset(args.path, streaming=args.streaming, num_proc=args.num_proc,
                                load_from_cache_file=False)
        if args.streaming:
            rows_out = calls = 0
            for row in train:
                rows_out += 1
                calls += sum(m["role"] == "tool_call" for m in row["messages"])
        else:
            rows_out = len(train)
            calls = None
        seconds, cpu_s = time.perf_counter() - started, cpu_seconds() - started_cpu
        print(json.dumps({
            "tool": f"ms-swift {version('ms-swift')} (datasets {version('datasets')})",
            "mode": "streaming" if args.streaming else f"map-style, num_proc={args.num_proc}",
            "rows_in": rows_in, "rows": rows_out, "tool_calls": calls, "seconds": seconds,
            "cpu_s": cpu_s, "rows_per_s": rows_out / seconds, "import_seconds": import_seconds, "peak_rss_mib": peak_rss_mib(),
        }))
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
