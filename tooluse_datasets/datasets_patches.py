"""Exact features kept through datasets' operations.

datasets rebuilds plain ``Features`` in many places (merged infos, mixed streams, column operations, a
map-style ``map``, ``from_dict``/``from_generator``), and its stream operations read keys our decoded rows leave
out (an empty media column). Each ``_install_*`` below wraps the datasets function concerned so that
:class:`~tooluse_datasets.exact_features.ExactFeatures` survive it; :func:`patched_once` wraps each one once.
They are installed when this module is imported, which the package's ``__init__`` does, so every dataset built
in a process that imports ``tooluse_datasets`` gets them.
"""
from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import itertools
from collections.abc import Mapping
from typing import Any, Callable, Iterator, Optional

import numpy as np
import pyarrow as pa
from datasets.exceptions import DatasetGenerationError
from datasets.features import LargeList, List, Value
from datasets.iterable_dataset import (FormattedExamplesIterable, RebatchedArrowExamplesIterable,
                                      SelectColumnsIterable, _BaseExamplesIterable)
from datasets.table import table_cast

from .arrow_rows import storage_type
from .codec import _has_non_finite
from .errors import (DataNotFoundError, InvalidJsonError, InvalidValueError, JsonValueError, ToolUseDataError,
                     json_kind)
from .exact_features import (ExactFeatures, ForeignExactFeatures, MappedUnifiedFeatures, holds_exact_json, holds_json,
                             is_unified_messages)
from .schema import MEDIA_COLUMNS
from .workers import forking_workers


def patched_once(original: Callable, patch: Callable, mark: str) -> Callable:
    """``patch``, a replacement for datasets' ``original`` that calls it, as it is installed: with ``original``'s
    name and doc, ``__wrapped__`` set to it (``functools.wraps``), and marked ``mark``; ``original`` itself when it
    is that patch already (the module installing it reloaded), so each patch wraps datasets' function once."""
    if getattr(original, mark, False):
        return original
    functools.wraps(original)(patch)
    setattr(patch, mark, True)
    return patch


def raising_typed_errors(prepare_split_single: Callable) -> Callable:
    """A builder's ``_prepare_split_single`` that raises this package's typed errors as themselves: datasets wraps
    what the generator raised in a DatasetGenerationError, whose cause is lost on the way back from a num_proc
    worker (only a traceback text remains). The typed error pickles, so the user sees file, row and field with
    any num_proc."""

    def prepare(self, *args, **kwargs):
        try:
            yield from prepare_split_single(self, *args, **kwargs)
        except DatasetGenerationError as exc:
            if isinstance(exc.__cause__, ToolUseDataError):
                # (a row the features refuse: named by the generator's row, see _install_generated_rows_...)
                raise exc.__cause__.at(row=getattr(self, "_row_encoded", None)) from None
            if isinstance(exc.__cause__, DataNotFoundError):
                raise DataGoneInWorker(exc.__cause__) from exc.__cause__
            raise

    return prepare


class DataGoneInWorker(DatasetGenerationError):
    """datasets' wrapper of a DataNotFoundError (a file deleted since the split was planned) that keeps it as its
    cause also from a num_proc worker, where the cause is lost on the way back: load() unwraps it. (Raised as
    itself, an OSError, datasets would turn it into "Cannot find data file".)"""

    def __init__(self, error: DataNotFoundError):
        super().__init__(str(error))
        self.error = self.__cause__ = error

    def __reduce__(self):
        return type(self), (self.error,)


def _install_generated_rows_raising_typed_errors() -> None:
    """``Dataset.from_generator`` over rows of this package's streams: a bad row stopped it with datasets' "An
    error occurred while generating the dataset" (with num_proc, the row named only in a traceback text)."""
    from datasets.packaged_modules.generator.generator import Generator
    from datasets.utils.sharding import _number_of_shards_in_gen_kwargs

    original = Generator._prepare_split_single
    Generator._prepare_split_single = patched_once(original, raising_typed_errors(original), "_raises_typed_errors")

    generate = Generator._generate_examples

    def generate_examples(self, **gen_kwargs):
        # datasets encodes each row through the features given after taking it: a value they refuse (NaN) was named
        # by field only. While it is encoded, the row it is of the one generator (not a shard of gen_kwargs) is kept.
        one = _number_of_shards_in_gen_kwargs(gen_kwargs) == 1
        for key, example in generate(self, **gen_kwargs):
            self._row_encoded = key.item_or_batch_id if one else None
            yield key, example
            self._row_encoded = None

    Generator._generate_examples = patched_once(generate, generate_examples, "_names_the_row")


def _install_map_writer_naming_rows() -> None:
    """datasets' Arrow writer encodes a map's output a column at a time, and its JSON encoding is handed values
    without their column: a value exact features refuse (NaN in a call's arguments) was a JsonValueError naming
    no row and no field, where ``from_list`` and ``add_item`` name both. On that error only, the batch's values
    are encoded again one by one, and the first refused for the same reason is raised, named by its row (rows
    the writer wrote before, plus the shard's offset under ``num_proc``) and field. Installed once per process."""
    from datasets import Dataset
    from datasets.arrow_writer import ArrowWriter

    write = ArrowWriter._write_batch

    def write_batch(self, batch_examples, *args, **kwargs):
        try:
            return write(self, batch_examples, *args, **kwargs)
        except ToolUseDataError as exc:
            if exc.row is not None:
                raise
            raise _named_in_batch(exc, batch_examples, self._features, self._num_examples) from None
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            # Arrow's own words for a value of another kind than the features' (a message's content given as a
            # list of parts: "cannot mix list and non-list"): the value the exact features refuse, named
            named = _named_in_batch(exc, batch_examples, self._features, self._num_examples)
            if named is exc:
                raise
            raise named from exc

    ArrowWriter._write_batch = patched_once(write, write_batch, "_names_the_row")

    map_single = Dataset._map_single

    def map_shard(*args, **kwargs):
        try:
            yield from map_single(*args, **kwargs)
        except ToolUseDataError as exc:
            if getattr(exc, "row_in_shard", False):  # (a row the writer named: counted from the shard's start)
                exc.row += kwargs.get("offset") or 0
                exc.row_in_shard = False
            raise

    Dataset._map_single = staticmethod(patched_once(map_single, map_shard, "_names_the_row"))


def _named_in_batch(exc: Exception, batch: Any, features: Any, first_row: int) -> Exception:
    """``exc``, raised writing ``batch`` (columns of Python values) with ``features``, as the error of the first
    value they refuse for the same reason (any reason, for an Arrow error), named by its row (``first_row`` + its
    place) and field; ``exc`` where none is found. Error path."""
    if not isinstance(features, dict) or not isinstance(batch, dict):
        return exc
    # (past its first batch, a map's writer holds plain Features keeping the ExactJson leaves that refuse)
    exact_columns = [name for name in batch if name in features and holds_exact_json(features[name])]
    typed = isinstance(exc, ToolUseDataError)
    if not exact_columns:
        return exc
    for name, column in batch.items():
        # an Arrow error may come from any column of a dataset with exact features (an id given as a list)
        if name in (exact_columns if typed else features) and isinstance(column, (list, tuple)):
            exact = ExactFeatures({name: features[name]})
            for row, value in enumerate(column):
                try:
                    exact.encode_column([value], name)
                except ToolUseDataError as found:
                    if not typed or found.message == exc.message:
                        found.row_in_shard = True
                        return found.at(row=first_row + row)
    return exc


def _keeping_exact_features(original: Callable, keep: Callable[..., None]) -> Callable:
    """datasets' ``original`` followed by ``keep(result, *args)``, which puts exact features back on the result
    where datasets rebuilt plain ones. ``args`` are the call's arguments in the order of ``original``'s parameters,
    whether given by position or by name (``DatasetInfo.from_merge(dataset_infos=...)``)."""
    signature = inspect.signature(original)

    def keeping(*args, **kwargs):
        out = original(*args, **kwargs)
        keep(out, *signature.bind(*args, **kwargs).args)
        return out

    return patched_once(original, keeping, "_keeps_exact_features")


