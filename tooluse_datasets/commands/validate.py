"""``tooluse-datasets validate``: every validation rule over every row of a source; counts, examples, verdict."""
from __future__ import annotations

import argparse
import sys

from . import (add_skipped_rows_argument, add_source_arguments, data_files_for, non_negative, print_json,
               refuse_writing_inputs, refuse_wrong_kind_outputs, skipped_rows_folder, source_options,
               with_data_dir_files)


def add_parser(sub) -> argparse.ArgumentParser:
    from ..validation.run import DEFAULT_FAIL_ON

    p = sub.add_parser("validate", help="check every row of a source against the validation rules (README: "
                       "Validation rules); exit 1 if a rule chosen with --fail-on fails")
    add_source_arguments(p, on_error="skip")
    p.add_argument("--config", default="unified",
                   help="also report the rows that cannot be read in this format (raw, swift, toolmind, llamafactory); the "
                        "rules always check the unified rows (default: unified)")
    p.add_argument("--rules", type=_selection(allow_read=False), default=None, metavar="RULE,...",
                   help="rules to run: ids, globs such as 'arguments.*', error, warning (default: all)")
    p.add_argument("--fail-on", type=_selection(allow_read=True), default=DEFAULT_FAIL_ON, metavar="RULE,...",
                   help="exit 1 if a row fails one of these (ids, globs, error, warning, all) or, with 'read', if "
                        f"a row could not be read (default: {DEFAULT_FAIL_ON})")
    p.add_argument("--examples", type=non_negative("a whole number of rows"), default=3, metavar="N",
                   help="example rows kept per rule (default: 3)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    add_skipped_rows_argument(p)
    return p


def _selection(*, allow_read: bool):
    def parse(text: str) -> str:
        from ..validation.registry import select_rules, selection_items

        if not selection_items(text):
            # --fail-on "$FAIL_ON" with FAIL_ON unset failed on nothing: every run passed, whatever the rows held;
            # --rules "$RULES" ran every rule, not the ones meant
            option, what = ("--fail-on", "to fail on") if allow_read else ("--rules", "to run")
            raise argparse.ArgumentTypeError(f"expected rules {what}, got {text!r} (an unset shell variable?); "
                                             f"leave {option} out for its default")
        try:
            select_rules(text, default_all=False, allow_read=allow_read)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return text

    return parse


# validate()'s arguments the command sets (beside load()'s): name -> the command's argument
VALIDATE_ARGUMENTS = {"rules": "--rules", "fail_on": "--fail-on", "max_examples": "--examples",
                      "skipped_rows": "--skipped-rows", "fresh_skipped_rows": "--skipped-rows", "validate": "--rules",
                      # (validate()'s own refusal speaks of its Python result, which the command prints)
                      "num_proc": "nothing: validate reads each row once, streaming, in this process"}


def run(args: argparse.Namespace) -> int:
    from ..validation.run import rules_run, validate

    data_files = data_files_for(args, args.source)
    # refused in the command's terms
    rules_run(args.source, args.rules, args.fail_on, VALIDATE_ARGUMENTS, data_files=data_files)
    skipped_rows = args.skipped_rows or None  # each split's report appends to it, emptied once the run is set up
    refuse_writing_inputs(with_data_dir_files(args, args.source, data_files), {"--skipped-rows": [skipped_rows]})
    refuse_wrong_kind_outputs(files={"--skipped-rows": skipped_rows})
    with skipped_rows_folder(skipped_rows):
        result = validate(args.source, args.config, split=args.split, data_files=data_files,
                          rules=args.rules, fail_on=args.fail_on, on_error=args.on_error, max_examples=args.examples,
                          skipped_rows=skipped_rows, fresh_skipped_rows=True,
                          **source_options(args, VALIDATE_ARGUMENTS))
    if args.json:
        print_json(result.to_dict(), indent=1)
    else:
        print(result.table())
    if result.nothing_checked:
        # (an empty file, blank lines, an empty array, or no row readable): nothing checked is no pass, as in verify
        print(f"error: {result.nothing_checked}", file=sys.stderr)
    return 1 if result.failed else 0
