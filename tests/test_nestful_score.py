"""NESTFUL scoring: the official metrics on hand-worked inputs (length mismatch, reordered sequence, wrong
label reference, unparsable prediction, upstream's quirks and bugs), the parsers, result files, the CLI,
and (when upstream's scorer is supplied) a comparison with it on the same inputs."""
from __future__ import annotations

import copy
import json
import os
import random
import shutil
import subprocess
import sys

import pytest

from tooluse_datasets import cli
from tooluse_datasets.builders.nestful.score import (ScoreItem, align, ground, macro_prf, parse_prediction,
                                                     read_results, score, score_file, sequence_accuracy)
from tooluse_datasets.errors import InvalidJsonError, InvalidValueError, MissingFieldError

from conftest import shared_data

CURRENT = ("nestful", "third_party", "reconstructed_current_v2", "rows_github_native_format.jsonl")
TOY = ("nestful", "third_party", "AtakanTekparmak_NESTFUL_27c2028", "data_v2", "toy_data.jsonl")
ICL = ("nestful", "src", "icl_examples.json")
FUNCTIONS = ("nestful", "data_v2", "executable_functions")
MATH_ID = "3a4b7b77-f0a1-4537-8623-432023f545bb"  # divide(25, 100) -> multiply(., 80) -> add(20, .) = 40.0


def rows(parts) -> list[dict]:
    path = shared_data(*parts)
    if path.suffix == ".json":
        return json.loads(path.read_text())
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def functions_dir():
    return str(shared_data(*FUNCTIONS))


@pytest.fixture(scope="module")
def math_row():
    return next(r for r in rows(CURRENT) if r["sample_id"] == MATH_ID)


def predictions(gold: list[dict]) -> dict[str, str]:
    """The five hand-worked predictions for the math row."""
    divide, multiply, add = copy.deepcopy(gold)
    wrong_ref = copy.deepcopy(multiply)
    wrong_ref["arguments"]["arg_0"] = "$var_3.result$"  # names the add call instead of divide
    return {
        "exact": json.dumps(gold),
        "reordered": json.dumps([add, multiply, divide]),
        "too_short": json.dumps([multiply, add]),
        "wrong_label_reference": json.dumps([divide, wrong_ref, add]),
        "unparsable": "I think the answer is 40.",
    }


def item(row: dict, prediction, sample_id=None) -> ScoreItem:
    return ScoreItem(sample_id or row["sample_id"], row["output"], row["tools"], json.dumps(row["gold_answer"]),
                     prediction)


# --------------------------------------------------------------------------------------------------
# Hand-worked metrics
# --------------------------------------------------------------------------------------------------


def test_each_metric_on_five_hand_worked_predictions(math_row, functions_dir):
    preds = predictions(math_row["output"])
    result = score([item(math_row, p, name) for name, p in preds.items()], executable_functions_dir=functions_dir)
    per = {s.sample_id: s for s in result.samples}
    # Partial accuracy (calls rendered "name(arg = value)", labels grounded to function names):
    # exact 3/3; reordered: only multiply stays in place, 1/3; too short: gold [divide, multiply, add] aligned
    # with ["", multiply, add], and multiply's arg_0 reads "$var_1.result$" (no divide call to ground it) 1/3;
    # wrong reference: multiply(arg_0 = $add.result$) 2/3; unparsable: 0.
    assert {k: round(s.partial_sequence_accuracy, 6) for k, s in per.items()} == {
        "exact": 1.0, "reordered": 0.333333, "too_short": 0.333333, "wrong_label_reference": 0.666667,
        "unparsable": 0.0}
    assert result.partial_sequence_accuracy == pytest.approx((1 + 1 / 3 + 1 / 3 + 2 / 3 + 0) / 5)
    assert result.full_sequence_accuracy == pytest.approx(1 / 5)
    # Only the exact sequence executes to 40.0: the others read labels that do not exist yet.
    assert [k for k, s in per.items() if s.win] == ["exact"] and result.win_rate == pytest.approx(1 / 5)
    assert per["reordered"].execution.reason == "bad_reference"
    assert result.parse_errors == 1 and per["unparsable"].parse_error
    # F1 intent, macro over {add, divide, multiply}: divide found 3 of 5 times (F1 6/8), multiply and add
    # 4 of 5 (8/9 each); nothing predicted outside the gold names.
    assert result.f1_intent == pytest.approx((6 / 8 + 8 / 9 + 8 / 9) / 3)
    assert result.p_intent == pytest.approx(1.0) and result.r_intent == pytest.approx((3 / 5 + 4 / 5 + 4 / 5) / 3)
    # F1 slot, macro over the six gold "arg = value" strings: divide's two 3/5 (6/8), multiply's
    # "arg_0 = $divide.result$" 2/5 (4/7), the other three 4/5 (8/9).
    assert result.f1_slot == pytest.approx((6 / 8 + 6 / 8 + 4 / 7 + 3 * 8 / 9) / 6)
    assert round(result.f1_slot, 3) == 0.790 and round(result.f1_intent, 3) == 0.843
    assert result.n_rows == 5