def _install_merged_info_features() -> None:
    """``datasets.concatenate_datasets`` / ``interleave_datasets`` of map-style datasets merge their infos with
    ``DatasetInfo.from_merge``, which drops the features of infos that differ in anything (every source's
    description does), so a mix of ``td.load`` results would fall back to plain ``Features``: its rows would come
    back with every key (``tool_calls: []``, ``images: []``: TRL takes such a mix for vision data). Where every merged info has
    the features of a member's :class:`ExactFeatures` (see :func:`_merged_exact_features`), the merged info keeps
    them. Infos equal in everything merge into the first one's copy, whose features may be the plain ones of a
    member read with ``load_from_disk`` (or exact ones not reading its text as foreign): replaced too, so that
    the mix does not depend on the members' order.
    Installed once per process on import, like the exact writer (:mod:`.exact_features`); other merges are
    datasets' own."""
    from datasets.info import DatasetInfo

    def keep(merged, cls, dataset_infos):
        exact = _merged_exact_features([info.features for info in dataset_infos if info is not None])
        if exact is not None:
            merged.features = exact

    DatasetInfo.from_merge = classmethod(_keeping_exact_features(DatasetInfo.from_merge.__func__, keep))


def _merged_exact_features(given: list) -> Optional["ExactFeatures"]:
    """The :class:`ExactFeatures` a mix of datasets with these features keeps: where some member has
    ``ExactFeatures`` and every member's features are equal to them, else None. A member with equal plain features
    (a ``td.load`` result saved and read back with ``load_from_disk``) holds
    the same columns: mixed as plain, every row of the mix, the ``td.load`` member's too, came back with every key
    (an answer's ``tool_calls: []`` renders as an empty call turn under Hermes 3, ``images: []`` makes TRL take the
    text for vision data). Its JSON text may come from other writers, so the mix then reads every text as
    ``td.exact`` does (foreign), as it does where any member is foreign."""
    exact = next((f for f in given if isinstance(f, ExactFeatures)), None)
    if exact is None or any(f is None or f != exact for f in given):
        return None
    foreign = any(not isinstance(f, ExactFeatures) or f.foreign_text for f in given)
    return (ForeignExactFeatures if foreign else ExactFeatures)(copy.deepcopy(dict(exact)))


def _install_mixed_stream_features() -> None:
    """``concatenate_datasets`` / ``interleave_datasets`` of streams set the mix's features to a plain
    ``Features`` rebuilt from the members' (not through ``DatasetInfo.from_merge``). Iterating the mix reads the
    members' rows as they are, but every ``map``, ``filter`` or format of it (TRL's own tokenizing ``map``)
    decodes through the mix's features: its rows came back with every key (``images: []``, ``tool_calls: []``,
    ``reasoning_content: None``), so TRL took a filtered mix for vision data and Hermes-3 rendered each plain
    answer as an empty call turn. Where every member has equal :class:`ExactFeatures` and the mix has the same
    columns, the mix keeps them (as map-style mixes do above), and the members whose rows are not typed yet are
    typed with them (:func:`_typed_members`). Installed once per process on import."""
    from datasets import combine, iterable_dataset

    def keep(out, dsets, *args):
        # (a member without features, a mapped stream, is mixed with the features resolved for it below)
        exact = _merged_exact_features([d.features if d.features is not None else
                                        getattr(d, "_resolved_exact_features", None) for d in dsets])
        if exact is not None and out.features is not None and dict(out.features) == dict(exact):
            out._info.features = exact
            _typed_members(out, exact)

    for name in ("_concatenate_iterable_datasets", "_interleave_iterable_datasets"):
        if getattr(iterable_dataset, name, None) is None:
            continue  # a datasets without it: left as it is
        wrapped = _keeping_exact_features(getattr(iterable_dataset, name), keep)
        setattr(iterable_dataset, name, wrapped)
        if hasattr(combine, name):
            setattr(combine, name, wrapped)


def _typed_members(mix: Any, features: "ExactFeatures") -> None:
    """Each member of the streams ``mix`` joins whose rows are not typed (an examples iterable without features:
    ``ds.to_iterable_dataset()`` of a map-style ``td.load``, a mapped stream) read through ``features``
    (:class:`DecodedRowsIterable`). datasets types a mix's rows only where the mix's features differ from its first
    member's; a ``td.load`` stream first decodes its own rows with features equal to the mix's, so the rows of the
    members after it came out as stored: arguments and tools as JSON text (a chat template refuses such tools),
    answers with ``tool_calls: []``. Every such member is wrapped, wherever it is: the members' order changes
    (``shuffle``, and each epoch's ``set_epoch`` shuffle the data sources)."""
    members = getattr(mix._ex_iterable, "ex_iterables", None)
    if members and any(member.features is None for member in members):
        mix._ex_iterable.ex_iterables = [
            member if member.features is not None else DecodedRowsIterable.of(member, features, mix._token_per_repo_id)
            for member in members]


class DecodedRowsIterable(FormattedExamplesIterable):
    """A stream's rows decoded through exact features, one row per Arrow table (as datasets reads a stream's rows:
    no empty media key kept), and said to be untyped, as a ``td.load`` stream says of its own rows: its Arrow
    tables hold JSON as text, which a map or filter of the mix must still decode (a typed member would make
    datasets read the mix's tables without its features)."""

    @classmethod
    def of(cls, member: Any, features: "ExactFeatures", token_per_repo_id: dict) -> "DecodedRowsIterable":
        if member.iter_arrow:
            member = RebatchedArrowExamplesIterable(member, batch_size=1)
        return cls(member, formatting=None, features=features, token_per_repo_id=token_per_repo_id)

    @property
    def is_typed(self) -> bool:
        return False

    # datasets rebuilds a FormattedExamplesIterable for these: kept of this class
    def shuffle_data_sources(self, generator):
        return self._same_class(super().shuffle_data_sources(generator))

    def shard_data_sources(self, num_shards, index, contiguous=True):
        return self._same_class(super().shard_data_sources(num_shards, index, contiguous=contiguous))

    def reshard_data_sources(self):
        return self._same_class(super().reshard_data_sources())

    def _same_class(self, out: Any) -> "DecodedRowsIterable":
        out.__class__ = type(self)
        return out


def _install_stream_features_resolved_from_exact_ones() -> None:
    """A stream's ``map`` (without ``features=``) has no features, and ``interleave_datasets``,
    ``concatenate_datasets`` and ``push_to_hub`` infer them from its first rows with pyarrow's inference, which
    fails on unified rows (arguments of differing types: ``ArrowInvalid: Could not convert '$var_1.result$'``):
    mixing streams after the README's ``ds.map(td.short_call_ids)`` stopped with a bare traceback. Where the map
    reads a stream with :class:`ExactFeatures`, a column its first rows hold as those features declare it keeps
    its feature (unified messages keep their media columns), the others are inferred alone, as datasets infers
    them. Installed once per process on import."""
    from datasets import IterableDataset

    original = IterableDataset._resolve_features

    def resolve_features(self):
        if self.features is None and not self._ex_iterable.is_typed:
            exact = _exact_features_read_by(self._ex_iterable)
            resolved = _features_of_head(self, exact) if exact is not None else None
            if resolved is not None:
                self._resolved_exact_features = resolved  # for the mix's features (above)
                out = copy.copy(self)  # as datasets' own: the same stream, with features
                out._info = self.info.copy()
                out._info.features = resolved
                return out
        return original(self)

    IterableDataset._resolve_features = patched_once(original, resolve_features, "_resolves_exact_features")


