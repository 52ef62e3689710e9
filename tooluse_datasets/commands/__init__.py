"""CLI subcommands; each module has ``add_parser(subparsers)`` and ``run(args)``."""
from __future__ import annotations

import argparse


def add_source_arguments(p: argparse.ArgumentParser, *, many: bool = False, on_error: str = "raise") -> None:
    """The arguments every data-reading command shares."""
    if many:
        p.add_argument("sources", nargs="+", metavar="SOURCE", help="nestful, ms_swift, toolmind (or all)")
    else:
        p.add_argument("source", metavar="SOURCE", help="nestful, ms_swift or toolmind")
    p.add_argument("--data-files", nargs="+", metavar="PATH",
                   help="local files or hf:// / https:// URLs (default: the pinned upstream files)")
    p.add_argument("--sample", action="store_true", help="use the small sample bundled with the package (offline)")
    p.add_argument("--split", default=None, help="one split (default: all)")
    p.add_argument("--on-error", choices=["raise", "skip"], default=on_error,
                   help=f"raise: stop at the first bad row; skip: drop, count and report bad rows (default: {on_error})")


def data_files_for(args: argparse.Namespace, source: str):
    from ..loading import sample_files

    if getattr(args, "sample", False):
        return sample_files(source)
    return args.data_files
