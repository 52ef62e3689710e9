"""``tooluse-datasets demo``: load every bundled sample offline, print a unified row and a summary."""
from __future__ import annotations

import argparse

from ..errors import SkipReport
from . import Distinct


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("demo", help="load the bundled samples of every source offline and show unified rows")
    from ..registry import MIX, source_names

    p.add_argument("--source", nargs="+", action=Distinct, metavar="SOURCE",
                   help=f"only these sources of {', '.join(source_names())}, e.g. --source nestful ms_swift, or "
                        f"{MIX}, their rows mixed as one source (default: each source on its own)")
    p.add_argument("--streaming", action="store_true", help="stream instead of preparing an Arrow cache")
    return p


def run(args: argparse.Namespace) -> int:
    from ..loading import load, sample_files
    from ..preview import console_for, render_row
    from ..registry import MIX, source_names
    from ..validation import validate_unified

    if args.source and MIX in args.source and len(args.source) > 1:  # (else the named sources are shown twice)
        raise ValueError(f"{MIX!r} names every source: give it alone (--source {MIX}), or name only the sources to "
                         "show")
    console = console_for()

    for source in args.source or source_names():
        report = SkipReport()
        splits = load(source, "unified", streaming=args.streaming, data_files=sample_files(source), report=report)
        rows = [row for split in splits.values() for row in split]
        for row in rows:
            validate_unified(row)
        calls = sum(len(m.get("tool_calls", [])) for r in rows for m in r["messages"])
        console.print(f"== {source}: {len(rows)} rows in splits {sorted(splits)}, {calls} tool calls, "
                      f"{report.summary()}", style="bold", markup=False, soft_wrap=True)  # one line, for grep
        console.print(render_row(rows[0], max_chars=300))
    return 0
