"""Which typed error each non-finite number raises, as the README's exact-JSON table says: a NaN or infinity
*value* (a Parquet float) is a JsonValueError; the *text* NaN / Infinity / -Infinity is not JSON (an
InvalidJsonError); 1e400 in text is an InvalidJsonError except in ms-swift's text, read as JSON or else a
Python literal, where Python makes it infinity (an InvalidValueError). Rows are the bundled samples, edited."""
from __future__ import annotations

import json
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tooluse_datasets as td


def _first_line(source: str, file: int = 0) -> str:
    with open(td.sample_files(source)["train"][file], encoding="utf-8") as f:
        return f.readline()


def _edited(line: str, old: str, new: str) -> str:
    assert old in line, "the bundled sample changed: pick another value to edit"
    return line.replace(old, new, 1)


def _streamed_error(source: str, path, cache_dir, error=td.ToolUseDataError):
    """The error streaming ``path`` (one edited row) raises, with its file and row checked."""
    with pytest.raises(error) as info:
        list(td.load(source, data_files=str(path), split="train", streaming=True, cache_dir=cache_dir))
    assert (info.value.file, info.value.row) == (str(path), 0), info.value.message
    return info.value


def _written(tmp_path, row: dict):
    """``row`` as the one line of a JSON Lines file."""
    path = tmp_path / "row.jsonl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    return path


def nestful_line(token):  # a number in the file's own JSON
    return "jsonl", _edited(_first_line("nestful"), '"arg_1": 0.3', f'"arg_1": {token}')


def nestful_array(token):
    return "json", "[" + nestful_line(token)[1] + "]"


def nestful_text_column(token):  # the HF layout: output is JSON text inside a string
    return "jsonl", _edited(_first_line("nestful", 1), '\\"arg_1\\": 0.3', f'\\"arg_1\\": {token}')


def swift_call_text(token):
    return "jsonl", _edited(_first_line("ms_swift"), '\\"base\\": \\"USD\\"', f'\\"base\\": {token}')


def llamafactory_call_text(token):
    return "jsonl", _edited(_first_line("llamafactory"), '\\"amount\\": 19.99', f'\\"amount\\": {token}')


def swift_parquet_float(value):  # a value, not text: a float column kept in meta
    return "parquet", pa.Table.from_pylist([dict(json.loads(_first_line("ms_swift")), loss_weight=value)])


CASES = [
    (nestful_line, "NaN", "nestful", td.InvalidJsonError, "<line>"),
    (nestful_array, "Infinity", "nestful", td.InvalidJsonError, "<element>"),
    (nestful_text_column, "-Infinity", "nestful", td.InvalidJsonError, "output"),
    (nestful_line, "1e400", "nestful", td.InvalidJsonError, "<line>"),
    (nestful_text_column, "1e400", "nestful", td.InvalidJsonError, "output"),
    (llamafactory_call_text, "NaN", "llamafactory", td.InvalidJsonError, "conversations[1].value"),
    (llamafactory_call_text, "1e400", "llamafactory", td.InvalidJsonError, "conversations[1].value"),
    (swift_call_text, "NaN", "ms_swift", td.InvalidJsonError, "messages[2].content"),
    (swift_call_text, "-Infinity", "ms_swift", td.InvalidJsonError, "messages[2].content"),
    (swift_call_text, "1e400", "ms_swift", td.InvalidValueError, "messages[2].content"),  # a Python literal: inf
    (swift_call_text, "[true, 1e400]", "ms_swift", td.InvalidValueError, "messages[2].content"),  # JSON all the same
    (swift_parquet_float, float("nan"), "ms_swift", td.JsonValueError, "meta"),
    (swift_parquet_float, float("-inf"), "ms_swift", td.JsonValueError, "meta"),
]


@pytest.mark.parametrize("streaming", [False, True], ids=["map", "streaming"])
@pytest.mark.parametrize("make, token, source, error, field", CASES,
                         ids=[f"{c[0].__name__}-{c[1]}" for c in CASES])
