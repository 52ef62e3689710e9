"""NESTFUL references mean one thing everywhere: the v2 reader (``call_graph``, undefined labels), the
``nestful.undefined_reference`` rule and the sandboxed executor agree on what a reference is, which call and
which output it names. Real rows, each changed in one place; execution goes through the package's sandbox
(``run_sequences``), never in this process."""
from __future__ import annotations

import json

import pytest

import tooluse_datasets as td
from tooluse_datasets.builders.nestful.executed import execution_job
from tooluse_datasets.builders.nestful.execution import run_sequences
from tooluse_datasets.builders.nestful.source import NestfulSource
from tooluse_datasets.source import RowContext
from tooluse_datasets.validation import check_row, get_rule

from conftest import shared_data

CURRENT = ("nestful", "third_party", "reconstructed_current_v2", "rows_github_native_format.jsonl")
FUNCTIONS = ("nestful", "data_v2", "executable_functions")
SOURCE = NestfulSource()


def current_row(index: int = 0) -> dict:
    """A real current-format row (0: 3a4b7b77, divide -> multiply($var_1.result$) -> add($var_2.result$))."""
    lines = shared_data(*CURRENT).read_text().splitlines()
    return json.loads(lines[index])


def unified(native: dict) -> dict:
    ctx = RowContext("nestful", "test", 0, "train")
    return SOURCE.to_unified(SOURCE.to_raw(native, ctx), ctx)


def executed(*rows: dict):
    return run_sequences([execution_job(r) for r in rows], str(shared_data(*FUNCTIONS)))


def reference_findings(row: dict) -> list:
    return check_row(row, [get_rule("nestful.undefined_reference"), get_rule("arguments.schema")])


def test_a_reference_without_its_closing_dollar_reads_as_one_everywhere():
    """Upstream's executor (spec §9, step 3) and scorer (grounding, the slot F1) read "$var_1.result" as the
    reference "$var_1.result$"; the executor here resolved it and reproduced the gold answer, while the reader
    kept it literal: no call_graph edge, and arguments.schema reported a string where a number is declared."""
    native = current_row()
    closed = unified(native)
    native["output"][1]["arguments"]["arg_0"] = "$var_1.result"
    unclosed = unified(native)
    assert unclosed["messages"][1]["tool_calls"][1]["function"]["arguments"]["arg_0"] == "$var_1.result"  # verbatim
    assert unclosed["call_graph"] == closed["call_graph"]
    assert reference_findings(unclosed) == []
    results = executed(closed, unclosed)
    assert [r.results for r in results[1:]] == [results[0].results] and results[1].win_upstream

    native["output"][1]["arguments"]["arg_0"] = "$var_7.result"  # no such call: refused as the closed form is
    with pytest.raises(td.UndefinedReferenceError) as info:
        unified(native)
    assert info.value.field == "output[1].arguments.arg_0"


@pytest.mark.parametrize("value, says", [
    ("$var_1.result.value$", 'divide has no output "result.value"'),
    ("$var_1.result[0]$", 'divide has no output "result[0]"'),
    ("$var_1$", "reference to var_1 names no output field"),
])
def test_a_v2_reference_names_exactly_one_output_as_the_executor_reads_it(value, says):
    """v2 references are `$label.field$`, field an output parameter (spec §4): upstream's executor looks the
    whole text after the label up among the outputs, so a path into an output or a whole output fails the
    sequence (bad_reference). The rule took the path's leading name for the output (a v1 reading) and let a
    reference without a field pass, so rows the executor cannot run validated clean."""
    native = current_row()
    native["output"][1]["arguments"]["arg_0"] = value
    row = unified(native)
    found = check_row(row, [get_rule("nestful.undefined_reference")])
    assert [f.field for f in found] == ["messages[1].tool_calls[1].function.arguments.arg_0"]
    assert says in found[0].message
    [result] = executed(row)
    assert (result.status, result.reason, result.failed_call) == ("error", "bad_reference", 1)


