"""``tooluse-datasets stats``: rows, turns, calls and tools per split of a source."""
from __future__ import annotations

import argparse
import contextlib
import os
import sys

from ..errors import SkipReport

from . import (a_path, add_skipped_rows_argument, add_source_arguments, data_files_for, output_folder,
               refuse_writing_inputs, refuse_wrong_kind_outputs, print_json, skipped_rows_folder, source_options,
               start_skipped_rows, with_data_dir_files)


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("stats", help="print per-split statistics of a source (unified) and its validation rule counts")
    add_source_arguments(p)
    p.add_argument("--plots", metavar="DIR", type=a_path,
                   help="also draw the distributions (turns, calls and tools per row, content lengths; one line "
                        "per split) as PNG files in DIR (needs the plots extra: pip install "
                        "'tooluse-datasets[plots]')")
    add_skipped_rows_argument(p)
    return p


def run(args: argparse.Namespace) -> int:
    if args.plots:  # refused before the pass, not after it (it would end as "unexpected ModuleNotFoundError")
        import importlib.util

        if importlib.util.find_spec("matplotlib") is None:
            raise ValueError("--plots draws with matplotlib, which is not installed: pip install "
                             "'tooluse-datasets[plots]'")
        from ..distributions import MEASURES

        # (found only once every row was read and the statistics printed, as the system's "Is a directory"; also
        # at the .partial name a picture is drawn under first)
        for file_name in [name for drawn, _, _ in MEASURES.values() for name in (drawn, f"{drawn}.partial")]:
            if os.path.isdir(os.path.join(args.plots, file_name)):
                raise ValueError(f"--plots {args.plots!r} holds a folder {file_name!r} where stats draws that "
                                 f"picture: move it away or give another --plots")
    refuse_wrong_kind_outputs(folders={"--plots": args.plots}, files={"--skipped-rows": args.skipped_rows})
    # The plots folder is made first, so that one that cannot be made stops the run before the pass (and removed
    # again, still empty, if the run is refused or fails): a --skipped-rows file inside it needs its folder when
    # the report is made.
    with output_folder(args.plots, "--plots") if args.plots else contextlib.nullcontext(), \
            skipped_rows_folder(args.skipped_rows):
        return _stats(args)


def _stats(args: argparse.Namespace) -> int:
    from ..distributions import plot_distributions
    from ..loading import load
    from ..progress import progress
    from ..stats import SplitStatistics
    from ..validation import ValidationCounter
    from ..validation.registry import sources_read

    # The splits are read in one load, as `export` and `validate` read them: rows that belong to no split (a
    # ToolMind file without a split column, a file that cannot be read) are reported once, by the first split,
    # not once by each split loaded on its own. Each split's own `read` is what was read while it was passed.
    skipped_rows = args.skipped_rows or None
    shared = _SplitReports(rows_path=skipped_rows)
    data_files = data_files_for(args, args.source)  # (once: it checks every path it names)
    refuse_writing_inputs(with_data_dir_files(args, args.source, data_files), {"--skipped-rows": [skipped_rows]})
    # arguments the data refuses (a split it lacks) fail here: nothing read yet
    splits = load(args.source, "unified", split=args.split, streaming=True, data_files=data_files,
                  on_error=args.on_error, report=shared, **source_options(args))
    if args.split:
        splits = {args.split: splits}
    start_skipped_rows(skipped_rows)  # only now: a refused command leaves the file as it was
    out, distributions = {}, {}
    for split, ds in splits.items():
        read = shared.current = SkipReport()  # one a split: the rows read and skipped, as `validate` gives
        # the rules' counts, in the same pass (see `validate`)
        counter = ValidationCounter(source=sources_read(args.source, data_files))
        stats = SplitStatistics()  # its distributions are what the plots draw
        for row in counter.observe(progress(ds, f"{args.source}/{split}")):
            stats.add(row)
        distributions[split] = stats.distributions
        out[split] = {**stats.result(), "read": read.to_dict(), "validation": counter.to_dict()}
    shared.close()
    print_json(out, indent=1)
    if args.plots:
        # The files written are said on standard error: standard output stays one JSON document (`| jq`)
        for path in plot_distributions(distributions, args.plots, title=args.source):
            print(f"plot: {path}", file=sys.stderr)
    return 0


class _SplitReports(SkipReport):
    """The report of a load of every split, which also counts each read and skip in the report of the split
    being passed (``current``; splits are read one after the other). It alone writes ``--skipped-rows``."""

    def __init__(self, *, rows_path=None) -> None:
        super().__init__(rows_path=rows_path)
        self.current = SkipReport()

    def add(self, error, *, log: bool = True, listed: bool = False) -> None:
        super().add(error, log=log, listed=listed)
        self.current.add(error, log=False)

    def count_read(self, n: int) -> None:
        super().count_read(n)
        self.current.count_read(n)

    def merge(self, other: SkipReport) -> None:
        super().merge(other)
        self.current.merge(other)
