"""``validate(source, ...)``: every rule over every row of a source, streaming, and the report it gives.

The report has, per split and in total, the rows the reader could not read (the skip report of the chosen
config) and the per-rule counts of the unified rows, with a few example rows each; as a table or as JSON.
What makes a run fail is a selection (``fail_on``): rule ids, globs, severities, and ``read`` for unreadable
rows; by default ``error,read``.
"""
from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import Any, Optional

from ..errors import SkipReport
from ..progress import progress
from .counter import ValidationCounter, check_max_examples
from .registry import (READ_ERRORS, SEVERITIES, RuleSelection, all_rules, read_once, refuse_rules_of_other_sources,
                       select_rules, selection_items, selects_read_errors, sources_read)

DEFAULT_FAIL_ON = "error,read"


@dataclass
class SplitValidation:
    read: SkipReport                 # rows read and skipped by the reader of the chosen config
    rules: ValidationCounter         # per-rule counts over the unified rows

    def to_dict(self) -> dict:
        return {"read": self.read.to_dict(), "validation": self.rules.to_dict()}


def validate(source: str, config: str = "unified", split: Optional[str] = None, data_files: Any = None,
             data_dir: Optional[str] = None, *, rules: RuleSelection = None, fail_on: RuleSelection = DEFAULT_FAIL_ON,
             revision: Optional[str] = None, on_error: str = "skip", max_examples: int = ValidationCounter.MAX_EXAMPLES,
             skipped_rows: Optional[str] = None, fresh_skipped_rows: bool = False,
             **source_options: Any) -> "ValidationResult":
    """Read ``source`` (streaming, constant memory) and check every unified row against ``rules`` (default:
    all). ``config`` chooses whose read errors are reported: a writer format (``swift``, ``toolmind``) or
    ``raw`` is read as well, so rows that cannot be written in it count as read errors; the rules always
    check the unified rows. ``skipped_rows``: a file to append every unreadable row to, one JSON object per
    line (file, row, field, reason, message); ``fresh_skipped_rows``: empty that file first, once the arguments
    are checked and the splits planned (a run refused for its arguments leaves it as it was). Other arguments
    are those of :func:`tooluse_datasets.load`."""
    from .. import registry
    from ..loading import check_argument_types, check_format, check_revision_reads_upstream
    from ..pipeline import UNIFIED, ShardConverter, config_features
    from ..source import splits_read

    check_argument_types(config=config, split=split, data_dir=data_dir, skipped_rows=skipped_rows, revision=revision)
    if split is not None and not isinstance(split, str):  # datasets' Split or ReadInstruction: as load() reads it
        split = str(split)
    if split is not None:
        splits_read(split)  # an empty name refused as load() refuses it, before any file is planned or fetched
    check_max_examples(max_examples)
    if "validate" in source_options:  # load()'s filter of failing rows: the builder would take it and never apply it
        raise ValueError("validate() checks every row against rules= and drops none: load()'s validate= does not "
                         "apply here; give the rules to check as rules=")
    _refuse_load_only_arguments(source, source_options)
    check_format(source, config)  # as load() says it (every format, the one meant), before any reading
    check_revision_reads_upstream(source, revision, data_files, data_dir)  # as load() refuses it: not ignored

    rules, fail_on = read_once(rules), read_once(fail_on)
    if rules is not None and not selection_items(rules, "rules"):
        # rules="" (an unset variable) ran every rule, where an empty fail_on or load(validate="") is refused;
        # so did rules=False, which check_row refuses and validate= reads as checking nothing
        raise ValueError(f"rules={rules!r} names no rule to run: give rule ids, globs such as 'arguments.*', error, "
                         "warning or all, or leave it out to run every rule")
    if fail_on is None:  # (os.environ.get("FAIL_ON") unset) failed on nothing, "PASSED (fail on )" whatever failed
        fail_on = DEFAULT_FAIL_ON
    if not selection_items(fail_on, "fail_on"):
        # fail_on="" (an unset variable) or False failed on nothing: every run passed, as an empty --fail-on would
        raise ValueError(f"fail_on={fail_on!r} names nothing to fail on: give rule ids, globs, error, warning or "
                         f"read, or leave it out for its default ({DEFAULT_FAIL_ON!r})")
    selected = rules_run(source, rules, fail_on, data_files=data_files)
    builder = registry.builder_class(source)(config_name=UNIFIED, data_files=data_files, data_dir=data_dir,
                                             on_error=on_error, revision=revision, **source_options)
    plans = builder.split_plans()  # every split planned once
    parts = {plan.name: [plan] for plan in plans}
    if split == "all" and split not in parts:
        # datasets' name for every split as one, as load() streams it and export and stats read it
        parts = {split: plans}
    elif split is not None:
        # "a+b" is one split of the rows of both, as load() streams it and stats counts it
        wanted = [name.strip() for name in split.split("+")]
        names = [name.split("[", 1)[0].strip() for name in wanted]
        builder.check_split_names(names, [p.name for p in plans])  # (a misspelt one named with the one meant)
        if names != wanted:  # "no split 'train[:10]'" said the name was wrong
            raise ValueError(f"validate() checks whole splits: split={split!r} has a slice; give "
                             f"{'+'.join(names)!r}")
        if len(set(names)) < len(names):  # each row of it would be counted twice
            raise ValueError(f"split={split!r} names a split more than once: its rows would be checked twice")
        parts = {split: [next(p for p in plans if p.name == name) for name in names]}

    def reports_for(read: SkipReport) -> dict[str, Any]:
        # One pass: each row is converted once to unified (what the rules check) and, for another config,
        # written in it too. The read errors reported are the rows that failed in either: a row with no
        # unified row is checked by no rule (a raw row is kept when only its unified conversion fails), and a
        # row failing in both counts once.
        if config == UNIFIED:
            return {UNIFIED: read}
        seen = _RecentKeys()
        return {UNIFIED: _EitherSkips(read, seen, counts_rows=True),
                config: _EitherSkips(read, seen, counts_rows=False)}

    config_features(builder.source, config)  # a format without a writer (or raw without raw rows) is refused now
    # (made first: a report refuses a file in a missing folder by name, where emptying it said FileNotFoundError)
    reads = {name: SkipReport(rows_path=skipped_rows) for name in parts}
    if skipped_rows:  # (fresh_skipped_rows emptied a data file)
        builder.refuse_writing_inputs({"skipped_rows": [skipped_rows]})
    if fresh_skipped_rows and skipped_rows:
        with open(skipped_rows, "wb"):
            pass
    splits: dict[str, SplitValidation] = {}
    for name, split_plans in parts.items():
        read = reads[name]
        counter = ValidationCounter(selected, max_examples=max_examples)
        reports = reports_for(read)
        converter = ShardConverter(builder.source, list(reports), on_error=on_error, reports=reports)
        rows = (row for plan in split_plans for shard in plan.shards
                for batch in converter.batches(plan, shard, arrow=False) for row in batch.rows[UNIFIED])
        for row in progress(rows, f"validate {source}/{name}"):
            counter.check(row)
        read.close()
        splits[name] = SplitValidation(read, counter)
    return ValidationResult(source, config, splits, fail_on, [r.id for r in selected])