def _exact_features_read_by(ex_iterable: Any) -> Optional["ExactFeatures"]:
    """The :class:`ExactFeatures` of the nearest typed stream step that ``ex_iterable`` reads (through maps and
    filters), or None."""
    while ex_iterable is not None:
        features = getattr(ex_iterable, "features", None)
        if ex_iterable.is_typed:
            return features if isinstance(features, ExactFeatures) else None
        ex_iterable = getattr(ex_iterable, "ex_iterable", None)
    return None


def _features_of_head(stream: Any, exact: "ExactFeatures") -> Optional["ExactFeatures"]:
    """Features of ``stream``'s first rows: ``exact``'s feature for each column that holds its values there, the
    others inferred alone; None where a column cannot be inferred (datasets' own inference then says why)."""
    from datasets.features.features import get_nested_type
    from datasets.iterable_dataset import _infer_features_from_batch

    with _reports_set_aside(stream._ex_iterable):
        head = stream.with_format(None)._head()
    columns = {}
    for name, values in head.items():
        feature = exact.get(name)
        refused = None
        if feature is not None:
            try:
                encoded = ExactFeatures({name: feature}).encode_column(values, name)
                pa.array(encoded, type=storage_type(get_nested_type(feature)))
                columns[name] = feature
                continue
            except JsonValueError:
                # a value JSON cannot hold where the features hold JSON (NaN in a call's arguments): inferred, it
                # became a struct of every row's keys; refused by row and field, as a map-style map refuses it
                raise _named_in_batch(pa.ArrowInvalid(""), {name: values}, exact, 0) from None
            except InvalidValueError:
                refused = _named_in_batch(pa.ArrowInvalid(""), {name: values}, exact, 0)
            except (InvalidJsonError, pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError,
                    KeyError, AttributeError):
                pass  # the map changed the column: inferred as datasets infers it
        try:
            columns[name] = _infer_features_from_batch({name: values})[name]
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            if isinstance(refused, InvalidValueError):  # (content as parts in some rows only: Arrow's bare error)
                raise refused from None
            return None
    if any(columns.get(name) == exact[name] for name in exact.chat_columns):
        columns.update((c, exact[c]) for c in exact.omitted_empty_media if c not in columns)
    ordered = [c for c in exact if c in columns] + [c for c in columns if c not in exact]
    # foreign: the map may hand on Arrow tables holding JSON text from any writer (as a map-style map's output)
    return ForeignExactFeatures({c: columns[c] for c in ordered})


@contextlib.contextmanager
def _reports_set_aside(ex_iterable: Any) -> Iterator[None]:
    """While it holds, the streams that ``ex_iterable`` reads (its steps' ``ex_iterable``/``ex_iterables``, down to
    the ones counting in a skip report) count nothing: a head read only to type the columns is read again in full
    by the pass it types, which counts (and lists) its reads and skips once."""
    readers, steps = [], [ex_iterable]
    while steps:
        step = steps.pop()
        if getattr(step, "report", None) is not None:
            readers.append((step, step.report))
        steps.extend(getattr(step, "ex_iterables", None) or ())
        if getattr(step, "ex_iterable", None) is not None:
            steps.append(step.ex_iterable)
    for reader, _ in readers:
        reader.report = None
    try:
        yield
    finally:
        for reader, report in readers:
            reader.report = report


def _install_column_operations_keeping_features() -> None:
    """``select_columns``, ``rename_column``, ``rename_columns``, ``cast_column``, ``cast`` (map-style and
    streaming) and ``flatten(_indices)`` rebuild the dataset's features as a plain ``Features``, so their rows came
    back with every key: after ``ds.select_columns(["messages", "tools"])`` Hermes-3 rendered each final answer
    (``tool_calls: []``) as an empty call turn, and a kept ``images: []`` made TRL take the text for vision data.
    Their result keeps the class of the features it came from (recompiled for its columns). So does a map-style
    ``map``, whose writer infers fresh features: after ``ds.map(td.short_call_ids)`` (or any map adding a column)
    the rows came back with every key too, and went to ``SFTTrainer`` that way unless passed through ``td.exact``
    again. Its JSON text is read as ``td.exact`` reads it, since a function may return Arrow tables holding text
    from any writer. (A stream's ``map`` hands on the function's rows as they are.) Installed once per process on
    import."""
    from datasets import Dataset, IterableDataset

    def keep(out, self, *args):
        _keep_exact_class(out, self._info.features, foreign=False)

    def keep_rewritten(out, self, *args):
        _keep_exact_class(out, self._info.features, foreign=True)

    Dataset.map = _writing_formatted_values_back(_keeping_exact_features(_map_workers_ending_with_the_pool(Dataset.map),
                                                                        keep_rewritten))
    # (``_fast_select_column`` is how ``ds["messages"]`` reads one column: its rows kept every key.)
    for cls, names in ((Dataset, ("select_columns", "rename_column", "rename_columns", "flatten_indices", "flatten",
                                  "cast_column", "cast", "_fast_select_column")),
                       (IterableDataset, ("select_columns", "rename_column", "rename_columns", "cast_column", "cast"))):
        for name in names:
            if getattr(cls, name, None) is not None:  # a datasets without it: left as it is
                setattr(cls, name, _keeping_exact_features(getattr(cls, name), keep))
    IterableDataset.select_columns = _selecting_absent_media(IterableDataset.select_columns)
    IterableDataset.__getitem__ = _column_of_selected(IterableDataset.__getitem__)
    IterableDataset.map = _handing_absent_media_to(_keeping_given_exact_features(IterableDataset.map))
    IterableDataset.filter = _handing_absent_media_to(IterableDataset.filter)
    IterableDataset.remove_columns = _removing_by_selecting(IterableDataset.remove_columns)
    IterableDataset.rename_columns = _renaming_absent_media(IterableDataset.rename_columns)  # rename_column's too


def _keeping_given_exact_features(original: Callable) -> Callable:
    """A stream's ``map(f, features=ds.features)`` gave the stream plain ``Features``: its exports (``to_list``,
    ``to_parquet``) built tables of the decoded rows by Arrow's inference and failed ("cannot mix struct and
    non-struct"), an identity map included. The stream keeps the class of the exact features given."""
    signature = inspect.signature(original)

    def apply(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        _keep_exact_class(out, signature.bind(self, *args, **kwargs).arguments.get("features"), foreign=False)
        return out

    return patched_once(original, apply, "_keeps_given_features")


# Formats whose values datasets' map writer cannot take back for nested columns (tensor formats, pandas)
_VALUE_FORMATS = ("numpy", "pandas", "torch", "jax", "tensorflow")
_TENSOR_FORMATS = ("torch", "jax", "tensorflow")


def _map_workers_ending_with_the_pool(original: Callable) -> Callable:
    """``map(num_proc=n)`` of a dataset of ours forks datasets' pool as a prepare does
    (:func:`.workers.forking_workers`): its workers take SIGTERM's default action, so a map whose function fails
    (the pool then terminated) ends, where a worker that inherited the caller's handler (a Ray driver's, a training
    script's) was waited on for ever."""
    def apply(self, *args, **kwargs):
        if (kwargs.get("num_proc") or 1) > 1 and isinstance(self._info.features, ExactFeatures):
            with forking_workers(watch_parent=True):
                return original(self, *args, **kwargs)
        return original(self, *args, **kwargs)

    return patched_once(original, apply, "_forks_workers_ending_with_the_pool")


def _writing_formatted_values_back(original: Callable) -> Callable:
    """A map-style ``map`` of a dataset formatted as numpy or pandas writes back what its function returns: datasets'
    writer takes numpy arrays of structs (messages, tools) for tensors and pandas rows by Arrow's inference, and failed
    on any such column returned (ArrowInvalid), an identity map included. With exact features the function's nested
    columns are written from the Python values they hold (numpy keeps JSON values exact). The torch, jax and tensorflow
    formats make JSON numbers tensors (floats float32): a JSON column returned holding them is refused by name."""
    def apply(self, function=None, *args, **kwargs):
        features = self._info.features
        if self._format_type in _VALUE_FORMATS and isinstance(features, ExactFeatures) \
                and not inspect.iscoroutinefunction(function):
            function = function if function is not None else _same  # (datasets' default: the identity)
            batched = kwargs.get("batched", len(args) > 3 and args[3])
            given = functools.partial(_written_back, _function=function, _features=features,
                                      _format=self._format_type, _batched=batched)
            given.__wrapped__ = function
            function = given
        return original(self, function, *args, **kwargs)

    return patched_once(original, apply, "_writes_formatted_values_back")


def _written_back(*args, _function: Callable, _features: ExactFeatures, _format: str, _batched: bool, **fn_kwargs):
    """What ``_function`` returns, its nested columns of ``_features`` as Python values (see above)."""
    import pandas as pd

    out = _function(*args, **fn_kwargs)
    nested = [c for c in (out if isinstance(out, (Mapping, pd.DataFrame)) else ()) if c in _features
              and not isinstance(_features[c], Value)]
    if not nested:
        return out
    if isinstance(out, pd.DataFrame):  # written as datasets writes a dict of its columns (a row's where not batched)
        if not _batched and len(out) != 1:
            return out  # datasets' own error
        out = {c: out[c].tolist() if _batched else out[c].iloc[0] for c in out.columns}
    else:
        out = dict(out)
    for name in nested:
        if _format in _TENSOR_FORMATS:
            if holds_json(_features[name]) and _holds_tensor(out[name]):
                raise InvalidValueError(
                    f"the {_format} format made this column's JSON numbers tensors (floats float32), which cannot be "
                    f"written back exactly: return only new columns, or map before with_format({_format!r}) "
                    f"(or on ds.with_format(None))").at(field=name)
        else:
            out[name] = _python_value(out[name])
    return out


def _same(value: Any) -> Any:
    """datasets' default ``map`` function, the identity (module level: a ``num_proc`` map pickles it)."""
    return value


def _python_value(value: Any) -> Any:
    """A value of datasets' numpy or pandas formatter as the python format gives it: arrays as lists, numpy scalars
    as Python ones (exact: float64 and int64, text as str)."""
    if isinstance(value, dict):
        return {k: _python_value(v) for k, v in value.items()}
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return value.item()
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_python_value(v) for v in value]
    return value.item() if isinstance(value, np.generic) else value


