"""One row per source (and per ms-swift call spelling) whose call passes values that a float round trip, a
``None`` for a missing key or an ASCII-escaping writer would change: integers beyond 64 bits, ``-0.0``, the
smallest subnormal, unicode escapes (an astral character, a NUL), nested objects and empty containers; its tool
describes them with ``$ref``/``$defs``, ``anyOf`` and ``oneOf``. ``ARGUMENTS_TEXT`` keeps the source's spelling;
``json.loads`` of it is the value every reader must give back."""
from __future__ import annotations

import json
from pathlib import Path

ARGUMENTS_TEXT = (
    '{"big": 123456789012345678901234567890, "neg_zero": -0.0, "u": "caf\\u00e9 \\ud83d\\ude00 tab\\t nul\\u0000 q\\"", '
    '"nested": {"a": [1, {"b": -0.0, "c": 9007199254740993}], "d": {}, "e": []}, "f": 0.1, "tiny": 5e-324, '
    '"e2": 1E+2, "nul": null, "i64": 9223372036854775807, "neg_big": -18446744073709551617, "t": true, '
    '"pi": 3.141592653589793, "huge": 1.7976931348623157e308}')
ARGUMENTS = json.loads(ARGUMENTS_TEXT)
PARAMETERS = {
    "type": "object",
    "$defs": {"Num": {"type": "number"}, "Pt": {"type": "object", "properties": {"a": {"type": "array"}}}},
    "properties": {"big": {"type": "integer"}, "neg_zero": {"type": "number"},
                   "u": {"anyOf": [{"type": "string"}, {"type": "null"}]}, "nested": {"$ref": "#/$defs/Pt"},
                   "f": {"type": "number", "default": -0.0}, "tiny": {"$ref": "#/$defs/Num"},
                   "e2": {"anyOf": [{"$ref": "#/$defs/Num"}]}, "nul": {"oneOf": [{"type": "null"}, {"type": "integer"}]},
                   "i64": {"type": "integer", "maximum": 9223372036854775807}, "neg_big": {"type": "integer"},
                   "t": {"type": "boolean"}, "pi": {"type": "number"}, "huge": {"type": "number"}},
    "required": ["big"]}
TOOL = {"type": "function", "function": {"name": "probe", "description": "Takes values that are easy to alter.",
                                         "parameters": PARAMETERS}}
QUERY = "Probe these values, please."
CALL_TEXT = '{"name": "probe", "arguments": ' + ARGUMENTS_TEXT + '}'


def write_files(folder: Path) -> list[tuple[str, str, str]]:
    """The rows' files in ``folder``: ``(source, path, split)`` for each."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    tools_text = json.dumps([TOOL])
    files = {
        # ms-swift's own agent format: calls as JSON text in tool_call messages
        "swift_agent.jsonl": ("ms_swift", json.dumps({"tools": tools_text, "messages": [
            {"role": "user", "content": QUERY}, {"role": "tool_call", "content": CALL_TEXT},
            {"role": "tool_response", "content": "ok"}, {"role": "assistant", "content": "Done."}]})),
        # OpenAI messages: arguments as JSON text
        "swift_openai.jsonl": ("ms_swift", json.dumps({"tools": [TOOL], "messages": [
            {"role": "user", "content": QUERY},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "probe", "arguments": ARGUMENTS_TEXT}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "ok"}, {"role": "assistant", "content": "Done."}]})),
        "llamafactory.jsonl": ("llamafactory", json.dumps({"conversations": [
            {"from": "human", "value": QUERY}, {"from": "function_call", "value": CALL_TEXT},
            {"from": "observation", "value": "ok"}, {"from": "gpt", "value": "Done."}], "tools": tools_text})),
        # NESTFUL: arguments as JSON values of the line itself, written by hand to keep their spelling
        "nestful.jsonl": ("nestful", '{"sample_id": "tricky", "input": "' + QUERY + '", "output": [{"name": "probe", '
                          '"label": "$var_1", "arguments": ' + ARGUMENTS_TEXT + '}], "tools": '
                          + json.dumps([{"name": "probe", "description": TOOL["function"]["description"],
                                         "parameters": {k: v for k, v in PARAMETERS["properties"].items()
                                                        if "$ref" not in json.dumps(v)}}])
                          + ', "gold_answer": 1}'),
    }
    found = []
    for name, (source, line) in files.items():
        (folder / name).write_text(line + "\n", encoding="utf-8")
        found.append((source, str(folder / name), "train"))
    messages = [{"role": "system", "content": "## Available Tools\n\n" + json.dumps(TOOL)},
                {"role": "user", "content": QUERY}, {"role": "reasoning", "content": "<think>Probe them.</think>"},
                {"role": "tool_call", "content": f"<tool_call>{CALL_TEXT}</tool_call>"},
                {"role": "tool_output", "content": "<tool_response>ok</tool_response>"},
                {"role": "reasoning", "content": "<think>Done.</think>"},
                {"role": "answer", "content": "<answer>Done.</answer>"}]
    pq.write_table(pa.table({"messages": [json.dumps(messages)], "split": ["synthetic"]}), folder / "toolmind.parquet")
    found.append(("toolmind", str(folder / "toolmind.parquet"), "synthetic"))
    return found


def bits(value):
    """``value`` compared as JSON is read: floats by their bits (``-0.0`` is not ``0.0``), ``1`` not ``1.0`` nor
    ``True``, keys in order."""
    import struct

    if isinstance(value, float):
        return ("float", struct.pack("<d", value))
    if isinstance(value, dict):
        return ("object", [(k, bits(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("array", [bits(v) for v in value])
    return (type(value).__name__, value)


def nestful_row_with(values: list, sample_id: str = "exact-1") -> dict:
    """A NESTFUL row whose calls each pass one of ``values`` (and whose gold answer is the last): the values reach
    the unified row as arguments, and ``meta.gold_answer``."""
    tools = [{"name": "echo", "description": "returns its input",
              "parameters": {"x": {"description": "anything", "type": "int or float"}},
              "output_parameters": {"result": {"description": "x", "type": "int or float"}}}]
    return {"sample_id": sample_id, "input": "echo these",
            "output": [{"name": "echo", "label": f"$var_{i + 1}", "arguments": {"x": v}} for i, v in enumerate(values)],
            "tools": tools, "gold_answer": values[-1]}