def _refuse_load_only_arguments(source: str, given: dict) -> None:
    """load()'s own arguments that validate() does not take (num_proc, streaming, report, ...) were refused as
    "ms_swift has no option 'num_proc'; its options: ...", as if a source option had been misspelt: the error says
    why they do not apply and what validate() gives instead."""
    import inspect

    from ..loading import load

    taken = set(inspect.signature(validate).parameters) | {"cache_dir"}  # (cache_dir goes to the builder)
    load_only = sorted(set(given) & set(inspect.signature(load).parameters) - taken)
    if load_only:
        names = ", ".join(load_only)
        raise ValueError(f"{names} {'is' if len(load_only) == 1 else 'are'} load()'s: validate() reads each row once, "
                         f"streaming, in this process, and takes no {names} (validating {source}); each split's read "
                         "report is result.splits[name].read, and skipped_rows= lists every skipped row")


def rules_run(source: str, rules: RuleSelection, fail_on: RuleSelection,
              names: Optional[dict[str, str]] = None, data_files: Any = None) -> list:
    """The rules :func:`validate` runs on ``source`` rows. A rule id or glob of ``rules`` or ``fail_on`` naming only
    other sources' rules (for the ``all`` mix, of sources ``data_files`` does not name), and one of ``fail_on`` that
    names none of the rules run (it could never fail the run), are a ValueError instead of a run that passes
    whatever the rows hold; severities, ``all`` and ``read`` select among the rules run, as they say. ``names``:
    what the caller calls the two (a command's ``--rules`` and ``--fail-on``), for the messages."""
    rules_name, fail_on_name = (names or {}).get("rules", "rules"), (names or {}).get("fail_on", "fail_on")
    read = sources_read(source, data_files)
    refuse_rules_of_other_sources(read, **{rules_name: rules, fail_on_name: fail_on})
    selected = select_rules(rules, source=read)  # (a mix lists the rules of the sources it reads)
    select_rules(fail_on, default_all=False, allow_read=True)  # a typo in fail_on fails now, not after the run
    _refuse_rules_not_run({r.id for r in selected}, fail_on, fail_on_name)
    return selected


def _refuse_rules_not_run(run: set, fail_on: RuleSelection, fail_on_name: str) -> None:
    """A rule id or glob of ``fail_on`` that names none of the rules ``run``: a ValueError, not a pass on it."""
    unrun = [item for item in selection_items(fail_on) if item not in (READ_ERRORS, "all", *SEVERITIES)
             and not run & {r.id for r in select_rules(item)}]
    if unrun:
        raise ValueError(f"{fail_on_name} names {', '.join(map(repr, unrun))}, which the rules run do not include "
                         f"(rules: {', '.join(sorted(run))}): add it to the rules, or the run could never fail on it")


