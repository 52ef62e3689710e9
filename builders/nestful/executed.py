"""Executed NESTFUL rows: the gold calls with their actual results and the gold answer, as a complete
trajectory.

A unified NESTFUL row is ``[user, assistant(tool_calls=every call)]``: calls without results, which is
not a complete SFT trajectory and cannot be written in formats that need results (``toolmind``). Running
the gold sequence in the sandbox gives every call's result; :func:`executed_row` turns a row and its
:class:`~.execution.SequenceResult` into::

    user, assistant(call 1), tool(result 1), assistant(call 2), tool(result 2), ..., assistant(gold answer)

**One call per assistant turn** (``calls_per_turn="one"``, the default): a NESTFUL call reads earlier
results, so a call is only made once the results it depends on exist. Chat templates put the results of
a turn after all of its calls, so a turn with every call would show calls made before the results they
consume; one call per turn keeps the order of execution, and maps one-to-one onto ToolMind's
``tool_call -> tool_output`` steps and ms-swift's ``tool_call``/``tool_response`` pairs. The arguments
stay as upstream wrote them (``$var_1.result$``): the reference, not the substituted value, is what
NESTFUL teaches, and ``call_graph`` still lists the edges. ``calls_per_turn="all"`` gives NESTFUL's own
evaluation shape instead (the whole sequence in one turn, then the results in call order).

**Contents**: a tool message holds the result as JSON text (``tooluse_datasets.codec.dumps``): ``40.0``,
``"HELLOHELLOHELLO"`` (a string result is quoted, so ``"11.00"`` and ``11.0`` stay apart), ``[5,4]``. Results
that are not JSON values are written as the sandbox renders them (tuples and sets as arrays, numpy values as
Python values, anything else as the string of its ``repr``) and the original Python type is recorded in
``meta.execution.result_types``. The final assistant turn is the gold answer, written the same way.

``meta.execution`` records ``reproduces_gold`` (the official win check, float rounding rule included),
the answer the execution gave, and notes. A row whose execution fails or is stopped by the sandbox is an
:class:`~tooluse_datasets.errors.ExecutionError` naming the failing call (``output[1]``) and the reason;
with ``require_reproduced=True`` so is a row whose answer differs from the gold.
"""
from __future__ import annotations

import copy
import os
from typing import Any, Mapping, Optional, Sequence, Union

from tooluse_datasets.codec import dumps
from tooluse_datasets.errors import ExecutionError, ToolUseDataError, count_of
from tooluse_datasets.schema import complete_row, message, tool_call

from .execution import REASONS, SandboxLimits, SequenceJob, SequenceResult, one_folder, run_sequences
from .execution import executable_functions as functions_folder
from .gold import has_gold_answer, mismatch_text
from .specs import output_fields

CALLS_PER_TURN = ("one", "all")


def gold_calls(row: dict) -> list[dict]:
    """The calls of a unified NESTFUL row as upstream's executor reads them: ``{name, label, arguments}``."""
    return [{"name": c["function"]["name"], "label": c["id"], "arguments": c["function"]["arguments"]}
            for m in complete_row(row)["messages"] if m["role"] == "assistant" for c in m["tool_calls"]]


def execution_job(row: dict) -> SequenceJob:
    """What the sandbox runs for a unified NESTFUL row: its gold calls, checked against its gold answer."""
    if not isinstance(row, Mapping) or "messages" not in row:
        # A raw or upstream row keeps its gold answer outside meta: read as unified, each failed as no_gold
        raise TypeError("NESTFUL execution takes unified rows (load('nestful') gives them), got "
                        + (f"a row with {', '.join(map(repr, list(row)[:5]))} and no 'messages' (a raw or upstream "
                           "row?): load it with the default config, or verify the file with verify(data_files=...)"
                           if isinstance(row, Mapping) else type(row).__name__))
    meta = row.get("meta") or {}
    if not has_gold_answer(meta):  # (a null gold answer is one: its sequence must give None)
        raise ExecutionError("no_gold: the row has no gold_answer to reproduce", field="gold_answer")
    return SequenceJob(gold_calls(row), output_fields(row["tools"]), dumps(meta["gold_answer"]))


def execution_error(result: SequenceResult) -> ExecutionError:
    """The typed error of a failed or stopped execution, naming the call (``output[i]``) and the reason."""
    reason = result.reason or result.status
    field = f"output[{result.failed_call}]" if result.failed_call is not None else "output"
    meaning, detail = REASONS.get(reason, reason), result.detail or ""
    # a detail the reason's meaning already says ("no calls") is left out, not repeated after it
    said = not detail.strip() or detail.strip().lower() in meaning.lower()
    return ExecutionError(f"{reason}: {meaning}" + ("" if said else f": {detail}"), field=field)


