"""``tooluse-datasets export``: write a source in any format as JSON Lines (what ``swift sft --dataset`` reads)."""
from __future__ import annotations

import argparse
import os
from pathlib import Path

import orjson

from . import add_source_arguments, data_files_for
from ..errors import SkipReport


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("export", help="write a source in one format to JSONL files (one per split)")
    add_source_arguments(p)
    p.add_argument("--format", default="unified", help="unified, raw, swift, toolmind")
    p.add_argument("--out", required=True, help="output folder; files are <source>-<format>-<split>.jsonl")
    return p


def run(args: argparse.Namespace) -> int:
    from ..loading import load

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = SkipReport()
    splits = load(args.source, args.format, split=args.split, streaming=True,
                  data_files=data_files_for(args, args.source), on_error=args.on_error, report=report)
    if args.split:
        splits = {args.split: splits}
    for split, ds in splits.items():
        path = out / f"{args.source}-{args.format}-{split}.jsonl"
        tmp = path.with_suffix(".jsonl.partial")
        n = 0
        with open(tmp, "wb") as f:
            for row in ds:
                f.write(orjson.dumps(row) + b"\n")
                n += 1
        os.replace(tmp, path)  # no half-written file under the final name
        print(f"{path}: {n} rows")
    print(report.summary())
    return 0