class _RecentKeys:
    """The keys of the last ``most`` rows skipped, in constant memory: a row's failures in the two configs are
    reported while its batch converts (batches hold at most a few thousand rows)."""

    def __init__(self, most: int = 1 << 16):
        self.most = most
        self._order: collections.deque = collections.deque()
        self._keys: set = set()

    def __contains__(self, key) -> bool:
        return key in self._keys

    def add(self, key) -> None:
        self._order.append(key)
        self._keys.add(key)
        if len(self._order) > self.most:
            self._keys.discard(self._order.popleft())


class _EitherSkips:
    """What the converter reports of one of two configs, into the one report ``read`` of rows failing in either:
    rows read are counted by one of them (``counts_rows``), and a row is skipped once however many of them
    fail it (``seen``, shared: the file and row of the rows skipped lately)."""

    def __init__(self, read: SkipReport, seen: "_RecentKeys", *, counts_rows: bool):
        self.read, self.seen, self.counts_rows = read, seen, counts_rows

    def count_read(self, n: int) -> None:
        if self.counts_rows:
            self.read.count_read(n)

    def add(self, error, *, log: bool = True, listed: bool = False) -> None:
        # an error without a row (a whole shard unreadable) is the same object in both configs' reports: the
        # object itself is the key (held in the set, its identity cannot be reused by a later error)
        key = (error.file, error.row) if error.row is not None else error
        if key in self.seen:
            return
        self.seen.add(key)
        self.read.add(error, log=log, listed=listed)


class ValidationResult:
    def __init__(self, source: str, config: str, splits: dict[str, SplitValidation],
                 fail_on: RuleSelection = DEFAULT_FAIL_ON, rules_checked: Optional[list[str]] = None):
        self.source = source
        self.config = config
        self.splits = splits
        self.fail_on = fail_on
        self.rules_checked = rules_checked if rules_checked is not None else [r.id for r in all_rules()]

    def total(self) -> SplitValidation:
        # as many examples per rule as each split keeps (validate's max_examples, --examples)
        most = max((part.rules.max_examples for part in self.splits.values()), default=ValidationCounter.MAX_EXAMPLES)
        read, counter = SkipReport(), ValidationCounter([], max_examples=most)
        counter.rules_checked = list(self.rules_checked)
        for part in self.splits.values():
            read.merge(part.read)
            counter.merge(part.rules)
        return SplitValidation(read, counter)

    def failures(self, fail_on: RuleSelection = None) -> dict[str, int]:
        """What failed under ``fail_on`` (default: the run's): ``{"read": rows skipped, rule id: rows}``. A rule
        id or glob the run did not check, or a selection naming nothing, is a ValueError, as in :func:`validate`:
        no row could have failed it."""
        fail_on = read_once(fail_on)
        if fail_on is None:
            fail_on = self.fail_on
        else:
            if not selection_items(fail_on, "fail_on"):
                raise ValueError(f"fail_on={fail_on!r} names nothing to fail on: give rule ids, globs, error, warning "
                                 "or read, or leave it out for the run's own")
            select_rules(fail_on, default_all=False, allow_read=True)  # (an unknown id, named as such)
            _refuse_rules_not_run(set(self.rules_checked), fail_on, "fail_on")
        total = self.total()
        out: dict[str, int] = {}
        if selects_read_errors(fail_on) and total.read.skipped:
            out[READ_ERRORS] = total.read.skipped
        for r in select_rules(fail_on, default_all=False, allow_read=True):
            if total.rules.rows_failing(r.id):
                out[r.id] = total.rules.rows_failing(r.id)
        return out

    @property
    def nothing_checked(self) -> Optional[str]:
        """Why no unified row was checked (the data holds no rows, or none could be read), or None. Nothing
        validated is no pass, whatever ``fail_on`` selects."""
        total = self.total()
        if total.rules.checked:
            return None
        if not total.read.rows_read:
            return "the data holds no rows: nothing was validated"
        return f"the reader skipped every row ({total.read.rows_read} read): nothing was validated"

    @property
    def failed(self) -> bool:
        return bool(self.failures()) or self.nothing_checked is not None

    def to_dict(self) -> dict:
        rules = {r.id: r for r in all_rules()}
        return {
            "source": self.source,
            "config": self.config,
            "fail_on": selection_items(self.fail_on),
            "failed": self.failed,
            "failures": self.failures(),
            "nothing_checked": self.nothing_checked,
            "rules": {i: {"severity": rules[i].severity, "description": rules[i].description}
                      for i in self.rules_checked if i in rules},
            "total": self.total().to_dict(),
            "splits": {name: part.to_dict() for name, part in self.splits.items()},
        }

    def table(self) -> str:
        from .render import render_table

        return render_table(self)