def _holds_tensor(value: Any) -> bool:
    """Whether a formatted value holds a tensor (torch, jax, tensorflow: an array that is not numpy's)."""
    if isinstance(value, dict):
        return any(_holds_tensor(v) for v in value.values())
    if isinstance(value, (list, tuple)) or (isinstance(value, np.ndarray) and value.dtype == object):
        return any(_holds_tensor(v) for v in value)
    return hasattr(value, "__array__") and not isinstance(value, (np.ndarray, np.generic))


def _renaming_absent_media(original: Callable) -> Callable:
    """A stream's ``rename_columns`` is datasets' Python ``map``, which requires every renamed key in every row:
    our decoded rows leave an empty media list out, so renaming ``images`` failed on the first row without
    images (ValueError: columns {'images'} are not in the dataset). With exact features such a key is renamed
    as the empty list it stands for."""
    def rename_columns(self, column_mapping):
        features = self._info.features
        if not isinstance(features, ExactFeatures):
            return original(self, column_mapping)
        # Rows leave empty media out, so datasets' row check misses a name taken by such a column: the renamed
        # column would replace it without a word (map-style refuses it, as here)
        taken = [new for new in column_mapping.values() if new in features and new not in column_mapping]
        if taken:
            raise ValueError(f"cannot rename to {', '.join(map(repr, taken))}: already a column of the dataset")
        empty = [c for c in column_mapping if c in features.omitted_empty_media]
        if not empty:
            return original(self, column_mapping)
        # (a module function, not a closure: the stream stays picklable, as a spawned DataLoader worker needs)
        rename = functools.partial(_rename_with_empty_media, empty=tuple(empty), column_mapping=column_mapping)
        out = self.map(rename, remove_columns=list(column_mapping))
        out._info.features = type(features)({column_mapping.get(c, c): f for c, f in features.items()})
        return out

    return patched_once(original, rename_columns, "_renames_absent_media")


def _rename_with_empty_media(example: dict, empty: tuple, column_mapping: dict) -> dict:
    """datasets' stream rename of one row, a media key the row leaves out (``empty``) taken as its empty list."""
    from datasets.iterable_dataset import _rename_columns_fn

    return _rename_columns_fn({**{c: [] for c in empty}, **example}, column_mapping)


def _removing_by_selecting(original: Callable) -> Callable:
    """A stream's ``remove_columns`` is datasets' Python ``map``, which hands on our rows as decoded values (a
    ``meta`` dict, not its JSON text): an Arrow step after it (``with_format("arrow")``, ``filter_dataset``)
    built tables from them and failed (ArrowInvalid: cannot mix struct and non-struct). With exact features it
    selects the other columns instead, which passes Arrow tables through as they are read."""
    def remove_columns(self, column_names):
        features = self._info.features
        if not isinstance(features, ExactFeatures):
            return original(self, column_names)
        removed = [column_names] if isinstance(column_names, str) else list(column_names)
        missing = [c for c in removed if c not in features]
        if missing:  # datasets' own error for it
            return original(self, column_names)
        return self.select_columns([c for c in features if c not in removed])

    return patched_once(original, remove_columns, "_selects_the_rest")


def _selecting_absent_media(original: Callable) -> Callable:
    """A stream's ``select_columns`` takes each selected key of a row where datasets has no cast to apply: when
    every column is selected (in any order, as ``remove_columns([])`` does), it read our rows, which leave an
    empty media column out, and failed (KeyError: 'images'). With exact features the selection leaves such a
    column out of the row as it was (it stands for ``[]``); its Arrow tables are selected as datasets selects them."""
    def select_columns(self, column_names):
        out = original(self, column_names)
        features = self._info.features
        selection = out._ex_iterable
        if isinstance(features, ExactFeatures) and features.omitted_empty_media and \
                type(selection) is SelectColumnsIterable:
            out._ex_iterable = _SelectColumnsLeavingAbsentMedia(selection.ex_iterable, selection.column_names,
                                                                features.omitted_empty_media)
        return out

    return patched_once(original, select_columns, "_leaves_absent_media")


def _column_of_selected(original: Callable) -> Callable:
    """A stream's ``ds["images"]`` (datasets' ``IterableColumn``) takes the key from each row: our rows leave an
    empty media column out, so it failed on the first row without media (KeyError: 'images'). With exact features
    the column is read from the stream of that column alone, ``[]`` where a row has no media, as map-style
    ``ds["images"]`` gives it."""
    def getitem(self, column_name):
        features = self._info.features
        if isinstance(features, ExactFeatures) and column_name in features.omitted_empty_media:
            return original(self.select_columns([column_name]), column_name)
        return original(self, column_name)

    return patched_once(original, getitem, "_reads_absent_media")


def _handing_absent_media_to(original: Callable) -> Callable:
    """A stream's ``map`` and ``filter`` take each of their ``input_columns`` from a row: our rows leave an empty
    media column out, so ``map(f, input_columns=["images"])`` failed on the first row without media (KeyError:
    'images'). With exact features the function is handed the columns by a wrapper instead, ``[]`` for a media
    column a row leaves out, as map-style hands it. A batched function given whole batches got a media column only
    where a row of the batch had media (``None`` for the others): ``batch["images"]`` failed on a batch without
    images (KeyError). It is handed every media column, ``[]`` for a row without media, as map-style hands it.
    (An async function is left to datasets, which tests for one.)"""
    def apply(self, function=None, with_indices=False, input_columns=None, batched=False, *args, **kwargs):
        features = self._info.features
        columns = [input_columns] if isinstance(input_columns, str) else input_columns
        if function is not None and not columns and batched and isinstance(features, ExactFeatures) and \
                features.omitted_empty_media and not inspect.iscoroutinefunction(function):
            given = functools.partial(_call_with_media_columns, _function=function, _features=features)
            given.__wrapped__ = function  # (steps that know a function of theirs find it: inspect.unwrap)
            return original(self, given, with_indices, input_columns, batched, *args, **kwargs)
        if function is None or not columns or not isinstance(features, ExactFeatures) or \
                not set(columns) & set(features.omitted_empty_media) or inspect.iscoroutinefunction(function):
            return original(self, function, with_indices, input_columns, batched, *args, **kwargs)
        given = functools.partial(_call_with_columns, _function=function, _columns=tuple(columns), _batched=batched,
                                  _absent=features.omitted_empty_media)
        given.__wrapped__ = function
        return original(self, given, with_indices, None, batched, *args, **kwargs)

    return patched_once(original, apply, "_hands_absent_media")