def test_non_finite_numbers_raise_the_error_the_readme_names(make, token, source, error, field, streaming, tmp_path,
                                                             cache_dir):
    kind, content = make(token)
    path = tmp_path / f"row.{kind}"
    if kind == "parquet":
        pq.write_table(content, path)
    else:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(td.ToolUseDataError) as info:
        list(td.load(source, data_files=str(path), split="train", streaming=streaming, cache_dir=cache_dir))
    assert type(info.value) is error and info.value.field == field
    assert (info.value.file, info.value.row) == (str(path), 0)
    report = td.SkipReport()  # skipping: the same error, counted
    rows = list(td.load(source, data_files=str(path), split="train", streaming=streaming, on_error="skip",
                        report=report, cache_dir=cache_dir + "-skip"))
    assert rows == [] and dict(report.by_reason) == {f"{error.__name__}:{field}": 1}


# Messages say what is wrong in the terms of the user's data: text that is JSON is named as JSON (with the
# parser's reason), never as the Python literal ms-swift's fallback reader made of it.
WORDING = [
    (swift_call_text, "1e400", "ms_swift", td.InvalidValueError,
     "tool_call content is JSON that cannot be read exactly (number 1e400 is beyond the range of a double)"),
    (swift_call_text, '\\"\\\\ud800\\"', "ms_swift", td.InvalidValueError,
     "tool_call content is JSON that cannot be read exactly (no low surrogate in string"),
    (swift_call_text, "9" * 5000, "ms_swift", td.InvalidValueError,
     "tool_call content is JSON that cannot be read exactly (an integer is too long to read from text (5,000 "
     "digits"),
    (swift_call_text, "[true, 1e400]", "ms_swift", td.InvalidValueError,  # no Python literal, JSON all the same
     "tool_call content is JSON that cannot be read exactly (number 1e400 is beyond the range of a double)"),
    (swift_call_text, "[" * 1100 + "]" * 1100, "ms_swift", td.InvalidJsonError,
     "tool_call content is neither JSON nor a Python literal (as JSON: depth limit exceeded"),
]


@pytest.mark.parametrize("make, token, source, error, wording", WORDING,
                         ids=["1e400", "lone-surrogate", "5000-digits", "1e400-beside-true", "1100-deep"])
def test_errors_name_json_text_as_json_with_the_reason(make, token, source, error, wording, tmp_path, cache_dir):
    kind, content = make(token)
    path = tmp_path / f"row.{kind}"
    path.write_text(content, encoding="utf-8")
    raised = _streamed_error(source, path, cache_dir)
    assert type(raised) is error and raised.field == "messages[2].content"
    assert wording in raised.message
    assert "Python literal JSON cannot hold" not in raised.message


# A LLaMA-Factory function_call value the reader refuses says why, and says LLaMA-Factory fails on it only where
# its json.loads does (it reads 1e400 as infinity and NaN as NaN; it stops at Python's integer-text limit).
LLAMAFACTORY_WORDING = [
    ("1e400", "function_call value is JSON that cannot be read exactly (number 1e400 is beyond the range of a "
              "double)"),
    ("9" * 5000, "function_call value is JSON that cannot be read exactly (an integer is too long to read from "
                 "text (5,000 digits; Python reads and writes at most"),
    ("NaN", "function_call value is not JSON (unexpected character"),
    ("[" * 1100 + "]" * 1100, "function_call value is not JSON (depth limit exceeded"),
]


@pytest.mark.parametrize("token, wording", LLAMAFACTORY_WORDING, ids=["1e400", "5000-digits", "NaN", "1100-deep"])
def test_llamafactory_call_errors_say_why_the_text_is_not_read(token, wording, tmp_path, cache_dir):
    kind, content = llamafactory_call_text(token)
    path = tmp_path / f"row.{kind}"
    path.write_text(content, encoding="utf-8")
    raised = _streamed_error("llamafactory", path, cache_dir, td.InvalidJsonError)
    assert raised.field == "conversations[1].value"
    assert wording in raised.message
    # (as LLaMA-Factory's json.loads on this Python: 3.12+ reads 1,100 levels, 3.11 does not)
    assert ("LLaMA-Factory fails on it" in raised.message) is _python_json_fails(token)


