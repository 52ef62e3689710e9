"""Validation rules over unified rows: each rule on a row that breaks it and on one that passes (real rows from
the bundled samples and ../shared/data, mutated), the counter, the registry and its README table."""
from __future__ import annotations

import copy
import functools
import json
import os
import re
import shutil
import time
from pathlib import Path

import datasets
import pytest

import tooluse_datasets as td
from tooluse_datasets.errors import InvalidValueError, MissingFieldError, UnknownToolError
from tooluse_datasets.formats import WRITERS, output_format
from tooluse_datasets.validation import (ValidationCounter, all_rules, check_row, get_rule, rules_table,
                                         select_rules)
from tooluse_datasets.validation.schemas import argument_errors, compile_parameters, json_message, undeclared_keys

from conftest import PROJECT_ROOT, count_calls, shared_data

NESTFUL_TOY = ("nestful", "third_party", "AtakanTekparmak_NESTFUL_27c2028", "data_v2", "toy_data.jsonl")
MS_SWIFT_DOC = ("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl")


@pytest.fixture(scope="module")
def samples() -> dict[str, dict[str, dict]]:
    """Every bundled sample row of every source, decoded as load() gives them, by id."""
    out = {}
    for source in td.SOURCES:
        if source == "all":
            continue
        splits = td.load(source, data_files=td.sample_files(source), streaming=True)
        out[source] = {row["id"]: row for split in splits.values() for row in split}
    return out


def base(samples, row_id: str) -> dict:
    source = row_id.split("/")[0]
    return copy.deepcopy(samples[source][row_id])


def rule_findings(row: dict, rule_id: str) -> list:
    return [f for f in check_row(row) if f.rule == rule_id]


# Rows used below (bundled samples): a NESTFUL row with three calls and two references, an ms-swift row with
# two parallel calls and their results, a ToolMind row with two call turns.
NESTFUL = "nestful/math/0d7c1f5e-5a52-4c55-9b1e-3f0a3c6e0002"
SWIFT = "ms_swift/agent_rows/0"
TOOLMIND = "toolmind/synthetic/1"


def _calls(row):
    return [c for m in row["messages"] for c in m.get("tool_calls") or []]


def _first_tool_message(row) -> dict:
    return next(m for m in row["messages"] if m["role"] == "tool")


def _set_first_reference(row, value):
    for call in _calls(row):
        for key, arg in call["function"]["arguments"].items():
            if isinstance(arg, str) and arg.startswith("$var"):
                call["function"]["arguments"][key] = value
                return
    raise AssertionError("no reference in the row")


def _backtracking_pattern(row):
    # (a|a)* on 'aaa...ab': about 2**32 steps in a backtracking engine, stopped by the time limit
    row["tools"][0]["function"]["parameters"]["properties"]["base"]["pattern"] = "^(a|a)*$"
    _calls(row)[0]["function"]["arguments"]["base"] = "a" * 32 + "b"


def _undeclared(row):
    _calls(row)[0]["function"]["arguments"]["invented"] = 1


def _no_schema_extras(row, extra):
    row["tools"][0]["function"]["parameters"]["additionalProperties"] = extra
    _undeclared(row)


# (rule, base row, mutation, the field the finding names)
BREAKS = [
    ("row.fields", SWIFT, lambda r: r.pop("meta"), "meta"),
    ("row.fields", SWIFT, lambda r: r["messages"].__setitem__(1, "hi"), "messages[1]"),
    ("tool.not_function", SWIFT, lambda r: r["tools"].__setitem__(0, r["tools"][0]["function"]), "tools[0]"),
    ("tool.duplicate_name", TOOLMIND, lambda r: r["tools"].append(copy.deepcopy(r["tools"][0])),
     "function.name"),
    ("tool.invalid_schema", SWIFT,
     lambda r: r["tools"][0]["function"]["parameters"]["properties"]["base"].update(type="text"),
     "tools[0].function.parameters"),
    ("tool.invalid_schema", NESTFUL, lambda r: r["tools"][0]["function"].update(parameters={"type": "string"}),
     "tools[0].function.parameters"),
    ("tool.unknown_dialect", SWIFT,
     lambda r: r["tools"][0]["function"]["parameters"].update({"$schema": "https://json-schema.org/draft/2030-01/schema"}),
     "tools[0].function.parameters.$schema"),
    ("message.role", TOOLMIND, lambda r: r["messages"][0].update(role="narrator"), "messages[0].role"),
    ("message.content", SWIFT, lambda r: r["messages"][1].update(content=None), "messages[1].content"),
    ("call.not_assistant", SWIFT,
     lambda r: r["messages"][1].update(tool_calls=copy.deepcopy(_calls(r)[:1])), "messages[1].tool_calls"),
    ("call.fields", SWIFT, lambda r: _calls(r)[1].update(id=""), "messages[2].tool_calls[1].id"),
    ("call.fields", NESTFUL, lambda r: _calls(r)[0]["function"].update(name=""), "tool_calls[0].function.name"),
    ("call.not_function", SWIFT, lambda r: _calls(r)[1].update(type="custom"), "messages[2].tool_calls[1].type"),
    ("call.duplicate_id", SWIFT, lambda r: _calls(r)[1].update(id="call_0"), "messages[2].tool_calls[1].id"),
    ("call.unknown_tool", NESTFUL, lambda r: _calls(r)[2]["function"].update(name="no_such_tool"),
     "tool_calls[2].function.name"),
    ("call.no_tools", TOOLMIND, lambda r: r.update(tools=[]), "tools"),
    ("arguments.not_object", TOOLMIND,
     lambda r: _calls(r)[0]["function"].update(arguments='{"city": "Paris"}'), "tool_calls[0].function.arguments"),
    # a required key missing, a wrong type, a value outside an enum
    ("arguments.schema", SWIFT, lambda r: _calls(r)[0]["function"]["arguments"].pop("quote"),
     "messages[2].tool_calls[0].function.arguments"),
    ("arguments.schema", SWIFT, lambda r: _calls(r)[1]["function"]["arguments"].update(base=840),
     "messages[2].tool_calls[1].function.arguments.base"),
    ("arguments.schema", SWIFT,
     lambda r: r["tools"][0]["function"]["parameters"]["properties"]["quote"].update(enum=["EUR", "GBP"]),
     "messages[2].tool_calls[1].function.arguments.quote"),
    ("arguments.schema", NESTFUL, lambda r: _calls(r)[0]["function"]["arguments"].update(arg_0="five"),
     "tool_calls[0].function.arguments.arg_0"),
    ("arguments.schema", SWIFT, lambda r: _no_schema_extras(r, False), "tool_calls[0].function.arguments"),
    ("arguments.unchecked", SWIFT, _backtracking_pattern, "messages[2].tool_calls[0].function.arguments.base"),
    ("arguments.undeclared_key", SWIFT, _undeclared, "messages[2].tool_calls[0].function.arguments.invented"),
    ("pairing.unknown_call", SWIFT, lambda r: r["messages"][4].update(tool_call_id="call_9"),
     "messages[4].tool_call_id"),
    ("pairing.count", SWIFT, lambda r: r["messages"].pop(4), "messages[2].tool_calls"),
    ("pairing.count", SWIFT, lambda r: r["messages"][4].update(tool_call_id="call_0"), "messages[2].tool_calls[0]"),
    ("pairing.name", TOOLMIND, lambda r: _first_tool_message(r).update(name="other_tool"), ".name"),
    ("grammar.system_first", SWIFT, lambda r: r["messages"].append({"role": "system", "content": "Be brief."}),
     "messages[6].role"),
    ("grammar.tool_after_call", SWIFT,
     lambda r: r["messages"].insert(2, {"role": "tool", "content": "42", "tool_call_id": "call_0"}),
     "messages[2].role"),
    ("grammar.empty_final_answer", TOOLMIND, lambda r: r["messages"][-1].update(content=" \n"), "content"),
    ("grammar.no_assistant", NESTFUL, lambda r: r["messages"].pop(), "messages"),
    ("call_graph.edge", NESTFUL, lambda r: r["call_graph"][0].update(producer="$var_9"), "call_graph[0].producer"),
    ("call_graph.edge", NESTFUL, lambda r: r["call_graph"][0].update(consumer="$var_7"), "call_graph[0].consumer"),
    ("nestful.undefined_reference", NESTFUL, lambda r: _set_first_reference(r, "$var_7.result$"), "arguments.arg_"),
    ("nestful.undefined_reference", NESTFUL, lambda r: _set_first_reference(r, "$var_1.total$"), "arguments.arg_"),
    ("ms_swift.pairing", SWIFT, lambda r: r["messages"][3].update(tool_call_id=None), "messages[3].tool_call_id"),
    ("ms_swift.pairing", TOOLMIND,
     lambda r: r["messages"].insert(2, {"role": "assistant", "content": "Checking."}), "messages[3].role"),
]


@pytest.mark.parametrize("rule_id, row_id, mutate, field", BREAKS,
                         ids=[f"{b[0]}-{i}" for i, b in enumerate(BREAKS)])
def test_rule_reports_a_row_that_breaks_it_and_passes_the_original(samples, rule_id, row_id, mutate, field):
    row = base(samples, row_id)
    assert rule_findings(row, rule_id) == []
    mutate(row)
    found = rule_findings(row, rule_id)
    assert found, f"{rule_id} did not report the mutated row"
    assert any(field in (f.field or "") for f in found), [f.field for f in found]


@pytest.mark.parametrize("content, said", [([{"type": "text"}], "an array"), ({"a": 1}, "an object"), (3, "a number"),
                                           (None, "null (use an empty string)")])
def test_a_content_that_is_no_string_is_named_by_its_kind_with_its_article(samples, content, said):
    """The message said "content is a array" and "a object"."""
    row = base(samples, SWIFT)
    row["messages"][1]["content"] = content
    assert [f.message for f in rule_findings(row, "message.content")] == [f"content is {said}"]


def test_a_call_without_an_id_is_paired_by_ms_swift_pairing_not_left_uncheckable(samples):
    """A decoded row leaves a null call id out: ms_swift.pairing read call["id"] and reported "the row could
    not be checked (KeyError: 'id')" with no field, instead of the result it cannot place."""
    row = base(samples, SWIFT)
    del _calls(row)[1]["id"]
    assert [f.field for f in rule_findings(row, "call.fields")] == ["messages[2].tool_calls[1].id"]
    found = rule_findings(row, "ms_swift.pairing")
    assert [(f.field, f.message) for f in found] == [
        ("messages[4].tool_call_id",
         'tool result answers "call_1", which is not a call of the preceding assistant turn')]


def test_a_finding_quoting_a_huge_name_is_cut_in_every_report(samples, tmp_path, capsys):
    """call.unknown_tool quoted the called name whole: a name of a megabyte came back whole in each example of
    validate --json (twice: total and split) and of stats, the text table alone cutting it."""
    from tooluse_datasets.cli import main

    huge = "n" * 200_000
    row = base(samples, SWIFT)
    _calls(row)[0]["function"]["name"] = huge
    _calls(row)[1]["function"]["name"] = "get_rate"
    messages = {f.field: f.message for f in rule_findings(row, "call.unknown_tool")}
    assert messages["messages[2].tool_calls[1].function.name"] == 'call to "get_rate", which is not in tools'
    cut = messages["messages[2].tool_calls[0].function.name"]
    assert cut == f'call to "{"n" * 79}..., which is not in tools'     # the value cut, the sentence whole
    line = Path(td.sample_files("ms_swift")["train"][0]).read_text(encoding="utf-8").splitlines()[0]
    native = json.loads(line)
    native["messages"][2]["content"] = native["messages"][2]["content"].replace("get_exchange_rate", huge)
    path = tmp_path / "huge.jsonl"
    path.write_text(json.dumps(native) + "\n", encoding="utf-8")
    assert main(["validate", "ms_swift", "--data-files", str(path), "--json"]) == 1
    out = capsys.readouterr().out
    report = json.loads(out)
    assert report["failures"] == {"call.unknown_tool": 1} and len(out) < 20_000
    assert main(["stats", "ms_swift", "--data-files", str(path)]) == 0
    assert len(capsys.readouterr().out) < 20_000


def test_every_rule_is_exercised_by_a_breaking_row():
    exercised = {b[0] for b in BREAKS} | {"toolmind.grammar"}  # toolmind.grammar: test_toolmind_grammar_rule
    assert exercised == {r.id for r in all_rules()}


def test_every_sample_row_passes_every_error_rule(samples):
    for rows in samples.values():
        for row in rows.values():
            assert [f for f in check_row(row) if get_rule(f.rule).severity == "error"] == [], row["id"]


def test_real_nestful_rows_references_are_not_checked_as_literals_and_a_broken_schema_is_found():
    rows = list(td.load("nestful", data_files=str(shared_data(*NESTFUL_TOY)), split="train", streaming=True))
    counter = ValidationCounter()
    for row in rows:
        counter.check(row)
    # 64 real rows whose references ("$var_1.result$" where a number is declared) are not literals
    assert counter.checked == 64 and counter.rows_failing("arguments.schema") == 0
    assert counter.rows_failing("nestful.undefined_reference") == 0
    # one real tool declares "type": ["array", "array"] (duplicate types are not valid JSON Schema)
    assert counter.rows_failing("tool.invalid_schema") == 1
    example = counter.counts["tool.invalid_schema"].examples[0]
    assert example["id"] == "nestful/code/266ec704-de4a-42a9-b0fe-5bded7b4ed40"
    assert '["array", "array"]' in example["message"] and example["field"].endswith("function.parameters")


def test_v1_embedded_references_are_checked_like_whole_ones():
    """NESTFUL v1 references inside longer strings ("5 * $var1.Exchange Rate$") are references to the v1
    reader (call_graph edges); a wrong label or output field in one is found as in a whole-value reference."""
    group = ("nestful", "data_v1", "executable")
    files = [str(shared_data(*group, "executable-data.json")), str(shared_data(*group, "executable-spec.json"))]
    rows = td.load("nestful", data_files=files, data_version="v1", split="train", streaming=True)
    row = next(r for r in rows if r["id"] == "nestful/v1-executable/14")
    arguments = row["messages"][1]["tool_calls"][1]["function"]["arguments"]
    assert arguments["numbers"] == "5 * $var1.Exchange Rate$" and check_row(row) == []
    field = "messages[1].tool_calls[1].function.arguments.numbers"
    for value, message in [("5 * $var1.Exchange Rat$", 'has no output "Exchange Rat"'),
                           ("5 * $var7.Exchange Rate$", '"var7", which no earlier call defines'),
                           ("$var1.Exchange Rat$", 'has no output "Exchange Rat"')]:
        arguments["numbers"] = value
        found = rule_findings(row, "nestful.undefined_reference")
        assert [f.field for f in found] == [field] and message in found[0].message, value
    # v2 rows keep the spec's rule: only whole values are references ("$100-$200" stays literal)
    v2 = copy.deepcopy(row)
    v2["subset"] = "math"
    v2["messages"][1]["tool_calls"][1]["function"]["arguments"]["numbers"] = "5 * $var7.Exchange Rate$"
    assert rule_findings(v2, "nestful.undefined_reference") == []


def test_real_ms_swift_doc_rows_without_tools_are_warnings_not_errors():
    rows = list(td.load("ms_swift", data_files=str(shared_data(*MS_SWIFT_DOC)), split="train", streaming=True))
    counter = ValidationCounter()
    for row in rows:
        counter.check(row)
    result = counter.to_dict()
    assert result["failed"] == 0 and result["warnings"] == {"call.no_tools": 4}


def test_toolmind_grammar_rule(tmp_path, samples):
    raw = next(iter(td.load("toolmind", "raw", data_files=td.sample_files("toolmind"), split="synthetic",
                            streaming=True)))
    messages = raw["messages"]
    assert [m["role"] for m in messages[-2:]] == ["reasoning", "answer"]
    broken = messages[:-2] + messages[-1:]                      # tool_output -> answer: outside the FSM
    path = tmp_path / "lenient.jsonl"
    path.write_text(json.dumps({"messages": json.dumps(broken), "split": "synthetic"}) + "\n")
    with pytest.raises(InvalidValueError, match="breaks the ToolMind FSM"):
        list(td.load("toolmind", data_files=str(path), split="synthetic", streaming=True))
    row = next(iter(td.load("toolmind", data_files=str(path), split="synthetic", streaming=True, strict=False)))
    found = rule_findings(row, "toolmind.grammar")
    assert [f.field for f in found] == [f"meta.source_messages[{len(broken) - 1}].role"]
    assert rule_findings(base(samples, "toolmind/synthetic/0"), "toolmind.grammar") == []
    # the rule is ToolMind's own: a row of another source carrying the same meta is not checked
    other = base(samples, SWIFT)
    other["meta"] = {"source_messages": broken}
    assert rule_findings(other, "toolmind.grammar") == []


# --------------------------------------------------------------------------------------------------
# Schemas: what "unknown keys" means, compile cache, schemas that cannot be applied
# --------------------------------------------------------------------------------------------------


def test_unknown_keys_depend_on_what_the_schema_says():
    declared = {"type": "object", "properties": {"city": {"type": "string"}}}
    arguments = {"city": "Oslo", "units": "C"}
    assert undeclared_keys(declared, arguments) == ["units"]                       # allowed by default: warning
    assert undeclared_keys({**declared, "additionalProperties": True}, arguments) == []
    assert undeclared_keys({**declared, "additionalProperties": {"type": "string"}}, arguments) == []
    assert undeclared_keys({**declared, "patternProperties": {"^un": {}}}, arguments) == []
    assert undeclared_keys({"type": "object"}, arguments) == []                   # declares nothing
    closed = compile_parameters({**declared, "additionalProperties": False})
    assert list(argument_errors(closed, arguments)) == [
        ("", 'Additional properties are not allowed ("units" was unexpected)', True)]


