"""``tooluse-datasets validate``: read every row, check unified invariants, report bad rows."""
from __future__ import annotations

import argparse

from . import add_source_arguments, data_files_for
from ..errors import SkipReport, ToolUseDataError


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("validate", help="read every row of a source and check it; exit 1 if any row is bad")
    add_source_arguments(p, on_error="skip")
    return p


def run(args: argparse.Namespace) -> int:
    from ..loading import load
    from ..schema import validate_unified

    report = SkipReport()
    splits = load(args.source, "unified", split=args.split, streaming=True,
                  data_files=data_files_for(args, args.source), on_error=args.on_error, report=report)
    if args.split:
        splits = {args.split: splits}
    for split, ds in splits.items():
        for row in ds:
            try:
                validate_unified(row)
            except ToolUseDataError as exc:
                exc.at(row=None, file=row["id"])
                report.add(exc)
    print(report.summary())
    for e in report.examples:
        print(f"  {e.error}: {e.file} row {e.row} field {e.field!r}: {e.message}")
    return 1 if report.skipped else 0
