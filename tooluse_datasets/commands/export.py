"""``tooluse-datasets export``: write a source in any format as JSON Lines (what ``swift sft --dataset`` reads;
``--format llamafactory`` also writes the ``dataset_info.json`` LLaMA-Factory registers its files with)."""
from __future__ import annotations

import argparse
import os
from pathlib import Path

import orjson

from . import (add_skipped_rows_argument, add_source_arguments, data_files_for, print_skips, skip_report_for,
               source_options, start_skipped_rows)
from ..progress import progress

DATASET_INFO = "dataset_info.json"


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("export", help="write a source in one format to JSONL files (one per split)")
    add_source_arguments(p)
    p.add_argument("--format", default="unified", help="unified, raw, swift, toolmind, llamafactory")
    p.add_argument("--out", required=True, help="output folder; files are <source>-<format>-<split>.jsonl (and "
                                                "dataset_info.json for llamafactory)")
    add_skipped_rows_argument(p)
    return p


def run(args: argparse.Namespace) -> int:
    from ..codec import dumps
    from ..loading import load

    report = skip_report_for(args)
    splits = load(args.source, args.format, split=args.split, streaming=True,
                  data_files=data_files_for(args, args.source), on_error=args.on_error, report=report,
                  **source_options(args))
    # Planned, nothing read yet: only now are the output folder and the skipped-rows file touched.
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start_skipped_rows(report)
    if args.split:
        splits = {args.split: splits}
    registered: dict[str, dict] = {}
    for split, ds in splits.items():
        path = out / f"{args.source}-{args.format}-{split}.jsonl"
        tmp = path.with_suffix(".jsonl.partial")
        n = 0
        used: set[str] = set()
        try:
            with open(tmp, "wb") as f:
                for row in progress(ds, f"{args.source}/{split}"):
                    # The package's exact JSON: integers beyond 64 bits as they are (orjson refuses them)
                    f.write(dumps(row).encode() + b"\n")
                    n += 1
                    if args.format == "llamafactory":
                        used |= _llamafactory_columns(row)
            os.replace(tmp, path)  # no half-written file under the final name
        finally:
            tmp.unlink(missing_ok=True)
        print(f"{path}: {n} rows")
        if args.format == "llamafactory":
            registered[path.stem] = _llamafactory_entry(path.name, used)
    if registered:
        _update_dataset_info(out / DATASET_INFO, registered)
    report.close()
    print_skips(report)
    return 0


def _llamafactory_columns(row: dict) -> set[str]:
    from ..builders.llamafactory.writer import columns_used

    return columns_used(row)


def _llamafactory_entry(file_name: str, used: set[str]) -> dict:
    from ..builders.llamafactory.writer import dataset_info_entry

    return dataset_info_entry(file_name, used)


def _update_dataset_info(path: Path, entries: dict[str, dict]) -> None:
    """Add or replace this export's entries; entries of other files in the folder stay."""
    info = orjson.loads(path.read_bytes()) if path.exists() else {}
    info.update(entries)
    tmp = path.with_suffix(".json.partial")
    tmp.write_bytes(orjson.dumps(info, option=orjson.OPT_INDENT_2) + b"\n")
    os.replace(tmp, path)
    print(f"{path}: {len(entries)} entr{'y' if len(entries) == 1 else 'ies'} ({', '.join(entries)})")