def test_findings_write_the_values_they_quote_as_json(samples):
    """Users read JSON rows: a finding quotes values as JSON writes them ("usd", true, null, {"a": 1}), not as
    Python's repr ('usd', True, None, {'a': 1}), jsonschema's messages included."""
    row = base(samples, SWIFT)
    row["tools"][0]["function"]["parameters"] = {"type": "object", "required": ["quote"], "properties": {
        "base": {"type": "string"}, "units": {"enum": ["C", "F", None]}, "flag": {"const": False},
        "opts": {"type": "object", "additionalProperties": False}}}
    _calls(row)[0]["function"]["arguments"] = {"base": True, "units": "K", "flag": True, "opts": {"it's": {"a": None}}}
    _calls(row)[1]["id"] = _calls(row)[0]["id"]
    row["messages"][0]["role"] = "narrator"
    found = sorted(f.message for f in check_row(row))
    name = _calls(row)[0]["function"]["name"]
    for said in [f'{name}: true is not of type "string"', f'{name}: "K" is not one of ["C", "F", null]',
                 f'{name}: false was expected', f'{name}: "quote" is a required property',
                 f'{name}: Additional properties are not allowed ("it\'s" was unexpected)',
                 f'call id {json.dumps(_calls(row)[0]["id"])} is not unique in the row',
                 'role "narrator" is not one of ["system", "user", "assistant", "tool"]']:
        assert said in found, (said, found)
    assert not [m for m in found if re.search(r"\bTrue\b|\bNone\b|\bFalse\b|'", m.replace("it's", ""))], found


@pytest.mark.parametrize("schema, value, said", [
    ({"const": "it's 'a'"}, "a", '"it\'s \'a\'" was expected'),                # a repr inside another value
    ({"enum": ["'x'"]}, "x", '"x" is not one of ["\'x\'"]'),
    ({"type": "string", "pattern": "^'x'$"}, "x", '"x" does not match "^\'x\'$"'),   # a message already JSON
    ({"type": "object", "additionalProperties": False}, {"True": True}, 'Additional properties are not allowed '
                                                                         '("True" was unexpected)'),
    ({"contains": {"type": "string"}}, [None, 1], "None of [null, 1] are valid under the given schema"),  # draft-07
], ids=["const", "enum", "pattern", "key-named-True", "contains"])
def test_a_value_quoted_inside_another_is_left_as_it_is_written(schema, value, said):
    """Only the values jsonschema quotes are rewritten as JSON: a repr that also occurs inside another quoted value
    ('a' inside "it's 'a'"), or a word of jsonschema's own (draft-07 contains' "None of"), stays as it is."""
    compiled = compile_parameters({"type": "object", "properties": {"q": schema}})
    assert list(argument_errors(compiled, {"q": value})) == [("q", said, True)]


