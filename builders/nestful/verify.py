"""Does each gold sequence reproduce its gold answer? Execute every row's gold calls in the sandbox and
count, per category (the derived domain: ``math``/``code``), the rows whose answer passes the official
win check, with each failure and its reason.

The spec records 1857 of 1861 for the full set (ids ``d448887d…``, ``c0147c17…``, ``a1ad66f4…``,
``c5b3ca75…`` do not reproduce); on the 66 v2 rows available locally, 65 reproduce and ``fa57c28a…`` needs
the network, which the sandbox refuses. Such rows can be listed as expected failures (see
:mod:`.expected_failures`): they are reported apart and the data passes, unless one of them reproduces after all.
"""
from __future__ import annotations

import dataclasses
import os
from collections import Counter
from typing import Any, Iterable, Optional, Union

from tooluse_datasets.errors import ToolUseDataError, one_line
from tooluse_datasets.progress import progress

from .executed import execution_job
from .expected_failures import ExpectedFailures, expected_failures_of
from .gold import mismatch_text
from .execution import SandboxLimits, one_folder, run_sequences
from .execution import executable_functions as functions_folder
from .execution.sandbox import ISOLATION


@dataclasses.dataclass
class VerifyReport:
    rows: int = 0
    reproduced: int = 0
    by_category: dict = dataclasses.field(default_factory=dict)  # category -> {"rows", "reproduced"}
    failures: list = dataclasses.field(default_factory=list)
    # Rows that could not be read (on_error="skip"): not verified, so the data does not pass either
    skipped: int = 0
    # The isolation the sandbox achieved (SequenceResult's fields): "namespace"/"read-only", or why not
    network: str = ""
    filesystem: str = ""
    processes: str = ""
    # With expected failures listed: the failures of listed rows (not in ``failures``, each with its
    # ``expected_reason``), the listed rows that reproduce after all, and the listed ids no row verified has
    expected_failures: list = dataclasses.field(default_factory=list)
    unexpected_passes: list = dataclasses.field(default_factory=list)
    expected_not_in_data: list = dataclasses.field(default_factory=list)

    @property
    def passed(self) -> bool:
        """Every row verified reproduces or is listed as failing, no listed row reproduces (the list stays
        honest), every listed id was verified, and no row was left unread."""
        return bool(self.rows) and not (self.failures or self.unexpected_passes or self.expected_not_in_data
                                        or self.skipped)

    def to_dict(self) -> dict:
        return dict(dataclasses.asdict(self), passed=self.passed)

    def table(self) -> str:
        lines = [f"{'category':<10} {'rows':>6} {'reproduced':>11}"]
        for category, c in sorted(self.by_category.items()):
            lines.append(f"{category:<10} {c['rows']:>6} {c['reproduced']:>11}")
        lines.append(f"{'total':<10} {self.rows:>6} {self.reproduced:>11}")
        if self.skipped:
            lines.append(f"{self.skipped} unreadable row{'s' if self.skipped != 1 else ''} not verified (skipped)")
        for kind in ISOLATION:
            if getattr(self, kind):
                lines.append(f"{kind} isolation: {getattr(self, kind)}")
        lines += [_failure_line(f) for f in self.failures]
        if self.expected_failures:
            lines.append(f"expected failures ({len(self.expected_failures)}, listed):")
            lines += [_failure_line(f) for f in self.expected_failures]
        if self.unexpected_passes:
            lines.append(f"listed as expected failures but reproduce ({len(self.unexpected_passes)}): take them "
                         f"off the list")
            lines += [one_line(f"  {p['sample_id']} ({p['category']})" + _expected_note(p))
                      for p in self.unexpected_passes]
        if self.expected_not_in_data:
            lines.append(f"listed as expected failures but no row verified has them "
                         f"({len(self.expected_not_in_data)}): {one_line(', '.join(self.expected_not_in_data))}")
        return "\n".join(lines)


def _failure_line(f: dict) -> str:
    # One line a failure: ids and details quote the data and upstream's messages, line breaks included
    # (the call it failed at, as an executed row's error names it: which of a long sequence's calls to look at)
    at = "" if f.get("failed_call") is None else f" at output[{f['failed_call']}]"
    return one_line(f"  {f['sample_id']} ({f['category']}): {f['reason']}{at}: {f['detail']}"
                    + (" [upstream's scorer counts it as a win]" if f.get("upstream_counts_as_win") else "")
                    + _expected_note(f))


def _expected_note(item: dict) -> str:
    reason = item.get("expected_reason")
    return "" if reason is None else f" [expected{': ' + reason if reason else ''}]"


