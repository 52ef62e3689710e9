"""``tooluse-datasets score nestful RESULT.jsonl``: NESTFUL's official metrics (F1 of function names and of
arguments, partial and full sequence accuracy, win rate) for a model's predictions."""
from __future__ import annotations

import argparse
from collections.abc import Mapping

from ..errors import InvalidValueError, plain_printable
from . import a_path, print_json
from .verify import add_execution_arguments, limits_from


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "score", help="score model predictions with NESTFUL's official metrics",
        description="RESULT.jsonl holds upstream's result rows (a NESTFUL row plus the model's generated_text), or "
                    "predictions keyed by sample_id (generated_text, or calls: an already-parsed list), joined to "
                    "the gold rows (--gold-data-files, --sample, default: the pinned upstream file). Keyed: every "
                    "gold row is scored, one without a prediction as a wrong answer (counted in "
                    "missing_predictions), and a sample_id on two lines is an error. Predicted sequences are "
                    "executed in a sandbox for the win rate.")
    p.add_argument("source", choices=["nestful"], help="the benchmark (only NESTFUL for now)")
    p.add_argument("results", metavar="RESULT.jsonl", type=a_path, help="one JSON object per line")
    p.add_argument("--parser", choices=["json", "hermes", "calls"], default="json",
                   help="json: a JSON list of calls; hermes: <tool_call>{...}</tool_call> blocks; calls: already "
                        "parsed (scored like json); a line whose prediction is a list is always read as calls (default: %(default)s)")
    p.add_argument("--corrected", action="store_true",
                   help="fix upstream's win-check bugs (a failed execution matching a gold 0/False, float digits "
                        "after an exponent, True == 1, nested tuples); default: the official figures")
    p.add_argument("--no-win-rate", action="store_true", help="skip execution (win_rate is null)")
    p.add_argument("--gold-data-files", nargs="+", action="extend", metavar="PATH", type=a_path,
                   help="NESTFUL files for keyed predictions (refused for a file in upstream's shape, whose lines "
                        "carry their own gold)")
    p.add_argument("--sample", action="store_true",
                   help="gold rows for keyed predictions: the sample bundled with the package")
    p.add_argument("--on-error", choices=["raise", "skip"], default="raise",
                   help="gold rows that cannot be read: raise stops; skip goes on, counts them and the predictions "
                        "keyed to none of the rows read (neither scored) (default: %(default)s)")
    add_execution_arguments(p)
    p.set_defaults(timeout=None, memory_mb=None)  # (SandboxLimits' own: None tells a limit given from the default)
    p.add_argument("--samples", action="store_true",
                   help="add per-sample results (a line each in the table, a list with --json), with the "
                        "execution's status and reason (timeout, memory, network...)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    return p


class _GoldRows(Mapping):
    """sample_id -> raw gold row, loaded on first use (result files in upstream's shape need none)."""

    def __init__(self, data_files, on_error="raise", report=None):
        self.data_files, self.on_error, self.report = data_files, on_error, report
        self._rows = None

    def _load(self) -> dict:
        if self._rows is None:
            from ..builders.nestful.score import gold_rows_by_id
            from ..loading import load

            splits = load("nestful", "raw", streaming=True, data_files=self.data_files, on_error=self.on_error,
                          report=self.report)
            rows = [row for split in splits.values() for row in split]
            try:
                self._rows = gold_rows_by_id(rows)
            except InvalidValueError:
                # Two different rows share a sample_id: read again to name each one's file and row.
                located = _located_rows(self.data_files)
                if [row for _, row in located] == rows:
                    gold_rows_by_id(rows, [where for where, _ in located])
                raise
        return self._rows

    def __getitem__(self, key):
        return self._load()[key]

    def __iter__(self):
        return iter(self._load())

    def __len__(self):
        return len(self._load())


def _located_rows(data_files) -> list[tuple[tuple[str, int], dict]]:
    """``((file, row), raw row)`` of every gold row, in the order ``load("nestful", "raw")`` gives them."""
    from .. import registry
    from ..pipeline import RAW, ShardConverter
    from ..shards.paths import display_path

    builder = registry.builder_class("nestful")(config_name=RAW, data_files=data_files)
    located = []
    for plan in builder.split_plans():
        converter = ShardConverter(builder.source, [RAW])
        for shard in plan.shards:
            for batch in converter.batches(plan, shard, arrow=False):
                # a position is where reading resumes after the row: the row's own number is one less
                located += [((display_path(shard.file), position[0] - 1), row)
                            for row, position in zip(batch.rows[RAW], batch.positions[RAW])]
    return located


def run(args: argparse.Namespace) -> int:
    from ..builders.nestful.score import (read_result_items, score, unused_gold_message,
                                          unused_win_rate_options_message, with_unreadable_gold)
    from ..errors import SkipReport
    from ..loading import sample_files

    if args.sample and args.gold_data_files:
        raise ValueError("--sample and --gold-data-files exclude each other: give one of them")
    # Nothing runs: a requirement would be checked nowhere, a folder or a limit used nowhere, the win check
    # that --corrected fixes never made (given, each is refused rather than silently unused)
    unused = [flag for flag, given in (("--kernel-isolation", args.kernel_isolation), ("--corrected", args.corrected),
                                       ("--executable-functions", args.executable_functions is not None),
                                       ("--timeout", args.timeout is not None),
                                       ("--memory-mb", args.memory_mb is not None)) if given]
    if unused and args.no_win_rate:
        raise ValueError(unused_win_rate_options_message(unused, "--no-win-rate"))
    from . import refuse_folders, refuse_missing_file

    refuse_missing_file(args.results, "RESULT.jsonl", "the results file (one JSON object a line)")
    refuse_folders(args.gold_data_files or [], "--gold-data-files")
    skips, unscored = SkipReport(), []
    gold = _GoldRows(sample_files("nestful") if args.sample else args.gold_data_files, args.on_error, skips)
    items, any_keyed = read_result_items(args.results, gold, skips, unscored)
    named = "--sample" if args.sample else "--gold-data-files" if args.gold_data_files else None
    if named and not any_keyed:  # gold rows the user named that nothing reads: refused, not silently unused
        raise ValueError(unused_gold_message(named, args.results))
    scores = score(items, parser=args.parser, corrected=args.corrected, win_rate=not args.no_win_rate,
                   executable_functions_dir=args.executable_functions, limits=limits_from(args))
    with_unreadable_gold(scores, skips, unscored, args.results)
    if args.json:
        print_json(scores.to_dict(samples=args.samples))
    else:
        print(plain_printable(scores.table(samples=args.samples)))  # sample ids quote the data
    return 0