def test_a_long_value_jsonschema_quotes_is_cut_so_the_finding_still_says_what_is_wrong():
    """jsonschema quotes the offending value whole: a 300-character argument filled the finding's 240 characters
    and the reason ("is not one of ...") was cut off. Quoted values are cut at 80 characters, as every finding's."""
    compiled = compile_parameters({"type": "object", "properties": {"units": {"enum": ["C", "F"]}}})
    [(path, message, checked)] = argument_errors(compiled, {"units": "x" * 300})
    assert (path, checked) == ("units", True)
    assert message == f'"{"x" * 79}... is not one of ["C", "F"]'
    [(_, message, _)] = argument_errors(compiled, {"units": 10 ** 300})  # an integer's repr is its JSON, cut too
    assert message == f'1{"0" * 79}... is not one of ["C", "F"]'
    name = "t" * 300  # the called tool's name, which the argument findings start with, is cut as well
    tool = {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {
        "units": {"enum": ["C", "F"]}}}}}
    row = {"id": "r", "source": "s", "subset": "s", "tools": [tool], "call_graph": [], "meta": {}, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": name, "arguments": {"units": "K", "extra": 1}}}]}]}
    assert {f.rule: f.message for f in check_row(row)} == {
        "arguments.schema": f'{"t" * 80}...: "K" is not one of ["C", "F"]',
        "arguments.undeclared_key": f'{"t" * 80}... declares no parameter "extra"'}


def test_a_value_longer_than_the_message_is_not_written_out_to_quote_it():
    """jsonschema's message for a missing key quotes the key, not the arguments: writing out a megabyte of
    arguments to look for them in a 30-character message cost 300 times the check itself."""
    written = []

    class Arguments(dict):
        def __repr__(self):
            written.append(1)
            return super().__repr__()

    arguments = Arguments({f"k{i}": "x" * 1000 for i in range(2000)})
    compiled = compile_parameters({"type": "object", "required": ["q"]})
    assert list(argument_errors(compiled, arguments)) == [("", '"q" is a required property', True)]
    assert written == []
    small = Arguments(a=None)
    assert [m for _, m, _ in argument_errors(compile_parameters({"type": "object", "not": {"required": ["a"]}}),
                                             small)] == ['{"a": null} should not be valid under {"required": ["a"]}']


def test_a_value_a_false_subschema_forbids_is_named_by_its_field(samples):
    """`"properties": {"legacy": false}` forbids the key: jsonschema reports it without the path it found it at, so
    the finding named the call's whole arguments; it names the key (and the item, for `items: false`)."""
    row = base(samples, SWIFT)
    row["tools"][0]["function"]["parameters"] = {"type": "object", "properties": {
        "legacy": False, "rates": {"type": "object", "properties": {"old": False}}}}
    call = _calls(row)[0]
    call["function"]["arguments"] = {"legacy": "x", "rates": {"old": None}}
    where = "messages[2].tool_calls[0].function.arguments"
    found = [(f.field, f.message) for f in rule_findings(row, "arguments.schema")]
    name = call["function"]["name"]
    assert found == [(f"{where}.legacy", f'{name}: the schema false allows no value ("x" given)'),
                     (f"{where}.rates.old", f"{name}: the schema false allows no value (null given)")]


@pytest.mark.parametrize("bad, said", [(25, "and 15 more errors"), (5000, "and at least 1000 more errors")])
def test_errors_past_the_cap_per_call_are_counted_and_said(samples, bad, said):
    """At most 10 errors are reported per call; the ones past them are not dropped without a word: one more
    finding on the arguments says how many (counted up to 1000, so a huge bad argument stays cheap)."""
    row = base(samples, SWIFT)
    row["tools"][0]["function"]["parameters"] = {"type": "object", "properties": {
        "xs": {"type": "array", "items": {"type": "integer"}}}}
    call = _calls(row)[0]
    call["function"]["arguments"] = {"xs": ["a"] * bad}
    found = rule_findings(row, "arguments.schema")
    where = "messages[2].tool_calls[0].function.arguments"
    assert [f.field for f in found] == [f"{where}.xs[{i}]" for i in range(10)] + [where]
    assert found[-1].message == (f"{call['function']['name']}: {said} in these arguments "
                                 "(not reported: at most 10 per call)")
    call["function"]["arguments"] = {"xs": ["a"] * 10}           # exactly the cap: nothing left out, no note
    assert [f.field for f in rule_findings(row, "arguments.schema")] == [f"{where}.xs[{i}]" for i in range(10)]


def test_counting_the_errors_past_the_cap_takes_no_longer_than_one_pattern_may(monkeypatch):
    """A pattern may take up to PATTERN_SECONDS on each value: counting 1,000 values that each fail within that
    limit took up to 1,000 times it per call (200 values "aaaaaaaaaaaaaaaaaab" against ^(a|a)*$: 17 s, where the 10
    reported took 1 s). Counting stops once it has taken as long as the reported ones may, and says "at least"."""
    from tooluse_datasets.validation import schemas

    searched = []

    def slow_miss(pattern, text):
        searched.append(text)
        time.sleep(schemas.PATTERN_SECONDS / 2)
        return False

    monkeypatch.setattr(schemas, "_search", slow_miss)
    compiled = compile_parameters({"type": "object", "properties": {
        "xs": {"type": "array", "items": {"type": "string", "pattern": "^b"}}}})
    found = list(argument_errors(compiled, {"xs": ["a"] * 60}))
    assert [path for path, _, _ in found] == [f"xs[{i}]" for i in range(10)] + [""]
    assert re.fullmatch(r"and at least \d+ more errors? in these arguments \(not reported: at most 10 per call\)",
                        found[-1][1]), found[-1]
    assert len(searched) < 50     # 10 reported, then about 20 counted in COUNTING_SECONDS


@pytest.mark.parametrize("draft", ["https://json-schema.org/draft/2019-09/schema",
                                   "https://json-schema.org/draft/2020-12/schema"])
def test_unevaluated_properties_says_what_other_keys_are_taken_like_additional_properties(samples, draft):
    """In 2019-09 and later, `unevaluatedProperties` decides the keys `properties` does not declare: `false`
    makes them an error (and only that), `true` or a schema declares they are taken (no warning)."""
    row = base(samples, SWIFT)
    parameters = row["tools"][0]["function"]["parameters"]
    parameters["$schema"] = draft
    _undeclared(row)                                                   # invented=1 on the first call
    where = "messages[2].tool_calls[0].function.arguments"

    def found():
        return [(f.rule, f.field) for f in check_row(row) if f.rule.startswith("arguments.")]

    assert found() == [("arguments.undeclared_key", f"{where}.invented")]          # left unset: a warning
    parameters["unevaluatedProperties"] = False
    assert found() == [("arguments.schema", where)]
    for taken in (True, {"type": "integer"}):
        parameters["unevaluatedProperties"] = taken
        assert found() == []
    parameters["unevaluatedProperties"] = {"type": "string"}
    assert found() == [("arguments.schema", where)]                    # the message names the key
    # draft-07 has no such keyword: it is ignored there, so the key is still undeclared
    parameters.update({"$schema": "http://json-schema.org/draft-07/schema#", "unevaluatedProperties": False})
    assert found() == [("arguments.undeclared_key", f"{where}.invented")]


@pytest.mark.parametrize("keyword", ["allOf", "anyOf", "oneOf", "if", "$ref"])
def test_a_parameter_declared_in_a_subschema_the_arguments_must_match_is_declared(samples, keyword):
    """A tool may declare some parameters in subschemas applied to the arguments themselves (``oneOf``
    alternatives, an ``if``/``then``, a shared definition an ``allOf`` refers to): those are parameters it reads,
    not invented ones. Only a key no such subschema declares is ``arguments.undeclared_key``."""
    row = base(samples, SWIFT)
    parameters = row["tools"][0]["function"]["parameters"]
    quote = parameters["properties"].pop("quote")
    parameters["required"] = ["base"]
    branch = {"properties": {"quote": quote}}
    if keyword == "if":
        parameters.update({"if": {"required": ["base"]}, "then": branch})
    elif keyword == "$ref":
        parameters.update({"definitions": {"currency~pair": branch}, "allOf": [{"$ref": "#/definitions/currency~0pair"}]})
    else:
        parameters[keyword] = [branch] if keyword != "oneOf" else [branch, {"required": ["amount"]}]
    assert [(f.rule, f.field) for f in check_row(row) if f.rule.startswith("arguments.")] == []
    _undeclared(row)                                                   # invented=1 on the first call
    assert [(f.rule, f.field) for f in check_row(row) if f.rule.startswith("arguments.")] == [
        ("arguments.undeclared_key", "messages[2].tool_calls[0].function.arguments.invented")]


@pytest.mark.parametrize("draft", ["http://json-schema.org/draft-07/schema#",
                                   "https://json-schema.org/draft/2020-12/schema"])
def test_a_schema_that_is_a_reference_to_its_own_definition_declares_what_the_definition_lists(samples, draft):
    """zod-to-json-schema writes a named schema as ``{"$ref": "#/definitions/Args", "definitions": {"Args": ...}}``:
    the parameters are those the definition lists. Its root listing no ``properties`` of its own, an invented key
    was never reported."""
    row = base(samples, SWIFT)
    function = row["tools"][0]["function"]
    args = function["parameters"]
    function["parameters"] = {"$schema": draft, "$ref": "#/definitions/get~1rate",
                              "definitions": {"get/rate": {"$ref": "#/definitions/args"}, "args": args}}
    where = "messages[2].tool_calls[0].function.arguments"

    def found():
        return [(f.rule, f.field) for f in check_row(row) if f.rule.startswith(("tool.", "arguments."))]

    assert found() == []
    _undeclared(row)                                                   # invented=1 on the first call
    assert found() == [("arguments.undeclared_key", f"{where}.invented")]
    args["additionalProperties"] = False                               # the definition refuses it: an error only
    assert found() == [("arguments.schema", where)]
    args["additionalProperties"] = True                                # the definition takes other keys
    assert found() == []


def test_undeclared_keys_follow_each_reference_once():
    """A schema whose references loop in place (tool.invalid_schema) still ends the walk for declared keys."""
    looping = {"type": "object", "properties": {"city": {}}, "allOf": [{"$ref": "#/definitions/a"}],
               "definitions": {"a": {"properties": {"units": {}}, "allOf": [{"$ref": "#"}]}}}
    assert undeclared_keys(looping, {"city": "Oslo", "units": "C", "days": 3}) == ["days"]
    # a reference that is no pointer into the schema, or points nowhere, declares nothing
    for reference in ("#units", "other.json#/definitions/a", "#/definitions/nowhere"):
        schema = {**looping, "allOf": [{"$ref": reference}]}
        assert undeclared_keys(schema, {"city": "Oslo", "units": "C"}) == ["units"]


@pytest.mark.parametrize("where", ["top level", "allOf branch"])
def test_a_broken_pattern_properties_is_the_schemas_finding_not_a_row_that_could_not_be_checked(samples, where):
    """``patternProperties: 5`` made arguments.undeclared_key fail on the row ("the row could not be checked
    (TypeError: 'int' object is not iterable)"); the schema's own finding says what is wrong."""
    row = base(samples, SWIFT)
    parameters = row["tools"][0]["function"]["parameters"]
    if where == "top level":
        parameters["patternProperties"] = 5
    else:
        parameters["allOf"] = [{"patternProperties": 5}]
    findings = check_row(row)
    assert not [f for f in findings if "could not be checked" in f.message]
    assert any(f.rule == "tool.invalid_schema" for f in findings)


def test_arguments_to_a_tool_without_parameters_are_undeclared_as_the_readers_make_it(samples):
    """A tool without `parameters` takes none: the readers write it as `{"type": "object", "properties": {}}`,
    whose calls' keys are undeclared. A row built without the key gave no finding at all for the same calls."""
    def undeclared(parameters):
        row = base(samples, SWIFT)
        function = row["tools"][0]["function"]
        function.pop("parameters")
        if parameters is not None:
            function["parameters"] = parameters
        return [(f.field, f.message) for f in rule_findings(row, "arguments.undeclared_key")]

    as_read = undeclared({"type": "object", "properties": {}})
    assert as_read == [(f"messages[2].tool_calls[{i}].function.arguments.{key}",
                        f'get_exchange_rate declares no parameter "{key}"') for i in (0, 1) for key in ("base", "quote")]
    assert undeclared(None) == as_read
    assert ms_swift_tool_without_parameters() == {"type": "object", "properties": {}}


def ms_swift_tool_without_parameters() -> dict:
    """What the ms-swift reader makes of a tool given without parameters."""
    from tooluse_datasets.builders.ms_swift.parsing import parse_tool

    return parse_tool({"name": "now", "description": "The time"}, "tools[0]")["function"]["parameters"]


def test_one_compiled_validator_per_distinct_schema():
    a = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
    b = {"required": ["x"], "properties": {"x": {"type": "integer"}}, "type": "object"}  # same, other key order
    assert compile_parameters(a) is compile_parameters(copy.deepcopy(a)) is compile_parameters(b)
    assert compile_parameters(a).validator is not None


def test_a_row_changed_after_it_is_checked_leaves_the_compiled_schema_as_it_was(samples):
    """The compiled validator kept the first row's own ``parameters`` object: a caller changing that row after
    checking it (a template reused for the next row) changed the schema applied to every later row with the
    original schema ("cannot be applied (UnknownType: Unknown type 'text' ...)" on a valid row)."""
    first = base(samples, SWIFT)
    assert [f for f in check_row(first) if f.rule.startswith(("tool.", "arguments."))] == []
    first["tools"][0]["function"]["parameters"]["properties"]["base"]["type"] = "text"
    later = base(samples, SWIFT)
    assert [f for f in check_row(later) if f.rule.startswith(("tool.", "arguments."))] == []
    _calls(later)[0]["function"]["arguments"].pop("quote")
    assert [(f.rule, f.field, f.message) for f in check_row(later) if f.rule.startswith(("tool.", "arguments."))] == [
        ("arguments.schema", "messages[2].tool_calls[0].function.arguments",
         'get_exchange_rate: "quote" is a required property')]


def test_a_broken_schema_of_a_tool_the_row_never_calls_is_an_error_of_the_row():
    """The catalog is shown to the model whether or not a tool is called: a real NESTFUL row whose catalog holds a
    tool with an invalid schema it never calls fails tool.invalid_schema, and load(validate="error") drops it
    naming the tool; a selection of the call rules keeps it (its calls are checked and pass)."""
    path = str(shared_data(*NESTFUL_TOY))
    broken = "nestful/code/266ec704-de4a-42a9-b0fe-5bded7b4ed40"
    rows = {row["id"]: row for row in td.load("nestful", data_files=path, split="train", streaming=True)}
    row = rows[broken]
    assert row["tools"][17]["function"]["name"] == "create_dict_from_list_pairs"
    assert "create_dict_from_list_pairs" not in {c["function"]["name"] for c in _calls(row)}
    assert [(f.rule, f.field) for f in check_row(row) if get_rule(f.rule).severity == "error"] == [
        ("tool.invalid_schema", "tools[17].function.parameters")]
    report = td.SkipReport()
    kept = [r["id"] for r in td.load("nestful", data_files=path, split="train", streaming=True, validate="error",
                                     on_error="skip", report=report)]
    assert broken not in kept and len(kept) == len(rows) - 1
    assert [(e["row_id"], e["field"]) for e in report.to_dict()["examples"]] == [
        (broken, "tools[17].function.parameters")]
    kept = [r["id"] for r in td.load("nestful", data_files=path, split="train", streaming=True,
                                     validate="arguments.*,call.*", on_error="skip")]
    assert broken in kept


def test_schemas_that_cannot_be_applied_are_findings_not_crashes(samples):
    row = base(samples, SWIFT)
    row["tools"][0]["function"]["parameters"] = {"type": "object", "properties": {
        "base": {"$ref": "https://example.com/currency.json"}}}   # never fetched
    found = rule_findings(row, "arguments.schema")
    assert found and "cannot be applied" in found[0].message
    row = base(samples, SWIFT)
    row["tools"][0]["function"]["parameters"] = ["base", "quote"]
    assert "got array" in rule_findings(row, "tool.invalid_schema")[0].message
    assert rule_findings(row, "arguments.schema") == []    # said once, by tool.invalid_schema
    # a second tool of the same name with a broken schema: it was reported only as tool.duplicate_name
    row = base(samples, SWIFT)
    twin = copy.deepcopy(row["tools"][0])
    twin["function"]["parameters"] = {"type": "object", "properties": {"base": {"type": "currency"}}}
    row["tools"].append(twin)
    assert [f.field for f in rule_findings(row, "tool.invalid_schema")] == [f"tools[{len(row['tools']) - 1}].function.parameters"]
    assert rule_findings(row, "tool.duplicate_name")
    # a $schema that is not a string: jsonschema's AttributeError text was the finding's message
    for draft, kind in ((5, "number"), (None, "null"), (["draft-07"], "array")):
        row = base(samples, SWIFT)
        row["tools"][0]["function"]["parameters"]["$schema"] = draft
        found = rule_findings(row, "tool.invalid_schema")
        assert len(found) == 1 and found[0].message.endswith(f"$schema must be a string naming a JSON Schema "
                                                              f"draft, got {kind}"), found
        assert rule_findings(row, "arguments.schema") == []


@pytest.mark.parametrize("named", ["http://json-schema.org/draft-08/schema#",      # a draft that never was
                                   "https://json-schema.org/draft/2030-01/schema",  # a future one
                                   "http://json-schema.org/schema#",                # "the latest", long deprecated
                                   "draft-07", ""])
def test_a_schema_naming_no_known_draft_is_checked_as_draft_07_and_says_so(samples, named):
    """jsonschema checks a schema whose ``$schema`` it does not know as the default draft without a word; the
    user learns it once per tool (not per call), with the draft used instead."""
    row = base(samples, SWIFT)
    parameters = row["tools"][0]["function"]["parameters"]
    parameters.update({"$schema": named, "unevaluatedProperties": False})   # a 2019-09 keyword: ignored
    _undeclared(row)                                                           # invented=1 on the first call
    found = [(f.rule, f.field, f.message) for f in check_row(row) if f.rule.startswith(("tool.", "arguments."))]
    assert found == [
        ("tool.unknown_dialect", "tools[0].function.parameters.$schema",
         f"$schema {json.dumps(named)} names no JSON Schema draft known here (draft-03, draft-04, draft-06, draft-07, "
         "2019-09, 2020-12): checked as draft-07"),
        ("arguments.undeclared_key", "messages[2].tool_calls[0].function.arguments.invented",
         'get_exchange_rate declares no parameter "invented"')]
    # one finding per tool that names it
    row["tools"].append(copy.deepcopy(row["tools"][0]))
    row["tools"][1]["function"]["name"] = "get_rate"
    assert [f.field for f in rule_findings(row, "tool.unknown_dialect")] == [
        "tools[0].function.parameters.$schema", "tools[1].function.parameters.$schema"]


@pytest.mark.parametrize("named, draft", [
    ("http://json-schema.org/draft-04/schema#", None), ("http://json-schema.org/draft-07/schema", None),
    ("https://json-schema.org/draft-07/schema#", None),
    ("https://json-schema.org/draft/2020-12/schema", "2020-12"),
    # a known draft under the other scheme names it: it was checked as draft-07, its keywords ignored
    ("http://json-schema.org/draft/2019-09/schema", "2019-09"),
    ("http://json-schema.org/draft/2020-12/schema#", "2020-12")])
def test_a_schema_naming_a_known_draft_is_checked_by_it(samples, named, draft):
    row = base(samples, SWIFT)
    parameters = row["tools"][0]["function"]["parameters"]
    parameters.update({"$schema": named, "unevaluatedProperties": False})
    _undeclared(row)
    assert rule_findings(row, "tool.unknown_dialect") == []
    found = [f.rule for f in check_row(row) if f.rule.startswith(("tool.", "arguments."))]
    # 2019-09 and later refuse the invented key; the others ignore unevaluatedProperties and warn of the key
    assert found == (["arguments.schema"] if draft else ["arguments.undeclared_key"])


@pytest.mark.parametrize("parameters", [
    {"type": "object", "properties": {"base": {"$ref": "https://example.com/currency.json"}}},
    # a relative reference against a remote base URI reaches the network too
    {"$id": "https://example.com/tools/rates.json", "type": "object", "properties": {"base": {"$ref": "currency.json"}}},
])
def test_a_ref_outside_the_schema_is_never_fetched(samples, monkeypatch, parameters):
    """Schemas come with the data: a `$ref` to a URL must not make validation download it (jsonschema's default
    registry does, with urllib)."""
    import urllib.request

    fetched = []

    def urlopen(request, *args, **kwargs):
        fetched.append(getattr(request, "full_url", request))
        raise OSError("offline")

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    row = base(samples, SWIFT)
    row["tools"][0]["function"]["parameters"] = parameters
    found = rule_findings(row, "arguments.schema")
    assert fetched == []
    assert [f.field for f in found] == ["messages[2].tool_calls[0].function.arguments",
                                        "messages[2].tool_calls[1].function.arguments"]
    # said in the user's terms: the reference and why it cannot be followed, not jsonschema's wrapper class
    # ("_WrappedReferencingError: Unresolvable: ...")
    reference = "https://example.com/currency.json" if "$id" not in parameters else "currency.json"
    assert {f.message for f in found} == {f"get_exchange_rate: the tool's schema cannot be applied: $ref "
                                          f"{json.dumps(reference)} names another document, which is never fetched (Unresolvable)"}
    # references inside the schema still resolve
    row["tools"][0]["function"]["parameters"] = {
        "type": "object", "definitions": {"code": {"type": "string", "minLength": 3}},
        "properties": {"base": {"$ref": "#/definitions/code"}, "quote": {"$ref": "#/definitions/code"}}}
    _calls(row)[0]["function"]["arguments"].update(base="US")
    assert [f.field for f in rule_findings(row, "arguments.schema")] == [
        "messages[2].tool_calls[0].function.arguments.base"]
    assert fetched == []


def _with_references(row, **changes) -> dict:
    """The row's first tool's parameters, updated with `changes`."""
    parameters = row["tools"][0]["function"]["parameters"]
    parameters.update(changes)
    return parameters


_DRAFT_2020 = "https://json-schema.org/draft/2020-12/schema"
# Schemas whose own references jsonschema can never apply: it raises (RecursionError, PointerToNowhere) on
# every call that reaches them, which blamed each call's arguments instead of the tool.
_BROKEN_REFERENCES = {
    "the root refers to itself": {"$ref": "#"},
    "allOf applies the root to itself": {"allOf": [{"$ref": "#"}]},
    "a $defs entry refers to itself": {
        "$schema": _DRAFT_2020, "$defs": {"currency": {"$ref": "#/$defs/currency"}},
        "properties": {"base": {"$ref": "#/$defs/currency"}, "quote": {"type": "string"}}},
    "two definitions alias each other": {
        "definitions": {"code": {"$ref": "#/definitions/currency"}, "currency": {"$ref": "#/definitions/code"}},
        "properties": {"base": {"$ref": "#/definitions/code"}, "quote": {"type": "string"}}},
    "anyOf falls back to itself": {
        "definitions": {"code": {"anyOf": [{"type": "string", "pattern": "^[a-z]{3}$"},
                                           {"$ref": "#/definitions/code"}]}},
        "properties": {"base": {"$ref": "#/definitions/code"}, "quote": {"type": "string"}}},
    "a pointer into nothing": {"properties": {"base": {"$ref": "#/definitions/currency"}, "quote": {"type": "string"}}},
    # a pointer to a value that is no schema (AttributeError / TypeError on every call that reaches it)
    "a pointer to a description": {"properties": {"base": {"$ref": "#/properties/quote/description"},
                                                  "quote": {"type": "string", "description": "ISO 4217 code"}}},
    "a pointer to the required list": {"properties": {"base": {"$ref": "#/required"}, "quote": {"type": "string"}},
                                       "required": ["base", "quote"]},
    "a pointer to a number": {"$schema": _DRAFT_2020, "properties": {
        "base": {"$ref": "#/properties/quote/maxLength"}, "quote": {"type": "string", "maxLength": 3}}},
}


@pytest.mark.parametrize("case", list(_BROKEN_REFERENCES))
def test_a_schema_whose_references_never_resolve_or_loop_is_one_invalid_schema_finding(samples, case):
    """A `$ref` that loops without descending into the value, or that points nowhere in the schema, breaks
    the tool, not its calls: one tool.invalid_schema naming the tool, and no arguments.schema on each call
    (it was "the tool's schema cannot be applied (RecursionError ...)" once per call)."""
    from jsonschema.validators import validator_for
    from referencing import Registry

    row = base(samples, SWIFT)
    parameters = _with_references(row, **_BROKEN_REFERENCES[case])
    arguments = _calls(row)[0]["function"]["arguments"]
    with pytest.raises(Exception):  # what jsonschema itself does with it: it cannot apply it
        list(validator_for(parameters)(parameters, registry=Registry()).iter_errors(arguments))
    found = rule_findings(row, "tool.invalid_schema")
    assert [f.field for f in found] == ["tools[0].function.parameters"], found
    assert "$ref" in found[0].message
    wording = {"a pointer into nothing": "points to nothing (no value at that JSON pointer)",
               "a pointer to a description": "points to a JSON string, not a schema",
               "a pointer to the required list": "points to a JSON array, not a schema"}.get(case)
    assert wording is None or wording in found[0].message, found[0].message
    assert [f for f in check_row(row) if f.rule.startswith("arguments.")] == []


_DRAFT_2019 = "https://json-schema.org/draft/2019-09/schema"
# Loops and dangling references through the dynamic scope: jsonschema raises on every call that reaches them.
_BROKEN_DYNAMIC_REFERENCES = {
    "the root applies its own dynamic anchor": (
        {"$schema": _DRAFT_2020, "$dynamicAnchor": "rate", "allOf": [{"$dynamicRef": "#rate"}]},
        '$dynamicRef "#rate" loops'),
    "the root applies itself by $recursiveRef": (
        {"$schema": _DRAFT_2019, "$recursiveAnchor": True, "anyOf": [{"$recursiveRef": "#"}]},
        '$recursiveRef "#" loops'),
    "a definition applies its own dynamic anchor": (
        {"$schema": _DRAFT_2020, "$defs": {"code": {"$dynamicAnchor": "code", "$dynamicRef": "#code"}},
         "properties": {"base": {"$ref": "#/$defs/code"}, "quote": {"type": "string"}}},
        '$dynamicRef "#code" loops'),
    "a dynamic anchor that is nowhere": (
        {"$schema": _DRAFT_2020, "properties": {"base": {"$dynamicRef": "#code"}, "quote": {"type": "string"}}},
        '$dynamicRef "#code" points to nothing'),
}


@pytest.mark.parametrize("case", list(_BROKEN_DYNAMIC_REFERENCES))
def test_a_dynamic_reference_that_loops_or_points_nowhere_is_one_invalid_schema_finding(samples, case):
    """As for `$ref`: a `$dynamicRef`/`$recursiveRef` loop that never descends, or one to no anchor, was "the
    tool's schema cannot be applied (RecursionError ...)" on every call; it is the tool's one finding."""
    from jsonschema.validators import validator_for
    from referencing import Registry

    row = base(samples, SWIFT)
    changes, message = _BROKEN_DYNAMIC_REFERENCES[case]
    parameters = _with_references(row, **changes)
    with pytest.raises(Exception):  # what jsonschema itself does with it
        list(validator_for(parameters)(parameters, registry=Registry()).iter_errors(_calls(row)[0]["function"]["arguments"]))
    found = rule_findings(row, "tool.invalid_schema")
    assert [f.field for f in found] == ["tools[0].function.parameters"] and message in found[0].message, found
    assert [f for f in check_row(row) if f.rule.startswith("arguments.")] == []


def test_a_dynamic_reference_resolved_by_an_outer_scope_that_descends_is_valid(samples):
    """A definition whose `$dynamicRef` would apply itself again, were it alone, resolves to the root when a
    property refers to it (the root is then in the dynamic scope), and the root descends: valid, and checked as
    jsonschema checks it."""
    from jsonschema.validators import validator_for
    from referencing import Registry

    row = base(samples, SWIFT)
    inverse = {"$id": "https://example.com/inverse", "$dynamicAnchor": "rate", "allOf": [{"$dynamicRef": "#rate"}]}
    parameters = _with_references(row, **{"$schema": _DRAFT_2020, "$id": "https://example.com/rate",
                                          "$dynamicAnchor": "rate", "$defs": {"inverse": inverse}})
    parameters["properties"]["inverse"] = {"$ref": "inverse"}
    stock = validator_for(parameters)(parameters, registry=Registry())
    for call in _calls(row):
        call["function"]["arguments"]["inverse"] = {"base": "EUR", "quote": "USD"}
        assert stock.is_valid(call["function"]["arguments"])
    assert [f for f in check_row(row) if f.rule.startswith(("tool.", "arguments."))] == []
    _calls(row)[0]["function"]["arguments"]["inverse"]["base"] = 5
    assert not stock.is_valid(_calls(row)[0]["function"]["arguments"])
    assert [f.field for f in rule_findings(row, "arguments.schema")] == [
        "messages[2].tool_calls[0].function.arguments.inverse.base"]


def test_a_loop_in_an_unused_definition_is_an_invalid_schema_too(samples):
    """Like any other broken part of a schema (the metaschema check covers unused definitions too), a looping
    definition no property refers to yet makes the schema invalid."""
    row = base(samples, SWIFT)
    _with_references(row, definitions={"code": {"$ref": "#/definitions/code"}})
    assert [f.field for f in rule_findings(row, "tool.invalid_schema")] == ["tools[0].function.parameters"]


def test_a_reference_walk_that_fails_leaves_the_schema_to_its_calls(samples, monkeypatch):
    """The walk reads jsonschema internals; should it fail (a jsonschema that changed them), the tool is not
    declared broken: its calls are checked as before, each saying what it meets."""
    from tooluse_datasets.validation import schemas

    def walk_fails(validator):
        raise AttributeError("'Draft7Validator' object has no attribute '_resolver'")

    monkeypatch.setattr(schemas, "reference_problem", walk_fails)
    monkeypatch.setattr(schemas, "_cache", {})
    row = base(samples, SWIFT)
    _with_references(row, definitions={"iso": {"type": "string"}}, properties={
        "base": {"$ref": "#/definitions/iso"}, "quote": {"type": "string"}})
    assert rule_findings(row, "tool.invalid_schema") == []
    _calls(row)[0]["function"]["arguments"]["base"] = 5
    assert [f.field for f in rule_findings(row, "arguments.schema")] == [
        "messages[2].tool_calls[0].function.arguments.base"]


_RECURSIVE_BUT_VALID = {
    # a tree: children are nodes, each level one deeper in the arguments
    "a tree node": ({"$schema": _DRAFT_2020,
                     "properties": {"base": {"type": "string"}, "quote": {"$ref": "#/$defs/node"}},
                     "$defs": {"node": {"type": "object", "properties": {
                         "code": {"type": "string"},
                         "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}}},
                    {"code": "EUR", "children": [{"code": "JPY", "children": [{"code": "GBP"}]}]},
                    {"code": "EUR", "children": [{"code": "JPY", "children": [{"code": 5}]}]},
                    "quote.children[0].children[0].code"),
    # {"$ref": "#"} under properties: the root again, one level down
    "the root under a property": ({"properties": {"base": {"type": "string"}, "quote": {"$ref": "#"}},
                                   "required": ["base"]},
                                  {"base": "EUR", "quote": {"base": "JPY", "quote": {"base": "GBP"}}},
                                  {"base": 5}, "quote.base"),
    # draft-07 ignores a $ref's siblings: the allOf that would loop is never applied
    "a loop beside a draft-07 $ref": ({"definitions": {"code": {"$ref": "#/definitions/iso", "allOf": [
        {"$ref": "#/definitions/code"}]}, "iso": {"type": "string"}},
        "properties": {"base": {"type": "string"}, "quote": {"$ref": "#/definitions/code"}}}, "EUR", 5, "quote"),
    # a plain-name fragment declared by a draft-07 $id
    "a $id anchor": ({"definitions": {"iso": {"$id": "#iso", "type": "string"}},
                      "properties": {"base": {"type": "string"}, "quote": {"$ref": "#iso"}}}, "EUR", 5, "quote"),
}


@pytest.mark.parametrize("case", list(_RECURSIVE_BUT_VALID))
def test_recursive_schemas_that_descend_keep_checking_calls(samples, case):
    row = base(samples, SWIFT)
    changes, good, bad, wrong = _RECURSIVE_BUT_VALID[case]
    _with_references(row, **changes)
    for call in _calls(row):
        call["function"]["arguments"]["quote"] = good
    assert rule_findings(row, "tool.invalid_schema") == []
    assert rule_findings(row, "arguments.schema") == []
    _calls(row)[0]["function"]["arguments"]["quote"] = bad
    assert [f.field for f in rule_findings(row, "arguments.schema")] == [
        f"messages[2].tool_calls[0].function.arguments.{wrong}"]


@pytest.mark.parametrize("draft", ["http://json-schema.org/draft-07/schema#", _DRAFT_2020])
def test_a_schema_reached_again_through_a_reference_keeps_the_bounded_keywords(samples, draft):
    """A schema naming its draft in ``$schema`` and recursing with ``{"$ref": "#"}``: one level down, jsonschema
    made the root's validator anew from its ``$schema``, the stock one, so patterns ran there in ``re``
    without a time limit (``\\p{Lu}`` failed to compile: "cannot be applied") and ``multipleOf`` divided
    doubles (19.99 is a multiple of 0.01)."""
    row = base(samples, SWIFT)
    parameters = row["tools"][0]["function"]["parameters"]
    parameters["$schema"] = draft
    parameters["properties"]["base"]["pattern"] = r"^\p{Lu}{3}$"
    parameters["properties"].update(amount={"type": "number", "multipleOf": 0.01}, inverse={"$ref": "#"})
    for call in _calls(row):
        call["function"]["arguments"].update(amount=19.99, inverse={"base": "EUR", "quote": "USD", "amount": 19.99,
                                                                    "inverse": {"base": "USD", "quote": "EUR"}})
    assert [f for f in check_row(row) if f.rule.startswith(("tool.", "arguments."))] == []
    _calls(row)[0]["function"]["arguments"]["inverse"]["inverse"].update(base="usd", amount=19.999)
    assert sorted((f.field, f.message) for f in rule_findings(row, "arguments.schema")) == [
        ("messages[2].tool_calls[0].function.arguments.inverse.inverse.amount",
         "get_exchange_rate: 19.999 is not a multiple of 0.01"),
        ("messages[2].tool_calls[0].function.arguments.inverse.inverse.base",
         'get_exchange_rate: "usd" does not match "^\\\\p{Lu}{3}$"')]


def _dynamic_scope_schema(draft: str) -> dict:
    """The get_exchange_rate tool extended as JSON Schema extends recursive schemas: ``quote`` holds a nested
    rate, checked by whichever schema is outermost in the dynamic scope (the root, which declares ``base``), not
    by the resource the reference is written in (``pair``, which declares only ``quote``)."""
    if draft == "2019-09":
        anchor, reference = {"$recursiveAnchor": True}, {"$recursiveRef": "#"}
        uri = "https://json-schema.org/draft/2019-09/schema"
    else:
        anchor, reference = {"$dynamicAnchor": "rate"}, {"$dynamicRef": "#rate"}
        uri = _DRAFT_2020
    pair = {"$id": "https://example.com/pair", **anchor,
            "properties": {"quote": {**reference, "unevaluatedProperties": False}}}
    return {"$schema": uri, "$id": "https://example.com/rate", **anchor, "type": "object",
            "properties": {"base": {"type": "string"}, "quote": True}, "required": ["base"],
            "allOf": [{"$ref": "pair"}], "$defs": {"pair": pair}}


@pytest.mark.parametrize("draft", ["2019-09", "2020-12"])
def test_dynamic_scope_references_are_resolved_as_jsonschema_resolves_them(samples, draft):
    """``unevaluatedProperties`` after a ``$recursiveRef`` (2019-09) looked the reference up as the plain
    ``"#"`` of its own resource: the nested rate's ``base``, declared by the outermost schema, was called
    unevaluated (a false arguments.schema that jsonschema itself does not report)."""
    from jsonschema.validators import validator_for
    from referencing import Registry

    row = base(samples, SWIFT)
    parameters = row["tools"][0]["function"]["parameters"] = _dynamic_scope_schema(draft)
    stock = validator_for(parameters)(parameters, registry=Registry())
    for call in _calls(row):
        call["function"]["arguments"].update(base="USD", quote={"base": "EUR"})
    arguments = _calls(row)[0]["function"]["arguments"]
    assert stock.is_valid(arguments)
    assert [f for f in check_row(row) if f.rule.startswith(("tool.", "arguments."))] == []
    arguments["quote"] = {"base": "EUR", "bse": "JPY"}
    assert not stock.is_valid(arguments)
    found = rule_findings(row, "arguments.schema")
    assert [f.field for f in found] == ["messages[2].tool_calls[0].function.arguments.quote"]
    assert '"bse" was unexpected' in found[0].message


def test_a_dynamic_scope_schema_is_compiled_once_for_all_its_calls(samples, monkeypatch):
    """Validators are compiled per distinct schema, not per call: 200 calls over two schemas, two compilations
    (resolving ``$recursiveRef``/``$dynamicRef`` happens per call, inside jsonschema)."""
    from tooluse_datasets.validation import schemas

    compiled = []
    compile_once = schemas._compile
    monkeypatch.setattr(schemas, "_compile", lambda *a, **k: compiled.append(1) or compile_once(*a, **k))
    monkeypatch.setattr(schemas, "_cache", {})
    for draft in ("2019-09", "2020-12"):
        for i in range(50):  # 50 rows of two calls, each row with its own copy of the schema
            row = base(samples, SWIFT)
            row["tools"][0]["function"]["parameters"] = _dynamic_scope_schema(draft)
            for call in _calls(row):
                call["function"]["arguments"].update(base="USD", quote={"base": "EUR", "quote": {"base": str(i)}})
            check_row(row)
    assert len(compiled) == 2


def test_a_pattern_that_backtracks_leaves_its_value_unchecked_instead_of_stalling(samples):
    row = base(samples, SWIFT)
    parameters = row["tools"][0]["function"]["parameters"]
    parameters["properties"]["base"]["pattern"] = "^[A-Z]{3}$"
    arguments = _calls(row)[0]["function"]["arguments"]
    arguments["base"] = "usd"
    assert "does not match" in rule_findings(row, "arguments.schema")[0].message
    arguments["base"] = "USD"
    assert rule_findings(row, "arguments.schema") == rule_findings(row, "arguments.unchecked") == []
    # (a|a)* on 'aaa...ab' takes about 2**n steps in a backtracking engine: hours at n=32. Without the time
    # limit this test would not finish.
    parameters["properties"]["base"]["pattern"] = "^(a|a)*$"
    arguments["base"] = "a" * 32 + "b"
    slow = rule_findings(row, "arguments.unchecked")
    assert len(slow) == 1 and slow[0].field.endswith("tool_calls[0].function.arguments.base")
    assert not [f for f in rule_findings(row, "arguments.schema") if f.field == slow[0].field]
    # The same pattern over keys: patternProperties, and additionalProperties weighing keys against it.
    del parameters["properties"]["base"]["pattern"]
    arguments["base"] = "USD"
    parameters["patternProperties"] = {"^(a|a)*$": {"type": "integer"}}
    parameters["additionalProperties"] = False
    arguments["a" * 32 + "b"] = 1
    slow = rule_findings(row, "arguments.unchecked")
    assert len(slow) == 2 and all("not checked" in f.message for f in slow)
    assert rule_findings(row, "arguments.schema") == []
    arguments["zz"] = 1   # a key no pattern can match, checked at once
    assert '"zz" was unexpected' in rule_findings(row, "arguments.schema")[0].message
    # With extra keys allowed, a key the pattern could not check is not called undeclared either.
    del parameters["additionalProperties"], arguments["zz"]
    assert len(rule_findings(row, "arguments.unchecked")) == 1
    assert rule_findings(row, "arguments.undeclared_key") == []


def test_unevaluated_properties_weighs_keys_against_patterns_with_the_time_limit_too(samples):
    """2019-09 and 2020-12 schemas: ``unevaluatedProperties`` decides which keys ``patternProperties``
    evaluated; a pattern that backtracks leaves its key unchecked instead of stalling (without the time limit
    this test would not finish). Draft-07 ignores the keyword, as the draft says."""
    row = base(samples, SWIFT)
    parameters = row["tools"][0]["function"]["parameters"]
    parameters["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    parameters["unevaluatedProperties"] = False
    arguments = _calls(row)[0]["function"]["arguments"]
    assert rule_findings(row, "arguments.schema") == rule_findings(row, "arguments.unchecked") == []
    arguments["a" * 32 + "b"] = 1
    assert "was unexpected" in rule_findings(row, "arguments.schema")[0].message
    parameters["patternProperties"] = {"^(a|a)*$": {"type": "integer"}}
    slow = rule_findings(row, "arguments.unchecked")
    # reported by patternProperties and by unevaluatedProperties, as additionalProperties does above
    assert len(slow) == 2 and all("not checked" in f.message for f in slow)
    assert rule_findings(row, "arguments.schema") == []
    arguments["zz"] = 1   # no pattern matches it: unevaluated, found at once
    assert '"zz" was unexpected' in rule_findings(row, "arguments.schema")[0].message
    parameters["$schema"] = "http://json-schema.org/draft-07/schema#"
    del arguments["a" * 32 + "b"]
    assert rule_findings(row, "arguments.schema") == []


@pytest.mark.parametrize("schema, arguments", [
    ({"properties": {"a": {}}}, {"a": 1, "b": 2}),
    ({"patternProperties": {"^x": {}}}, {"xa": 1, "b": 2, "c": 3}),
    ({"allOf": [{"properties": {"a": {}}}], "unevaluatedProperties": {"type": "integer"}}, {"a": "s", "b": "t", "c": 4}),
    ({"anyOf": [{"properties": {"a": {"type": "string"}}, "required": ["a"]}, {"properties": {"b": {}}}]},
     {"a": 1, "b": 2}),
    ({"if": {"properties": {"k": {"const": 1}}}, "then": {"properties": {"t": {}}},
      "else": {"properties": {"e": {}}}}, {"k": 1, "t": 1, "e": 1}),
    ({"if": {"properties": {"k": {"const": 1}}}, "then": {"properties": {"t": {}}},
      "else": {"properties": {"e": {}}}}, {"k": 2, "t": 1, "e": 1}),
    ({"$defs": {"d": {"properties": {"r": {}}}}, "$ref": "#/$defs/d"}, {"r": 1, "z": 1}),
    ({"dependentSchemas": {"a": {"properties": {"b": {}}}}}, {"a": 1, "b": 1, "c": 1}),
    ({"additionalProperties": {"type": "integer"}}, {"a": 1, "b": "x"}),
    ({"properties": {"n": {"type": "object", "properties": {"q": {}}, "unevaluatedProperties": False}}},
     {"n": {"q": 1, "w": 2}}),
])
def test_bounded_unevaluated_properties_finds_what_jsonschema_finds(schema, arguments):
    from jsonschema import Draft202012Validator

    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
              "unevaluatedProperties": False, **schema}
    expected = sorted(json_message(error) for error in Draft202012Validator(schema).iter_errors(arguments))
    assert expected  # every case breaks the schema somewhere
    assert sorted(message for _, message, _ in argument_errors(compile_parameters(schema), arguments)) == expected


def test_integers_beyond_64_bits_and_exact_floats_are_checked_as_numbers(samples):
    row = base(samples, SWIFT)
    row["tools"][0]["function"]["parameters"]["properties"]["amount"] = {"type": "integer", "maximum": 2**70}
    arguments = _calls(row)[0]["function"]["arguments"]
    arguments["amount"] = 2**70
    assert rule_findings(row, "arguments.schema") == []
    arguments["amount"] = 2**70 + 1
    assert "is greater than the maximum" in rule_findings(row, "arguments.schema")[0].message
    arguments["amount"] = 3.141592653589793
    assert 'is not of type "integer"' in rule_findings(row, "arguments.schema")[0].message


@pytest.mark.parametrize("draft", [None, "http://json-schema.org/draft-04/schema#",
                                   "https://json-schema.org/draft/2020-12/schema"])
def test_multiple_of_is_decided_on_the_decimal_values_json_holds(samples, draft):
    """19.99 is a multiple of 0.01 and 0.3 of 0.1, although the doubles divided are not; integers beyond a
    double's range are checked too, not a schema that "cannot be applied"."""
    row = base(samples, SWIFT)
    parameters = row["tools"][0]["function"]["parameters"]
    if draft:
        parameters["$schema"] = draft
    arguments = _calls(row)[0]["function"]["arguments"]
    for divisor, good, bad in [(0.01, 19.99, 19.995), (0.1, 0.3, 0.35), (1e-8, 1e-7, 1.5e-8), (0.5, 10**400, 0.25),
                               (3, 2**70 + 2, 2**70 + 1), (0.25, 2.75, 2.7)]:
        parameters["properties"]["amount"] = {"type": "number", "multipleOf": divisor}
        arguments["amount"] = good
        assert rule_findings(row, "arguments.schema") == [], (divisor, good)
        arguments["amount"] = bad
        found = rule_findings(row, "arguments.schema")
        assert len(found) == 1 and found[0].field.endswith("arguments.amount"), (divisor, bad, found)
        assert found[0].message.endswith(f"{bad!r} is not a multiple of {divisor}")


@pytest.mark.parametrize("pattern, good, bad", [
    ("^\\p{L}+$", "Zoë", "Zoë1"),                          # ECMA-262 Unicode property escape
    ("^(?<year>\\d{4})-(?<month>\\d{2})$", "2024-05", "24-05"),  # ECMA-262 named groups
])
def test_patterns_the_validating_engine_runs_are_valid_schemas(samples, pattern, good, bad):
    """A pattern is checked by the engine that runs it on arguments (``regex``): Python's ``re`` refusing
    ``\\p{L}`` or ``(?<name>...)`` does not make the tool's schema invalid."""
    row = base(samples, SWIFT)
    parameters = row["tools"][0]["function"]["parameters"]
    parameters["properties"]["base"]["pattern"] = pattern
    parameters["patternProperties"] = {pattern: {"type": "string"}}
    for call in _calls(row):   # both calls of the row are to this tool
        call["function"]["arguments"]["base"] = good
    assert rule_findings(row, "tool.invalid_schema") == []
    assert rule_findings(row, "arguments.schema") == []
    _calls(row)[0]["function"]["arguments"]["base"] = bad
    found = rule_findings(row, "arguments.schema")
    assert len(found) == 1 and "does not match" in found[0].message
    parameters["properties"]["base"]["pattern"] = "(unclosed"   # still refused
    assert 'is not a "regex"' in rule_findings(row, "tool.invalid_schema")[0].message


# --------------------------------------------------------------------------------------------------
# Rows of either shape, structural check, counter
# --------------------------------------------------------------------------------------------------


def test_rows_as_built_and_as_decoded_check_the_same(samples):
    for row_id in (NESTFUL, SWIFT, TOOLMIND):
        decoded = base(samples, row_id)
        built = td.schema.complete_row(decoded)   # every key present, as the builder writes rows
        assert check_row(built) == check_row(decoded) == []


def test_check_row_takes_a_rule_selection_as_the_counter_does(samples):
    """check_row(row, "arguments.*") failed with AttributeError "'str' object has no attribute 'id'" (it took rules
    only), where ValidationCounter("arguments.*") and filter_dataset take the selection."""
    row = base(samples, SWIFT)
    row["tools"] = []                                            # call.no_tools, a warning
    _calls(row)[0]["function"]["arguments"] = ["x"]              # arguments.not_object, an error
    for selection in ("arguments.*", ["warning"], "error,warning", True):
        expected = check_row(row, select_rules(selection))
        assert expected and check_row(row, selection) == expected
    assert {f.rule for f in check_row(row, "all")} == {f.rule for f in check_row(row)}
    # rules given as a generator: read once to tell rules from a selection, they were checked as none
    warnings = select_rules("warning")
    assert check_row(row, (r for r in warnings)) == check_row(row, warnings) != []


def test_the_counter_takes_rules_as_check_row_does(samples):
    """ValidationCounter took rules only as a list: a tuple, a set or a generator of them was refused as "a rule
    selection is a string ... got (Rule(...)", where check_row checks the row by them."""
    row = base(samples, SWIFT)
    row["tools"] = []                                            # call.no_tools, a warning
    warnings = select_rules("warning")
    for rules in (tuple(warnings), set(warnings), (r for r in warnings)):
        counter = ValidationCounter(rules)
        assert sorted(counter.rules_checked) == sorted(r.id for r in warnings)
        assert counter.check(row) == check_row(row, warnings) != []
    assert ValidationCounter(set(warnings)).rules_checked == [r.id for r in warnings]  # registry order, not the set's


@pytest.mark.parametrize("empty", ["", " , ", [""]])
def test_check_row_and_the_counter_refuse_a_selection_of_nothing_as_validate_does(samples, empty):
    """check_row(row, "") (an unset variable) ran every rule and ValidationCounter("") counted them all, where
    validate(rules=""), load(validate="") and filter_dataset(ds, "") refuse it."""
    row = base(samples, SWIFT)
    row["tools"] = []                                            # call.no_tools, a warning
    assert [f.rule for f in check_row(row)] == ["call.no_tools"]
    with pytest.raises(ValueError, match="names no rule"):
        check_row(row, empty)
    with pytest.raises(ValueError, match="names no rule"):
        ValidationCounter(empty)
    assert check_row(row, []) == [] and ValidationCounter([]).rules_checked == []  # no rules: a counter to merge into


def test_row_fields_names_the_key_of_a_call_graph_edge_that_is_wrong(samples):
    """A call_graph edge of the wrong type was reported at the edge, as "an object of strings ('consumer',
    'argument', 'producer', 'output_field')": a Python tuple, no key named, and null keys are accepted."""
    row = base(samples, NESTFUL)
    row["call_graph"][0]["producer"] = 7
    row["call_graph"].append("$var_1")
    assert [(f.field, f.message) for f in rule_findings(row, "row.fields")] == [
        ("call_graph[0].producer", "producer must be a string or null, got number"),
        (f"call_graph[{len(row['call_graph']) - 1}]", "a call_graph edge must be an object, got string")]


def test_a_row_of_the_wrong_shape_is_reported_by_row_fields_only(samples):
    row = base(samples, SWIFT)
    row["messages"][2]["tool_calls"] = "call_0"
    assert {f.rule for f in check_row(row)} == {"row.fields"}
    assert {f.rule for f in check_row(row, select_rules("arguments.*"))} == {"row.fields"}
    assert check_row(["not", "a", "row"])[0].rule == "row.fields"


def test_validate_unified_raises_the_first_structural_finding_typed(samples):
    td.validate_unified(base(samples, SWIFT))
    cases = [
        (lambda r: r.pop("tools"), MissingFieldError, "tools"),
        (lambda r: r["messages"][1].update(role="narrator"), InvalidValueError, "messages[1].role"),
        (lambda r: _calls(r)[1].update(id="call_0"), InvalidValueError, "messages[2].tool_calls[1].id"),
        (lambda r: _calls(r)[1]["function"].update(name="nope"), UnknownToolError,
         "messages[2].tool_calls[1].function.name"),
        (lambda r: r["messages"][4].update(tool_call_id="call_7"), InvalidValueError, "messages[4].tool_call_id"),
        # another call type: the schema has one, and the writers wrote it as a function call without a word
        (lambda r: _calls(r)[1].update(type="custom"), InvalidValueError, "messages[2].tool_calls[1].type"),
    ]
    for mutate, error, field in cases:
        row = base(samples, SWIFT)
        mutate(row)
        with pytest.raises(error) as err:
            td.validate_unified(row)
        assert err.value.field == field
    row = base(samples, SWIFT)
    _calls(row)[1]["function"]["name"] = "nope"
    td.validate_unified(row, require_known_tools=False)
    # content rules are not structural: writers decide about them
    row = base(samples, SWIFT)
    row["messages"][-1]["content"] = ""
    td.validate_unified(row)


@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_every_writer_names_the_field_of_a_row_a_user_broke(samples, fmt):
    """Rows handed to a writer may be built or edited by hand: a broken one is a typed error naming the field
    (the toolmind writer raised KeyError and TypeError on them)."""
    write = output_format(fmt).write
    cases = [
        (lambda r: r.pop("id"), "id"),
        (lambda r: r.update(messages="hello"), "messages"),
        (lambda r: r["messages"].__setitem__(1, "hello"), "messages[1]"),
        (lambda r: r["messages"][1].pop("role"), "messages[1].role"),
        (lambda r: r["messages"][2].update(tool_calls="call_0"), "messages[2].tool_calls"),
        (lambda r: _calls(r)[0].pop("function"), "messages[2].tool_calls[0]"),
        (lambda r: r.update(tools="get_exchange_rate"), "tools"),
        (lambda r: _calls(r)[0]["function"].pop("arguments"), "messages[2].tool_calls[0].function.arguments"),
        (lambda r: r.update(images=[1]), "images[0]"),
        # JSON values a Python row may hold: the toolmind writer rendered NaN (invalid JSON), turned 1 into
        # "1" and raised TypeError on a set
        (lambda r: _calls(r)[0]["function"].update(arguments={"x": float("nan")}),
         "messages[2].tool_calls[0].function.arguments"),
        (lambda r: _calls(r)[0]["function"].update(arguments={1: "a"}), "messages[2].tool_calls[0].function.arguments"),
        (lambda r: _calls(r)[0]["function"].update(arguments={"x": {1, 2}}),
         "messages[2].tool_calls[0].function.arguments"),
        (lambda r: _calls(r)[0]["function"].update(arguments={"x": 10**5000}),
         "messages[2].tool_calls[0].function.arguments"),
        (lambda r: r["tools"][0]["function"]["parameters"].update(default=float("inf")), "tools[0]"),
        # a lone surrogate (text decoded with surrogateescape): swift and llamafactory rows failed when written
        # out, naming no field, and toolmind wrote it escaped, as JSON its reader refuses
        (lambda r: r["messages"][1].update(content="caf\udce9"), "messages[1].content"),
        (lambda r: r["messages"][1].update(name="b\ud83d"), "messages[1].name"),
        (lambda r: r["messages"][2].update(reasoning_content="x\udfff"), "messages[2].reasoning_content"),
        (lambda r: _calls(r)[0]["function"].update(arguments={"x": "\ud800"}),
         "messages[2].tool_calls[0].function.arguments"),
        # a media path listed from a folder whose file name is no UTF-8 (os.listdir decodes it so) passed
        (lambda r: r.update(images=["photo\udce9.png"]), "images[0]"),
    ]
    for mutate, field in cases:
        row = base(samples, SWIFT)
        mutate(row)
        with pytest.raises(td.ToolUseDataError) as err:
            write(row)
        assert err.value.field == field, (fmt, field)
    with pytest.raises(MissingFieldError, match="a unified row must be an object"):
        write("not a row")
    # a recorded spelling in meta that a user broke is not used; the row is written from its values
    row = base(samples, SWIFT)
    for source in ("ms_swift", "toolmind", "llamafactory"):
        written = write({**row, "source": source, "meta": {}})
        for meta in ("note", {"ms_swift_original": 3, "llamafactory_original": [1], "content": 2, "bridges": 3},
                     {"llamafactory_original": {"conversations": {"x": 1, "1": 2}, "tools": 3},
                      "content": {str(i): i for i in range(9)}, "bridges": {str(i): [i] for i in range(9)},
                      "call_key": 4, "wrapper_padding": 5}):
            assert write({**row, "source": source, "meta": meta}) == written, (fmt, source, meta)


def test_counter_counts_rows_per_rule_with_examples_and_merges(samples):
    rows = [base(samples, SWIFT) for _ in range(5)]
    rows[1]["messages"][-1]["content"] = ""
    rows[2]["messages"][0]["role"] = "narrator"
    rows[2]["messages"][1]["role"] = "narrator"     # two findings, one row
    rows[3]["tools"] = []                           # warning only
    whole = ValidationCounter()
    for row in rows:
        whole.check(row)
    result = whole.to_dict()
    assert (result["checked"], result["failed"], result["warned"]) == (5, 2, 1)
    assert result["by_reason"] == {"grammar.empty_final_answer": 1, "message.role": 1}
    assert result["warnings"] == {"call.no_tools": 1}
    assert result["rules"]["message.role"]["findings"] == 2
    assert result["rules"]["message.role"]["examples"] == [
        {"id": SWIFT, "field": "messages[0].role", "message": 'role "narrator" is not one of '
                                                               '["system", "user", "assistant", "tool"]'}]
    # shards counted apart, merged after a trip through JSON (as from worker processes), give the same counts
    left, right = ValidationCounter(), ValidationCounter()
    for row in rows[:2]:
        left.check(row)
    for row in rows[2:]:
        right.check(row)
    merged = ValidationCounter.from_dict(json.loads(json.dumps(left.to_dict())))
    merged.merge(ValidationCounter.from_dict(json.loads(json.dumps(right.to_dict()))))
    assert merged.to_dict() == result


def test_a_counter_read_back_checks_further_rows_by_its_rules(samples):
    """A counter made by from_dict had no rules: a row it checked next was counted as checked and passing, whatever
    it broke (only row.fields ran)."""
    row = base(samples, SWIFT)
    row["tools"] = []                                            # call.no_tools, a warning
    counter = ValidationCounter("warning")
    counter.check(row)
    again = ValidationCounter.from_dict(counter.to_dict())
    assert [r.id for r in again.rules] == counter.rules_checked
    assert again.check(row) == counter.check(row) != []
    assert again.to_dict() == counter.to_dict()


def test_a_counter_merged_into_checks_further_rows_by_the_rules_merged(samples):
    """A counter merged into (a mirror's total starts as ValidationCounter([])) listed the other's rules as checked
    but checked the rows it was given next by its own alone: counted as passing."""
    row = base(samples, SWIFT)
    row["tools"] = []                                            # call.no_tools, a warning
    part = ValidationCounter("warning")
    total = ValidationCounter([]).merge(part)
    assert [r.id for r in total.rules] == total.rules_checked == part.rules_checked
    assert total.check(row) == part.check(row) != []


def test_a_counter_read_back_keeps_as_many_examples_as_it_is_told(samples):
    """from_dict(..., max_examples=1) kept every example the dict held, as many as the counter that wrote it."""
    counter = ValidationCounter("warning")
    for k in range(3):
        row = base(samples, SWIFT)
        row.update(id=f"r{k}", tools=[])                         # call.no_tools, a warning
        counter.check(row)
    assert len(counter.counts["call.no_tools"].examples) == 3
    again = ValidationCounter.from_dict(counter.to_dict(), max_examples=1)
    assert again.counts["call.no_tools"].examples == counter.counts["call.no_tools"].examples[:1]


def test_counter_examples_are_capped_per_rule(samples):
    counter = ValidationCounter(max_examples=2)
    for i in range(4):
        row = base(samples, SWIFT)
        row["id"] = f"ms_swift/x/{i}"
        row["messages"][-1]["content"] = ""
        counter.check(row)
    count = counter.counts["grammar.empty_final_answer"]
    assert count.rows == 4 and [e["id"] for e in count.examples] == ["ms_swift/x/0", "ms_swift/x/1"]


# --------------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------------


def test_registry_ids_severities_and_selection():
    rules = all_rules()
    assert len({r.id for r in rules}) == len(rules)
    assert all(r.severity in ("error", "warning") and r.description for r in rules)
    assert {r.id for r in select_rules("arguments.*")} == {"arguments.not_object", "arguments.schema",
                                                           "arguments.unchecked", "arguments.undeclared_key"}
    assert all(r.severity == "warning" for r in select_rules("warning"))
    assert [r.id for r in select_rules(None)] == [r.id for r in rules]
    assert select_rules(None, default_all=False) == []
    with pytest.raises(ValueError, match="names no validation rule"):
        select_rules("arguments.scheme")


def test_source_rules_live_in_their_folders_and_name_their_source():
    by_id = {r.id: r for r in all_rules()}
    for source in ("nestful", "ms_swift", "toolmind"):
        assert (PROJECT_ROOT / "builders" / source / "rules.py").exists()
        own = [r for r in by_id.values() if r.id.startswith(f"{source}.")]
        assert own and all(r.check.__module__ == f"tooluse_datasets.builders.{source}.rules" for r in own)
    assert by_id["nestful.undefined_reference"].sources == ("nestful",)
    assert by_id["toolmind.grammar"].sources == ("toolmind",)


def test_importing_the_package_or_loading_without_validate_imports_no_rules(tmp_path):
    """Rules (and jsonschema) load on first use: a load that validates nothing does not pay for them (it took
    60 of a first load's 100 ms)."""
    import subprocess
    import sys

    code = ("import sys, tooluse_datasets as td\n"
            "rules = lambda: sorted(m for m in sys.modules if m.endswith('.rules') or m.startswith('jsonschema'))\n"
            "print(rules())\n"
            "td.load('ms_swift', data_files=td.sample_files('ms_swift'), cache_dir=sys.argv[1] + '/a')\n"
            "print(rules())\n"
            "td.load('ms_swift', data_files=td.sample_files('ms_swift'), config='unified', validate='error',\n"
            "        cache_dir=sys.argv[1] + '/b')\n"
            "print('builders.ms_swift.rules' in ' '.join(rules()))\n")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True,
                         env={**os.environ, "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"}).stdout.split("\n")
    assert out[:3] == ["[]", "[]", "True"]


def test_readme_lists_every_rule_as_the_registry_renders_it():
    assert rules_table() in (PROJECT_ROOT / "README.md").read_text()


# --------------------------------------------------------------------------------------------------
# validate (function and CLI), stats
# --------------------------------------------------------------------------------------------------

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather now.", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


def _swift_row(arguments, tools=(WEATHER,)) -> str:
    return json.dumps({"tools": list(tools), "messages": [
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "tool_call", "content": json.dumps({"name": "get_weather", "arguments": arguments})},
        {"role": "tool_response", "content": "4 C"},
        {"role": "assistant", "content": "It is 4 C in Oslo."}]})


@pytest.fixture
def agent_file(tmp_path) -> str:
    """ms-swift agent rows: good, an argument of the wrong type, an unreadable line, calls without a tool
    catalog, and a tool without a description (fine in unified, refused by the swift writer)."""
    undocumented = {"type": "function", "function": {k: v for k, v in WEATHER["function"].items() if k != "description"}}
    lines = [_swift_row({"city": "Oslo"}), _swift_row({"city": 4}), '{"messages": [{"role": "user", "content": "cut',
             _swift_row({"city": "Oslo"}, tools=()), _swift_row({"city": "Oslo"}, tools=(undocumented,))]
    path = tmp_path / "agent.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _sample_row_count(source: str) -> int:
    splits = td.load(source, data_files=td.sample_files(source), streaming=True)
    return sum(1 for split in splits.values() for _ in split)


@pytest.mark.parametrize("source", ["nestful", "ms_swift", "toolmind", "all"])
def test_cli_json_report_on_the_bundled_sample_of_every_source(source, capsys):
    from tooluse_datasets.cli import main

    assert main(["validate", source, "--sample", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    rows = _sample_row_count(source)
    assert (report["source"], report["config"], report["failed"], report["failures"]) == (source, "unified", False, {})
    assert report["fail_on"] == ["error", "read"]
    assert report["total"]["read"]["rows_read"] == report["total"]["validation"]["checked"] == rows > 0
    assert report["total"]["validation"]["failed"] == 0 and report["total"]["read"]["skipped"] == 0
    applying = [r for r in all_rules() if source == "all" or r.sources is None or source in r.sources]
    assert set(report["rules"]) == {r.id for r in applying}
    assert all(report["rules"][r.id] == {"severity": r.severity, "description": r.description} for r in applying)
    assert sum(s["validation"]["checked"] for s in report["splits"].values()) == rows
    if source == "toolmind":
        assert len(report["splits"]) == 7


def test_cli_report_counts_rule_failures_and_read_errors_with_examples(agent_file, capsys):
    from tooluse_datasets.cli import main

    assert main(["validate", "ms_swift", "--data-files", agent_file, "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["failures"] == {"read": 1, "arguments.schema": 1}
    total = report["total"]
    assert (total["read"]["rows_read"], total["read"]["skipped"], total["validation"]["checked"]) == (5, 1, 4)
    assert total["read"]["examples"][0]["row"] == 2 and total["read"]["examples"][0]["error"] == "InvalidJsonError"
    assert total["validation"]["rules"]["arguments.schema"]["examples"] == [
        {"id": "ms_swift/agent/1", "field": "messages[1].tool_calls[0].function.arguments.city",
         "message": 'get_weather: 4 is not of type "string"'}]
    assert total["validation"]["warnings"] == {"call.no_tools": 1}
    assert main(["validate", "ms_swift", "--data-files", agent_file]) == 1
    table = capsys.readouterr().out
    assert "ms_swift (unified): 5 rows read, 1 skipped; 4 unified rows checked by" in table
    assert "ms_swift/agent/1  messages[1].tool_calls[0].function.arguments.city: get_weather: 4 is not of type" in table
    assert "InvalidJsonError:<line> x1" in table and "agent.jsonl row 2 field '<line>'" in table
    assert table.rstrip().endswith("FAILED (fail on error,read): read (1 row), arguments.schema (1 row)")


@pytest.mark.parametrize("fail_on, status", [
    ("error,read", 1), ("read", 1), ("arguments.schema", 1), ("arguments.*", 1), ("warning", 1),
    ("call.no_tools", 1), ("call.unknown_tool,grammar.*", 0), ("pairing.count", 0), ("error", 1),
])
def test_cli_fail_on_sets_the_exit_status(agent_file, fail_on, status, capsys):
    from tooluse_datasets.cli import main

    assert main(["validate", "ms_swift", "--data-files", agent_file, "--fail-on", fail_on]) == status
    out = capsys.readouterr().out
    assert ("FAILED" if status else "PASSED") in out.splitlines()[-1]


@pytest.mark.parametrize("fail_on", ["", " ", ","])
def test_an_empty_fail_on_is_a_usage_error_not_a_run_that_always_passes(agent_file, fail_on, capsys):
    """--fail-on "$FAIL_ON" with the variable unset selected nothing to fail on: the run printed "PASSED (fail
    on )" and exited 0 over rows failing arguments.schema and unreadable lines."""
    from tooluse_datasets.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["validate", "ms_swift", "--data-files", agent_file, "--fail-on", fail_on])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "argument --fail-on: expected rules to fail on" in err and "leave --fail-on out" in err


@pytest.mark.parametrize("rules", ["", " , "])
def test_an_empty_rules_argument_is_refused_not_every_rule_run(agent_file, rules, capsys):
    """--rules "$RULES" with RULES unset ran all the rules, not the ones meant."""
    from tooluse_datasets.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["validate", "ms_swift", "--data-files", agent_file, "--rules", rules])
    assert exit_.value.code == 2
    assert "argument --rules: expected rules to run" in capsys.readouterr().err


@pytest.mark.parametrize("empty", ["", " ,", []])
def test_an_empty_rule_selection_in_python_is_refused_not_a_check_of_nothing(agent_file, empty):
    """load(validate="") kept every row unchecked and validate(fail_on="") passed whatever the rows held (a
    value read from an unset variable), where the commands refuse --option validate= and an empty --fail-on."""
    with pytest.raises(ValueError, match="names no rule"):
        td.load("ms_swift", data_files=agent_file, split="train", validate=empty)
    with pytest.raises(ValueError, match="names nothing to fail on"):
        td.validate("ms_swift", data_files=agent_file, fail_on=empty)
    with pytest.raises(ValueError, match="names no rule to run"):  # (ran every rule)
        td.validate("ms_swift", data_files=agent_file, rules=empty)
    assert td.validate("ms_swift", data_files=agent_file).failed  # the default fails on its bad rows


def test_fail_on_none_is_the_default_and_false_is_refused_not_a_run_that_always_passes(agent_file):
    """fail_on=None (os.environ.get("FAIL_ON") unset) and fail_on=False failed on nothing: "PASSED (fail on )" over a
    row breaking arguments.schema and an unreadable line, where fail_on="" is refused and rules=None is the default."""
    result = td.validate("ms_swift", data_files=agent_file, fail_on=None)
    assert result.failures() == {"read": 1, "arguments.schema": 1}
    assert result.table().rstrip().endswith("FAILED (fail on error,read): read (1 row), arguments.schema (1 row)")
    with pytest.raises(ValueError, match="fail_on=False names nothing to fail on"):
        td.validate("ms_swift", data_files=agent_file, fail_on=False)
    with pytest.raises(ValueError, match="fail_on=False names nothing to fail on"):
        result.failures(False)


def test_check_row_and_the_counter_refuse_false_which_ran_every_rule(samples):
    """check_row(row, False) and ValidationCounter(False) ran every rule, where validate=False checks nothing."""
    row = base(samples, SWIFT)
    row["tools"] = []                                            # call.no_tools, a warning
    with pytest.raises(ValueError, match="rules=False names no rule"):
        check_row(row, False)
    with pytest.raises(ValueError, match="rules=False names no rule"):
        ValidationCounter(False)
    assert [f.rule for f in check_row(row, True)] == []          # True: the error rules, as validate=True
    assert [f.rule for f in check_row(row, "warning")] == ["call.no_tools"]


def test_a_result_without_id_after_the_answer_is_not_counted_for_the_call_turn_before_it(samples):
    """A result without tool_call_id after the final answer was counted for the last call turn: pairing.count said
    that turn's 2 calls had 3 results, blaming a turn whose calls are each answered; grammar.tool_after_call is the
    finding."""
    row = base(samples, SWIFT)                                   # 2 calls, each answered by id, then the answer
    row["messages"].append({"role": "tool", "content": "late"})
    assert [(f.rule, f.field) for f in check_row(row, "pairing.*,grammar.*")] == [
        ("grammar.tool_after_call", "messages[6].role")]
    row = base(samples, SWIFT)
    row["messages"].insert(4, {"role": "user", "content": "and yen?"})  # the second result after the user's turn
    del row["messages"][5]["tool_call_id"]
    assert [f.field for f in check_row(row, "pairing.count")] == ["messages[2].tool_calls"]
    row = base(samples, SWIFT)                                   # results by position (no ids) still pair
    for m in row["messages"][3:5]:
        del m["tool_call_id"]
    assert check_row(row, "pairing.count") == []


def test_a_result_after_an_answer_is_said_to_follow_an_assistant_message(samples):
    """The message read "tool result after a assistant message without calls"."""
    row = base(samples, SWIFT)
    row["messages"].append({"role": "tool", "content": "late"})
    row["messages"].insert(1, {"role": "tool", "content": "early"})
    assert [f.message for f in check_row(row, "grammar.tool_after_call")] == [
        "tool result after a system message without calls", "tool result after an assistant message without calls"]


def test_a_tool_with_an_empty_name_is_not_a_function_tool_with_a_name(samples):
    """A tool named "" passed tool.not_function (and validate_unified, so writers wrote it), where a call naming ""
    is call.fields: only call.unknown_tool said something, on the calls of the tool it was meant to be."""
    row = base(samples, SWIFT)
    row["tools"][0]["function"]["name"] = ""
    assert [(f.rule, f.field) for f in check_row(row, "tool.*")] == [("tool.not_function", "tools[0]")]
    with pytest.raises(InvalidValueError, match="not an OpenAI function tool with a name") as err:
        td.validate_unified(row)
    assert err.value.field == "tools[0]"


def test_validate_refuses_rules_false_which_ran_every_rule(agent_file):
    """validate(rules=False) ran every rule (and failed on the errors), where check_row(row, False) is refused and
    load(validate=False) checks nothing."""
    with pytest.raises(ValueError, match="rules=False names no rule to run"):
        td.validate("ms_swift", data_files=agent_file, rules=False)
    assert td.validate("ms_swift", data_files=agent_file, rules=True).failures() == {"read": 1, "arguments.schema": 1}


def test_rule_selections_given_as_generators_are_read_once_not_emptied():
    """A generator of rule ids was read when checked and again, empty, when selected: validate(rules=gen) ran every
    rule, validate(fail_on=gen) and result.failures(gen) failed on nothing, filter_dataset(ds, gen) dropped no row."""
    from tooluse_datasets.validation import filter_dataset

    files = str(shared_data(*MS_SWIFT_DOC))  # upstream rows with calls but no tool catalog: call.no_tools
    result = td.validate("ms_swift", data_files=files, rules=(r for r in ["arguments.schema"]))
    assert result.rules_checked == ["arguments.schema"]
    result = td.validate("ms_swift", data_files=files, fail_on=(r for r in ["warning"]))
    assert result.failed and result.failures() == {"call.no_tools": 4}
    assert td.validate("ms_swift", data_files=files).failures(r for r in ["warning"]) == {"call.no_tools": 4}
    ds = td.load("ms_swift", data_files=files, split="train")
    assert len(filter_dataset(ds, (r for r in ["warning"]))) == len(filter_dataset(ds, ["warning"])) == len(ds) - 4


@pytest.mark.parametrize("streaming", [False, True], ids=["map-style", "streaming"])
@pytest.mark.parametrize("make", [iter, functools.partial(map, str.strip)], ids=["iter", "map"])
def test_load_reads_a_validate_iterator_once_not_as_no_rule(make, streaming, cache_dir):
    """load(validate=iter(["warning"])) (or a map object) kept every row unchecked: only generators were read into a
    tuple, and other iterators were found empty when the rules were selected."""
    files = str(shared_data(*MS_SWIFT_DOC))  # upstream rows with calls but no tool catalog: call.no_tools
    report = td.SkipReport()
    ds = td.load("ms_swift", data_files=files, split="train", validate=make(["warning"]), on_error="skip",
                 report=report, streaming=streaming, cache_dir=cache_dir)
    assert len(list(ds)) == 3 and report.to_dict()["by_reason"] == {"RuleViolationError:call.no_tools": 4}


@pytest.mark.parametrize("max_examples", ["3", 1.5, -1, None])
def test_max_examples_of_the_wrong_kind_is_refused_before_any_row_is_read(agent_file, max_examples):
    """"3" was a bare TypeError ('<' not supported between instances of 'int' and 'str') once a rule failed, after
    the rows were read; -1 kept no example without a word."""
    with pytest.raises(ValueError, match="max_examples must be a whole number of rows, 0 or more"):
        td.validate("ms_swift", data_files=agent_file, max_examples=max_examples)
    # the counter itself, which README offers for counting rows: its TypeError came at the first failing row
    with pytest.raises(ValueError, match="max_examples must be a whole number of rows, 0 or more"):
        ValidationCounter(max_examples=max_examples)
    # and one read back from to_dict() to merge: its TypeError came at the first merge or failing row
    with pytest.raises(ValueError, match="max_examples must be a whole number of rows, 0 or more"):
        ValidationCounter.from_dict(ValidationCounter().to_dict(), max_examples=max_examples)


def test_line_breaks_in_a_row_id_or_argument_key_stay_on_their_example_line(tmp_path, capsys):
    """The table's example lines quote the row id and the field (an argument key) as they are: a NESTFUL
    sample_id or a key holding a line break printed lines of its own, one of them a forged verdict
    ("PASSED ...") above the real one."""
    from tooluse_datasets.cli import main

    row = json.loads(open(td.sample_files("nestful")["train"][0], encoding="utf-8").readline())
    forged = "PASSED (fail on error,read)"
    row["sample_id"] = f"s1\n\n{forged}\n"
    row["output"][1]["arguments"][f"other\u2028{forged}"] = 2      # a line separator: str.splitlines breaks there
    row["output"][0]["arguments"][f"invented\r\n{forged}"] = 1    # arguments.undeclared_key names it as the field
    path = tmp_path / "forged.jsonl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    assert main(["validate", "nestful", "--data-files", str(path), "--fail-on", "warning"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert not any(line.startswith(forged) for line in lines)
    example = lines[lines.index("arguments.undeclared_key, e.g.:") + 1]
    assert example.startswith(f"  nestful/other/s1\\u000a\\u000a{forged}\\u000a  messages[1].tool_calls[0].function."
                              f"arguments.invented\\u000d\\u000a{forged}: ")
    assert lines[-1].startswith("FAILED (fail on warning): arguments.undeclared_key (1 row)")
    assert main(["validate", "nestful", "--data-files", str(path), "--fail-on", "warning", "--examples", "1"]) == 1
    assert not any(line.startswith(forged) for line in capsys.readouterr().out.splitlines())
    row["output"][0]["arguments"] = {"arg_0": 12.5, "arg_1": 0.3}      # only the key with a line separator is left
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    assert main(["validate", "nestful", "--data-files", str(path), "--fail-on", "warning"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert not any(line.startswith(forged) for line in lines)
    assert f"arguments.other\\u2028{forged}: " in lines[lines.index("arguments.undeclared_key, e.g.:") + 1]


def test_cli_refuses_unknown_rules_and_stops_typed_on_read_errors_when_asked(agent_file, capsys):
    from tooluse_datasets.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["validate", "ms_swift", "--data-files", agent_file, "--fail-on", "arguments.scheme"])
    assert exit_.value.code == 2 and "names no validation rule" in capsys.readouterr().err
    assert main(["validate", "ms_swift", "--data-files", agent_file, "--on-error", "raise"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ms_swift, ") and "row 2" in err and "Traceback" not in err


def test_fail_on_naming_a_rule_that_is_not_run_is_refused_not_passed(agent_file, tmp_path, capsys):
    """--fail-on call.no_tools with --rules arguments.*: call.no_tools never runs, so the run used to pass
    (exit 0) whatever the rows held. A rule id or glob of --fail-on must be among the rules run; severities,
    'all' and 'read' select among them."""
    from tooluse_datasets.cli import main

    skipped = tmp_path / "skipped.jsonl"
    skipped.write_text("kept\n")
    assert main(["validate", "ms_swift", "--data-files", agent_file, "--rules", "arguments.*",
                 "--fail-on", "call.no_tools", "--skipped-rows", str(skipped)]) == 2
    err = capsys.readouterr().err
    assert "'call.no_tools'" in err and "rules run do not include" in err and "Traceback" not in err
    assert skipped.read_text() == "kept\n"           # refused before the run: the file is left as it was
    with pytest.raises(ValueError, match="'tool.\\*'"):
        td.validate("ms_swift", data_files=agent_file, rules="arguments.*", fail_on="arguments.schema,tool.*")
    # rules the run includes, severities, all and read are fine
    assert main(["validate", "ms_swift", "--data-files", agent_file, "--rules", "call.*",
                 "--fail-on", "call.no_tools"]) == 1
    assert main(["validate", "ms_swift", "--data-files", agent_file, "--rules", "call.no_tools",
                 "--fail-on", "error,warning,all,read"]) == 1
    assert main(["validate", "ms_swift", "--data-files", agent_file, "--rules", "grammar.*",
                 "--fail-on", "error"]) == 0


def test_rule_selections_refused_by_validate_are_named_as_the_caller_gave_them(agent_file, capsys):
    """The command printed "fail_on names ..." and "rules names ...", validate()'s keywords, for --fail-on and
    --rules; the Python call keeps its own names."""
    from tooluse_datasets.cli import main

    for args, named in ((["--rules", "arguments.*", "--fail-on", "call.no_tools"], "--fail-on"),
                        (["--rules", "toolmind.grammar"], "--rules"), (["--fail-on", "toolmind.grammar"], "--fail-on")):
        assert main(["validate", "ms_swift", "--data-files", agent_file, *args]) == 2
        assert capsys.readouterr().err.startswith(f"error: ValueError: {named} names '"), args
    with pytest.raises(ValueError, match="^fail_on names 'call.no_tools'"):
        td.validate("ms_swift", data_files=agent_file, rules="arguments.*", fail_on="call.no_tools")
    with pytest.raises(ValueError, match="^rules names 'toolmind.grammar'"):
        td.validate("ms_swift", data_files=agent_file, rules="toolmind.grammar")


def test_validate_lists_only_the_rules_that_check_the_sources_rows(agent_file, capsys):
    """A source-native rule checks its own source's rows only: ms_swift's report listed toolmind.grammar and
    nestful.undefined_reference (0 rows), counted them in "checked by N rules", and --rules or --fail-on naming
    only them ran no rule or could never fail. Now they are left out, and naming them is refused (exit 2)."""
    from tooluse_datasets.cli import main

    native = {r.id for r in all_rules() if r.sources and "ms_swift" not in r.sources}
    assert native  # toolmind.grammar, nestful.undefined_reference
    result = td.validate("ms_swift", data_files=agent_file)
    assert result.rules_checked == [r.id for r in all_rules() if r.id not in native]
    assert not native & set(result.to_dict()["rules"])
    assert f"checked by {len(result.rules_checked)} rules" in result.table()
    assert not native & {line.split()[0] for line in result.table().splitlines() if line}
    for option in ("--rules", "--fail-on"):
        assert main(["validate", "ms_swift", "--data-files", agent_file, option, "toolmind.*"]) == 2
        err = capsys.readouterr().err
        assert "'toolmind.*'" in err and "does not apply to ms_swift rows" in err and "Traceback" not in err
    mixed = td.validate("all", data_files={"ms_swift": agent_file})  # a mix of ms_swift rows only: the same rules
    assert mixed.rules_checked == result.rules_checked


def test_stats_mirror_and_load_count_only_the_rules_that_check_the_sources_rows(agent_file, tmp_path, capsys):
    """validate left other sources' own rules out; stats and the mirror's manifest still listed them as checked
    (failing no row they could never check), and load(validate="toolmind.*") of ms_swift rows dropped none of
    them, silently. Now all count the same rules, and naming only other sources' rules in validate= is refused."""
    from tooluse_datasets.cli import main
    from tooluse_datasets.mirror import MirrorRequest, build_mirror
    from tooluse_datasets.mirror.manifest import read_manifest

    native = {r.id for r in all_rules() if r.sources and "ms_swift" not in r.sources}
    expected = td.validate("ms_swift", data_files=agent_file).rules_checked
    assert native and not native & set(expected)
    assert main(["stats", "ms_swift", "--data-files", agent_file, "--on-error", "skip"]) == 0
    assert json.loads(capsys.readouterr().out)["train"]["validation"]["rules_checked"] == expected
    folder = build_mirror(MirrorRequest("ms_swift", configs=["unified"], data_files=agent_file, on_error="skip"),
                          tmp_path / "mirror")
    assert read_manifest(folder).validation["train"]["rules_checked"] == expected
    nestful = build_mirror(MirrorRequest("nestful", configs=["unified"], data_files=td.sample_files("nestful")),
                           tmp_path / "nestful")  # a source's own rules are among those its mirror counts
    assert [r for r in read_manifest(nestful).validation["train"]["rules_checked"] if r.startswith("nestful.")] \
        == ["nestful.undefined_reference"]
    with pytest.raises(ValueError, match="does not apply to ms_swift rows"):
        td.load("ms_swift", split="train", data_files=agent_file, validate="toolmind.*")

def test_python_calls_refuse_a_skipped_rows_file_that_is_a_data_file(agent_file, tmp_path):
    """The command line refused --skipped-rows naming an input; from Python, validate(skipped_rows=<the input>,
    fresh_skipped_rows=True) emptied the data file (its rows lost) and a load's report appended skipped rows to
    a file it was reading. Now both are a ValueError naming the file, also by a hard link or through data_dir."""
    original = Path(agent_file).read_bytes()
    link = tmp_path / "link.jsonl"
    os.link(agent_file, link)
    # (the data file is named apart only when the listing names it otherwise: "'a' is 'a', one of ..." said it twice)
    for listing, which in ((agent_file, ""), (str(link), f" ({agent_file!r})")):
        refused = f"skipped_rows {listing!r} is one of the data files read{which}: "
        with pytest.raises(ValueError, match=re.escape(refused)):
            td.validate("ms_swift", data_files=agent_file, skipped_rows=listing, fresh_skipped_rows=True)
    with pytest.raises(ValueError, match="one of the data files read"):
        td.load("ms_swift", split="train", data_dir=str(tmp_path), on_error="skip", streaming=True,
                report=td.SkipReport(rows_path=agent_file))
    with pytest.raises(ValueError, match="rows_path"):
        td.load("ms_swift", split="train", data_files=agent_file, on_error="skip",
                report=td.SkipReport(rows_path=agent_file))
    assert Path(agent_file).read_bytes() == original
    listed = tmp_path / "elsewhere" / "skipped.jsonl"
    listed.parent.mkdir()
    assert td.validate("ms_swift", data_files=agent_file, skipped_rows=str(listed)).total().read.skipped == 1
    assert len(listed.read_text().splitlines()) == 1


def test_validate_function_rules_selection_and_config(agent_file):
    result = td.validate("ms_swift", data_files=agent_file, rules="arguments.*")
    assert result.rules_checked == ["arguments.not_object", "arguments.schema", "arguments.unchecked",
                                    "arguments.undeclared_key"]
    assert result.failures() == {"read": 1, "arguments.schema": 1}
    assert result.failures("warning") == {}            # call.no_tools was not run
    # a rule id or glob the run did not check, or a selection of nothing, answered {} as if no row failed it
    for asked in ("call.no_tools", "toolmind.*"):
        with pytest.raises(ValueError, match=f"^fail_on names {re.escape(repr(asked))}, which the rules run do not"):
            result.failures(asked)
    with pytest.raises(ValueError, match="names nothing to fail on"):
        result.failures("")
    assert result.failed
    # config: whose read errors count; the swift writer refuses the tool without a description
    swift = td.validate("ms_swift", "swift", data_files=agent_file, fail_on="read")
    assert swift.total().read.skipped == 2 and swift.total().read.by_reason["ConversionError:tools[0].function.description"] == 1
    assert swift.total().rules.checked == 4           # the rules still check the unified rows


@pytest.mark.parametrize("source", ["ms_swift", "all"])
@pytest.mark.parametrize("given", [{"num_proc": 2}, {"streaming": True}, {"report": "skipped"}])
def test_validate_says_load_arguments_it_does_not_take_are_load_s_not_misspelt_source_options(source, given):
    """validate(num_proc=2) said "ms_swift has no option 'num_proc'; its options: batch_size, ...", as if a source
    option had been misspelt, and nothing of why load()'s arguments do not apply or where the read report is."""
    files = td.sample_files("ms_swift")
    name = next(iter(given))
    if name == "report":
        given = {"report": td.SkipReport()}
    with pytest.raises(ValueError) as err:
        td.validate(source, data_files={"ms_swift": files} if source == "all" else files, **given)
    assert f"{name} is load()'s: validate() reads each row once, streaming" in str(err.value)
    assert "result.splits[name].read" in str(err.value) and "skipped_rows=" in str(err.value)
    assert "has no option" not in str(err.value)  # (not a misspelt source option)
    # what validate() does take still works (cache_dir goes to the builder)
    assert td.validate("ms_swift", data_files=files, cache_dir=None).failures() == {}


def test_stats_shows_the_validation_counts_and_the_rows_it_could_not_read(agent_file, tmp_path, capsys):
    from tooluse_datasets.cli import main

    skipped = tmp_path / "skipped.jsonl"
    assert main(["stats", "ms_swift", "--data-files", agent_file, "--on-error", "skip",
                 "--skipped-rows", str(skipped)]) == 0
    stats = json.loads(capsys.readouterr().out)["train"]
    assert stats["rows"] == stats["validation"]["checked"] == 4
    assert stats["validation"]["by_reason"] == {"arguments.schema": 1}
    assert stats["validation"]["warnings"] == {"call.no_tools": 1}
    # the unreadable third line: counted in the JSON (it was only a log line) and listed in the file
    assert (stats["read"]["rows_read"], stats["read"]["skipped"]) == (5, 1)
    assert stats["read"]["by_reason"] == {"InvalidJsonError:<line>": 1}
    assert [(r["file"], r["row"]) for r in map(json.loads, skipped.read_text().splitlines())] == [(agent_file, 2)]


def test_stats_reads_each_split_for_itself(capsys):
    from tooluse_datasets.cli import main

    assert main(["stats", "toolmind", "--sample"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert len(stats) == 7 and sum(s["rows"] for s in stats.values()) == _sample_row_count("toolmind")
    assert all(s["read"]["rows_read"] == s["rows"] and s["read"]["skipped"] == 0 for s in stats.values())


# --------------------------------------------------------------------------------------------------
# Dropping rows that fail chosen rules (load's validate= option), exact-JSON safe
# --------------------------------------------------------------------------------------------------

EXACT = {"x": 3.141592653589793, "n": 2**70}


@pytest.fixture
def mixed_file(tmp_path) -> str:
    """Four ms-swift rows: exact values that datasets' Json() would change, one argument of the wrong type,
    one empty final answer."""
    tool = {"type": "function", "function": {"name": "f", "description": "x", "parameters": {
        "type": "object", "properties": {"x": {"type": "number"}, "n": {"type": "integer"}}, "required": ["x"]}}}

    def line(arguments, answer="Done."):
        return json.dumps({"tools": [tool], "messages": [
            {"role": "user", "content": "go"},
            {"role": "tool_call", "content": json.dumps({"name": "f", "arguments": arguments})},
            {"role": "tool_response", "content": "ok"}, {"role": "assistant", "content": answer}]})

    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join([line(EXACT), line({"x": "bad"}), line({"x": 0.1, "n": 2**70 + 1}, answer=""),
                               line({"x": 1e-7, "n": -(2**80)})]) + "\n")
    return str(path)


def _arguments(row):
    return row["messages"][1]["tool_calls"][0]["function"]["arguments"]


@pytest.mark.parametrize("streaming", [False, True])
def test_filter_drops_failing_rows_counts_them_and_keeps_values_exact(mixed_file, streaming, cache_dir):
    from tooluse_datasets.exact_features import ExactFeatures
    from tooluse_datasets.validation import filter_dataset

    ds = td.load("ms_swift", data_files=mixed_file, split="train", streaming=streaming, cache_dir=cache_dir)
    report = td.SkipReport()
    kept = filter_dataset(ds, "error", report=report)
    rows = list(kept)
    assert [r["id"] for r in rows] == ["ms_swift/mixed/0", "ms_swift/mixed/3"]
    assert report.skipped == 2 and dict(report.by_reason) == {"RuleViolationError:arguments.schema": 1,
                                                              "RuleViolationError:grammar.empty_final_answer": 1}
    assert {(e.error, e.field) for e in report.examples} == {
        ("RuleViolationError", "messages[1].tool_calls[0].function.arguments.x"),
        ("RuleViolationError", "messages[3].content")}
    # bit-exact: the same double, the same int beyond 64 bits (datasets' Json() would round the first)
    first = _arguments(rows[0])
    assert first == EXACT and first["x"].hex() == (3.141592653589793).hex() and type(first["n"]) is int
    assert _arguments(rows[1]) == {"x": 1e-7, "n": -(2**80)}
    assert isinstance(kept.features, ExactFeatures) and rows == [r for r in ds if r["id"] in {x["id"] for x in rows}]
    if not streaming:
        # storage untouched: the kept rows' stored JSON text is the text the builder wrote
        stored = kept.with_format("arrow")[:]["messages"].to_pylist()
        original = ds.with_format("arrow")[:]["messages"].to_pylist()
        assert stored == [original[0], original[3]]
        assert stored[0][1]["tool_calls"][0]["function"]["arguments"] == ' {"x":3.141592653589793,"n":1180591620717411303424}'


def test_filter_selection_rules_and_raise_mode(mixed_file, cache_dir):
    from tooluse_datasets.validation import filter_dataset

    ds = td.load("ms_swift", data_files=mixed_file, cache_dir=cache_dir)           # a DatasetDict
    report = td.SkipReport()
    kept = filter_dataset(ds, ["grammar.*"], report=report)
    assert [r["id"] for r in kept["train"]] == ["ms_swift/mixed/0", "ms_swift/mixed/1", "ms_swift/mixed/3"]
    assert report.skipped == 1
    assert filter_dataset(ds, None) is ds
    for empty in ("", [], " , "):  # a selection read from an unset variable: refused, not every row kept unchecked
        with pytest.raises(ValueError, match="names no rule"):
            filter_dataset(ds, empty)
    with pytest.raises(td.RuleViolationError) as err:
        filter_dataset(ds["train"], "arguments.schema", on_error="raise")
    assert (err.value.rule, err.value.row_id, err.value.field) == (
        "arguments.schema", "ms_swift/mixed/1", "messages[1].tool_calls[0].function.arguments.x")
    assert err.value.source == "ms_swift"  # str() names the row by its id, which starts with the source
    assert str(err.value).startswith(
        "row id 'ms_swift/mixed/1', field 'messages[1].tool_calls[0].function.arguments.x': ")
    streamed = filter_dataset(td.load("ms_swift", data_files=mixed_file, split="train", streaming=True),
                              "arguments.schema", on_error="raise")
    with pytest.raises(td.RuleViolationError, match="row id 'ms_swift/mixed/1'"):
        list(streamed)
    with pytest.raises(ValueError, match="unified"):
        filter_dataset(td.load("ms_swift", "raw", data_files=mixed_file, split="train", streaming=True), "error")


def test_filter_takes_a_plain_dict_of_splits_and_refuses_other_values_with_a_type_error(mixed_file, cache_dir):
    """A plain {split: Dataset} dict, as the README's "a dict of splits" reads, raised AttributeError on
    `.features`; so did any value that is no dataset, instead of the TypeError meant for it."""
    from tooluse_datasets.validation import filter_dataset

    ds = td.load("ms_swift", data_files=mixed_file, split="train", cache_dir=cache_dir)
    kept = filter_dataset({"train": ds}, "arguments.schema")
    assert type(kept) is dict
    assert [r["id"] for r in kept["train"]] == ["ms_swift/mixed/0", "ms_swift/mixed/2", "ms_swift/mixed/3"]
    for value in (list(ds), ds.to_pandas()):
        with pytest.raises(TypeError, match="takes a datasets Dataset or IterableDataset, or a dict of them"):
            filter_dataset(value, "arguments.schema")


@pytest.mark.parametrize("streaming", [False, True])
def test_filter_refuses_a_report_or_batch_size_of_the_wrong_kind_before_any_row(mixed_file, streaming, cache_dir):
    """report="x" failed with AttributeError "'str' object has no attribute 'add'" (a stream at its first batch),
    batch_size="8" with datasets' "'<=' not supported", and batch_size=0 or -1 checked the whole split as one
    batch; each is refused naming the argument, as load() refuses its report."""
    from tooluse_datasets.validation import filter_dataset

    ds = td.load("ms_swift", data_files=mixed_file, split="train", streaming=streaming, cache_dir=cache_dir)
    with pytest.raises(TypeError, match="^report must be a tooluse_datasets.SkipReport .*got str"):
        filter_dataset(ds, "arguments.schema", report="x")
    for batch_size in ("8", 0, -1, None, True, 2.0):
        said = f"^batch_size must be a positive whole number of rows, got {batch_size!r}"
        with pytest.raises(ValueError, match=said):
            filter_dataset(ds, "arguments.schema", batch_size=batch_size)
    assert len(list(filter_dataset(ds, "arguments.schema", batch_size=1))) == 3


def test_filtering_with_only_rules_of_sources_the_rows_lack_is_refused(mixed_file, cache_dir):
    """filter_dataset(ms_swift rows, "toolmind.*") dropped no row, silently, where load(validate="toolmind.*") is
    refused; a map-style dataset's rows name their sources, so the same selection is refused here too."""
    from tooluse_datasets.validation import filter_dataset

    ds = td.load("ms_swift", data_files=mixed_file, cache_dir=cache_dir)
    for held in (ds, ds["train"], ds["train"].select([0, 2]), {"train": ds["train"]}):
        with pytest.raises(ValueError, match="^rules names 'toolmind.grammar', which checks rows of toolmind only: "
                                             "it does not apply to ms_swift rows"):
            filter_dataset(held, "toolmind.grammar")
    mixed = td.load("all", split="train", data_files={"ms_swift": mixed_file, "nestful": td.sample_files("nestful")},
                    cache_dir=cache_dir)
    kept = filter_dataset(mixed, "nestful.*")  # rules of one of the sources held: they check its rows
    assert sum(row["source"] == "ms_swift" for row in kept) == 4
    with pytest.raises(ValueError, match="does not apply to ms_swift or nestful rows"):
        filter_dataset(mixed, "toolmind.*")
    # a view of one source's rows is of that source only (the rows it leaves out named nestful: nothing was refused)
    swift_only = mixed.filter(lambda row: row["source"] == "ms_swift")
    with pytest.raises(ValueError, match="does not apply to ms_swift rows"):
        filter_dataset(swift_only, "nestful.*")


@pytest.mark.parametrize("streaming", [False, True])
def test_a_mix_refuses_rules_only_of_sources_its_data_files_do_not_name(mixed_file, streaming, cache_dir, capsys):
    """load("all", data_files={"ms_swift": ...}, validate="toolmind.*") dropped no row, silently, and validate all
    on those files passed on --rules/--fail-on toolmind.*, where load("ms_swift", ...) and filter_dataset of the
    same mix refuse it: the mix's data_files name the sources of its rows before any is read."""
    from tooluse_datasets.cli import main

    files = {"ms_swift": mixed_file}
    with pytest.raises(ValueError, match="^validate names 'toolmind.*', which checks rows of toolmind only: "
                                         "it does not apply to ms_swift rows"):
        td.load("all", split="train", data_files=files, validate="toolmind.*", streaming=streaming,
                cache_dir=cache_dir)
    with pytest.raises(ValueError, match="^fail_on names 'toolmind.grammar'.*does not apply to ms_swift rows"):
        td.validate("all", data_files=files, fail_on="toolmind.grammar")
    for option in ("--rules", "--fail-on"):
        assert main(["validate", "all", "--data-files", f"ms_swift={mixed_file}", option, "toolmind.*"]) == 2
        assert f"{option} names 'toolmind.*'" in capsys.readouterr().err
    # a rule of a source the data files name checks its rows; the whole mix holds every source's
    both = {**files, "nestful": td.sample_files("nestful")}
    kept = td.load("all", split="train", data_files=both, validate="nestful.*", on_error="skip", streaming=streaming,
                   cache_dir=cache_dir)
    assert sum(row["source"] == "ms_swift" for row in kept) == 4
    assert main(["validate", "all", "--sample", "--rules", "toolmind.*"]) == 0


def test_a_mix_lists_the_rules_of_the_sources_its_data_files_name(mixed_file, capsys):
    """validate all and stats all on {"ms_swift": F} listed nestful.* and toolmind.* as checked (0 rows), rules
    they refuse to be selected on those files; the whole mix (--sample) still lists every rule."""
    from tooluse_datasets.cli import main
    from tooluse_datasets.validation import all_rules

    swift_rules = {r.id for r in all_rules() if r.checks_source("ms_swift")}
    result = td.validate("all", data_files={"ms_swift": mixed_file})
    assert set(result.rules_checked) == swift_rules and not any(r.startswith("toolmind.") for r in swift_rules)
    assert main(["stats", "all", "--data-files", f"ms_swift={mixed_file}"]) == 0
    listed = json.loads(capsys.readouterr().out)["train"]["validation"]["rules_checked"]
    assert set(listed) == swift_rules
    assert set(td.validate("all", split="train", data_files={"ms_swift": mixed_file,
                                                             "nestful": td.sample_files("nestful")}).rules_checked) \
        == {r.id for r in all_rules() if r.checks_source("ms_swift") or r.checks_source("nestful")}
    assert main(["validate", "all", "--sample", "--json"]) == 0  # the whole mix holds every source's rows
    assert set(json.loads(capsys.readouterr().out)["rules"]) == {r.id for r in all_rules()}


@pytest.mark.parametrize("column", ["meta", "call_graph", "subset"])
def test_filtering_a_dataset_without_a_unified_column_is_refused_not_emptied(mixed_file, cache_dir, column):
    """row.fields fails every row lacking a unified column, whatever the rules selected: a dataset whose `meta`
    was removed lost all its rows to `row.fields` when filtered on `arguments.schema`. It is refused, naming
    the column; media columns may be left out."""
    from tooluse_datasets.validation import filter_dataset

    ds = td.load("ms_swift", data_files=mixed_file, split="train", cache_dir=cache_dir)
    report = td.SkipReport()
    with pytest.raises(ValueError, match=rf"lacks \['{column}'\]"):
        filter_dataset(ds.remove_columns(column), "arguments.schema", report=report)
    assert report.skipped == 0
    kept = filter_dataset(ds.remove_columns(["images", "audios", "videos"]), "arguments.schema", report=report)
    assert [r["id"] for r in kept] == ["ms_swift/mixed/0", "ms_swift/mixed/2", "ms_swift/mixed/3"]
    assert dict(report.by_reason) == {"RuleViolationError:arguments.schema": 1}


@pytest.fixture
def nestful_some_broken(tmp_path) -> str:
    """The real NESTFUL toy rows (one of which has a tool schema that is no JSON Schema), where in every third
    row whose first call passes a number as `arg_0` that number is text instead (arguments.schema)."""
    first_number = re.compile(r'("arguments": \{"arg_0": )(-?[0-9][0-9.]*)')
    lines = shared_data(*NESTFUL_TOY).read_text().splitlines()
    broken = set([i for i, line in enumerate(lines) if first_number.search(line)][::3])
    path = tmp_path / "toy_data.jsonl"
    path.write_text("".join((first_number.sub(r'\1"\2 apples"', line, count=1) if i in broken else line) + "\n"
                            for i, line in enumerate(lines)))
    return str(path)


@pytest.mark.parametrize("resumed_in", ["a new stream", "the same stream"])
def test_a_filtered_stream_resumed_mid_batch_counts_each_skip_once(nestful_some_broken, resumed_in):
    """filter_dataset checks a batch of rows before handing them out; a stream resumed from a state taken in
    the middle of a batch checks that batch again (datasets replays it from its start), and its skips were
    counted again in the same report. Saved after any row and resumed with the same report, the counts are
    one uninterrupted pass's (the load's reads included, in one report)."""
    from tooluse_datasets.validation import filter_dataset

    def stream(report):
        loaded = td.load("nestful", data_files=nestful_some_broken, split="train", streaming=True, report=report)
        return filter_dataset(loaded, "error", report=report, batch_size=8)

    whole = td.SkipReport()
    ids = [row["id"] for row in stream(whole)]
    assert whole.skipped >= 4 and set(whole.by_reason) == {"RuleViolationError:arguments.schema",
                                                            "RuleViolationError:tool.invalid_schema"}
    assert whole.rows_read == len(ids) + whole.skipped
    for stop in range(1, len(ids), 5):
        report = td.SkipReport()
        first = stream(report)
        seen = []
        for row in first:
            seen.append(row["id"])
            if len(seen) == stop:
                break
        state = first.state_dict()
        second = first if resumed_in == "the same stream" else stream(report)
        second.load_state_dict(state)
        seen += [row["id"] for row in second]
        assert seen == ids
        assert report.to_dict() == whole.to_dict(), stop
    # a new pass over a stream read once counts its skips again, as a load() stream's report does
    again = stream(report := td.SkipReport())
    list(again), list(again)
    assert report.skipped == 2 * whole.skipped


def test_filtering_a_stream_whose_features_map_dropped_says_so(mixed_file):
    """A stream's features are unknown after map(); filter_dataset said the dataset lacked every unified column."""
    from tooluse_datasets.validation import filter_dataset

    stream = td.load("ms_swift", data_files=mixed_file, split="train", streaming=True)
    mapped = stream.map(lambda row: {"n_messages": len(row["messages"])})
    assert mapped.features is None and next(iter(mapped))["id"] == "ms_swift/mixed/0"
    with pytest.raises(ValueError, match=r"are unknown.*filter before map\(\)") as err:
        filter_dataset(mapped, "arguments.schema")
    assert "lacks" not in str(err.value)
    assert [r["id"] for r in filter_dataset(stream, "arguments.schema").map(
        lambda row: {"n_messages": len(row["messages"])})] == ["ms_swift/mixed/0", "ms_swift/mixed/2", "ms_swift/mixed/3"]


@pytest.mark.parametrize("streaming", [False, True], ids=["map", "streaming"])
def test_rows_dropped_by_validate_are_listed_with_their_file_row_and_row_id(mixed_file, streaming, cache_dir,
                                                                            tmp_path):
    """Rules are checked as rows are converted, where file and row number are known."""
    # One more row, unreadable: a read error keeps its file and row number, and has no row id.
    with open(mixed_file, "a") as f:
        f.write(json.dumps({"messages": [{"role": "narrator", "content": "hi"}]}) + "\n")
    listed = tmp_path / "skipped.jsonl"
    report = td.SkipReport(keep_all=True, rows_path=listed)
    kept = td.load("ms_swift", data_files=mixed_file, split="train", streaming=streaming, cache_dir=cache_dir,
                   on_error="skip", validate="error", report=report)
    assert [r["id"] for r in kept] == ["ms_swift/mixed/0", "ms_swift/mixed/3"]
    report.close()
    assert report.rows_read == 5 and report.skipped == 3
    rules = [r for r in report.rows if r["error"] == "RuleViolationError"]
    assert sorted(rules, key=lambda r: r["row_id"]) == [
        {"source": "ms_swift", "file": mixed_file, "row": 1, "row_id": "ms_swift/mixed/1",
         "field": "messages[1].tool_calls[0].function.arguments.x", "error": "RuleViolationError",
         "reason": "RuleViolationError:arguments.schema",
         "message": 'f: "bad" is not of type "number" (arguments.schema)'},
        {"source": "ms_swift", "file": mixed_file, "row": 2, "row_id": "ms_swift/mixed/2",
         "field": "messages[3].content",
         "error": "RuleViolationError", "reason": "RuleViolationError:grammar.empty_final_answer",
         "message": "assistant answer is empty (grammar.empty_final_answer)"}]
    [read] = [r for r in report.rows if r["error"] != "RuleViolationError"]
    assert (read["source"], read["file"], read["row"], "row_id" in read) == ("ms_swift", mixed_file, 4, False)
    assert [json.loads(line) for line in listed.read_text().splitlines()] == report.rows
    examples = {e.row_id: e for e in report.examples}
    assert examples["ms_swift/mixed/1"].field == "messages[1].tool_calls[0].function.arguments.x"
    assert examples[None].row == 4  # the read error's example
    assert {e.row_id for e in td.SkipReport.from_dict(report.to_dict()).examples} == set(examples)


def test_load_validate_is_cached_per_rule_selection_and_the_same_with_worker_processes(mixed_file, cache_dir,
                                                                                      tmp_path):
    """Rules run while rows are converted, so a map-style load keeps its validated rows and their skips in the
    cache (a selection of its own), and worker processes check rows as this process does."""
    expected = ["ms_swift/mixed/0", "ms_swift/mixed/3"]
    for attempt in range(2):  # prepared, then from the cache: the same rows and counts
        report = td.SkipReport()
        kept = td.load("ms_swift", data_files=mixed_file, split="train", cache_dir=cache_dir, on_error="skip",
                       validate="error", report=report)
        assert [r["id"] for r in kept] == expected and (report.rows_read, report.skipped) == (4, 2), attempt
    assert len(td.load("ms_swift", data_files=mixed_file, split="train", cache_dir=cache_dir)) == 4  # no rules
    second = str(tmp_path / "second.jsonl")
    shutil.copy(mixed_file, second)
    for streaming in (False, True):
        report = td.SkipReport(keep_all=True)
        kept = td.load("ms_swift", data_files=[mixed_file, second], split="train", streaming=streaming,
                       num_proc=2, cache_dir=cache_dir, on_error="skip", validate="error", report=report)
        assert len(list(kept)) == 4 and report.skipped == 4
        assert sorted((r["file"], r["row"]) for r in report.rows) == [(f, n) for f in sorted([mixed_file, second])
                                                                      for n in (1, 2)]
    with pytest.raises(td.RuleViolationError, match="mixed.jsonl, row 1"):
        list(td.load("ms_swift", data_files=mixed_file, split="train", streaming=True, validate="arguments.schema"))
    with pytest.raises(ValueError, match="validate= needs config='unified'"):
        td.load("ms_swift", "swift", data_files=mixed_file, split="train", streaming=True, validate="error")
    with pytest.raises(ValueError, match="names no validation rule"):
        td.load("ms_swift", data_files=mixed_file, split="train", streaming=True, validate="no.such.rule")


# --------------------------------------------------------------------------------------------------
# ToolMind modes: strict=False relaxes the order of turns, never the content the card calls invalid
# --------------------------------------------------------------------------------------------------


def _toolmind_variants(tmp_path) -> tuple[str, list[str]]:
    """Variants of the first bundled ToolMind row (JSON Lines), and the expected skip reasons."""
    raw = next(iter(td.load("toolmind", "raw", data_files=td.sample_files("toolmind"), split="synthetic",
                            streaming=True)))
    messages = raw["messages"]
    roles = [m["role"] for m in messages]
    answer, think, call = roles.index("answer"), roles.index("reasoning"), roles.index("tool_call")

    def variant(index, content):
        changed = copy.deepcopy(messages)
        changed[index]["content"] = content
        return changed

    packed = messages[call]["content"] + "\n<tool_call></tool_call>"
    packed = "<tool_call>" + packed[len("<tool_call>"):]
    rows = {
        "empty answer": (variant(answer, "<answer></answer>"), f"InvalidValueError:messages[{answer}].content"),
        "empty think": (variant(think, "<think>  </think>"), f"InvalidValueError:messages[{think}].content"),
        "unparsable call": (variant(call, '<tool_call>{"name": "get_weather", "arguments": {</tool_call>'),
                            f"InvalidJsonError:messages[{call}].content"),
        "empty packed call": (variant(call, packed), f"InvalidValueError:messages[{call}].content"),
        "outside the FSM": (messages[:answer - 1] + messages[answer:], None),   # reasoning before answer removed
    }
    path = tmp_path / "variants.jsonl"
    path.write_text("".join(json.dumps({"messages": json.dumps(m), "split": "synthetic"}) + "\n"
                            for m, _ in rows.values()))
    return str(path), [reason for _, reason in rows.values() if reason]


@pytest.mark.parametrize("strict", [True, False])
def test_invalid_content_is_reported_in_both_modes_and_only_the_order_is_relaxed(tmp_path, strict):
    path, reasons = _toolmind_variants(tmp_path)
    report = td.SkipReport()
    rows = list(td.load("toolmind", data_files=path, split="synthetic", streaming=True, on_error="skip",
                        report=report, strict=strict))
    for reason in reasons:
        assert report.by_reason[reason] == 1, (reason, dict(report.by_reason))
    if strict:
        assert rows == [] and report.skipped == 5
        assert any("breaks the ToolMind FSM" in e.message for e in report.examples)
    else:  # only the row outside the FSM is converted, and the validation rule says what it is
        assert report.skipped == 4 and len(rows) == 1
        assert [f.rule for f in check_row(rows[0])] == ["toolmind.grammar"]


@pytest.mark.parametrize("streaming", [False, True], ids=["map", "streaming"])
def test_load_validate_drops_and_counts_rows_breaking_chosen_rules(streaming, cache_dir):
    files = [str(shared_data("ms_swift", name)) for name in
             ("agent_support_doc_examples_en.jsonl", "custom_dataset_doc_agent_rows_en.jsonl")]
    everything = list(td.load("ms_swift", data_files=files, split="train", streaming=streaming, cache_dir=cache_dir))
    no_tools = [r["id"] for r in everything if any(m.get("tool_calls") for m in r["messages"]) and not r["tools"]]
    assert no_tools, "the doc rows include calls made without a tools list"
    report = td.SkipReport()
    kept = list(td.load("ms_swift", data_files=files, split="train", streaming=streaming, cache_dir=cache_dir,
                        on_error="skip", validate="call.no_tools", report=report))
    assert [r["id"] for r in kept] == [r["id"] for r in everything if r["id"] not in no_tools]
    assert report.by_reason["RuleViolationError:call.no_tools"] == len(no_tools)
    with pytest.raises(td.ToolUseDataError, match="call.no_tools"):
        list(td.load("ms_swift", data_files=files, split="train", streaming=streaming, cache_dir=cache_dir,
                     validate="call.no_tools"))


def test_validate_reads_each_row_once_whatever_the_config(monkeypatch):
    """Validating another config converts each row once (unified for the rules, then written in the config)
    and plans the splits once: ToolMind's seven splits of one file, every row in one split."""
    from tooluse_datasets.builders.toolmind.source import ToolMindSource

    calls = count_calls(monkeypatch, ToolMindSource, "to_raw", "to_unified", "plan")
    result = td.validate("toolmind", "swift", data_files=td.sample_files("toolmind"), fail_on="read")
    rows = result.total().read.rows_read
    assert len(result.splits) == 7 and rows == result.total().rules.checked + result.total().read.skipped > 0
    assert calls == {"to_raw": rows, "to_unified": rows, "plan": 1}


def test_cli_examples_option_sets_the_examples_of_the_total_and_the_table(tmp_path, capsys):
    """--examples N kept N examples per split, but the total (the table, the JSON "total") kept 3."""
    from tooluse_datasets.cli import main

    path = tmp_path / "train.jsonl"
    path.write_text("".join(_swift_row({"city": n}) + "\n" for n in range(6)))
    argv = ["validate", "ms_swift", "--data-files", str(path), "--option", "shard_bytes=64"]
    assert main([*argv, "--examples", "5", "--json"]) == 1
    total = json.loads(capsys.readouterr().out)["total"]["validation"]["rules"]["arguments.schema"]
    assert total["rows"] == 6 and len(total["examples"]) == 5
    assert main([*argv, "--examples", "5"]) == 1
    table = capsys.readouterr().out
    assert [n for n in range(6) if f"ms_swift/train/{n}  " in table] == [0, 1, 2, 3, 4]
    assert main([*argv, "--examples", "0"]) == 1
    table = capsys.readouterr().out
    assert re.search(r"^arguments\.schema +error +6 ", table, re.M) and "e.g.:" not in table  # no empty list
    with pytest.raises(SystemExit) as refused:  # refused by argparse, not 0 examples silently
        main([*argv, "--examples", "-1"])
    assert refused.value.code == 2


def test_validate_raw_reports_the_rows_whose_unified_conversion_fails(capsys):
    """NESTFUL v1 glaive (real upstream files): 14 rows read as raw rows but have no unified row (a call to a tool
    missing from the specs, a reused label). No rule can check them, so validating the raw config reports them as
    read errors, as validating unified does; a row failing in both configs is counted once."""
    files = {"glaive": [str(shared_data("nestful", "data_v1", "non-executable", name))
                        for name in ("non-executable-glaive-data.json", "non-executable-glaive-spec.json")]}
    unified = td.validate("nestful", data_files=files, data_version="v1", fail_on="read").total()
    raw = td.validate("nestful", "raw", data_files=files, data_version="v1", fail_on="read").total()
    assert unified.read.skipped == 14
    assert (raw.read.rows_read, raw.read.skipped, dict(raw.read.by_reason)) == \
        (unified.read.rows_read, unified.read.skipped, dict(unified.read.by_reason))
    assert raw.rules.checked == unified.rules.checked == raw.read.rows_read - 14


def test_parameters_an_xlam_style_arguments_block_describes_are_declared(tmp_path):
    """ToolMind's graph_syn tools (real upstream rows, read as ms-swift rows) may describe their parameters
    xLAM-style under ``arguments`` ({"city": {"type": "str", ...}}) instead of ``parameters``: the reader gives the
    tool the empty parameters ms-swift sees, and every call's keys were called undeclared although the tool lists
    them. A key the block does not describe is still undeclared."""
    path = shared_data("toolmind", "nanbeige_toolmind_graphsyn_raw_sample.json")
    rows_file = tmp_path / "graphsyn.json"
    rows_file.write_text(json.dumps(json.loads(path.read_text(encoding="utf-8"))["rows"]))
    rows = list(td.load("ms_swift", data_files=str(rows_file), split="train", streaming=True))
    row = next(r for r in rows if r["id"] == "ms_swift/graphsyn/2")
    function = row["tools"][2]["function"]
    assert function["parameters"] == {"type": "object", "properties": {}} and "city" in function["arguments"]
    assert [f for r in rows for f in check_row(r)] == []
    _calls(row)[0]["function"]["arguments"]["town"] = "Boston"
    assert [(f.field, f.message) for f in rule_findings(row, "arguments.undeclared_key")] == [
        ("messages[1].tool_calls[0].function.arguments.town", 'get_date_and_time_by_city declares no parameter "town"')]


@pytest.mark.parametrize("given", ["data_files", "data_dir"])
def test_validate_refuses_a_revision_beside_data_files_as_load_does(tmp_path, capsys, given):
    """load() refuses revision= beside data_files/data_dir (the files are read as given, the revision unused);
    validate() built the builder itself and ignored it: the report said nothing of the revision it never read."""
    from tooluse_datasets.cli import main

    files = td.sample_files("ms_swift")["train"]
    where = {"data_files": files} if given == "data_files" else {"data_dir": os.path.dirname(files[0])}
    skipped = tmp_path / "skipped.jsonl"
    skipped.write_text("kept\n")
    with pytest.raises(ValueError, match=r"^revision='v2' picks the revision of ms_swift's upstream files.*hf://"):
        td.validate("ms_swift", revision="v2", skipped_rows=str(skipped), fresh_skipped_rows=True, **where)
    assert skipped.read_text() == "kept\n"  # refused before anything is read or emptied
    assert td.validate("ms_swift", fail_on="read", **where).total().read.rows_read == 6
    assert main(["validate", "ms_swift", "--sample", "--option", "revision=v2"]) == 2
    err = capsys.readouterr().err
    assert "revision='v2' picks the revision" in err and len(err.strip().splitlines()) == 1


def test_a_turn_of_many_parallel_calls_is_paired_in_linear_time(samples):
    """ms_swift.pairing (and the swift and llamafactory writers) looked each result's call id up in the list of the
    turn's call ids: quadratic in the calls of one turn, 1.7 s for a turn of 16,000 calls and 6 s for 32,000, in
    one rule of one row. A set makes it linear (two hundredths of a second here)."""
    import time

    from tooluse_datasets.validation.view import RowView

    row = base(samples, SWIFT)
    turn = row["messages"][2]
    call = turn["tool_calls"][0]
    n = 32_000
    turn["tool_calls"] = [{**call, "id": f"call_{k}"} for k in range(n)]
    result = row["messages"][3]
    # the results in reverse order: each is placed by its id, not its position
    row["messages"][3:5] = [{**result, "tool_call_id": f"call_{k}"} for k in reversed(range(n))]
    view = RowView(row)
    started = time.perf_counter()
    found = list(get_rule("ms_swift.pairing").findings(view))
    took = time.perf_counter() - started
    assert found == []
    assert took < 1.0, f"ms_swift.pairing took {took:.1f} s on a turn of {n:,} calls"


def test_validate_reads_split_a_plus_b_as_one_split_as_stats_does(capsys):
    """The commands take split names such as ``a+b`` (README: Command line), and ``stats`` reads them as one split;
    ``validate --split When2Call+tau_train`` was refused ("toolmind has no split 'When2Call+tau_train'", exit 2)."""
    from tooluse_datasets.cli import main

    one = td.validate("toolmind", split="When2Call", data_files=td.sample_files("toolmind"))
    other = td.validate("toolmind", split="tau_train", data_files=td.sample_files("toolmind"))
    both = td.validate("toolmind", split="When2Call+tau_train", data_files=td.sample_files("toolmind"))
    assert list(both.splits) == ["When2Call+tau_train"]
    part = both.splits["When2Call+tau_train"]
    assert part.read.rows_read == one.total().read.rows_read + other.total().read.rows_read == 3
    assert part.rules.checked == 3
    assert main(["validate", "toolmind", "--sample", "--split", "When2Call+tau_train", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["total"]["validation"]["checked"] == 3
    assert main(["stats", "toolmind", "--sample", "--split", "When2Call+tau_train"]) == 0
    assert json.loads(capsys.readouterr().out)["When2Call+tau_train"]["validation"]["checked"] == 3
    with pytest.raises(ValueError, match=r"no split 'tau'"):
        td.validate("toolmind", split="When2Call+tau", data_files=td.sample_files("toolmind"))
    with pytest.raises(ValueError, match=r"names a split more than once"):
        td.validate("toolmind", split="When2Call+When2Call", data_files=td.sample_files("toolmind"))


def test_validate_reads_split_all_as_every_split_as_export_and_stats_do(capsys):
    """``stats --split all`` and ``export --split all`` read datasets' ``all``, every split as one; ``validate``
    refused it ("toolmind has no split 'all'")."""
    from tooluse_datasets.cli import main

    every = td.validate("toolmind", data_files=td.sample_files("toolmind"))
    assert len(every.splits) > 1
    merged = td.validate("toolmind", split="all", data_files=td.sample_files("toolmind"))
    assert list(merged.splits) == ["all"]
    assert merged.splits["all"].rules.checked == every.total().rules.checked
    assert main(["stats", "toolmind", "--sample", "--split", "all"]) == 0
    assert json.loads(capsys.readouterr().out)["all"]["validation"]["checked"] == every.total().rules.checked


def test_validate_refuses_a_slice_as_a_slice_and_names_a_misspelt_split_s_meant_one():
    """``split="tau_train[:1]"`` was "toolmind has no split 'tau_train[:1]' (did you mean 'tau_train'?)", as if the
    name were wrong; ``"tau_trian[:1]"`` got no suggestion at all."""
    with pytest.raises(ValueError, match=r"^validate\(\) checks whole splits: split='tau_train\[:1\]\+When2Call' has a "
                                         r"slice; give 'tau_train\+When2Call'$"):
        td.validate("toolmind", split="tau_train[:1]+When2Call", data_files=td.sample_files("toolmind"))
    with pytest.raises(ValueError, match=r"^toolmind has no split 'tau_trian' \(did you mean 'tau_train'\?\)"):
        td.validate("toolmind", split="tau_trian[:1]", data_files=td.sample_files("toolmind"))


def test_validate_takes_datasets_split_objects_as_load_does():
    """``split=datasets.Split.TRAIN`` passed the argument check and failed with "'NamedSplit' object has no
    attribute 'split'"; a ReadInstruction with a slice is refused as the slice it holds."""
    files = td.sample_files("ms_swift")
    got = td.validate("ms_swift", split=datasets.Split.TRAIN, data_files=files).to_dict()
    assert got == td.validate("ms_swift", split="train", data_files=files).to_dict() and got["splits"]["train"]
    with pytest.raises(ValueError, match=r"^validate\(\) checks whole splits: split='train\[:1\]' has a slice"):
        td.validate("ms_swift", split=datasets.ReadInstruction("train", to=1, unit="abs"), data_files=files)


def test_validate_refuses_a_skipped_rows_file_in_a_missing_folder_by_name(tmp_path):
    """validate(skipped_rows=..., fresh_skipped_rows=True) emptied the file before any report checked the path: a
    file in a folder not there said a bare "[Errno 2] No such file or directory", as load()'s report= does not."""
    missing = tmp_path / "no-such-folder" / "skipped.jsonl"
    with pytest.raises(ValueError, match=r"the skipped rows file .*skipped\.jsonl' cannot be made: give a file in an "
                                         r"existing folder"):
        td.validate("ms_swift", data_files=td.sample_files("ms_swift"), skipped_rows=str(missing),
                    fresh_skipped_rows=True)
    assert not missing.parent.exists()