def test_label_spelling_does_not_matter_but_the_var_prefix_does(math_row):
    gold = math_row["output"]
    relabelled = json.loads(json.dumps(gold).replace("$var_1", "$var_7").replace("$var_2", "$var_8"))
    other = json.loads(json.dumps(gold).replace("$var_1", "$step_1"))
    result = score([item(math_row, json.dumps(relabelled)), item(math_row, json.dumps(other))], win_rate=False)
    # "$var_7.result$" is grounded to "$divide.result$"; "$step_1.result$" is not (upstream's check is
    # startswith("$var")), so multiply's argument no longer matches.
    assert [s.partial_sequence_accuracy for s in result.samples] == [1.0, pytest.approx(2 / 3)]
    assert result.win_rate is None


def test_an_unclosed_reference_is_closed_and_still_executes(math_row, functions_dir):
    text = json.dumps(math_row["output"]).replace('"$var_1.result$"', '"$var_1.result"')
    result = score([item(math_row, text)], executable_functions_dir=functions_dir)
    assert result.full_sequence_accuracy == 1.0 and result.win_rate == 1.0 and result.f1_slot == 1.0


def test_a_repeated_function_keeps_only_its_last_call_for_the_slot_f1(math_row):
    divide, multiply, add = math_row["output"]
    twice = dict(copy.deepcopy(divide), label="$var_9", arguments={"arg_0": 1, "arg_1": 2})
    result = score([item(math_row, json.dumps([divide, multiply, add, twice]))], win_rate=False)
    # divide's slots become ["arg_0 = 1", "arg_1 = 2"]: both gold divide strings are missed.
    assert result.f1_slot == pytest.approx((0 + 0 + 1 + 1 + 1 + 1) / 6)
    # Partial: gold [d, m, a] vs [d, m, a, d]: aligned gold [d, m, a, ""], 3/4.
    assert result.partial_sequence_accuracy == pytest.approx(3 / 4)


def test_alignment_is_greedy_on_names():
    gold = ["a(x = 1)", "b()", "c()"]
    assert align(gold, ["b()", "c()"]) == (gold, ["", "b()", "c()"])
    # A wrong first name consumes gold until names meet again: nothing pairs up after the gaps.
    assert align(["a()", "b()"], ["c()", "a()", "b()"]) == (["a()", "b()", "", "", ""], ["", "", "c()", "a()", "b()"])
    assert sequence_accuracy(["a()", "b()"], ["c()", "a()", "b()"]) == 0.0
    assert sequence_accuracy([], []) == 0.0  # sklearn raises on empty input; upstream counts 0


def test_macro_f1_with_a_single_gold_label_is_sklearns_binary_average():
    # One class: the indicator matrix is one column, which sklearn scores as a binary problem averaged over
    # both values: value 1 has P 1/2, R 1, F 2/3; value 0 is never predicted (P 0, R 0, F 0).
    p, r, f = macro_prf([["a"], []], [["a", "z"], ["a"]])
    assert (p, r, f) == (pytest.approx(0.25), pytest.approx(0.5), pytest.approx(1 / 3))
    assert macro_prf([["a"], ["b"]], [["a"], []]) == (pytest.approx(0.5), pytest.approx(0.5), pytest.approx(0.5))
    assert macro_prf([[], []], [["a"], []]) is None  # sklearn raises: no label at all


# --------------------------------------------------------------------------------------------------
# The win check: upstream's bugs by default, fixed with corrected=True
# --------------------------------------------------------------------------------------------------

SUBTRACT = {"name": "subtract", "description": "subtract two numbers",
            "parameters": {"arg_0": {"type": "int or float"}, "arg_1": {"type": "int or float"}},
            "output_parameters": {"result": {"type": "int or float"}}}
DIVIDE = dict(SUBTRACT, name="divide", description="divide two numbers")


def calc(name, *args, label="$var_1"):
    return {"name": name, "label": label, "arguments": {f"arg_{i}": a for i, a in enumerate(args)}}


def test_a_failed_execution_wins_against_a_gold_zero_unless_corrected(functions_dir):
    gold = [calc("subtract", 5, 5)]
    items = [ScoreItem("broken", gold, [SUBTRACT], "0", json.dumps([calc("subtract", "$var_9.result$", 1)])),
             ScoreItem("empty", gold, [SUBTRACT], "0", "[]"),
             ScoreItem("right", gold, [SUBTRACT], "0", json.dumps(gold))]
    official = score(items, executable_functions_dir=functions_dir)
    corrected = score(items, executable_functions_dir=functions_dir, corrected=True)
    # Upstream: the failed run returns False, and False == 0; an empty prediction is not run at all.
    assert [s.win for s in official.samples] == [True, False, True]
    assert [s.win for s in corrected.samples] == [False, False, True]
    assert official.win_rate == pytest.approx(2 / 3) and corrected.win_rate == pytest.approx(1 / 3)
    assert official.f1_intent == corrected.f1_intent  # only the win check differs