def verify_rows(rows: Iterable[dict], *, executable_functions: Union[str, os.PathLike, None] = None,
                functions_dir: Union[str, os.PathLike, None] = None, limits: SandboxLimits = SandboxLimits(),
                cache_dir: Optional[str] = None, batch_size: int = 1000,
                expected_failures: Optional[ExpectedFailures] = None) -> VerifyReport:
    """Execute the gold sequences of unified NESTFUL rows, ``batch_size`` rows per sandbox process, with the
    functions of ``executable_functions`` (or ``functions_dir``; default: the pinned upstream folder).

    ``expected_failures``: ids (as failures name rows: the ``sample_id``, else the unified id), or id -> reason,
    of rows known not to reproduce: their failures go to ``expected_failures``, and those that reproduce after
    all to ``unexpected_passes``; listed ids no row has are in ``expected_not_in_data``."""
    expected = expected_failures_of(expected_failures)
    folder = functions_folder(one_folder(executable_functions, functions_dir, "functions_dir"), cache_dir=cache_dir)
    report = VerifyReport()
    counts: dict[str, Counter] = {}
    seen: set[str] = set()  # the listed ids met
    batch: list[dict] = []

    def flush():
        jobs, kept = [], []
        for row in batch:
            try:
                jobs.append(execution_job(row))
                kept.append(row)
            except ToolUseDataError as error:
                # the message is "<reason>: <detail>" (no_gold: ...): the reason is printed once, before the detail
                reason, sep, detail = error.message.partition(": ")
                if not sep or " " in reason:
                    reason, detail = type(error).__name__, error.message
                _count(report, counts, row, False, {"status": "error", "reason": reason, "detail": detail,
                                                    "failed_call": None, "answer": None, "answer_type": None,
                                                    "answer_repr": None, "upstream_counts_as_win": False},
                       expected, seen)
        for row, result in zip(kept, run_sequences(jobs, folder, limits)):
            for kind in ISOLATION:
                setattr(report, kind, getattr(report, kind) or getattr(result, kind))
            reproduced = result.ok and bool(result.win_upstream)
            failure = None
            if not reproduced:
                mismatch = mismatch_text(result, row.get("meta") or {})
                # The answer as JSON, and what it is in Python where JSON cannot say (a tuple, NaN, int keys)
                failure = {"status": result.status, "reason": result.reason or "gold_mismatch",
                           "detail": result.detail or mismatch,
                           "failed_call": result.failed_call, "answer": (result.answer or {}).get("value"),
                           "answer_type": result.answer_type, "answer_repr": result.answer_repr,
                           "upstream_counts_as_win": bool(result.win_upstream)}
            _count(report, counts, row, reproduced, failure, expected, seen)
        batch.clear()

    for row in progress(rows, "verify nestful"):
        batch.append(row)
        if len(batch) >= batch_size:
            flush()
    if batch:
        flush()
    report.by_category = {k: {"rows": c["rows"], "reproduced": c["reproduced"]} for k, c in sorted(counts.items())}
    report.expected_not_in_data = [name for name in expected if name not in seen]
    return report


def _count(report: VerifyReport, counts: dict, row: dict, reproduced: bool, failure: Optional[dict],
           expected: dict, seen: set) -> None:
    category = row.get("subset") or "other"
    c = counts.setdefault(category, Counter())
    c["rows"] += 1
    report.rows += 1
    meta = row.get("meta") or {}
    name = meta.get("sample_id") or row.get("id")  # v1 rows have a null sample_id: their unified id names them
    listed = name in expected
    if listed:
        seen.add(name)
    if reproduced:
        c["reproduced"] += 1
        report.reproduced += 1
        if listed:
            report.unexpected_passes.append({"sample_id": name, "category": category,
                                             "expected_reason": expected[name]})
    else:
        entry = {"sample_id": name, "category": category, "gold_answer": meta.get("gold_answer"), **failure}
        if listed:
            report.expected_failures.append(dict(entry, expected_reason=expected[name]))
        else:
            report.failures.append(entry)


def verify(data_files: Any = None, *, data_dir: Optional[str] = None, executable_functions=None, functions_dir=None,
           limits: SandboxLimits = SandboxLimits(), cache_dir: Optional[str] = None, on_error: str = "raise",
           report=None, expected_failures: Optional[ExpectedFailures] = None) -> VerifyReport:
    """:func:`verify_rows` over every row of every split that ``tooluse_datasets.load("nestful", ...)`` reads
    (default: the pinned upstream file). With ``on_error="skip"``, rows that cannot be read are counted in the
    result's ``skipped`` (and listed in ``report``, a :class:`SkipReport`): they were not verified.
    ``expected_failures``: see :func:`verify_rows` (``read_expected_failures(path)`` reads a list file);
    ``passed`` on the result says whether the data passes."""
    from tooluse_datasets import load
    from tooluse_datasets.errors import SkipReport

    folder = one_folder(executable_functions, functions_dir, "functions_dir")  # (checked before the data files are)
    report = SkipReport() if report is None else report
    before = report.skipped
    splits = load("nestful", "unified", streaming=True, data_files=data_files, data_dir=data_dir,
                  on_error=on_error, report=report)
    rows = (row for split in splits.values() for row in split)
    result = verify_rows(rows, executable_functions=folder, limits=limits, cache_dir=cache_dir,
                         expected_failures=expected_failures)
    result.skipped = report.skipped - before  # rows that could not be read were not verified: said in the result
    return result