@pytest.mark.parametrize("index, value, field, says", [
    # e3e68bf5: find_kth_largest -> convert_to_float_or_string(input_string="$var1.output_0$"), a string parameter
    (1, "$var1.output_0$ as text", "input_string", 'has no output "output_0$ as text"'),
    (1, "$var1.output_0$\n", "input_string", 'has no output "output_0$\\n"'),
    (1, "$var1", "input_string", "reference to var1 names no output field"),
    # 3a4b7b77: divide -> multiply(arg_0="$var_1.result$") -> add
    (0, ["$var_1.result$"], "arg_0[0]", "upstream's executor reads only a whole argument value"),
    (0, {"value": "$var_1.result$"}, "arg_0.value", "upstream's executor reads only a whole argument value"),
])
def test_v2_values_are_checked_as_the_executor_reads_them(index, value, field, says):
    """What upstream's executor takes for a reference (a string that starts with `$var`, or starts and ends
    with `$`; spec §9) is what verify and execute=True run: such a value that is no well-formed reference fails
    with bad_reference, and a reference inside a list or object reaches the function as text. The rule passed
    all of these (a string parameter is no type error either), so rows that cannot run validated clean."""
    native = current_row(index)
    call = native["output"][1]
    name = next(iter(call["arguments"]))
    call["arguments"][name] = value
    row = unified(native)
    found = check_row(row, [get_rule("nestful.undefined_reference")])
    assert [f.field for f in found] == [f"messages[1].tool_calls[1].function.arguments.{field}"]
    assert says in found[0].message
    [result] = executed(row)
    assert result.status == "error" and not result.win_upstream
    if isinstance(value, str):
        assert (result.reason, result.failed_call) == ("bad_reference", 1)


def relabelled(native: dict, old: str, new: str) -> dict:
    """``native`` with every ``$<old>N`` label, in the labels and in the references, spelled ``$<new>N``."""
    return json.loads(json.dumps(native).replace(f'"${old}', f'"${new}'))


def test_calls_labelled_otherwise_than_var_n_are_referenced_as_upstream_executes_them():
    """Upstream's executor removes the `$`s of any label and resolves any `$<label>.<field>$` (spec §9), and so
    did the sandbox here (the row reproduced its gold); the reader knew only `$var_N` labels: a row labelling its
    calls `$step_1` had no call_graph edge, and arguments.schema took its references for literal strings where
    numbers are declared."""
    native = relabelled(current_row(), "var_", "step_")
    assert [c["label"] for c in native["output"]] == ["$step_1", "$step_2", "$step_3"]
    row = unified(native)
    assert row["call_graph"] == [
        {"consumer": "$step_2", "argument": "arg_0", "producer": "$step_1", "output_field": "result"},
        {"consumer": "$step_3", "argument": "arg_1", "producer": "$step_2", "output_field": "result"}]
    assert reference_findings(row) == []
    [result] = executed(row)
    assert result.ok and result.win_upstream

    # A label no earlier call defines is the rule's finding (the executor fails on it), and a text that only
    # looks like one stays literal for the reader (no edge; "$100-$200" is a price).
    native["output"][2]["arguments"]["arg_1"] = "$step_9.result$"
    row = unified(native)
    assert row["call_graph"][1:] == []
    found = check_row(row, [get_rule("nestful.undefined_reference")])
    assert [(f.field, "no earlier call defines" in f.message) for f in found] == [
        ("messages[1].tool_calls[2].function.arguments.arg_1", True)]
    [result] = executed(row)
    assert (result.status, result.reason, result.failed_call) == ("error", "bad_reference", 2)


@pytest.mark.parametrize("tool, output", [("d" * 300, "total"), ("divide", "o" * 300)])
def test_a_long_name_in_a_reference_finding_is_cut_so_the_finding_still_says_what_is_wrong(tool, output):
    """The rule wrote the producing tool's name and the referenced output in full: a long one filled the
    240-character finding and cut off the outputs the tool does list. They are cut at 80 characters, as the
    argument rules cut the called tool's name."""
    row = json.loads(json.dumps(unified(current_row())).replace('"divide"', json.dumps(tool)))
    row["messages"][1]["tool_calls"][1]["function"]["arguments"]["arg_0"] = f"$var_1.{output}$"
    [found] = check_row(row, [get_rule("nestful.undefined_reference")])
    assert found.message.endswith("(outputs: result)")
    assert "d" * 81 not in found.message and "o" * 81 not in found.message