def test_float_answers_are_rounded_to_the_gold_digits_exponents_miscounted_upstream(functions_dir):
    third = [calc("divide", 1, 3)]
    tiny = [calc("divide", 64, 1000000)]  # 6.4e-05
    items = [ScoreItem("third", third, [DIVIDE], "0.33", json.dumps(third)),
             ScoreItem("tiny", tiny, [DIVIDE], "6.4e-05", json.dumps(tiny)),
             ScoreItem("no_dot", tiny, [DIVIDE], "1e-05", json.dumps(tiny))]
    official = score(items, executable_functions_dir=functions_dir)
    corrected = score(items, executable_functions_dir=functions_dir, corrected=True)
    # 0.333... rounded to the 2 digits of "0.33" wins. Upstream counts the digits after "." of "6.4e-05"
    # ("4e-05": 5) and rounds 6.4e-05 to 6e-05: no win; corrected counts 6 digits. "1e-05" has no "."
    # (upstream's scorer crashes there; here it compares unrounded and says so in the notes).
    assert [s.win for s in official.samples] == [True, False, False]
    assert [s.win for s in corrected.samples] == [True, True, False]
    assert any("no '.'" in n for n in official.notes)


# --------------------------------------------------------------------------------------------------
# Parsers
# --------------------------------------------------------------------------------------------------


def test_json_parser_grounds_only_when_the_text_mentions_label(math_row):
    gold = math_row["output"]
    grounded = parse_prediction(json.dumps(gold))
    assert grounded.calls == ground(gold) and grounded.executed == gold and not grounded.parse_error
    assert grounded.calls[1]["arguments"]["arg_0"] == "$divide.result$" and "label" not in grounded.calls[0]
    bare = [{"name": c["name"], "arguments": c["arguments"]} for c in gold]
    assert parse_prediction(json.dumps(bare)).calls == bare  # no "label" in the text: used as they are
    assert parse_prediction(gold, "hermes").calls == grounded.calls  # already-parsed lists: as the json parser


@pytest.mark.parametrize("text, calls, error", [
    ("not json", [], True),
    ("[]", [], False),                      # an empty list is not a parse error (and never wins)
    ('{"name": "add"}', ["name"], False),   # upstream iterates the object: its keys (each then fails as a call)
    ("42", [], True),                       # upstream's scorer crashes on a number; a parse error here
    ('[{"name": "add", "label": "$var_1", "arguments": [1, 2]}]', [], True),  # cannot be grounded
])
def test_json_parser_edge_cases(text, calls, error):
    parsed = parse_prediction(text)
    assert (parsed.calls, parsed.parse_error) == (calls, error)


def test_a_prediction_nested_deeper_than_the_stack_is_a_parse_error(math_row):
    depth = sys.getrecursionlimit() * 100
    text = "[" * depth + "]" * depth
    nested: list = []
    for _ in range(depth):
        nested = [nested]
    for prediction, parser in [(text, "json"), (f"<tool_call>{text}</tool_call>", "hermes"), (nested, "json")]:
        parsed = parse_prediction(prediction, parser)
        assert (parsed.calls, parsed.parse_error) == ([], True)
    result = score([item(math_row, text), item(math_row, nested)], win_rate=False)
    assert (result.n_rows, result.parse_errors, result.full_sequence_accuracy) == (2, 2, 0.0)


def test_hermes_parser_reads_tool_call_blocks_and_skips_broken_ones(math_row, functions_dir):
    blocks = "".join(f"<tool_call>\n{json.dumps(c)}\n</tool_call>\n" for c in math_row["output"])
    parsed = parse_prediction("Let me compute.\n" + blocks + "<tool_call>{broken</tool_call>", "hermes")
    assert parsed.calls == ground(math_row["output"]) and not parsed.parse_error
    assert parse_prediction("tool_call\n" + json.dumps(math_row["output"][0]) , "hermes").calls == []
    assert parse_prediction("no calls here", "hermes").parse_error
    result = score([item(math_row, blocks)], parser="hermes", executable_functions_dir=functions_dir)
    assert (result.full_sequence_accuracy, result.win_rate) == (1.0, 1.0)