def _call_with_media_columns(batch: dict, *rest, _function: Callable, _features: ExactFeatures, **fn_kwargs):
    """``_function`` called with a batch of unified rows holding every media column, ``[]`` for a row without media
    (rows cut from a batch leave empty media out, and datasets fills a key some rows hold with None)."""
    # Python batches only: a table format's batch (pandas, arrow) and a tensor format's columns are the format's own
    if type(batch) is dict and any(type(batch.get(name)) is list for name in _features.chat_columns):
        rows = len(next(iter(batch.values()), ()))
        batch = dict(batch)
        for name in _features.omitted_empty_media:
            batch[name] = _media_lists(batch.get(name), rows)
    return _function(batch, *rest, **fn_kwargs)


def _media_lists(values: Optional[list], rows: int) -> list:
    """A media column of a batch of ``rows`` unified rows, ``[]`` for each row without media: datasets fills a key
    that some rows of the batch hold with None for the others, and leaves out one that no row holds."""
    return [[] for _ in range(rows)] if values is None else [[] if v is None else v for v in values]


def _call_with_columns(example: dict, *rest, _function: Callable, _columns: tuple, _batched: bool, _absent: tuple,
                       **fn_kwargs):
    """``_function`` called as datasets calls it with ``input_columns``, a media column the row (or every row of the
    batch) leaves out given as empty; any other column missing is datasets' KeyError."""
    if _batched:
        rows = len(next(iter(example.values()), ()))
        values = [_media_lists(example.get(c), rows) if c in _absent else example[c] for c in _columns]
    else:
        values = [example[c] if c in example or c not in _absent else [] for c in _columns]
    return _function(*values, *rest, **fn_kwargs)


class _SelectColumnsLeavingAbsentMedia(SelectColumnsIterable):
    """datasets' ``SelectColumnsIterable`` whose rows leave out a media column the row read leaves out."""

    def __init__(self, ex_iterable, column_names: list, absent_media: tuple):
        super().__init__(ex_iterable, column_names)
        self.absent_media = absent_media

    def __iter__(self):
        columns, absent = self.column_names, self.absent_media
        for idx, row in self.ex_iterable:
            yield idx, {c: row[c] for c in columns if c in row or c not in absent}

    def _alike(self, plain: SelectColumnsIterable) -> "_SelectColumnsLeavingAbsentMedia":
        return type(self)(plain.ex_iterable, plain.column_names, self.absent_media)

    def shuffle_data_sources(self, generator):
        return self._alike(super().shuffle_data_sources(generator))

    def shard_data_sources(self, num_shards: int, index: int, contiguous=True):
        return self._alike(super().shard_data_sources(num_shards, index, contiguous=contiguous))

    def reshard_data_sources(self):
        return self._alike(super().reshard_data_sources())


def _install_stream_tables_encoding_decoded_rows() -> None:
    """A stream's Arrow tables (``with_format("arrow")``, ``pandas``, ``polars``; behind its ``to_list``, ``to_dict``,
    ``to_pandas``, ``to_json`` and ``to_parquet``) are built from its rows where a step hands on Python rows (a
    ``map``): datasets had Arrow infer their types, and decoded JSON values failed (ArrowInvalid: "cannot mix struct
    and non-struct", "Could not convert '$var_1.result$'"), so ``ds.map(td.short_call_ids).to_list()`` of every
    source's stream did. Where the stream's features are exact each row becomes a one-row table of their schema,
    encoded by them (JSON leaves as exact text), which datasets casts to them; the exports of a stream without
    features (after a map) first resolve them from the exact ones its map reads, and so does iterating such a stream
    formatted as tables (not ``with_format`` itself, which reads no row): ``ds.map(f).with_format("arrow")`` failed
    with Arrow's "Schema at index 1 was different". Installed once per process."""
    from datasets import IterableDataset

    def typed_first(export: Callable) -> Callable:
        def typed_export(self, *args, **kwargs):
            if self.features is None and _exact_features_read_by(self._ex_iterable) is not None:
                # exact ones where its first rows fit them (see resolve_features): the head is read once more here,
                # its reads and skips not counted
                self = self._resolve_features()
            return export(self, *args, **kwargs)

        return patched_once(export, typed_export, "_types_tables")

    for name in ("to_list", "to_dict", "to_pandas", "to_polars", "to_json", "to_parquet", "to_csv", "to_sql"):
        if getattr(IterableDataset, name, None) is not None:  # a datasets without it: left as it is
            setattr(IterableDataset, name, typed_first(getattr(IterableDataset, name)))

    def typed_tables(iterate: Callable) -> Callable:
        def typed_iterate(self, *args, **kwargs):
            if self._formatting is not None and self._formatting.is_table and self.features is None and \
                    _exact_features_read_by(self._ex_iterable) is not None:
                # resolved in place (as the exports resolve them), so that state_dict() stays this stream's; the
                # formatter (pandas) then decodes JSON leaves as the exact features do
                self._info = self._resolve_features()._info
            yield from iterate(self, *args, **kwargs)

        return patched_once(iterate, typed_iterate, "_types_formatted_tables")

    IterableDataset.__iter__ = typed_tables(IterableDataset.__iter__)
    IterableDataset.iter = typed_tables(IterableDataset.iter)
    prepare = IterableDataset._prepare_ex_iterable_for_iteration

    def prepared(self, *args, **kwargs):
        out = prepare(self, *args, **kwargs)
        features = self.features
        if features is not None and not isinstance(features, ExactFeatures) and \
                any(holds_exact_json(feature) for feature in features.values()):
            # plain Features holding exact leaves (a map given the README's datasets.Features({**ds.features,
            # "prompt": ...})): their tables failed as those of no features did ("Schema at index 1 was different")
            features = ExactFeatures(features)
        rebatched = getattr(out, "ex_iterable", None)
        if isinstance(features, ExactFeatures) and type(rebatched) is RebatchedArrowExamplesIterable and \
                rebatched.force_convert_to_arrow and not rebatched.ex_iterable.iter_arrow:
            rebatched.ex_iterable = _EncodedRows(rebatched.ex_iterable, features, rebatched.batch_size)
        return out

    IterableDataset._prepare_ex_iterable_for_iteration = patched_once(prepare, prepared, "_encodes_rows_for_tables")


