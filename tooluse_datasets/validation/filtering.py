"""Dropping (or stopping at) unified rows that break chosen rules, counted as skips.

``load(..., validate=RULES)`` checks rows as they are converted (:func:`rule_check`, run by the pipeline,
where each row's file and row number are known). :func:`filter_dataset` does the same to a dataset already
loaded: it decides on rows decoded exactly from the stored Arrow data and keeps only a selection of rows
(stored values are never decoded and re-encoded, so no JSON column goes through ``datasets.Json``'s lossy
float encoding). Map-style, ``Dataset.filter`` on the Arrow format builds an index mapping (in memory, never
from a cache, so the skip report is filled on every call); streaming, the same filter runs on Arrow batches
as rows are read. A row it drops is named by its source and unified id (``row_id`` in the skip record):
loaded rows hold neither the file nor the row number they were read from.

A stream resumed from a saved state checks the batch in progress again (datasets replays a filter batch from
its start); its skips were counted when the state was saved, so they are not counted again, as a resumed
``load()`` stream does not count its rows twice (``ShardExamplesIterable._note_counted``).
"""
from __future__ import annotations

import functools
import inspect
from typing import Any, Optional

import pyarrow as pa
import pyarrow.compute as pc
from datasets import Dataset, IterableDataset
from datasets.iterable_dataset import FilteredExamplesIterable

from ..datasets_patches import patched_once
from ..exact_features import ExactFeatures
from ..errors import RuleViolationError, SkipReport, check_on_error
from ..schema import MEDIA_COLUMNS, UNIFIED_FEATURES
from .check import findings_of
from .registry import Rule, RuleSelection, read_once, refuse_rules_of_other_sources, select_rules, selection_items

FILTER_BATCH_ROWS = 256  # unified rows of long conversations are large; batches stay small
# Every unified column but the media ones (decoded rows leave those out when empty): ``row.fields`` fails a row
# without one whatever the rules selected, so a dataset lacking one (``remove_columns("meta")``) would lose every
# row. It is refused instead.
_UNIFIED_COLUMNS = tuple(c for c in UNIFIED_FEATURES if c not in MEDIA_COLUMNS)


def filter_dataset(ds: Any, rules: RuleSelection, *, on_error: str = "skip", report: Optional[SkipReport] = None,
                   batch_size: int = FILTER_BATCH_ROWS) -> Any:
    """``ds`` without the rows that break any of ``rules`` (a selection as in ``select_rules``: ids, globs,
    ``error``, ``warning``, ``all``; None: ``ds`` unchanged; an empty one, a ValueError).

    ``on_error="skip"``: those rows are dropped, each counted in ``report`` as
    ``RuleViolationError:<rule id>`` (a map-style dataset is filtered now, a streaming one as it is read).
    ``on_error="raise"``: the first such row raises :class:`RuleViolationError` naming the row id, rule and
    field. Works on ``Dataset``, ``IterableDataset`` and their dicts of unified rows; the result keeps the
    input's features and format.
    """
    check_on_error(on_error)
    # (checked before any row: a stream's filter met them at its first batch, as AttributeError "'str' object has
    # no attribute 'add'" or datasets' "'<=' not supported", and 0 or -1 made the whole split one batch)
    if report is not None and not isinstance(report, SkipReport):
        raise TypeError(f"report must be a tooluse_datasets.SkipReport (it is filled in), got {type(report).__name__}")
    if type(batch_size) is not int or batch_size < 1:
        raise ValueError(f"batch_size must be a positive whole number of rows, got {batch_size!r}")
    rules = read_once(rules)
    if rules not in (None, False) and not selection_items(rules, "rules"):
        # rules=os.environ.get("RULES", "") returned every row unchecked: refused, as load(validate="") is
        raise ValueError(f"rules={rules!r} names no rule: give rule ids, globs such as 'arguments.*', error, "
                         "warning or all, or None to filter nothing")
    selected = select_rules(rules, default_all=False)
    if not selected:
        return ds
    held = _sources_held(ds)
    if held:  # a selection naming only rules of sources absent from the rows would drop no row, silently
        refuse_rules_of_other_sources(held, rules=rules)
    report = report if report is not None else SkipReport()
    if isinstance(ds, dict):  # a DatasetDict, an IterableDatasetDict or a plain dict of splits
        return type(ds)({name: _filter_split(split, selected, on_error, report, batch_size)
                         for name, split in ds.items()})
    return _filter_split(ds, selected, on_error, report, batch_size)


