"""``tooluse-datasets verify nestful``: execute every gold call sequence in the sandbox and report, per category,
how many reproduce their gold answer (exit 1 if any does not, or if a row could not be read; rows listed with
``--expect-failures``/``--expect-failure`` may fail, and must)."""
from __future__ import annotations

import argparse
import math
import sys

from ..errors import plain_printable
from . import a_path, data_files_for, print_json, print_skips, refuse_missing_file


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("verify", help="execute every NESTFUL gold sequence in a sandbox; count the rows that "
                                      "reproduce their gold answer, per category, with each failure's reason")
    p.add_argument("source", choices=["nestful"], help="the source (only NESTFUL has executable gold sequences)")
    p.add_argument("--data-files", nargs="+", action="extend", metavar="PATH", type=a_path,
                   help="local files or hf:// / https:// URLs (default: the pinned upstream file)")
    # (its rows only: the executable functions they call are fetched as without --sample, so "offline" was wrong)
    p.add_argument("--sample", action="store_true",
                   help="use the small sample bundled with the package (its rows; the executable functions are "
                        "still fetched unless --executable-functions names a local copy)")
    p.add_argument("--on-error", choices=["raise", "skip"], default="raise",
                   help="raise: stop at the first unreadable row; skip: go on, count and report them (not verified: "
                        "exit 1 all the same) (default: raise)")
    p.add_argument("--expect-failures", metavar="FILE", type=a_path,
                   help="ids of rows known not to reproduce, one a line (the sample_id, as failures are named), "
                        "each with an optional '# reason': they are reported as expected and do not fail the run; "
                        "a listed row that reproduces fails it (take it off the list), and so does a listed id no "
                        "row has (exit 2)")
    p.add_argument("--expect-failure", action="append", default=[], metavar="ID",
                   help="one id known not to reproduce, as in --expect-failures; repeat for several")
    add_execution_arguments(p)
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    return p


def add_execution_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--executable-functions", metavar="DIR", type=a_path,
                   help="local data_v2/executable_functions folder (default: the pinned upstream one, downloaded "
                        "once and cached)")
    p.add_argument("--timeout", type=_positive(float, "timeout"), default=10.0,
                   help="seconds per sample (default: 10, as upstream)")
    p.add_argument("--memory-mb", type=_positive(int, "memory_mb"), default=4096,
                   help="address space of the sandbox (default: 4096)")
    p.add_argument("--kernel-isolation", action="store_true",
                   help="require the kernel's isolation (network, mount, IPC and PID namespaces, a read-only file "
                        "system): where the machine cannot give it, stop with an error before any sample runs "
                        "(default: use it where available, else the audit hook alone)")


def _positive(kind, limit: str):
    """An argparse type: a positive finite number of ``kind`` (0, a negative or an endless limit would not
    limit: a negative memory size wraps to no limit at all, NaN fails every sample), at most what the sandbox
    can apply as its ``limit`` (``SandboxLimits`` field)."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            # (--memory-mb 1.5 or 1e3 is a number, but not one int() reads: say which kind is wanted)
            wanted = "must be a whole number (digits only)" if kind is int else "must be a number"
            raise argparse.ArgumentTypeError(f"{wanted}, got {text!r}") from None
        if not (math.isfinite(value) and value > 0):
            raise argparse.ArgumentTypeError(f"must be a positive finite number, got {text!r}")
        from ..builders.nestful.execution.sandbox import MAXIMA  # (here: the parser is built for every command)

        if value > MAXIMA[limit]:
            raise argparse.ArgumentTypeError(f"must be at most {MAXIMA[limit]:.15g}, got {text!r}")
        return value

    parse.__name__ = kind.__name__
    return parse


def limits_from(args: argparse.Namespace):
    from ..builders.nestful.execution import SandboxLimits

    # (CPU seconds: the timeout rounded up, SandboxLimits' default: never below the wall-clock timer)
    # --kernel-isolation requires it (True); without the flag it is tried, falling back to the hook (None)
    limits = {k: v for k, v in (("timeout", args.timeout), ("memory_mb", args.memory_mb)) if v is not None}
    return SandboxLimits(**limits, kernel_isolation=True if args.kernel_isolation else None)


def run(args: argparse.Namespace) -> int:
    from ..builders.nestful.expected_failures import read_expected_failures
    from ..builders.nestful.verify import verify
    from ..errors import SkipReport

    # (read before any row runs: a list that cannot be read is refused up front)
    if args.expect_failures:
        refuse_missing_file(args.expect_failures, "--expect-failures", "the list file (one id a line)")
    expected = read_expected_failures(args.expect_failures) if args.expect_failures else {}
    for name in args.expect_failure:
        if not name.strip():
            raise ValueError("--expect-failure takes an id, got an empty one")
        expected.setdefault(name.strip(), "")
    skips = SkipReport()
    report = verify(data_files_for(args, args.source), functions_dir=args.executable_functions,
                    limits=limits_from(args), on_error=args.on_error, report=skips, expected_failures=expected)
    if args.json:
        print_json(dict(report.to_dict(), unreadable_rows=skips.to_dict()), indent=1)
    else:
        print(plain_printable(report.table()))  # ids and details quote the data
        if skips.skipped:
            print_skips(skips)
    if not report.rows and not report.skipped:
        # (an empty file, blank lines, an empty array): nothing was verified, which is no pass
        print("error: the data files hold no rows: nothing was verified", file=sys.stderr)
        return 1
    if report.expected_not_in_data:
        # A list that names rows the data does not have is a list for other data (or a typo): not a pass
        # Under skipping, a listed row may be one that could not be read rather than one the data lacks
        unread = (f"; {report.skipped} row(s) could not be read and were not verified (--on-error skip): a listed "
                  "id may be one of them" if report.skipped else "")
        print(plain_printable(f"error: ids listed as expected failures that no row verified has: "
                              f"{', '.join(report.expected_not_in_data)}{unread}"), file=sys.stderr)
        return 2
    # A row that could not be read was not verified: the run fails, as validate fails on unreadable rows
    return 0 if report.passed else 1
