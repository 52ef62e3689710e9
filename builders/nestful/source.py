"""NESTFUL (IBM): nested sequences of API calls whose outputs feed later calls.

Reads both upstream forms, field by field: the GitHub JSONL (``output``/``tools`` as JSON, ``gold_answer``
native) and the HF parquet (``output``/``tools``/``gold_answer`` as strings), and both tool-spec variants
(current ``output_parameters``; Jan-2025 ``output_parameter`` and JSON-Schema-wrapped code tools).

Unified: a user turn (``input``) and one assistant turn whose ``tool_calls`` are ``output`` in order, the
call ``label`` as the call id, arguments verbatim (references such as ``$var_1.result$`` included), and
the call dependency graph in ``call_graph``. Tools become OpenAI function tools with JSON Schema
parameters and keep ``output_parameters`` (models need them to pick the field a reference reads).

Options (:class:`NestfulOptions`): ``execute=True`` runs each batch's gold sequences in the sandbox and gives
complete trajectories (:mod:`.executed`); ``data_version="v1"`` reads the 2024 ``data_v1/`` files (:mod:`.v1`).
"""
from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, Iterator, Optional

from datasets import Features, Json, List, Value

from tooluse_datasets.codec import json_reason, loads
from tooluse_datasets.errors import (InvalidJsonError, InvalidValueError, MissingFieldError, json_kind, shown,
                                     wrapped_rows_error)
from tooluse_datasets.schema import complete_row, message, tool_call, unified_row
from tooluse_datasets.shards.batches import joined_batches
from tooluse_datasets.shards.lines import file_version
from tooluse_datasets.shards.paths import display_path
from tooluse_datasets.shards.plan import starts_file
from tooluse_datasets.shards.shard import RawBatch, Shard
from tooluse_datasets.source import RowContext, Source, SourceOptions, SplitPlan, ids_in_file, ids_of_rows

from .executed import CALLS_PER_TURN
from .execution.sandbox import MAXIMA as SANDBOX_MAXIMA
from .gold import NULL_TEXT, decode_gold_answer, has_gold_answer, stored_as_text
from .specs import CALL_KEYS, check_call, check_references, from_openai_tool, label_key, to_openai_tool
from .upstream import CITATION, DESCRIPTION, UPSTREAM
from .v1 import RESULT_CALL, TOOLS_MODES, group_of

FIELDS = ("sample_id", "input", "output", "tools", "gold_answer")
ROW_KEYS = FIELDS[:4]  # what every row has

RAW_FEATURES = Features(
    {
        "sample_id": Value("string"),
        "input": Value("string"),
        "output": List(Json()),
        "tools": List(Json()),
        "gold_answer": Json(),
        # The upstream text of gold_answer when the source stored it as a string (HF parquet); null for
        # the GitHub JSONL, where gold_answer is native JSON. Keeps HF rows reproducible to the byte. A GitHub
        # gold answer that is JSON null is "null" here: an answer, told from a row without gold_answer.
        "gold_answer_text": Value("string"),
        # Columns beyond the five NESTFUL defines (null when none): kept, never dropped silently.
        "extra": Json(),
    }
)


@dataclasses.dataclass
class NestfulOptions(SourceOptions):
    """NESTFUL options; ``tooluse_datasets.load("nestful", ..., <option>=...)`` sets them.

    Args:
        data_version: ``"v2"`` (the 1861-row benchmark, default) or ``"v1"`` (the 2024 ``data_v1/`` files: splits
            ``executable``, ``glaive``, ``sgd``; see :mod:`.v1`).
        v1_tools: v1 rows' tools: their group's whole spec catalog (``"catalog"``) or only the specs their
            calls name (``"used"``).
        execute: run every row's gold calls in the sandbox (one process per batch) and give complete
            trajectories: each call's result as a tool message, the gold answer as the last turn (see
            :mod:`.executed`). Rows whose execution fails are typed errors (``on_error`` decides).
        executable_functions: the ``data_v2/executable_functions`` folder; default: the pinned upstream one,
            downloaded once and cached.
        execution_timeout: seconds per row (upstream: 10); also its CPU seconds.
        execution_memory_mb: address space of the sandbox process.
        execution_kernel_isolation: require the sandbox's kernel isolation (``SandboxLimits(kernel_isolation=
            True)``): where the machine cannot isolate, each row is a ``SandboxError`` saying so. Default: used
            where available, else the audit hook alone.
        calls_per_turn: ``"one"`` assistant turn per call (default) or ``"all"`` calls in one turn.
        require_reproduced: also refuse rows whose gold calls do not give the gold answer.
    """

    data_version: str = "v2"
    v1_tools: str = "catalog"
    execute: bool = False
    executable_functions: Optional[str] = None
    execution_timeout: float = 10.0
    execution_memory_mb: int = 4096
    execution_kernel_isolation: bool = False
    calls_per_turn: str = "one"
    require_reproduced: bool = False


