"""``tooluse-datasets stats``: rows, turns, calls and tools per split of a source."""
from __future__ import annotations

import argparse
import json

from . import add_skipped_rows_argument, add_source_arguments, data_files_for, source_options, start_skipped_rows


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("stats", help="print per-split statistics of a source (unified) and its validation rule counts")
    add_source_arguments(p)
    p.add_argument("--plots", metavar="DIR", help="also draw the distributions (turns, calls and tools per row, "
                                                  "content lengths; one line per split) as PNG files in DIR "
                                                  "(needs the plots extra: pip install 'tooluse-datasets[plots]')")
    add_skipped_rows_argument(p)
    return p


def run(args: argparse.Namespace) -> int:
    from ..distributions import plot_distributions
    from ..errors import SkipReport
    from ..loading import load
    from ..progress import progress
    from ..stats import SplitStatistics
    from ..validation import ValidationCounter

    def stream(split=None, report=None):
        return load(args.source, "unified", split=split, streaming=True, data_files=data_files_for(args, args.source),
                    on_error=args.on_error, report=report, **source_options(args))

    if args.split:
        stream(args.split)  # a split the data does not have is refused here, before the skipped-rows file is touched
    names = [args.split] if args.split else list(stream())
    skipped_rows = args.skipped_rows or None  # each split's report appends to it
    start_skipped_rows(skipped_rows)
    out, distributions = {}, {}
    for split in names:
        read = SkipReport(rows_path=skipped_rows)  # one a split: the rows read and skipped, as `validate` gives
        counter = ValidationCounter()  # the validation rules' counts, in the same pass (see `validate`)
        stats = SplitStatistics()  # its distributions are what the plots draw
        for row in counter.observe(progress(stream(split, read), f"{args.source}/{split}")):
            stats.add(row)
        read.close()
        distributions[split] = stats.distributions
        out[split] = {**stats.result(), "read": read.to_dict(), "validation": counter.to_dict()}
    print(json.dumps(out, indent=1, ensure_ascii=False))
    if args.plots:
        for path in plot_distributions(distributions, args.plots, title=args.source):
            print(path)
    return 0