def test_each_unparsable_output_says_why_and_is_not_run(math_row, functions_dir, tmp_path, capsys):
    """A model's raw outputs as tool-calling models emit them: each malformed one is a parse error with its reason
    (not the sandbox's "no calls"), an empty prediction is not executed (as upstream's win check), and a Hermes
    block the parser skips is said, not dropped without a word."""
    text = json.dumps(math_row["output"])
    blocks = "".join(f"<tool_call>\n{json.dumps(c)}\n</tool_call>\n" for c in math_row["output"])
    outputs = {"empty": ("", "json"), "cut_off": (text[:-25], "json"), "prose_first": ("The calls: " + text, "json"),
               "prose_after": (text + "\nDone.", "json"), "hermes_as_json": (blocks, "json"),
               "null": (None, "json"), "no_blocks": ("I would call divide first.", "hermes"),
               "hermes_cut_off": (blocks[:-30], "hermes")}
    expected = {"empty": "the output is empty", "cut_off": "the text ends inside the JSON (cut off?)",
                "prose_first": "text before the JSON", "prose_after": "text after the JSON",
                "hermes_as_json": "<tool_call> blocks, which the hermes parser reads", "null": "no output (null)",
                "no_blocks": "no <tool_call>...</tool_call> block",
                "hermes_cut_off": "a <tool_call> without its </tool_call> (the output cut off?) is not read"}
    for name, (output, parser) in outputs.items():
        result = score([item(math_row, output, name)], parser=parser, executable_functions_dir=functions_dir)
        sample = result.samples[0]
        assert expected[name] in (sample.parse_detail or ""), (name, sample.parse_detail)
        assert "JSONDecodeError" not in (sample.parse_detail or ""), (name, sample.parse_detail)  # the text's terms
        assert sample.parse_error == (name != "hermes_cut_off") and sample.win is False
        if name != "hermes_cut_off":
            assert sample.execution is None  # nothing to run: not a sandbox "no_calls" error
    # The Hermes output cut off in its last call: its first two calls are scored as upstream scores them, and a
    # note says a part was left out
    assert result.samples[0].partial_sequence_accuracy == pytest.approx(2 / 3) and result.parse_errors == 0
    assert any("parts left out" in n for n in result.notes)
    # The command's per-sample lines and JSON carry the reason
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps({**math_row, "sample_id": name, "generated_text": output}) + "\n"
                            for name, (output, parser) in outputs.items() if parser == "json"))
    assert cli.main(["score", "nestful", str(path), "--executable-functions", functions_dir, "--samples"]) == 0
    table = capsys.readouterr().out
    assert "empty: partial 0.000, parse error (the output is empty), win False, not run: no calls" in table
    assert cli.main(["score", "nestful", str(path), "--executable-functions", functions_dir, "--samples",
                     "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [s["parse_detail"] is not None for s in report["samples"]] == [True] * 6
    assert report["isolation"] is None  # nothing ran


def test_a_parse_error_from_a_call_the_metrics_cannot_read_names_that_not_a_skipped_block(math_row):
    """A Hermes output whose calls parse, one with a name the metrics cannot key (an object), and a block the
    parser skipped: the parse error came from the call, and its detail said only "block 3 of 3 is not JSON", a
    part that does not make a parse error. It names the call first, and the skipped block after it."""
    divide, multiply, _ = copy.deepcopy(math_row["output"])
    multiply["name"] = {"function": multiply["name"]}
    text = "".join(f"<tool_call>\n{json.dumps(c)}\n</tool_call>\n" for c in (divide, multiply))
    sample = score([item(math_row, text + "<tool_call>{broken</tool_call>")], parser="hermes",
                   win_rate=False).samples[0]
    assert sample.parse_error
    assert sample.parse_detail.startswith("an element of the calls is not an object with a name and arguments; "
                                          "block 3 of 3 is not JSON"), sample.parse_detail
    # without the skipped block, the call's problem alone
    sample = score([item(math_row, text)], parser="hermes", win_rate=False).samples[0]
    assert (sample.parse_error, sample.parse_detail) == (
        True, "an element of the calls is not an object with a name and arguments")


def test_unknown_parser_is_refused():
    with pytest.raises(ValueError, match="parser"):
        parse_prediction("[]", "xml")


# --------------------------------------------------------------------------------------------------
# Result files and the command line
# --------------------------------------------------------------------------------------------------


def upstream_line(row: dict, generated_text: str) -> dict:
    """A line of upstream's results/*/output.jsonl: structured fields as JSON text."""
    return {"sample_id": row["sample_id"], "input": row["input"], "output": json.dumps(row["output"]),
            "gold_answer": json.dumps(row["gold_answer"]), "tools": json.dumps(row["tools"]),
            "generated_text": generated_text}


def write_lines(path, lines) -> str:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return str(path)


def test_score_command_json_on_upstream_result_rows(tmp_path, math_row, functions_dir, capsys):
    path = write_lines(tmp_path / "output.jsonl", [upstream_line(math_row, p) for p in predictions(math_row["output"]).values()])
    code = cli.main(["score", "nestful", path, "--executable-functions", functions_dir, "--parser", "json", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert {k: round(out[k], 3) if isinstance(out[k], float) else out[k] for k in
            ("n_rows", "parse_errors", "f1_intent", "f1_slot", "partial_sequence_accuracy", "full_sequence_accuracy",
             "win_rate")} == {"n_rows": 5, "parse_errors": 1, "f1_intent": 0.843, "f1_slot": 0.790,
                              "partial_sequence_accuracy": 0.467, "full_sequence_accuracy": 0.2, "win_rate": 0.2}


def test_score_says_which_predictions_the_sandbox_stopped_and_samples_work_in_the_table(tmp_path, math_row,
                                                                                      functions_dir, capsys):
    # A prediction past the memory limit and one past the time limit lose like wrong calls; the table used to
    # show only the win rate (and --samples without --json was accepted and did nothing)
    memory = [{"name": "multiply", "label": "$var_1", "arguments": {"arg_0": "a", "arg_1": 3 * 10 ** 9}}]
    slow = [{"name": "divide", "label": "$var_1", "arguments": {"arg_0": 10, "arg_1": 3}}] * 20000
    lines = [dict(upstream_line(math_row, text), sample_id=name) for name, text in
             [("exact", json.dumps(math_row["output"])), ("memory", json.dumps(memory)), ("slow", json.dumps(slow))]]
    path = write_lines(tmp_path / "output.jsonl", lines)
    args = ["score", "nestful", path, "--executable-functions", functions_dir, "--timeout", "1", "--memory-mb", "1024"]
    assert cli.main(args) == 0
    table = capsys.readouterr().out
    assert "Stopped by the sandbox      memory 1, timeout 1" in table
    assert cli.main(args + ["--samples"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert "  exact: partial 1.000, win True, ok" in table
    assert "  memory: partial 0.000, win False, limit at output[0]: memory: over 1024 MB" in table
    assert any(line.startswith("  slow: partial 0.000, win False, limit at output[")  # (the call the timer stopped)
               and line.endswith("]: timeout: over 1.0 s") for line in table), table
    assert cli.main(args + ["--json"]) == 0
    assert json.loads(capsys.readouterr().out)["stopped_by_sandbox"] == {"memory": 1, "timeout": 1}


def test_each_samples_result_names_the_predicted_call_it_failed_at(tmp_path, math_row, functions_dir, capsys):
    # A sample's result gave the reason ('bad_reference: ...') but not which of the predicted calls failed
    second_bad = [math_row["output"][0], dict(math_row["output"][1], arguments={"arg_0": "$var_9.result$", "arg_1": 1})]
    lines = [dict(upstream_line(math_row, json.dumps(calls)), sample_id=name)
             for name, calls in [("exact", math_row["output"]), ("second_bad", second_bad)]]
    path = write_lines(tmp_path / "output.jsonl", lines)
    assert cli.main(["score", "nestful", path, "--executable-functions", functions_dir, "--json", "--samples"]) == 0
    exact, bad = (s["execution"] for s in json.loads(capsys.readouterr().out)["samples"])
    assert (exact["status"], exact["failed_call"]) == ("ok", None)
    assert (bad["reason"], bad["failed_call"]) == ("bad_reference", 1)
    # and so does the table's line
    assert cli.main(["score", "nestful", path, "--executable-functions", functions_dir, "--samples"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert "  exact: partial 1.000, win True, ok" in table
    assert any(line.startswith("  second_bad: ") and ", error at output[1]: bad_reference: " in line
               for line in table), table


def test_score_says_how_isolated_the_predictions_ran(tmp_path, math_row, functions_dir, capsys):
    # Predictions are a model's: with upstream's eval-based functions they run code of its choosing. verify said
    # which isolation the sandbox achieved; score did not, so a run with the audit hook alone looked the same.
    from tooluse_datasets.builders.nestful.execution import SandboxLimits, run_sequences
    from tooluse_datasets.builders.nestful.execution.sandbox import SequenceJob

    off = SandboxLimits(kernel_isolation=False, network_namespace=False)
    result = score([item(math_row, json.dumps(math_row["output"]))], executable_functions_dir=functions_dir, limits=off)
    assert result.to_dict()["isolation"] == {"network": "off", "filesystem": "off", "processes": "off"}
    assert "  network isolation: off" in result.table().splitlines()
    (ran,) = run_sequences([SequenceJob([], {})], functions_dir)  # what this machine allows by default
    path = write_lines(tmp_path / "output.jsonl", [upstream_line(math_row, json.dumps(math_row["output"]))])
    assert cli.main(["score", "nestful", path, "--executable-functions", functions_dir, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["isolation"] == {
        "network": ran.network, "filesystem": ran.filesystem, "processes": ran.processes}
    assert cli.main(["score", "nestful", path, "--no-win-rate"]) == 0
    assert "isolation" not in capsys.readouterr().out  # nothing ran
    assert score_file(path, win_rate=False).to_dict()["isolation"] is None


def test_keyed_predictions_join_the_gold_rows_and_score_the_same(tmp_path, math_row, functions_dir, capsys):
    # One prediction per gold row of the file: the math row exactly (an already-parsed list), the code row
    # unparsable text.
    gold_rows = rows(CURRENT)
    other = next(r for r in gold_rows if r["sample_id"] != MATH_ID)
    keyed = [{"sample_id": MATH_ID, "calls": math_row["output"]},
             {"sample_id": other["sample_id"], "generated_text": "I think the answer is 3."}]
    path = write_lines(tmp_path / "predictions.jsonl", keyed)
    code = cli.main(["score", "nestful", path, "--gold-data-files", str(shared_data(*CURRENT)),
                     "--executable-functions", functions_dir])
    table = capsys.readouterr().out
    assert code == 0
    values = {line.strip().rsplit(None, 1)[0].strip(): line.split()[-1] for line in table.splitlines()[1:]}
    # F1 intent: macro over the 5 gold names, the math row's 3 found, the code row's 2 missed.
    assert values["Samples"] == "2" and values["Parsing errors"] == "1" and values["F1 intent (function names)"] == "0.600"
    assert values["Partial sequence accuracy"] == "0.500" and values["Win rate"] == "0.500"
    upstream = write_lines(tmp_path / "output.jsonl", [upstream_line(math_row, json.dumps(math_row["output"])),
                                                        upstream_line(other, "I think the answer is 3.")])
    gold = {r["sample_id"]: r for r in gold_rows}
    assert score_file(path, gold_rows=gold, win_rate=False).to_dict() == \
        score_file(upstream, win_rate=False).to_dict()


def test_bad_result_files_are_typed_errors_naming_the_line(tmp_path, math_row):
    good = upstream_line(math_row, "[]")
    cases = [("not json\n", InvalidJsonError, "<line>"),
             (json.dumps({k: v for k, v in good.items() if k != "generated_text"}) + "\n", MissingFieldError, "generated_text"),
             (json.dumps({"sample_id": "nope", "generated_text": "[]"}) + "\n", MissingFieldError, "output"),
             (json.dumps(dict(good, output="[{")) + "\n", InvalidJsonError, "output"),
             (json.dumps(dict(good, gold_answer="a is greater")) + "\n", InvalidJsonError, "gold_answer"),
             # nested deeper than Python's stack: the line, or a field holding JSON text
             ('{"sample_id": "x", "calls": ' + "[" * 100_000 + "]" * 100_000 + "}\n", InvalidJsonError, "<line>"),
             (json.dumps(dict(good, output="[" * 100_000 + "]" * 100_000)) + "\n", InvalidJsonError, "output")]
    for i, (text, error, field) in enumerate(cases):
        path = tmp_path / f"bad{i}.jsonl"
        path.write_text(json.dumps(good) + "\n" + text)
        with pytest.raises(error) as info:
            read_results(path)
        assert (info.value.row, info.value.field) == (1, field)
    path = tmp_path / "unknown.jsonl"
    path.write_text(json.dumps({"sample_id": "nope", "generated_text": "[]"}) + "\n")
    with pytest.raises(InvalidValueError, match="not among the gold rows"):
        read_results(path, gold_rows={})


def test_a_gold_answer_that_is_not_json_stops_no_score_without_the_win_rate(tmp_path, math_row, capsys):
    # Only the win check reads the gold answer: --no-win-rate refused the whole file for one answer it never read.
    right = upstream_line(math_row, json.dumps(math_row["output"]))
    path = write_lines(tmp_path / "output.jsonl", [right, dict(right, gold_answer="a is greater")])
    result = score_file(path, win_rate=False)
    assert (result.n_rows, result.full_sequence_accuracy, result.win_rate) == (2, 1.0, None)
    assert cli.main(["score", "nestful", path, "--no-win-rate", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["full_sequence_accuracy"] == 1.0
    with pytest.raises(InvalidJsonError) as info:  # the win check reads it: refused before anything runs
        score_file(path, executable_functions="/nonexistent")
    assert (info.value.file, info.value.row, info.value.field) == (path, 1, "gold_answer")


def test_gold_calls_that_cannot_be_grounded_name_the_line_not_the_sample_as_a_file(tmp_path, math_row):
    broken = dict(math_row, output=[{"name": "add", "label": "$var_1", "arguments": [1, 2]}])
    path = write_lines(tmp_path / "output.jsonl", [upstream_line(math_row, "[]"), upstream_line(broken, "[]")])
    with pytest.raises(InvalidValueError) as info:
        score_file(path, win_rate=False)
    assert (info.value.file, info.value.row, info.value.field) == (path, 1, "output")
    assert repr(MATH_ID) in info.value.message and MATH_ID not in info.value.file
    with pytest.raises(InvalidValueError) as info:  # built in Python: the row is the item's position
        score([item(math_row, "[]"), item(broken, "[]")], win_rate=False)
    assert (info.value.file, info.value.row, info.value.field) == (None, 1, "output")


# --------------------------------------------------------------------------------------------------
# Against upstream's own scorer (when supplied)
# --------------------------------------------------------------------------------------------------

UPSTREAM_SRC = os.environ.get("NESTFUL_UPSTREAM_SRC")  # a folder with upstream's src/scorer.py & co.
UPSTREAM_PYTHON = os.environ.get("NESTFUL_UPSTREAM_PYTHON")  # a python with scikit-learn, tqdm, jsonlines

DRIVER = """
import contextlib, io, json, sys
src, results, functions, model, out = sys.argv[1:6]
sys.path.insert(0, src)
import scorer
from utils import read_jsonlines
data = read_jsonlines(results)
with contextlib.redirect_stdout(io.StringIO()):
    result = scorer.calculate_scores(data, model, functions)
json.dump(result, open(out, "w"))
"""


def current_format(tool: dict) -> dict:
    """The Apr-2025 tool format upstream's scorer reads (output_parameters, no JSON-Schema wrappers)."""
    t = dict(tool)
    if "output_parameter" in t:
        t["output_parameters"] = t.pop("output_parameter")
    for key in ("parameters", "output_parameters"):
        v = t.get(key)
        if isinstance(v, dict) and "properties" in v and set(v) <= {"properties", "required", "type"}:
            t[key] = v["properties"]
    return t


def variants(gold: list[dict], rng: random.Random) -> list[str]:
    g = copy.deepcopy(gold)
    out = [json.dumps(g), json.dumps(g[::-1]), json.dumps(g[:-1]), json.dumps(g + g[:1]), "oops", "[]", "{}",
           json.dumps([{k: v for k, v in c.items() if k != "label"} for c in g]),
           json.dumps([{"name": "dummy", "arguments": {}}] + g)]
    h = copy.deepcopy(g)
    for c in h:
        for k, v in c["arguments"].items():
            if isinstance(v, str) and v.startswith("$var"):
                c["arguments"][k] = v.replace("1", "9", 1) if rng.random() < .5 else v[:-1]
    out.append(json.dumps(h))
    return out


def _limit_memory() -> None:
    """The upstream scorer's process (which runs upstream's functions) gets at most 4 GiB of address space."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


@pytest.mark.skipif(not (UPSTREAM_SRC and UPSTREAM_PYTHON),
                    reason="set NESTFUL_UPSTREAM_SRC (upstream's src/ at the pinned revision) and NESTFUL_UPSTREAM_PYTHON "
                           "(an interpreter with scikit-learn, tqdm, jsonlines) to compare with upstream's scorer")
@pytest.mark.parametrize("parser, model", [("json", "DeepSeek-V3"), ("hermes", "Hermes-2-Pro-Mistral-7B")])
def test_metrics_equal_upstream_scorer_to_three_decimals(tmp_path, functions_dir, parser, model):
    rng = random.Random(0)
    lines = []
    for row in rows(TOY) + rows(CURRENT) + rows(ICL):
        if row["sample_id"].startswith("fa57c28a"):  # needs the network; upstream's scorer would try
            continue
        row = dict(row, tools=[current_format(t) for t in row["tools"]])
        for text in variants(row["output"], rng):
            if parser == "hermes" and text.startswith("["):
                text = "".join(f"<tool_call>{json.dumps(c)}</tool_call>" for c in json.loads(text))
            lines.append(upstream_line(row, text))
    path = write_lines(tmp_path / "output.jsonl", lines)
    work = tmp_path / "upstream_run"
    work.mkdir()
    # Upstream's scorer imports the functions into its own process, which runs them: like our sandbox, a scratch
    # folder, a clean environment, no network (a namespace of its own, else the test skips), time and memory limits.
    # -B: the functions folder is upstream's (often read-only, and shared): write no bytecode into it.
    if not (shutil.which("unshare") and subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0):
        pytest.skip("upstream's scorer runs upstream's functions: it runs only without network, and this machine "
                    "cannot make a network namespace (unshare -n)")
    command = ["unshare", "-n", UPSTREAM_PYTHON, "-B", "-c", DRIVER, UPSTREAM_SRC, path, functions_dir, model,
               str(work / "result.json")]
    subprocess.run(command, cwd=work, env={"PATH": os.environ.get("PATH", ""), "HOME": str(work),
                                           "PYTHONDONTWRITEBYTECODE": "1"}, check=True,
                   timeout=900, capture_output=True, preexec_fn=_limit_memory)
    theirs = json.loads((work / "result.json").read_text())
    ours = score_file(path, parser=parser, executable_functions_dir=functions_dir)
    assert ours.n_rows == theirs["num_examples"] and ours.parse_errors == theirs["num_pred_examples_w_parsing_errors"]
    pairs = {"f1_intent": "f1_intent", "f1_slot": "f1_slot", "p_intent": "p_intent", "r_intent": "r_intent",
             "p_slot": "p_slot", "r_slot": "r_slot", "partial_sequence_accuracy": "accuracy_combined",
             "full_sequence_accuracy": "percentage_times_full_score", "win_rate": "win_rate"}
    assert {k: f"{getattr(ours, k):.3f}" for k in pairs} == {k: theirs[v] for k, v in pairs.items()}


# Metrics only: upstream's scorer never runs a function with win_rate_flag=False, so nothing of the functions
# folder is imported outside the sandbox.
METRICS_DRIVER = """
import contextlib, io, json, sys, warnings
warnings.filterwarnings("ignore")
src, results, model, out = sys.argv[1:5]
sys.path.insert(0, src)
import scorer
from utils import read_jsonlines
data = read_jsonlines(results)
with contextlib.redirect_stdout(io.StringIO()):
    total = scorer.calculate_scores(data, model, "/nonexistent", win_rate_flag=False)
    each = [scorer.calculate_scores([item], model, "/nonexistent", win_rate_flag=False) for item in data]
json.dump({"total": total, "each": [[r["accuracy_combined"], r["num_pred_examples_w_parsing_errors"]] for r in each]},
          open(out, "w"))
"""


def shapes(gold: list[dict], rng: random.Random) -> list[str]:
    """Predictions the metrics read in ways of their own: values str() writes otherwise (5 -> 5.0, booleans
    flipped, strings upper-cased, lists grown), argument order, arguments that are no object, a name that is
    no string, a repeated call, labels spelled otherwise, an undeclared argument, calls without labels or
    arguments, items that are no call, a call given alone or inside lists, text around the JSON."""
    def changed(value):
        if isinstance(value, bool):
            return not value
        if isinstance(value, int):
            return float(value)
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, list):
            return value + value[:1]
        return value.upper() if isinstance(value, str) and not value.startswith("$") else value
    out = []
    for edit in (lambda h: [c["arguments"].update({k: changed(v) for k, v in c["arguments"].items()
                                                   if rng.random() < .5}) for c in h],
                 lambda h: [c.update(arguments=dict(reversed(list(c["arguments"].items())))) for c in h],
                 lambda h: h[0].update(arguments=list(h[0]["arguments"].values())),
                 lambda h: h[-1].update(name=7),
                 lambda h: h.insert(1, copy.deepcopy(h[0])),
                 lambda h: [c.update(label=f"$step_{i + 1}") for i, c in enumerate(h)],
                 lambda h: h[0]["arguments"].update(extra=None)):
        h = copy.deepcopy(gold)
        edit(h)
        out.append(json.dumps(h))
    out += [json.dumps(gold[:1]), json.dumps([{"name": c["name"], "arguments": c["arguments"]} for c in gold[::-1]]),
            json.dumps(gold) + "\n", " " + json.dumps(gold), json.dumps([gold[0], "text", 5]),
            json.dumps([{"name": c["name"]} for c in gold]), json.dumps(gold[0]), json.dumps([[c] for c in gold])]
    return out


@pytest.mark.skipif(not (UPSTREAM_SRC and UPSTREAM_PYTHON),
                    reason="set NESTFUL_UPSTREAM_SRC (upstream's src/ at the pinned revision) and NESTFUL_UPSTREAM_PYTHON "
                           "(an interpreter with scikit-learn, tqdm, jsonlines) to compare with upstream's scorer")
@pytest.mark.parametrize("parser, model", [("json", "DeepSeek-V3"), ("hermes", "Hermes-2-Pro-Mistral-7B")])
def test_metrics_and_each_samples_accuracy_equal_upstream_scorer_on_more_shapes(tmp_path, parser, model):
    """The official definitions (spec section 9) on the 69 real rows, predictions in shapes the comparison above
    does not make: every metric, and each sample's partial sequence accuracy and parse error, as upstream's scorer
    gives them."""
    rng = random.Random(1)
    lines = []
    for row in rows(TOY) + rows(CURRENT) + rows(ICL):
        row = dict(row, tools=[current_format(t) for t in row["tools"]])
        for text in shapes(row["output"], rng):
            calls = json.loads(text) if text.strip().startswith("[") else None
            if parser == "hermes" and calls is not None:
                text = "".join(f"<tool_call>{json.dumps(c)}</tool_call>" for c in calls)
            lines.append(upstream_line(row, text))
    path = write_lines(tmp_path / "output.jsonl", lines)
    work = tmp_path / "upstream_run"
    work.mkdir()
    subprocess.run([UPSTREAM_PYTHON, "-B", "-c", METRICS_DRIVER, UPSTREAM_SRC, path, model, str(work / "result.json")],
                   cwd=work, env={"PATH": os.environ.get("PATH", ""), "HOME": str(work)}, check=True, timeout=900,
                   capture_output=True)
    theirs = json.loads((work / "result.json").read_text())
    ours = score_file(path, parser=parser, win_rate=False)
    total = theirs["total"]
    assert ours.n_rows == total["num_examples"] and ours.parse_errors == total["num_pred_examples_w_parsing_errors"]
    pairs = {"f1_intent": "f1_intent", "f1_slot": "f1_slot", "p_intent": "p_intent", "r_intent": "r_intent",
             "p_slot": "p_slot", "r_slot": "r_slot", "partial_sequence_accuracy": "accuracy_combined",
             "full_sequence_accuracy": "percentage_times_full_score"}
    assert {k: f"{getattr(ours, k):.3f}" for k in pairs} == {k: total[v] for k, v in pairs.items()}
    assert [[f"{s.partial_sequence_accuracy:.3f}", int(s.parse_error)] for s in ours.samples] == theirs["each"]


def test_string_gold_answers_of_native_result_lines_stay_strings(tmp_path, functions_dir):
    """A result line in the GitHub form (output and tools as lists) holds gold_answer as the value: the toy rows'
    string answers ("11.00", "    [2]", "table_name") are strings, not JSON text to parse ("11.00" was read
    as 11.0 and lost its win, "table_name" stopped the whole file). Their own gold calls, run, win."""
    toy = [r for r in rows(TOY) if isinstance(r["gold_answer"], str)]
    assert {"11.00", "    [2]", "table_name"} <= {r["gold_answer"] for r in toy}
    path = write_lines(tmp_path / "output.jsonl", [dict(r, generated_text=json.dumps(r["output"])) for r in toy])
    items = read_results(path)
    assert [json.loads(i.gold_answer) for i in items] == [r["gold_answer"] for r in toy]
    result = score(items, executable_functions_dir=functions_dir)
    wins = {i.sample_id: s.win for i, s in zip(items, result.samples)}
    by_answer = {r["gold_answer"]: wins[r["sample_id"]] for r in toy}
    assert by_answer["11.00"] and by_answer["    [2]"] and by_answer["table_name"]
