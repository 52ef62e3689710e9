"""``tooluse-datasets show``: one row of a source rendered for a person (roles, reasoning, calls, results)."""
from __future__ import annotations

import argparse
import sys

from ..errors import SkipReport, ToolUseDataError, count_of, plain_printable
from . import add_source_arguments, data_files_for, non_negative, source_options


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("show", help="render one row as a readable conversation (colours on a terminal)")
    add_source_arguments(p)
    from ..formats import FORMATS

    p.add_argument("--config", default="unified", help=f"format to show: {', '.join(FORMATS)} (default unified: the "
                                                        "conversation view; other formats are shown as JSON)")
    which = p.add_mutually_exclusive_group()
    # a negative N names no row: refused up front, not after a pass over every row looking for it. No default
    # here (0 is set in run): argparse takes a value equal to the default as not given, so `--row 0 --id X`
    # passed the group and --row was dropped without a word.
    which.add_argument("--row", type=non_negative("a row number"), metavar="N",
                       help="the N-th row (default 0), of the --split named, else counted through every split in "
                            "order")
    which.add_argument("--id", help="the row with this unified id")
    p.add_argument("--max-chars", type=non_negative("a number of characters", " (0: never elide)"), default=600,
                   help="elide text longer than this (0: never; default: %(default)s)")
    return p


def run(args: argparse.Namespace) -> int:
    from ..loading import features
    from ..preview import console_for, render_json, render_row

    if args.id is not None and "id" not in features(args.source, args.config):
        # No row of this format could match: "no id" after a pass over every row would say the row is missing
        raise ValueError(f"--id finds a row by its unified id, which rows of --config {args.config} do not carry: "
                         f"show it with --config unified, or pick it by position with --row N")
    if args.row is None:
        args.row = 0
    options = source_options(args)
    # Rows are converted a few at a time: read one at a time, so that with --on-error raise a bad row
    # just after the one asked for is not reached (it would raise before that row is shown). An --id search
    # reads every row before the one it finds: in batches, and again one at a time only if a batch fails.
    one_at_a_time = {"batch_size": 1, **options}
    skips = SkipReport()
    try:
        splits, (row, rows_by_split) = _search(args, one_at_a_time if args.id is None else options, skips)
    except ToolUseDataError:
        if args.id is None or "batch_size" in options:
            raise
        splits, (row, rows_by_split) = _search(args, one_at_a_time, skips)
    if row is None:  # an argument that names no row is bad input, as a missing file is: exit 2
        what = f"id {args.id!r}" if args.id is not None else f"row {args.row}"
        rows = count_of(sum(rows_by_split.values()), "row")
        if len(rows_by_split) > 1:
            rows += ": " + ", ".join(f"{name} {n}" for name, n in rows_by_split.items())
        if skips.skipped:  # (with --on-error skip: "0 rows" alone read as if the files held none)
            rows += f"; {count_of(skips.skipped, 'row')} skipped"
        print(plain_printable(f"error: {args.source}: no {what} in split(s) {', '.join(splits)} ({rows})"),
              file=sys.stderr)
        return 2
    console = console_for()
    if args.config == "unified":
        console.print(render_row(row, args.max_chars))
    else:  # JSON text: lines are not cut at the console width, so a pipe gets JSON that parses
        console.print(render_json(row, args.max_chars), soft_wrap=True)
    return 0


def _search(args, options: dict, skips: SkipReport):
    """The splits read and what :func:`_find` found in them (rows skipped counted in ``skips``)."""
    from ..loading import load

    splits = load(args.source, args.config, split=args.split, streaming=True,
                  data_files=data_files_for(args, args.source), on_error=args.on_error, report=skips, **options)
    if args.split:
        splits = {args.split: splits}
    # Without --split, every split is searched (--split's default is all): --row counts through them in order.
    return splits, _find(splits, args)


def _find(splits, args):
    """The row asked for (None if there is none) and the rows read looking for it, by split. ``--row N`` is the
    N-th row counting through the splits in order."""
    searched: dict[str, int] = {}
    n = 0
    for name, ds in splits.items():
        searched[name] = 0
        for row in ds:
            if (row.get("id") == args.id) if args.id is not None else n == args.row:
                return row, searched
            searched[name] += 1
            n += 1
    return None, searched
