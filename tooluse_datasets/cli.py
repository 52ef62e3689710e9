"""``tooluse-datasets``: demo, export, validate, stats (and mirror/publish, see their modules).

Each subcommand is a module under ``tooluse_datasets/commands/`` exposing ``add_parser(subparsers)`` and
``run(args) -> int``; adding one is a module plus a line in ``COMMANDS``.
"""
from __future__ import annotations

import argparse
import importlib
import logging
import sys

from .errors import DataNotFoundError, ToolUseDataError

COMMANDS = ["demo", "export", "validate", "stats", "mirror", "publish"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tooluse-datasets",
        description="Tool-use training data (NESTFUL, ms-swift agent format, ToolMind) as Hugging Face datasets.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        module = importlib.import_module(f"tooluse_datasets.commands.{name}")
        p = module.add_parser(sub)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
    try:
        return int(args._run(args) or 0)
    except (ToolUseDataError, DataNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