# The options of execute=True (NestfulOptions): each is refused without it
EXECUTION_OPTIONS = ("executable_functions", "execution_timeout", "execution_memory_mb",
                     "execution_kernel_isolation", "calls_per_turn", "require_reproduced")

# The first row of each sample_id of the files read in this process (NestfulSource._prime_ids), by file version
_FIRST_ROWS: dict[tuple, dict[str, int]] = {}


class NestfulSource(Source):
    name = "nestful"
    pretty_name = "NESTFUL"
    upstream = UPSTREAM
    raw_features = RAW_FEATURES
    citation = CITATION
    description = DESCRIPTION
    options_class = NestfulOptions
    # data_v2/ holds the functions' index, executable_functions/func_file_map.json, beside the data: data_dir=
    # "NESTFUL/data_v2" read it as a row and failed
    local_not_data = frozenset({"func_file_map.json"})

    @classmethod
    def card_file(cls, options: dict) -> str:
        return "card_v1.md" if options.get("data_version") == "v1" else "card.md"  # the 2024 data: other splits

    @classmethod
    def pretty_name_for(cls, options: dict) -> str:
        return "NESTFUL v1" if options.get("data_version") == "v1" else cls.pretty_name  # as card_v1.md names it

    def __init__(self, options: Optional[NestfulOptions] = None):
        super().__init__(options)
        opts = self.options
        if opts.data_version not in ("v2", "v1"):
            raise ValueError(f"data_version must be 'v2' or 'v1', got {opts.data_version!r}")
        if opts.v1_tools not in TOOLS_MODES:
            raise ValueError(f"v1_tools must be one of {TOOLS_MODES}, got {opts.v1_tools!r}")
        if opts.calls_per_turn not in CALLS_PER_TURN:
            raise ValueError(f"calls_per_turn must be one of {CALLS_PER_TURN}, got {opts.calls_per_turn!r}")
        for name, limit in (("execution_timeout", "timeout"), ("execution_memory_mb", "memory_mb")):
            value = getattr(opts, name)
            # (its type is checked already) 0, a negative number, NaN or infinity would fail every row in the
            # sandbox, or (a negative memory size) leave the sandbox without a memory limit
            if isinstance(value, (int, float)) and not (math.isfinite(value) and value > 0):
                raise ValueError(f"option {name} must be a positive finite number, got {value!r}")
            # a value past what the sandbox can apply failed every row (or the load) with an OverflowError
            if isinstance(value, (int, float)) and value > SANDBOX_MAXIMA[limit]:
                raise ValueError(f"option {name} must be at most {SANDBOX_MAXIMA[limit]:.15g}, got {value!r}")
        if opts.execute and opts.data_version == "v1":
            raise ValueError("v1 rows have no gold answers and their APIs are live services: execute=True needs v2")
        # Options that only mean something with another option: set without it, they would be ignored without a
        # word (require_reproduced=True would refuse nothing: rows not executed are not checked at all)
        unused = [f.name for f in dataclasses.fields(NestfulOptions) if f.name in EXECUTION_OPTIONS
                  and getattr(opts, f.name) != f.default] if not opts.execute else []
        if unused:
            raise ValueError(f"option{'s' if len(unused) > 1 else ''} {', '.join(unused)} only appl"
                             f"{'y' if len(unused) > 1 else 'ies'} to executed rows: pass execute=True too (without "
                             "it the gold calls are not run)")
        if opts.data_version != "v1" and opts.v1_tools != "catalog":
            raise ValueError(f"option v1_tools applies to the v1 data only: pass data_version='v1' too, or leave "
                             f"v1_tools out (got v1_tools={opts.v1_tools!r} with data_version={opts.data_version!r})")
        if opts.execute and getattr(opts, "name", None) == "raw":
            # (the config's name: the source is made from its builder config) raw rows are upstream's rows as
            # they are, with no place for the results: loading them unexecuted would ignore the option silently
            raise ValueError("execute=True gives executed trajectories, which the 'raw' format (upstream's rows as "
                             "they are) cannot hold; execute= needs config='unified' or a writer format, not 'raw'")
        if opts.data_version == "v1":
            from .v1 import V1_UPSTREAM

            self.upstream = V1_UPSTREAM

    # -- reading: the default Source.read (GitHub JSONL, JSON arrays, HF parquet) -------------------

    def split_names(self, files_by_split: dict[str, list[str]]) -> Optional[list[str]]:
        return None if self.options.data_version == "v1" else list(files_by_split)  # v1: groups of paired files

    def plan(self, files_by_split: dict[str, list[str]]) -> list[SplitPlan]:
        if self.options.data_version == "v1":
            from .v1 import v1_plan

            return v1_plan(files_by_split, self.options.shard_bytes)
        return super().plan(files_by_split)

    def read(self, shard: Shard, split: SplitPlan, resume: Optional[tuple[int, int]] = None) -> Iterator[RawBatch]:
        learning = False
        if self.options.data_version != "v1":
            # A reader starting at the file's first row meets every earlier holder of an id before its repeats:
            # it learns the ids as it reads, and its first row does not wait for a pass over the whole file.
            learning = resume is None and starts_file(shard) and not self.unique_ids.is_primed(
                display_path(shard.file))
            if not learning:
                self._prime_ids(shard.file)
        batches = super().read(shard, split, resume)
        if learning:
            batches = self._learning_ids(batches, display_path(shard.file))
        if self.options.execute:  # one sandbox process per batch: batches of batch_size rows, not JSON's few
            batches = joined_batches(batches, self.options.batch_size)
        if self.options.data_version == "v1":
            from .v1 import with_specs

            yield from with_specs(batches, split.selection, self.options.v1_tools, shard, resume)
        else:
            yield from batches

    def _prime_ids(self, path: str) -> None:
        """Every sample_id of the file and its first row, once per file in this process, whatever part of the
        file is read: the rule that a repeat gets ``#<row>`` then does not depend on which shard, resume point
        or worker reads a row, nor on whether the first holder of an id converts (a file of NESTFUL's size is
        read twice: the ids first)."""
        file = display_path(path)
        if self.unique_ids.is_primed(file):
            return
        key = (path, file_version(path.split("::")[-1]))  # a file of a zip archive: the archive's version
        first_rows = _FIRST_ROWS.get(key)
        if first_rows is None:
            # Once per file in this process, not once per copy of the source: a worker process converts
            # shard after shard, each task with a copy of the source that may not have the ids yet.
            first_rows = {}
            for row, sample_id in ids_in_file(path, "sample_id"):
                first_rows.setdefault(sample_id, row)
            if len(_FIRST_ROWS) >= 4:
                _FIRST_ROWS.pop(next(iter(_FIRST_ROWS), None), None)  # (threads may evict at once)
            _FIRST_ROWS[key] = first_rows
        self.unique_ids.prime_file(file, ((row, sample_id) for sample_id, row in first_rows.items()))

    def _learning_ids(self, batches: Iterator[RawBatch], file: str) -> Iterator[RawBatch]:
        """``batches``, each batch's ids learnt before its rows convert, as :meth:`_prime_ids` would have told
        them (so a first holder that is refused still keeps its id from its repeats)."""
        for batch in batches:
            self.unique_ids.learn(file, ids_of_rows(batch.items, "sample_id"))
            yield batch

    @property
    def has_batch_step(self) -> bool:
        return self.options.execute  # one sandbox process per batch

    def complete_unified(self, rows: list[dict], contexts: list[RowContext]) -> list:
        """With ``execute=True``: the batch's call sequences run in one sandbox process; each row becomes its
        executed trajectory, or the ExecutionError saying why it has none."""
        if not self.options.execute:
            return rows
        from .executed import execute_with_options

        return execute_with_options(rows, self.options)

    def to_raw(self, native: dict, ctx: RowContext) -> dict:
        if self.options.data_version == "v1":
            from .v1 import v1_to_raw

            return v1_to_raw(native, ctx)
        for key in ROW_KEYS:
            if native.get(key) is None:
                raise wrapped_rows_error(native, ROW_KEYS) or MissingFieldError(
                    f"NESTFUL rows need {key!r}{_format_hint(native, ctx)}", field=key)
        sample_id = native["sample_id"]
        if isinstance(sample_id, bool) or not isinstance(sample_id, (str, int)) or sample_id == "":
            # The id names the row (``nestful/<domain>/<sample_id>``): text or a number, never str() of a list.
            raise InvalidValueError(f"sample_id must be a non-empty string or an integer, got {shown(sample_id)}",
                                    field="sample_id")
        if not isinstance(native["input"], str):
            raise InvalidValueError(f"input must be a string, got {json_kind(native['input'])}", field="input")
        output = _json_field(native, "output", list)
        tools = _json_field(native, "tools", list)
        for i, call in enumerate(output):
            if not isinstance(call, dict):
                raise InvalidValueError(f"a call must be a JSON object, got {json_kind(call)}", field=f"output[{i}]")
        for i, tool in enumerate(tools):
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
                got = (json_kind(tool) if not isinstance(tool, dict) else
                       f"one whose name is a JSON {json_kind(tool['name'])}" if "name" in tool else "one without")
                raise InvalidValueError(f"a tool spec must be an object with a name, got {got}", field=f"tools[{i}]")
        gold = native.get("gold_answer")
        extra = {k: v for k, v in native.items() if k not in FIELDS}
        if {"gold_answer_text", "extra"} <= extra.keys() and not stored_as_text(native):
            # The package's own raw row (a raw export read back: both columns, calls and tools as JSON): its text
            # and extra columns are taken as they are, not kept as columns of the row (read back, they nested one
            # level deeper each time). An upstream row with a column of either name keeps it in extra.
            gold_text, kept = extra.pop("gold_answer_text"), extra.pop("extra", None)
            if gold_text is not None and not isinstance(gold_text, str):
                raise InvalidValueError(f"gold_answer_text must be a string or null, got {shown(gold_text)}",
                                        field="gold_answer_text")
            if kept is not None and not isinstance(kept, dict):
                raise InvalidValueError(f"extra must be a JSON object or null, got {json_kind(kept)}", field="extra")
            extra = {**(kept or {}), **extra}
        elif isinstance(gold, str) and stored_as_text(native):
            gold_text, gold = gold, decode_gold_answer(gold)  # (HF) decoded, its upstream text kept
        else:  # (GitHub) the value itself; a null answer keeps its text, so it is not taken for a missing one
            gold_text = NULL_TEXT if gold is None and has_gold_answer(native) else None
        return {
            "sample_id": str(sample_id),
            "input": native["input"],
            "output": output,
            "tools": tools,
            "gold_answer": gold,
            "gold_answer_text": gold_text,
            "extra": extra or None,
        }

    # -- raw <-> unified ------------------------------------------------------------------------------

    def to_unified(self, raw: dict, ctx: RowContext) -> dict:
        if self.options.data_version == "v1":
            from .v1 import v1_to_unified

            return v1_to_unified(raw, ctx)
        catalog = {t["name"] for t in raw["tools"]}
        calls, graph, producers = [], [], {}
        for i, call in enumerate(raw["output"]):
            label, name, arguments = check_call(call, i, producers=producers, catalog=catalog,
                                                catalog_name="the row's tools")
            for argument, producer, output_field in check_references(arguments, producers, f"output[{i}].arguments"):
                graph.append({"consumer": label, "argument": argument, "producer": producer,
                              "output_field": output_field})
            producers[label_key(label)] = label
            calls.append(tool_call(label, name, arguments))

        meta = {
            "sample_id": raw["sample_id"],
            "gold_answer": raw["gold_answer"],
            "gold_answer_text": raw["gold_answer_text"],
            # The upstream specs verbatim: free-text types such as "int or float" cannot be recovered
            # from JSON Schema, and raw -> unified -> raw must be exact.
            "source_tools": raw["tools"],
        }
        if raw.get("extra"):
            meta["extra"] = raw["extra"]
        # Math calls are {name, label, arguments}, code calls {name, arguments, label}: keep the order.
        key_orders = {tuple(c) for c in raw["output"]}
        if len(key_orders) == 1 and set(next(iter(key_orders))) == set(CALL_KEYS):
            if key_orders != {CALL_KEYS}:
                meta["call_keys"] = list(next(iter(key_orders)))
        elif key_orders:
            meta["source_output"] = raw["output"]
        domain = infer_domain(raw["output"])
        return unified_row(
            id=self.unique_ids(raw["sample_id"], f"nestful/{domain}/{raw['sample_id']}", ctx),
            source="nestful",
            subset=domain,
            tools=[to_openai_tool(t, f"tools[{i}]") for i, t in enumerate(raw["tools"])],
            messages=[message("user", raw["input"]), message("assistant", "", tool_calls=calls)],
            call_graph=graph,
            meta=meta,
        )

    def from_unified(self, row: dict) -> dict:
        row = complete_row(row)
        meta = row["meta"]
        user = next(m for m in row["messages"] if m["role"] == "user")
        calls = [c for m in row["messages"] if m["role"] == "assistant" for c in m["tool_calls"]]
        if "source_output" in meta:
            output = meta["source_output"]
        else:
            order = meta.get("call_keys") or CALL_KEYS
            output = []
            for c in calls:
                values = {"name": c["function"]["name"], "label": c["id"], "arguments": c["function"]["arguments"]}
                output.append({k: values[k] for k in order})
        return {
            "sample_id": meta["sample_id"],
            "input": user["content"],
            "output": output,
            "tools": meta.get("source_tools") or [from_openai_tool(t) for t in row["tools"]],
            "gold_answer": meta["gold_answer"],
            "gold_answer_text": meta["gold_answer_text"],
            "extra": meta.get("extra"),
        }