def _filter_split(ds: Any, selected: list[Rule], on_error: str, report: SkipReport, batch_size: int) -> Any:
    if not isinstance(ds, (Dataset, IterableDataset)):
        raise TypeError(f"filter_dataset takes a datasets Dataset or IterableDataset, or a dict of them, "
                        f"got {type(ds).__name__}")
    if ds.features is None:  # datasets forgets a stream's features in map(): "lacks every column" would mislead
        raise ValueError("validation rules decode unified rows by their features, and this dataset's are unknown "
                         "(a stream after map() has none): filter before map(), or load the split map-style")
    missing = [c for c in _UNIFIED_COLUMNS if c not in ds.features]
    if missing:
        raise ValueError(f"validation rules check unified rows; this dataset lacks {missing} (load config='unified')")
    keep = _RowFilter(ds.features, selected, on_error, report)
    if isinstance(ds, Dataset):
        fmt = ds.format
        out = ds.with_format("arrow").filter(keep, batched=True, batch_size=batch_size, keep_in_memory=True,
                                             load_from_cache_file=False)
        return out.with_format(fmt["type"], columns=fmt["columns"], output_all_columns=fmt["output_all_columns"],
                               **fmt["format_kwargs"])
    format_type = ds._formatting.format_type if ds._formatting is not None else None
    return ds.with_format("arrow").filter(keep, with_indices=True, batched=True,
                                          batch_size=batch_size).with_format(format_type)


def _sources_held(ds: Any) -> set[str]:
    """The sources of a map-style dataset's rows (of all its splits; only the rows a select() or filter() kept, not
    the others its table still holds); none known (an empty set) where a split is a stream, which is not read
    ahead."""
    splits = list(ds.values()) if isinstance(ds, dict) else [ds]
    if not all(isinstance(split, Dataset) and "source" in split.column_names for split in splits):
        return set()
    # (the column as Arrow, through the view's indices: neither rows decoded nor the view flattened to a file)
    return {name for split in splits for name in pc.unique(split.with_format("arrow")["source"]).to_pylist() if name}


class _RowFilter:
    """The batched predicate: decodes an Arrow batch exactly, checks each row, keeps the ones that pass."""

    def __init__(self, features, rules: list[Rule], on_error: str, report: SkipReport):
        self.decoder = features if isinstance(features, ExactFeatures) else ExactFeatures(features)
        self.rules = rules
        self.on_error = on_error
        self.report = report
        # Rows of the stream (by index in the pass) whose skips the report has: those a saved state had checked.
        self.counted = 0
        self._checked = False

    def note_state(self, state: Optional[dict]) -> None:
        """Before the filter's state is replaced (see _install_filter_that_notes_counted): remember the furthest
        row a loaded state had checked. datasets loads the saved (latest) state first, then replays the batch in
        progress from its start; those rows were counted when the state was saved. A new pass over the stream
        (after one was checked) counts afresh."""
        if self._checked:
            self.counted, self._checked = 0, False
        elif state:
            self.counted = max(self.counted, state.get("previous_state_example_idx") or 0)

    def __call__(self, batch: pa.Table, indices: Optional[list[int]] = None) -> list[bool]:
        keep = []
        for i, stored in enumerate(batch.to_pylist()):
            error = first_violation(self.decoder.decode_example(stored), self.rules)
            if error is not None:
                if self.on_error == "raise":
                    raise error
                if indices is None or indices[i] >= self.counted:
                    self.report.add(error)
            keep.append(error is None)
        self._checked = True
        return keep


def _install_filter_that_notes_counted() -> None:
    """datasets' stream filter tells a row filter of ours each state it is about to replace, as its state is
    reset or loaded (``_init_state_dict`` runs first in both): the only moment the furthest state loaded is
    seen before the filter replays from an earlier one. Its copies (``shard_data_sources`` for nodes and
    workers, ``shuffle_data_sources``) keep the same row filter, so they tell it too. Other filters are
    untouched. Installed once per process on import."""
    original = getattr(FilteredExamplesIterable, "_init_state_dict", None)
    if original is None:
        return  # (a datasets without it: left as it is)

    def _init_state_dict(self):
        # (getattr: every other filter of the process runs through here too, and must not fail on a datasets
        # whose attributes are named otherwise)
        # (unwrapped: a batched filter of a stream with media is handed its media columns by a wrapper)
        mask_function = inspect.unwrap(getattr(self, "mask_function", None))
        if isinstance(mask_function, _RowFilter):
            mask_function.note_state(getattr(self, "_state_dict", None))
        return original(self)

    FilteredExamplesIterable._init_state_dict = patched_once(original, _init_state_dict, "_notes_counted")


_install_filter_that_notes_counted()


def rule_check(rules: RuleSelection):
    """A picklable ``row -> RuleViolationError | None`` for a selection (None if it selects no rule)."""
    selected = select_rules(rules, default_all=False)
    return functools.partial(first_violation, rules=selected) if selected else None


def first_violation(row: dict, rules: list[Rule]) -> Optional[RuleViolationError]:
    """The first finding of ``rules`` on a unified row as the error that names it: the row's source and id,
    the rule and the field (the file and row number are filled in by a caller that knows them); None if the
    row passes."""
    findings = findings_of(row, rules)
    if not findings:
        return None
    first = findings[0]
    return RuleViolationError(f"{first.message} ({first.rule})", rule=first.rule, row_id=row.get("id"),
                              source=row.get("source"), field=first.field)