class _EncodedRows:
    """The rows of ``rows`` (an examples iterable, already prepared for iteration) as Arrow tables of ``features``'
    schema, their values encoded by them (datasets would infer each row's types alone, a row's null
    ``reasoning_content`` another type than another's text); everything else is ``rows``'. Each table holds the
    rows of one batch the stream hands out (``batch_size``, the tables' rebatching; 1000 where that takes all):
    datasets' one-row tables made each batch a table of as many chunks, cast chunk by chunk (``to_list`` of 9,000
    mapped ms_swift rows took 15 s, 7 s in batches), while a stream read row by row still gets each row as soon as
    it is mapped."""

    def __init__(self, rows: Any, features: ExactFeatures, batch_size: Optional[int]):
        self.rows, self.features = rows, features
        self.batch_size = batch_size if batch_size is not None and batch_size > 0 else 1000

    @property
    def iter_arrow(self):
        return self._iter_arrow

    def _iter_arrow(self):
        # JSON leaves as their text (Arrow builds no json extension array from Python values): datasets casts the
        # tables to the features after this step
        encode = self.features.encode_example
        schema = pa.schema([pa.field(f.name, storage_type(f.type)) for f in self.features.arrow_schema])
        rows, done = iter(self.rows), 0
        while batch := list(itertools.islice(rows, self.batch_size)):  # (no row read past the batch: its state)
            try:
                encoded = [encode(row) for _, row in batch]
            except ToolUseDataError as exc:  # named by its row of the stream, as the head's rows are
                refused = next(i for i, (_, row) in enumerate(batch) if not _encodes(encode, row))
                raise exc.at(row=done + refused) from None
            yield "_".join(str(key) for key, _ in batch), pa.Table.from_pylist(encoded, schema=schema)
            done += len(batch)

    def __iter__(self):
        return iter(self.rows)

    def __getattr__(self, name):
        return getattr(self.rows, name)


def _encodes(encode: Callable, row: dict) -> bool:
    """Whether ``encode`` takes ``row`` without a typed error (the error path's search for the refused row)."""
    try:
        encode(row)
    except ToolUseDataError:
        return False
    return True


def _install_file_builders_reading_foreign_text() -> None:
    """datasets' file builders given exact features (``Dataset.from_parquet``/``from_json``/``from_csv`` with
    ``features=ds.features``) read files anyone may have written: text holding an integer beyond 64 bits without
    our mark (DuckDB's, Polars') came back a float (123456789012345678901234567890 as 1.2345678901234568e+29), and
    the same call read from datasets' cache gave plain ``Features``, its rows with every key. Their datasets (and
    streams) read the text as ``td.exact`` does, built or cached. (``load_dataset`` hands its builder plain
    ``Features`` holding the ``ExactJson`` leaves, which read text that way too.) Installed once per process."""
    from datasets.builder import DatasetBuilder

    def keep(out, self, *args):
        given = getattr(self.config, "features", None)
        if isinstance(given, ExactFeatures):
            for ds in out.values() if isinstance(out, dict) else (out,):
                made = getattr(getattr(ds, "_info", None), "features", None)
                if made is not None and not (isinstance(made, ExactFeatures) and made.foreign_text):
                    ds._info.features = ForeignExactFeatures(dict(made))

    for name in ("as_dataset", "as_streaming_dataset"):
        setattr(DatasetBuilder, name, _keeping_exact_features(getattr(DatasetBuilder, name), keep))


def _install_add_item_encoding_the_item() -> None:
    """datasets' ``Dataset.add_item`` makes the item's table from its Python values, with Arrow's inferred types: a
    JSON value that is a dict became a struct, which it then tried to align with the ``Json()`` column
    (AttributeError: 'ExactJson' object has no attribute 'items'), so no row of ours could be added. With exact
    features the item is encoded by them first (JSON leaves as text, exactly; absent empty keys as a prepared
    row stores them), and datasets aligns and casts that text as it does any. Installed once per process."""
    from datasets import Dataset

    original = Dataset.add_item

    def add_item(self, item, *args, **kwargs):
        features = self._info.features
        if isinstance(features, ExactFeatures) and isinstance(item, dict):
            unknown = [k for k in item if k not in features]
            if unknown:  # datasets' own add_item fails on them in Arrow (schemas differ)
                raise ValueError(f"add_item: {unknown} are not columns of the dataset (columns: {list(features)})")
            item = features.encode_example(item)
        return original(self, item, *args, **kwargs)

    Dataset.add_item = patched_once(original, add_item, "_encodes_the_item")


def _install_from_list_taking_decoded_rows() -> None:
    """datasets' ``Dataset.from_list`` takes its columns from the first row's keys: decoded unified rows leave an empty
    media column out, so ``Dataset.from_list(list(ds), features=ds.features)`` failed ("Keys mismatch") whenever
    the first row had no images. With features of unified rows, a media column a row leaves out is given as the
    empty list it stands for. Installed once per process on import."""
    from datasets import Dataset

    original = Dataset.from_list.__func__

    def from_list(cls, mapping, features=None, *args, **kwargs):
        media = _media_of_unified(features)
        if media and isinstance(mapping, list):
            mapping = [_with_media(row, features, media) if isinstance(row, dict) and not all(c in row for c in media)
                       else row for row in mapping]
        return original(cls, mapping, features, *args, **kwargs)

    Dataset.from_list = classmethod(patched_once(original, from_list, "_takes_decoded_rows"))


def _install_constructors_keeping_exact_features() -> None:
    """``Dataset.from_dict`` (behind ``from_list``) and ``Dataset.from_generator`` given :class:`ExactFeatures`
    (``features=ds.features``) gave the new dataset datasets' plain ``Features``: its rows came back with every key,
    ``images: []`` (TRL refused it as vision data) and ``tool_calls: None`` on each answer, and a
    ``concatenate_datasets`` of it with ``ds`` fell back to plain ``Features`` too. The new dataset keeps the class
    of the features given (foreign where ``from_dict`` is handed Arrow arrays, whose JSON text it does not write).
    ``from_dict`` of a decoded batch (``ds[:8]``) failed ("Keys mismatch") where no row of the batch had media:
    such a media column is given as the empty lists it stands for, as ``from_list`` gives it for a row.
    Installed once per process on import."""
    from datasets import Dataset

    from_dict_original = Dataset.from_dict.__func__

    def from_dict(cls, mapping, features=None, info=None, *args, **kwargs):
        given = features if features is not None else getattr(info, "features", None)  # (datasets replaces info's)
        media = _media_of_unified(given)
        if media and isinstance(mapping, dict) and mapping and not all(c in mapping for c in media):
            mapping = _with_media_columns(mapping, given, media)
        if isinstance(given, ExactFeatures) and isinstance(mapping, dict):
            _refuse_text_for_lists(mapping, given)
            _refuse_values_for_text(mapping, given)
        try:
            out = from_dict_original(cls, mapping, features, info, *args, **kwargs)
        except (JsonValueError, AttributeError, TypeError) as exc:
            raise _named_by_row_and_field(exc, mapping, given) from None
        arrow_given = isinstance(mapping, dict) and any(isinstance(v, (pa.Array, pa.ChunkedArray))
                                                        for v in mapping.values())
        _keep_exact_class(out, given, arrow_given)
        return out

    Dataset.from_dict = classmethod(patched_once(from_dict_original, from_dict, "_keeps_exact_features"))

    from_generator_original = Dataset.from_generator

    def from_generator(generator, features=None, *args, **kwargs):
        out = from_generator_original(generator, features, *args, **kwargs)
        _keep_exact_class(out, features, foreign=False)  # its rows are encoded through the features given
        return out

    Dataset.from_generator = staticmethod(patched_once(from_generator_original, from_generator,
                                                       "_keeps_exact_features"))

    from_pandas_original = Dataset.from_pandas.__func__

    def from_pandas(cls, df, features=None, info=None, *args, **kwargs):
        # datasets has Arrow infer the frame's types before casting to the features: the decoded JSON values of
        # ds.to_pandas() (a dict here, a list there) failed ("cannot mix struct and non-struct") or became
        # structs. Their columns are encoded by the exact features first, as from_dict encodes them.
        given = features if features is not None else getattr(info, "features", None)
        if isinstance(given, ExactFeatures):
            df = _frame_encoded(df, given)
        out = from_pandas_original(cls, df, features, info, *args, **kwargs)
        _keep_exact_class(out, given, foreign=False)
        return out

    Dataset.from_pandas = classmethod(patched_once(from_pandas_original, from_pandas, "_keeps_exact_features"))