# --------------------------------------------------------------------------------------------------
# Field helpers
# --------------------------------------------------------------------------------------------------


def _json_field(native: dict, key: str, expected: type) -> Any:
    value = native[key]
    if isinstance(value, str):
        try:
            value = loads(value)
        except (ValueError, RecursionError) as exc:  # the reason tells a cut text from a NaN, 1e400, a stray comma
            raise InvalidJsonError(f"{key} is a string but not valid JSON ({json_reason(exc)})", field=key) from None
    if not isinstance(value, expected):
        raise InvalidValueError(f"{key} must be a JSON {json_kind(expected())}, got {json_kind(value)}", field=key)
    return value


def _format_hint(native: dict, ctx: RowContext) -> str:
    """What to do when a row lacks a field because it is v1 data read as v2 (the likeliest cause: v1 samples have no
    sample_id or tools, and data_v1/ also holds the spec files): its file is one of v1's, or it ends with v1's
    ``var_result`` pseudo-call; or because it is one of the package's own unified rows (``--gold-data-files`` given
    an export)."""
    if native.get("sample_id") is None and {"gold_answer_text", "extra"} <= native.keys():
        # (a raw export of v1 rows: data_version='v1' refuses them too, having no spec file)
        return ("; this looks like the package's raw rows of NESTFUL v1 data (export --format raw), which neither "
                "data_version reads back: load v1's data and spec files themselves")
    output = native.get("output")
    ends_with_result = (isinstance(output, list) and bool(output) and isinstance(output[-1], dict)
                        and output[-1].get("name") == RESULT_CALL)
    if ends_with_result or group_of(ctx.file):
        # (verify and score take no --option: say why v1 rows are of no use to them)
        return ("; this looks like NESTFUL v1 data (data_v1/), which loads with data_version='v1' (on the command "
                "line: --option data_version=v1); v1 rows have no gold answers, so verify and score cannot use them")
    if native.get("source") == "nestful" and {"messages", "call_graph"} <= native.keys():
        # (a mirror's unified Parquet holds meta as JSON text, an export as an object)
        return ("; this looks like the package's unified rows (export --format unified, or a mirror's unified "
                "config), which the NESTFUL reader does not take: read the files they were exported from, or export "
                "--format raw (in Python, score takes unified rows as gold rows through gold_rows_by_id)")
    return ""


def infer_domain(output: list[dict]) -> str:
    """``math`` (labels ``$var_N``, arguments ``arg_N``) or ``code`` (labels ``$varN``); NESTFUL has no
    domain field, so this is derived (see the spec: small disagreement with the paper's 1415/446)."""
    labels = [str(c.get("label", "")) for c in output]
    if labels and all(re.fullmatch(r"\$var_\d+", lb) for lb in labels) and all(
            re.fullmatch(r"arg_\d+", k) for c in output for k in c.get("arguments", {})):
        return "math"
    if labels and all(re.fullmatch(r"\$var\d+", lb) for lb in labels):
        return "code"
    return "other"