def executed_row(row: dict, result: SequenceResult, *, calls_per_turn: str = "one",
                 require_reproduced: bool = False) -> dict:
    """The complete trajectory of ``row`` from its execution ``result`` (pure: no execution here).

    Raises :class:`ExecutionError` when the execution did not complete (or, with ``require_reproduced``,
    did not give the gold answer)."""
    if calls_per_turn not in CALLS_PER_TURN:
        raise ValueError(f"calls_per_turn must be one of {CALLS_PER_TURN}, got {calls_per_turn!r}")
    if not result.ok:
        raise execution_error(result)
    too_large = next((k for k, r in enumerate(result.results) if "omitted" in r), None)
    if too_large is not None:  # (a sequence that ran, but a tool message needs the whole result)
        raise ExecutionError(f"result_too_large: {REASONS['result_too_large']}: result is "
                             f"{result.results[too_large]['omitted']}", field=f"output[{too_large}]")
    if require_reproduced and not result.win_upstream:
        # (with the sandbox's notes: why an answer that reads as the gold does not count, as verify says it)
        raise ExecutionError(f"gold_mismatch: {mismatch_text(result, row['meta'])}", field="gold_answer")
    complete = complete_row(row)
    calls = [c for m in complete["messages"] if m["role"] == "assistant" for c in m["tool_calls"]]
    if len(result.results) != len(calls):
        raise ExecutionError(f"exception: {count_of(len(calls), 'call')} but {count_of(len(result.results), 'result')}",
                             field="output")
    # The messages before the first assistant turn (the user query), in the shape the row came in.
    first_turn = next((k for k, m in enumerate(complete["messages"]) if m["role"] == "assistant"), len(complete["messages"]))
    prefix = list(row["messages"][:first_turn])
    results = [message("tool", dumps(r["value"]), tool_call_id=c["id"], name=c["function"]["name"])
               for c, r in zip(calls, result.results)]
    if calls_per_turn == "one":
        trajectory = [m for c, r in zip(calls, results) for m in (message("assistant", "", tool_calls=[_copy(c)]), r)]
    else:
        trajectory = [message("assistant", "", tool_calls=[_copy(c) for c in calls]), *results]
    meta = dict(row["meta"])
    execution: dict[str, Any] = {"reproduces_gold": bool(result.win_upstream), "answer": result.answer["value"]}
    types = {c["id"]: r["python_type"] for c, r in zip(calls, result.results) if r.get("python_type")}
    if types:
        execution["result_types"] = types
    if result.notes:
        execution["notes"] = list(result.notes)
    meta["execution"] = execution
    final = message("assistant", dumps(row["meta"]["gold_answer"]))
    return dict(row, messages=prefix + trajectory + [final], meta=meta)


def _copy(call: dict) -> dict:
    return tool_call(call["id"], call["function"]["name"], call["function"]["arguments"])


def execute_rows(rows: Sequence[dict], *, executable_functions: Union[str, os.PathLike, None] = None,
                 functions_dir: Union[str, os.PathLike, None] = None, limits: SandboxLimits = SandboxLimits(),
                 calls_per_turn: str = "one", require_reproduced: bool = False, cache_dir: Optional[str] = None
                 ) -> list[Union[dict, ToolUseDataError]]:
    """Execute a batch of unified NESTFUL rows in one sandbox process; per row, the executed row or the
    :class:`ExecutionError` saying why there is none (never a silent drop). ``executable_functions`` (or
    ``functions_dir``): a local ``executable_functions`` folder; default: the pinned upstream one (downloaded
    once, cached)."""
    folder = functions_folder(one_folder(executable_functions, functions_dir, "functions_dir"), cache_dir=cache_dir)
    out: list[Union[dict, ToolUseDataError, None]] = [None] * len(rows)
    jobs, positions = [], []
    for i, row in enumerate(rows):
        try:
            jobs.append(execution_job(row))
            positions.append(i)
        except ToolUseDataError as error:
            out[i] = error
    try:
        results = run_sequences(jobs, folder, limits)
    except ToolUseDataError as error:  # the sandbox itself failed: each row that was to run gets its own copy
        results = [copy.copy(error) for _ in jobs]
    for i, result in zip(positions, results):
        if isinstance(result, ToolUseDataError):
            out[i] = result
            continue
        try:
            out[i] = executed_row(rows[i], result, calls_per_turn=calls_per_turn,
                                  require_reproduced=require_reproduced)
        except ToolUseDataError as error:
            out[i] = error
        except Exception as exc:  # a result no check foresaw (the child's channel is upstream code's to write)
            out[i] = ExecutionError(f"exception: the sandbox's result cannot be read ({type(exc).__name__}: "
                                    f"{exc})", field="output")
    for row, error in zip(rows, out):
        if isinstance(error, ExecutionError) and error.row_id is None:
            # The executed config's rows are unified rows: a failed one is named by its id, as a row dropped by
            # validation is (file and row number alone do not find it in a dataset already loaded).
            error.row_id = row.get("id")
    return out  # type: ignore[return-value]


def execute_with_options(rows: Sequence[dict], options) -> list[Union[dict, ToolUseDataError]]:
    """:func:`execute_rows` with a NESTFUL source's options (``execute=True`` loads)."""
    limits = SandboxLimits(timeout=options.execution_timeout, memory_mb=options.execution_memory_mb,
                           kernel_isolation=True if options.execution_kernel_isolation else None)
    return execute_rows(rows, executable_functions=options.executable_functions, limits=limits,
                        calls_per_turn=options.calls_per_turn, require_reproduced=options.require_reproduced)