def _frame_encoded(df: Any, features: ExactFeatures) -> Any:
    """A shallow copy of the pandas frame ``df`` whose columns holding JSON values are stored as ``features`` store
    them (JSON leaves as exact text); a value they cannot store is named by its row and field."""
    import pandas as pd

    # (and the other list columns: Arrow fails bare on text given for one, an image path)
    columns = [name for name in df.columns
               if name in features and (holds_json(features[name]) or isinstance(features[name], (List, LargeList)))]
    if not columns:
        return df
    df = df.copy(deep=False)
    for name in columns:
        encoded = []
        for row, value in enumerate(df[name].tolist()):
            try:
                encoded.append(features.encode_column([value], name)[0])
            except (InvalidValueError, JsonValueError) as exc:
                raise exc.at(row=row) from None
        df[name] = pd.Series(encoded, index=df.index, dtype=object)
    return df


def _refuse_text_for_lists(mapping: dict, features: ExactFeatures) -> None:
    """datasets' encoder stores text given for a list column one character an entry (`tools` as JSON text became
    ``["[", "{", ...]``, an image path one letter an image), which ``add_item`` refuses: refused here too, naming
    the row and column."""
    for name, column in mapping.items():
        if name in features and isinstance(features[name], (List, LargeList)) and isinstance(column, (list, tuple)):
            for row, value in enumerate(column):
                if isinstance(value, str):
                    raise InvalidValueError("expected a list, got string").at(row=row, field=name)


def _refuse_values_for_text(mapping: dict, features: ExactFeatures) -> None:
    """datasets' encoder (``from_dict`` encodes with plain features) stores ``str()`` of a list or object given for
    a text field (``"['a', 'b']"`` as a message's content), which ``add_item`` refuses: refused here too, naming
    the row and field."""
    for name, column in mapping.items():
        if name in features and isinstance(column, (list, tuple)):
            for row, value in enumerate(column):
                found = _value_for_text(features[name], value, name)
                if found is not None:
                    raise InvalidValueError(f"expected string, got {json_kind(found[1])}").at(row=row, field=found[0])


def _value_for_text(feature: Any, value: Any, field: str) -> Optional[tuple[str, Any]]:
    """``(field, value)`` of the first list or object in ``value`` where ``feature`` holds text, else None."""
    if value is None:
        return None
    if isinstance(feature, Value):
        text = feature.dtype in ("string", "large_string")
        return (field, value) if text and isinstance(value, (Mapping, list, tuple)) else None
    if isinstance(feature, (List, LargeList)) and isinstance(value, (list, tuple)):
        return next((found for i, item in enumerate(value)
                     if (found := _value_for_text(feature.feature, item, f"{field}[{i}]")) is not None), None)
    if isinstance(feature, dict) and isinstance(value, Mapping):
        return next((found for key, sub in feature.items()
                     if (found := _value_for_text(sub, value.get(key), f"{field}.{key}")) is not None), None)
    return None


def _named_by_row_and_field(exc: Exception, mapping: Any, features: Any) -> Exception:
    """``exc``, raised by datasets' ``from_dict`` encoding a value its exact features cannot store (NaN...), named
    by the row and field of that value, which datasets' column by column encoding does not say: the first value, in
    the order datasets encodes them, refused for the same reason. datasets' own AttributeError or TypeError (text
    where a message is) says neither what nor where: the first value the exact features refuse is named instead.
    Error path only."""
    if not isinstance(features, ExactFeatures) or not isinstance(mapping, dict):
        return exc
    for name, column in mapping.items():
        if name in features and isinstance(column, (list, tuple)):
            for row, value in enumerate(column):
                try:
                    features.encode_column([value], name)
                except JsonValueError as found:
                    # (datasets encodes a list only where its first element changes: a value it passed over may
                    # be refused here for another reason)
                    if not isinstance(exc, JsonValueError) or found.message == exc.message:
                        return found.at(row=row)
                except InvalidValueError as found:  # datasets' encoder lets text for a list by: not a JSON error
                    if not isinstance(exc, JsonValueError):
                        return found.at(row=row)
    return exc


def _keep_exact_class(out: Any, given: Any, foreign: bool) -> None:
    """Gives ``out`` (a dataset datasets made, map-style or stream) the class of ``given`` where these are
    :class:`ExactFeatures` and datasets rebuilt plain ones; ``foreign``: its JSON text was not written by this
    package's writer."""
    made = getattr(getattr(out, "_info", None), "features", None)
    if isinstance(given, ExactFeatures) and made is not None and not isinstance(made, ExactFeatures):
        # A map of unified rows may move their messages into TRL's prompt/completion columns
        cls = (MappedUnifiedFeatures if given.omitted_empty_media else ForeignExactFeatures) if foreign else type(given)
        out._info.features = cls(dict(made))


def _with_media_columns(mapping: dict, features: dict, media: tuple) -> dict:
    """A columnar ``mapping`` with every media column, ``[]`` for each row where it left one out, its columns in the
    order of ``features``."""
    rows = len(next(iter(mapping.values())))
    columns = [c for c in features if c in mapping or c in media] + [c for c in mapping if c not in features]
    return {c: mapping[c] if c in mapping else [[] for _ in range(rows)] for c in columns}


def _with_media(row: dict, features: dict, media: tuple) -> dict:
    """The row with every media column, ``[]`` where it left one out, its columns in the order of ``features`` (the
    first row's keys order the columns)."""
    columns = [c for c in features if c in row or c in media] + [c for c in row if c not in features]
    return {c: row[c] if c in row else [] for c in columns}


def _media_of_unified(features: Any) -> tuple:
    """The media columns that decoded rows of ``features`` leave out when empty (none unless they are unified rows)."""
    if isinstance(features, ExactFeatures):
        return features.omitted_empty_media
    if isinstance(features, dict) and any(is_unified_messages(f) for f in features.values()):
        return tuple(c for c in MEDIA_COLUMNS if c in features)
    return ()


# Formats whose ds[i] is a row decoded by the features' decode_example, which leaves out empty media
_ROW_DECODING_FORMATS = (None, "numpy", "torch", "tensorflow", "jax")


def _install_batched_steps_giving_rows_in_their_shape() -> None:
    """A stream's batched ``map`` and ``filter`` read rows cut from decoded batches, which keep a media column
    where any row of the batch has media (``images: []`` on its text rows), and the batched ``map`` hands on the
    rows cut from its function's batch as they are: text rows came out with ``images: []`` in a batch with images
    and without the key in others (after ``ds.map(td.short_call_ids, batched=True)``, TRL took a text dataset
    whose first row had the key for vision data). Rows cut from a batch of unified rows, read or mapped, take the
    row shape, as map-style's rows and a row function's have it. So do the rows a map-style dataset gives a torch
    DataLoader (``__getitems__``: datasets cuts them from a batch), which ``ds[i]`` and streams give without empty
    media. Installed once per process on import."""
    from datasets import Dataset
    from datasets.iterable_dataset import MappedExamplesIterable

    getitems = Dataset.__getitems__

    def rows_of_keys(self, keys: list) -> list:
        rows = getitems(self, keys)
        features = self._info.features
        if (not isinstance(features, ExactFeatures) or not features.omitted_empty_media
                or self._format_type not in _ROW_DECODING_FORMATS):
            return rows  # (a table's or a transform's rows are its own)
        if self._format_columns is not None and not any(c in self._format_columns for c in features.chat_columns):
            # columns asked for without the conversation keep their media, as ds[i] does, also beside the other
            # columns output_all_columns adds (the conversation among them)
            return rows
        return [features.without_empty_media(row) for row in rows]

    formatted = FormattedExamplesIterable.__iter__

    def formatted_rows(self):
        features = self.features
        if not (isinstance(features, ExactFeatures) and features.omitted_empty_media and self.ex_iterable.iter_arrow):
            yield from formatted(self)  # rows decoded one by one take the shape in decode_example
            return
        shaped = features.without_empty_media
        for key, row in formatted(self):
            yield key, shaped(row) if type(row) is dict else row  # (a table format's rows are its own)

    mapped = MappedExamplesIterable.__iter__

    def mapped_rows(self):
        features = _exact_features_read_by(self.ex_iterable) if self.batched else None
        if features is None or not features.omitted_empty_media:
            yield from mapped(self)
            return
        shaped, media = features.without_empty_media, features.omitted_empty_media
        for key, row in mapped(self):
            if type(row) is not dict:  # a table format's rows are its own
                yield key, row
                continue
            row = shaped(row)
            if any(name in row for name in media):
                # a batch orders its columns as its first row holds them: a media column after the others where
                # that row has no media; a row with media gets its columns back in the order its features give
                row = {**{name: row[name] for name in features if name in row}, **row}
            yield key, row

    FormattedExamplesIterable.__iter__ = patched_once(formatted, formatted_rows, "_gives_rows_in_their_shape")
    MappedExamplesIterable.__iter__ = patched_once(mapped, mapped_rows, "_gives_rows_in_their_shape")
    Dataset.__getitems__ = patched_once(getitems, rows_of_keys, "_gives_rows_in_their_shape")


