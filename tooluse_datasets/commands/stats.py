"""``tooluse-datasets stats``: rows, turns, calls and tools per split of a source."""
from __future__ import annotations

import argparse
import json

from . import add_source_arguments, data_files_for


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("stats", help="print per-split statistics of a source (unified)")
    add_source_arguments(p)
    return p


def run(args: argparse.Namespace) -> int:
    from ..loading import load
    from ..stats import split_statistics

    splits = load(args.source, "unified", split=args.split, streaming=True,
                  data_files=data_files_for(args, args.source), on_error=args.on_error)
    if args.split:
        splits = {args.split: splits}
    print(json.dumps({split: split_statistics(ds) for split, ds in splits.items()}, indent=1))
    return 0