def _python_json_fails(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return True
    return False


def test_text_deeper_than_read_is_not_json_whatever_python_reads(tmp_path, cache_dir):
    """Python 3.12+'s json reads 1,100 levels, 3.11's stops at its recursion limit: raised here, 3.11 reads them
    too, and the message still says the text is not JSON (the package reads 1,024 levels on every version)."""
    kind, content = llamafactory_call_text("[" * 1100 + "]" * 1100)
    path = tmp_path / f"row.{kind}"
    path.write_text(content, encoding="utf-8")
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(20_000)
    try:
        raised = _streamed_error("llamafactory", path, cache_dir, td.InvalidJsonError)
    finally:
        sys.setrecursionlimit(limit)
    assert "function_call value is not JSON (depth limit exceeded" in raised.message


def _row_with(source: str, edit) -> dict:
    row = json.loads(_first_line(source))
    edit(row)
    return row


def _set(path, value):
    def edit(row):
        *parents, last = path
        for key in parents:
            row = row[key]
        row[last] = value
    return edit


# A value of the wrong JSON type is named by its JSON type (object, array, boolean, number, null), never by
# Python's (dict, list, bool, int, NoneType): the rows are JSON.
JSON_KINDS = [
    ("ms_swift", _set(("messages", 0), True), "messages[0]", "a message must be an object, got boolean"),
    ("ms_swift", _set(("messages", 0, "role"), {"x": 1}), "messages[0].role", "role must be a string, got object"),
    ("ms_swift", _set(("messages", 1, "content"), True), "messages[1].content", "content must be a string, got boolean"),
    ("ms_swift", _set(("messages", 1, "content"), [1]), "messages[1].content[0]", "not an object (number)"),
    ("ms_swift", _set(("messages",), 5), "messages", "messages must be an array, got number"),
    ("ms_swift", _set(("tools",), [3]), "tools[0]", "a tool must be a JSON object, got number"),
    ("llamafactory", _set(("system",), {}), "system", "system must be a string, got object {}"),
    ("llamafactory", _set(("system",), True), "system", "system must be a string, got boolean true"),
    ("llamafactory", _set(("tools",), 0), "tools", "tools must be the JSON text of an array, got number 0"),
    ("nestful", _set(("output",), {"a": 1}), "output", "output must be a JSON array, got object"),
    ("nestful", _set(("input",), 5), "input", "input must be a string, got number"),
    ("nestful", _set(("output", 0), 3), "output[0]", "a call must be a JSON object, got number"),
    ("nestful", _set(("output", 0, "name"), 5), "output[0].name", "name must be a string, got number"),
    ("nestful", _set(("output", 0, "arguments"), [1]), "output[0].arguments",
     "arguments must be a JSON object, got array"),
    ("ms_swift", _set(("system",), 3), "system", "the system column must be a string, got number"),
    ("ms_swift", _set(("tools",), [{"name": "f", "description": 5}]), "tools[0].description",
     "tool description must be a string, got number"),
    ("ms_swift", _set(("tools",), [{"name": "f", "parameters": 5}]), "tools[0].parameters",
     "tool parameters must be a JSON Schema object, got number"),
    ("ms_swift", _set(("messages", 2), {"role": "assistant", "content": "", "tool_calls": 5}),
     "messages[2].tool_calls", "tool_calls must be a list, got number"),
    ("ms_swift", _set(("messages", 2), {"role": "assistant", "content": "", "tool_calls": [3]}),
     "messages[2].tool_calls[0]", "an OpenAI tool call must be an object, got number"),
    ("ms_swift", _set(("messages", 2), {"role": "assistant", "content": "", "tool_calls": [{"function": None}]}),
     "messages[2].tool_calls[0].function", "an OpenAI tool call's function must be an object, got null"),
    ("ms_swift", _set(("rejected_response",), 5), "rejected_response",
     "rejected_response must be a string or a list of messages, got number"),
    ("ms_swift", _set(("rejected_response",), [True]), "rejected_response",
     "rejected_response must be a string or a list of messages, got an array holding a JSON boolean"),
    ("ms_swift", lambda row: row.update(messages=[{"role": "user", "content": "hi"}, {"role": "assistant",
                                                                                       "content": "yo"}],
                                        rejected_response=[{"role": "assistant", "content": "", "tool_calls": 5}]),
     "rejected_response[0].tool_calls", "rejected_response tool_calls must be a list of calls, got number"),
    ("nestful", _set(("tools",), [3]), "tools[0]", "a tool spec must be an object with a name, got number"),
    ("nestful", _set(("tools",), [{"name": None}]), "tools[0]",
     "a tool spec must be an object with a name, got one whose name is a JSON null"),
    ("nestful", _set(("output", 0, "label"), 5), "output[0].label",
     "label must be a non-empty string besides its '$', got number"),
]


@pytest.mark.parametrize("source, edit, field, wording", JSON_KINDS, ids=[f"{c[0]}-{c[2]}" for c in JSON_KINDS])
def test_wrong_types_are_named_as_json_types(source, edit, field, wording, tmp_path, cache_dir):
    raised = _streamed_error(source, _written(tmp_path, _row_with(source, edit)), cache_dir)
    assert raised.field == field and wording in raised.message, raised.message


# NESTFUL's text columns (the HF layout) that do not parse say why, instead of guessing "truncated?".
NESTFUL_TEXT = [
    ("1e400", "output is a string but not valid JSON (number 1e400 is beyond the range of a double)"),
    ("NaN", "output is a string but not valid JSON (unexpected character"),
    ("9" * 5000, "output is a string but not valid JSON (an integer is too long to read from text (5,000 digits"),
]


@pytest.mark.parametrize("token, wording", NESTFUL_TEXT, ids=["1e400", "NaN", "5000-digits"])
def test_nestful_text_columns_say_why_they_are_not_json(token, wording, tmp_path, cache_dir):
    kind, content = nestful_text_column(token)
    path = tmp_path / f"row.{kind}"
    path.write_text(content, encoding="utf-8")
    raised = _streamed_error("nestful", path, cache_dir, td.InvalidJsonError)
    assert raised.field == "output" and wording in raised.message, raised.message
    assert "truncated?" not in raised.message


def _line_of(source: str, file: int, index: int) -> dict:
    with open(td.sample_files(source)["train"][file], encoding="utf-8") as f:
        return json.loads(f.readlines()[index])


# A value quoted in a message is written as JSON writes it (true, {"x": 1}), not as Python's repr (True,
# {'x': 1}), and a long one is cut.
QUOTED = [
    ("ms_swift", 1, 1, _set(("tools", 0, "type"), True), "tools[0].type",
     "only function tools are supported, got type true"),
    ("ms_swift", 1, 1, _set(("tools", 0, "type"), {"x": 1.5}), "tools[0].type",
     'only function tools are supported, got type {"x": 1.5}'),
    ("ms_swift", 1, 1, _set(("messages", 2, "tool_call_id"), ["a"]), "messages[2].tool_call_id",
     'tool_call_id ["a"] is not the id of the call it answers by position (\'call_bgo\')'),
    ("ms_swift", 1, 1, _set(("messages", 2, "tool_call_id"), "x" * 5000), "messages[2].tool_call_id",
     "tool_call_id '" + "x" * 79 + "... names no call of its turn"),
    ("nestful", 0, 0, _set(("sample_id",), False), "sample_id",
     "sample_id must be a non-empty string or an integer, got false"),
    ("ms_swift", 1, 1, _set(("messages", 0, "content"), [{"type": True, "text": "hi"}]), "messages[0].content[0].type",
     "content block type true is not supported"),
]


@pytest.mark.parametrize("source, file, index, edit, field, wording", QUOTED,
                         ids=["type-true", "type-object", "id-array", "id-long", "sample-id-false", "block-type-true"])
def test_quoted_values_are_written_as_json(source, file, index, edit, field, wording, tmp_path, cache_dir):
    row = _line_of(source, file, index)
    edit(row)
    raised = _streamed_error(source, _written(tmp_path, row), cache_dir)
    assert raised.field == field and wording in raised.message, raised.message
    assert len(raised.message) < 400


# A long value where a name belongs (a role, a role tag, a tool name) is quoted cut, not in full: a row holding
# a 5,000-character role gave a 5,000-character message (and log line).
LONG_NAMES = [
    ("ms_swift", 1, 1, _set(("messages", 0, "role"), "r" * 5000), "messages[0].role", "role 'rrr"),
    ("llamafactory", 0, 0, _set(("conversations", 0, "from"), "h" * 5000), "conversations[0].from", "'hhh"),
    ("nestful", 0, 0, _set(("output", 0, "name"), "n" * 5000), "output[0].name", "call to 'nnn"),
]


@pytest.mark.parametrize("source, file, index, edit, field, wording", LONG_NAMES, ids=["role", "tag", "tool"])
def test_long_names_are_quoted_cut(source, file, index, edit, field, wording, tmp_path, cache_dir):
    row = _line_of(source, file, index)
    edit(row)
    raised = _streamed_error(source, _written(tmp_path, row), cache_dir)
    assert raised.field == field and wording in raised.message, raised.message[:300]
    assert "..." in raised.message and len(raised.message) < 400


def _toolmind_row() -> dict:
    return pq.read_table(td.sample_files("toolmind")["train"][0]).slice(0, 1).to_pylist()[0]


# ToolMind's messages column holds JSON text of an array: a broken text is named in JSON's terms.
@pytest.mark.parametrize("messages, wording", [
    ("{", "it does not start with a JSON array"),
    ('"hi"', "messages must hold a JSON array, got string"),
    (5, "messages must be a JSON string or an array, got number"),
], ids=["not-an-array", "string", "number"])
def test_toolmind_messages_errors_name_json_types(messages, wording, tmp_path, cache_dir):
    raised = _streamed_error("toolmind", _written(tmp_path, dict(_toolmind_row(), messages=messages, split="train")),
                             cache_dir)
    assert raised.field == "messages" and wording in raised.message, raised.message


def test_toolmind_split_value_of_the_wrong_type_is_named_as_a_json_type(tmp_path, cache_dir):
    raised = _streamed_error("toolmind", _written(tmp_path, dict(_toolmind_row(), split=5)), cache_dir)
    assert raised.field == "split" and "split must be a string, got number" in raised.message, raised.message


# ms-swift takes its messages from a conversations (or conversation) column too: an error in that column names
# it as the file does, in the message as in the field.
@pytest.mark.parametrize("value, wording", [
    (True, "conversations must be an array, got boolean"),
    (None, "conversations is null"),
    ([], "conversations is empty"),
    ("", "conversations text is neither JSON nor a Python literal"),
], ids=["boolean", "null", "empty", "empty-text"])
def test_ms_swift_conversations_column_is_named_as_the_file_names_it(value, wording, tmp_path, cache_dir):
    row = _line_of("ms_swift", 0, 0)
    del row["messages"]
    row["conversations"] = value
    raised = _streamed_error("ms_swift", _written(tmp_path, row), cache_dir)
    assert raised.field == "conversations" and wording in raised.message, raised.message


# ToolMind's grammar errors list the roles that may come as JSON names them ("answer"), not as a Python
# list (['answer']).
@pytest.mark.parametrize("edit, wording", [
    (lambda messages: messages[1:], '"user" at the start breaks the ToolMind FSM (allowed: "system")'),
    (lambda messages: messages[:3], '(allowed: "answer" or "tool_call")'),
    (lambda messages: messages[:-1], 'breaks the ToolMind FSM (it must end on "answer")'),
], ids=["start", "after-reasoning", "ending"])
def test_toolmind_grammar_errors_list_roles_as_text(edit, wording, tmp_path, cache_dir):
    row = _toolmind_row()
    messages = json.loads(row["messages"])
    assert [m["role"] for m in messages[:3]] == ["system", "user", "reasoning"], "the bundled sample changed"
    messages = edit(messages)
    if wording.startswith('(allowed: "answer"'):
        messages.append({"role": "user", "content": "again"})
    raised = _streamed_error("toolmind", _written(tmp_path, dict(row, messages=messages, split="train")), cache_dir,
                             td.InvalidValueError)
    assert wording in raised.message and "['" not in raised.message, raised.message


def test_toolmind_long_unknown_role_is_quoted_cut(tmp_path, cache_dir):
    row = _toolmind_row()
    messages = json.loads(row["messages"])
    messages[1]["role"] = "u" * 5000
    raised = _streamed_error("toolmind", _written(tmp_path, dict(row, messages=messages, split="train")), cache_dir,
                             td.InvalidValueError)
    assert raised.field == "messages[1].role" and "unknown role 'uuu" in raised.message
    assert "..." in raised.message and len(raised.message) < 400


@pytest.mark.parametrize("value, name", [(float("nan"), "NaN"), (float("-inf"), "-Infinity"), (float("inf"), "Infinity")])
def test_a_non_finite_parquet_float_is_named_as_json_texts_name_it(value, name, tmp_path, cache_dir):
    kind, table = swift_parquet_float(value)
    path = tmp_path / f"row.{kind}"
    pq.write_table(table, path)
    with pytest.raises(td.JsonValueError) as info:
        list(td.load("ms_swift", data_files=str(path), split="train", streaming=True, cache_dir=cache_dir))
    assert info.value.field == "meta"
    assert info.value.message.startswith(f"{name} at $.loss_weight cannot be stored as JSON"), info.value.message