def _install_stream_maps_refusing_non_finite_values() -> None:
    """A stream's ``map`` handed on a NaN or an infinity its function put in a JSON leaf (a call's arguments) to a
    loop reading its rows, where a map-style ``map`` refuses it (JsonValueError naming row and field), as do the
    stream's Arrow tables and exports. The function of a map reading (or given) exact features is wrapped so that the
    JSON columns it returns (not the ones it leaves as read, which the stream's converter checked) are walked once
    for such a float, and one found is refused by the map's output row and field. Installed once per process."""
    from datasets.iterable_dataset import FilteredExamplesIterable, MappedExamplesIterable

    init = MappedExamplesIterable.__init__

    def checking_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        given = self._features
        features = given if given is not None and any(holds_exact_json(f) for f in given.values()) \
            else _exact_features_read_by(self.ex_iterable)
        if (features is None or isinstance(self, FilteredExamplesIterable) or type(self.function) is _NonFiniteRefused
                or inspect.iscoroutinefunction(self.function)
                or (self.formatting is not None and self.formatting.format_type not in (None, "python"))):
            return  # (a filter's rows are its input's; a table or tensor format's values are not Python ones)
        columns = {name: feature for name, feature in features.items() if holds_exact_json(feature)}
        if columns:
            self.function = _NonFiniteRefused(self.function, columns, self.batched)

    iterate = MappedExamplesIterable.__iter__

    def rows_named(self):
        if type(self.function) is not _NonFiniteRefused:
            yield from iterate(self)
            return
        state, handed = self._state_dict, 0
        # a resumed map computes again from its previous state the rows it skipped (a batch's first ones)
        before = state["previous_state_example_idx"] + (state["num_examples_since_previous_state"]
                                                        if state["previous_state"] else 0) if state else 0
        try:
            for item in iterate(self):
                yield item
                handed += 1
        except JsonValueError as exc:
            offset = exc.__dict__.pop("row_in_output", None)
            if offset is None:
                raise
            raise exc.at(row=before + handed + offset) from None

    MappedExamplesIterable.__init__ = patched_once(init, checking_init, "_refuses_non_finite_values")
    MappedExamplesIterable.__iter__ = patched_once(iterate, rows_named, "_names_refused_rows")


class _NonFiniteRefused:
    """A stream map's function, whose returned ``columns`` (JSON columns of exact features) are refused holding a
    NaN or an infinity at a JSON leaf: a JsonValueError naming the field, and the row of this call's output (see
    _install_stream_maps_refusing_non_finite_values). Picklable as its function is (DataLoader workers)."""

    def __init__(self, function: Callable, columns: dict, batched: bool):
        self.function, self.columns, self.batched = function, columns, batched

    def __call__(self, *args, **kwargs):
        out = self.function(*args, **kwargs)
        if isinstance(out, Mapping):
            for name, feature in self.columns.items():
                if name in out and _has_non_finite(out[name]):
                    values = out[name] if self.batched and isinstance(out[name], (list, tuple)) else [out[name]]
                    for row, value in enumerate(values):
                        try:
                            ExactFeatures({name: feature}).encode_column([value], name)
                        except JsonValueError as exc:
                            exc.row_in_output = row
                            raise
                        except ToolUseDataError:
                            pass  # the map made the column another kind of value: not a JSON leaf's float
        return out


def _install_stream_maps_of_tables_typing_mapped_rows() -> None:
    """A map of a stream formatted as tables (``with_format("arrow").map(g, batched=True)``, TRL's packing) over rows
    a Python map handed on (``stream.map(f, features=ds.features)``) had Arrow infer each batch's types from decoded
    rows, and failed ("cannot mix struct and non-struct"). Where those rows' features are exact (given to the map,
    or the stream's), its batches are tables of those features, JSON leaves exact, as the stream's own tables are.
    Installed once per process."""
    from datasets import IterableDataset

    def typing_rows(operation: Callable) -> Callable:
        def operated(self, *args, **kwargs):
            features = self.features
            if (self._formatting is not None and self._formatting.is_table and not self._ex_iterable.iter_arrow
                    and features is not None and any(holds_exact_json(f) for f in features.values())):
                self = copy.copy(self)  # (the same stream, its rows read as tables)
                self._ex_iterable = _RowsAsTables(self._ex_iterable, features)
            return operation(self, *args, **kwargs)

        return patched_once(operation, operated, "_types_mapped_rows_for_tables")

    IterableDataset.map = typing_rows(IterableDataset.map)
    IterableDataset.filter = typing_rows(IterableDataset.filter)


class _RowsAsTables(_BaseExamplesIterable):
    """The Python rows of ``ex_iterable`` (a map's) and, as tables, the same rows encoded by ``features`` (see
    _EncodedRows), cast to them; its state, shards and shuffling are ``ex_iterable``'s."""

    def __init__(self, ex_iterable: Any, features: Any):
        super().__init__()
        self.ex_iterable = ex_iterable
        self._features = features if isinstance(features, ExactFeatures) else ExactFeatures(features)

    @property
    def features(self):
        return self._features

    @property
    def is_typed(self) -> bool:
        return self.ex_iterable.is_typed

    @property
    def iter_arrow(self):
        return self._iter_arrow

    @property
    def num_shards(self) -> int:
        return self.ex_iterable.num_shards

    def _init_state_dict(self) -> dict:
        self._state_dict = self.ex_iterable._init_state_dict()
        return self._state_dict

    def __iter__(self):
        return iter(self.ex_iterable)

    def _iter_arrow(self):
        schema = self._features.arrow_schema
        for key, table in _EncodedRows(self.ex_iterable, self._features, None)._iter_arrow():
            yield key, table_cast(table, schema)

    def shuffle_data_sources(self, generator: np.random.Generator) -> "_RowsAsTables":
        return _RowsAsTables(self.ex_iterable.shuffle_data_sources(generator), self._features)

    def shard_data_sources(self, num_shards: int, index: int, contiguous: bool = True) -> "_RowsAsTables":
        return _RowsAsTables(self.ex_iterable.shard_data_sources(num_shards, index, contiguous=contiguous),
                             self._features)

    def reshard_data_sources(self) -> "_RowsAsTables":
        return _RowsAsTables(self.ex_iterable.reshard_data_sources(), self._features)


_install_merged_info_features()
_install_batched_steps_giving_rows_in_their_shape()
_install_mixed_stream_features()
_install_stream_features_resolved_from_exact_ones()
_install_from_list_taking_decoded_rows()
_install_constructors_keeping_exact_features()
_install_generated_rows_raising_typed_errors()
_install_map_writer_naming_rows()
_install_column_operations_keeping_features()
_install_add_item_encoding_the_item()
_install_file_builders_reading_foreign_text()
_install_stream_tables_encoding_decoded_rows()
_install_stream_maps_refusing_non_finite_values()
_install_stream_maps_of_tables_typing_mapped_rows()
