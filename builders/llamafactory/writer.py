"""The ``llamafactory`` format: unified rows -> LLaMA-Factory 0.9.5 sharegpt rows it trains on as written.

Every row has the same columns::

    {"conversations": [{"from": "human|gpt|function_call|observation", "value": str}, ...],
     "system": str, "tools": "<JSON text of a list>" or "", "images": [...], "videos": [...], "audios": [...]}

Rules (from LLaMA-Factory's ``SharegptDatasetConverter``, ``FunctionFormatter``, ``ToolFormatter`` and
``DefaultToolUtils``); a row that cannot follow them without loss is a :class:`ConversionError` naming the field:

* Roles alternate strictly: even positions ``human``/``observation``, odd positions ``gpt``/``function_call``,
  an even count, ending on ``gpt`` or ``function_call`` (LLaMA-Factory drops any other row silently). So two
  user turns in a row, a row ending on a result (``trailing_results="drop"`` ends it on its calls), a system
  message after the first, or a call without results followed by more turns (it would train the next turn as if
  the call had answered) are errors.
* An assistant turn with calls is one ``function_call``: the JSON of ``{"name", "arguments"}`` (a list for
  parallel calls), arguments an object (strings would be double-encoded). Its reasoning goes before the JSON as
  ``<think>\\n...\\n</think>\\n\\n`` (LLaMA-Factory's default thought words). Assistant text beside calls has
  no slot (the value must be reasoning + JSON), so it is an error.
* The results of one call group are one ``observation`` in call order (paired by position, matched by
  ``tool_call_id``), parallel results joined with ``\\n</tool_response>\\n<tool_response>\\n`` as LLaMA-Factory's
  own OpenAI converter does; a result containing that separator could not be split back, so it is an error.
* ``tools`` is JSON text of a list (a plain list crashes training); every tool has ``parameters.properties``
  (``{}`` added where a tool has none), ``required`` a list (a null one left out), enum values are strings and
  ``items`` an object (its ReAct tool prompt fails otherwise; it skips a falsy ``enum`` or ``items``).
* ``{{idx}}`` in a user turn is an error: LLaMA-Factory's user formatter replaces it with the turn number.
* A call turn whose reasoning holds ``<tool_call>`` and then ``</tool_call>`` (there or in the calls), or whose
  name or arguments hold them, is an error: its function formatter parses the text between them as the calls (a
  tag alone is written). Answers (and their reasoning) are trained as written, those tags included.
* Media: one ``<image>``/``<video>``/``<audio>`` tag per entry, as for ms-swift.
* Grounding rows (ms-swift's ``objects`` column, in ``meta``) are an error, as in the ``swift`` writer:
  LLaMA-Factory has no such column and would train on the ``<ref-object>``/``<bbox>`` tags as text.

Not written: call ids (positional on the way back: ``call_0``, ``call_1``...), ``call_graph``, ``meta`` (except
the original spellings of rows read from LLaMA-Factory files, so that such rows are written back byte for byte;
but not a ``tools`` spelling LLaMA-Factory's default tool prompt fails on, such as a tool without
``parameters.properties``: that is written by the rules above).
"""
from __future__ import annotations

import json
import re
from typing import Any, Optional

from datasets import Features, List, Value

from tooluse_datasets.builders.ms_swift.parsing import (EMPTY_PARAMETERS, parse_tool, spaced_call_text, spaced_dumps,
                                                        spaced_list_text, split_think)
from tooluse_datasets.builders.ms_swift.writer import (MEDIA_TAGS, check_media_tags, check_no_objects,
                                                       check_think_block_closes_once)
from tooluse_datasets.codec import is_json_syntax, json_reason, loads
from tooluse_datasets.errors import (ConversionError, InvalidJsonError, InvalidValueError, MissingFieldError,
                                     ToolUseDataError, json_kind)
from tooluse_datasets.formats import Format
from tooluse_datasets.pairing import call_groups, results_in_call_order
from tooluse_datasets.schema import complete_row, tool_call
from tooluse_datasets.validation import validate_unified

TARGET = "LLaMA-Factory"
HUMAN, GPT, FUNCTION, OBSERVATION = "human", "gpt", "function_call", "observation"
EVEN_TAGS, ODD_TAGS = (HUMAN, OBSERVATION), (GPT, FUNCTION)
RESULT_SEPARATOR = "\n</tool_response>\n<tool_response>\n"
THINK_OPEN, THINK_CLOSE = "<think>\n", "\n</think>\n\n"
# How LLaMA-Factory's FunctionFormatter finds the thought of a function_call value (its default thought words,
# searched, not anchored); the rest, with that thought removed, must be the calls' JSON.
_CALL_THOUGHT = re.compile(re.escape(THINK_OPEN) + "(.*?)" + re.escape(THINK_CLOSE), re.DOTALL)
CALL_MARKERS = ("<tool_call>", "</tool_call>")
# What LLaMA-Factory's FunctionFormatter searches a function_call value for first (every template's default
# tool_call_words): found, the text between the markers is parsed as the calls' JSON instead of the value.
_TOOL_CALL_SPAN = re.compile(re.escape(CALL_MARKERS[0]) + "(.*?)" + re.escape(CALL_MARKERS[1]), re.DOTALL)
# LLaMA-Factory's user formatter fills this placeholder in with the turn number, in the human turn's text too
# (StringFormatter.apply replaces each keyword after the content is in).
USER_TURN_PLACEHOLDER = "{{idx}}"
# Rows read from LLaMA-Factory files keep here the values the writer would not spell the same way.
ORIGINAL_KEY = "llamafactory_original"
MEDIA_COLUMNS = ("images", "videos", "audios")

LLAMAFACTORY_FEATURES = Features(
    {
        "conversations": List({"from": Value("string"), "value": Value("string")}),
        "system": Value("string"),
        "tools": Value("string"),
        "images": List(Value("string")),
        "videos": List(Value("string")),
        "audios": List(Value("string")),
    }
)


def unified_to_llamafactory(row: dict) -> dict:
    """One unified row -> one LLaMA-Factory sharegpt row (rules in the module docstring)."""
    validate_unified(row, require_known_tools=False)
    row = complete_row(row)
    if row.get("source") != "llamafactory":
        # ms-swift's grounding objects (a column of LLaMA-Factory's own files means nothing to it: kept as read)
        check_no_objects(row.get("meta"), f"{TARGET} rows", TARGET)
    system, conversations = llamafactory_conversations(row["messages"])
    out = {"conversations": conversations, "system": system, "tools": tools_text(row["tools"])}
    messages_text = [{"content": c["value"]} for c in conversations]
    for column in MEDIA_COLUMNS:
        out[column] = list(row.get(column) or [])
        check_media_tags(messages_text, out[column], column, MEDIA_TAGS[column], TARGET)
    return with_originals(out, row)


def llamafactory_conversations(messages: list[dict]) -> tuple[str, list[dict]]:
    """Unified messages -> (system text, conversations in strict alternation)."""
    system = ""
    start = 0
    if messages and messages[0]["role"] == "system":
        system, start = messages[0]["content"], 1
    out: list[dict] = []
    sources: list[int] = []  # unified message index of each conversation entry, for error fields
    for i, end in call_groups(messages, start):
        m, where = messages[i], f"messages[{i}]"
        if m["role"] == "system":
            raise ConversionError(f"{TARGET} only takes a system message first", field=f"{where}.role")
        if m["role"] == "tool":
            raise ConversionError("tool result does not directly follow the assistant turn whose call it answers",
                                  field=f"{where}.role")
        if m["role"] == "user":
            if USER_TURN_PLACEHOLDER in m["content"]:
                raise ConversionError(f"{TARGET} replaces {USER_TURN_PLACEHOLDER} in a human turn with the turn "
                                      f"number (its user formatter fills it in), so the turn would be trained "
                                      f"altered", field=f"{where}.content")
            out.append({"from": HUMAN, "value": m["content"]})
            sources.append(i)
            continue
        calls = m["tool_calls"]
        if not calls:
            # (Answers are trained as written, <tool_call> tags too: only a function_call value is parsed. A call
            # turn's thought is found by its whole spelling instead: checked below.)
            check_think_block_closes_once(m["reasoning_content"], f"{where}.reasoning_content", TARGET)
            out.append({"from": GPT, "value": with_reasoning(m["reasoning_content"], m["content"])})
            sources.append(i)
            continue
        if m["content"]:
            raise ConversionError(f"assistant text beside tool calls has no place in {TARGET}'s function_call "
                                  f"(reasoning and the calls' JSON only)", field=f"{where}.content")
        if m["reasoning_content"] is not None and THINK_CLOSE in m["reasoning_content"] + THINK_CLOSE[:-1]:
            raise ConversionError(f"reasoning containing {THINK_CLOSE!r} ends {TARGET}'s thought early in a call turn "
                                  f"(the rest is not JSON: it fails on the row)", field=f"{where}.reasoning_content")
        value = with_reasoning(m["reasoning_content"], calls_text(calls, where))
        if m["reasoning_content"] is not None:
            check_no_call_markers(value, f"{where}.reasoning_content")
        out.append({"from": FUNCTION, "value": value})
        sources.append(i)
        results = results_in_call_order(messages, i, end, target=TARGET)
        if results:
            out.append({"from": OBSERVATION, "value": observation_text(results, i + 1)})
            sources.append(i + 1)
        elif end < len(messages):
            raise ConversionError(f"the calls have no results but the conversation goes on; {TARGET} would train "
                                  f"the next turn as if they had answered", field=f"{where}.tool_calls")
    check_alternation(out, sources)
    return system, out


def check_alternation(conversations: list[dict], sources: list[int]) -> None:
    for k, turn in enumerate(conversations):
        if turn["from"] not in (EVEN_TAGS, ODD_TAGS)[k % 2]:
            expected = " or ".join((EVEN_TAGS, ODD_TAGS)[k % 2])
            raise ConversionError(f"{TARGET} needs {expected} at position {k} of the conversation, not "
                                  f"{turn['from']} (it drops rows that do not alternate)",
                                  field=f"messages[{sources[k]}].role")
    if conversations and conversations[-1]["from"] == OBSERVATION:
        # An agent trace cut after its last results: the calls are worth training, the results teach nothing
        # without a turn after them, so the fix is to drop them (kept here: the writer never drops data).
        raise ConversionError(f"the conversation ends on tool results with no assistant turn after them; {TARGET} "
                              f"drops such rows, calls included. To train the calls, drop the results that end "
                              f"the conversation first (load(..., trailing_results='drop'), export "
                              f"--drop-trailing-results or ds.map(td.drop_trailing_results): the row then ends on "
                              f"its call turn), or add the answer",
                              field=f"messages[{sources[-1]}]")
    if not conversations or len(conversations) % 2:
        raise ConversionError(f"{TARGET} needs the conversation to end on an assistant turn (gpt or "
                              f"function_call); it drops other rows", field="messages")


def with_reasoning(reasoning: Optional[str], text: str) -> str:
    if reasoning is None:
        return text
    return f"{THINK_OPEN}{reasoning}{THINK_CLOSE}{text}"


def check_no_call_markers(value: str, field: str) -> None:
    """A call turn's value (its calls' text holds no span: checked by calls_text) where the reasoning opens a
    <tool_call>...</tool_call> span; a marker alone matches nothing, and LLaMA-Factory reads the value as written."""
    if _TOOL_CALL_SPAN.search(value):
        raise ConversionError(f"a {CALL_MARKERS[0]} in a call turn's reasoning, followed by {CALL_MARKERS[1]}: "
                              f"{TARGET}'s function formatter reads the text between them as the calls", field=field)


def calls_text(calls: list[dict], where: str) -> str:
    spelled = []
    for j, call in enumerate(calls):
        arguments = call["function"]["arguments"]
        if not isinstance(arguments, dict):
            raise ConversionError(f"call arguments must be a JSON object for {TARGET}, {_not_an_object(arguments)}",
                                  field=f"{where}.tool_calls[{j}].function.arguments")
        spelled.append(spaced_call_text(call["function"]["name"], arguments,
                                        f"{where}.tool_calls[{j}].function.arguments"))
    text = spelled[0] if len(spelled) == 1 else spaced_list_text(spelled)
    span = _TOOL_CALL_SPAN.search(text)
    if span:  # LLaMA-Factory would parse the text between the markers as the calls (not JSON: it stops)
        j = next(j for j, call in enumerate(calls) if CALL_MARKERS[0] in spelled[j])
        part = "name" if CALL_MARKERS[0] in calls[j]["function"]["name"] else "arguments"
        raise ConversionError(f"a call holding {CALL_MARKERS[0]}...{CALL_MARKERS[1]} makes {TARGET}'s function "
                              f"formatter read the text between them as the calls (it fails on the row)",
                              field=f"{where}.tool_calls[{j}].function.{part}")
    return text


def observation_text(results: list[dict], first: int) -> str:
    contents = [r["content"] for r in results]
    text = RESULT_SEPARATOR.join(contents)
    if len(results) > 1:
        for k, result in enumerate(results):
            if RESULT_SEPARATOR in result["content"]:
                raise ConversionError("a tool result contains the separator of parallel results, so it could "
                                      "not be split back", field=f"messages[{first + k}].content")
        # A result ending in the start of the separator makes one with the separator after it, found first
        split = text.split(RESULT_SEPARATOR)
        if split != contents:
            k = next(k for k, (a, b) in enumerate(zip(split, contents)) if a != b)
            raise ConversionError("a tool result ends in part of the separator of parallel results, so it could "
                                  "not be split back", field=f"messages[{first + k}].content")
    return text


def tools_text(tools: list[dict]) -> str:
    if not tools:
        return ""
    return spaced_list_text([spaced_dumps(react_ready_tool(tool, f"tools[{i}]"), f"tools[{i}]")
                             for i, tool in enumerate(tools)])


def react_ready_tool(tool: dict, field: str) -> dict:
    """A tool as LLaMA-Factory's default (ReAct) tool prompt reads it: ``parameters.properties`` present,
    ``required`` a list or absent, enum values strings, ``items`` objects."""
    function = tool["function"]
    # Its tool prompt prints the description as text (a number would be trained as its digits), and the
    # llamafactory reader refuses such a tool: NESTFUL reads one from a damaged spec.
    if not isinstance(function.get("description", ""), (str, type(None))):
        raise ConversionError(f"{TARGET}'s tool prompt prints the description as text; a tool description must be "
                              f"a string, got {json_kind(function['description'])}",
                              field=f"{field}.function.description")
    parameters = function.get("parameters")
    if parameters is None:
        parameters = dict(EMPTY_PARAMETERS)
    if not isinstance(parameters, dict):
        raise ConversionError("tool parameters must be a JSON Schema object", field=f"{field}.function.parameters")
    if "properties" not in parameters:
        parameters = {**parameters, "properties": {}}
    # Its tool prompt tests `name in parameters.get("required", [])`: null (none required) fails the whole run
    # with a TypeError, so it is left out; text would match substrings, another value would fail.
    if "required" in parameters and parameters["required"] is None:
        parameters = {key: value for key, value in parameters.items() if key != "required"}
    elif not isinstance(parameters.get("required", []), list):
        raise ConversionError(f"{TARGET}'s tool prompt reads required as a list of names",
                              field=f"{field}.function.parameters.required")
    properties = parameters["properties"]
    if not isinstance(properties, dict):
        raise ConversionError("tool parameters.properties must be an object",
                              field=f"{field}.function.parameters.properties")
    for name, spec in properties.items():
        where = f"{field}.function.parameters.properties.{name}"
        if not isinstance(spec, dict):
            raise ConversionError("a parameter schema must be an object", field=where)
        if spec.get("enum") and not _string_list(spec["enum"]):
            raise ConversionError(f"{TARGET}'s tool prompt joins enum values as text; an enum must be a list of "
                                  f"strings (another value fails, or a text is joined letter by letter)",
                                  field=f"{where}.enum")
        # Tested by truth, as its tool prompt tests it: a falsy items ([], false) is skipped there, the row trains.
        if spec.get("items") and not isinstance(spec["items"], dict):
            raise ConversionError(f"{TARGET}'s tool prompt reads items as an object", field=f"{where}.items")
    if parameters is function.get("parameters"):
        return tool
    return {**tool, "function": {**function, "parameters": parameters}}


def with_originals(out: dict, row: dict) -> dict:
    """Rows read from LLaMA-Factory files: put back the values whose spelling the rules above would change, as
    long as the row still says what the recorded spelling says (an edited turn or tool list is written from
    the row: the spelling reads the same as the value written here, or it is not used)."""
    meta = row.get("meta")
    original: Any = meta.get(ORIGINAL_KEY) if row.get("source") == "llamafactory" and isinstance(meta, dict) else None
    if not isinstance(original, dict):
        return out
    # Recorded spellings are hints for writing a row back byte for byte; one that is not of the shape this
    # reader records (a hand-edited meta) is not used, and the row's values are written.
    conversations = out["conversations"]
    recorded = original.get("conversations")
    for index, value in recorded.items() if isinstance(recorded, dict) else ():
        k = int(index) if isinstance(index, str) and index.isdigit() else len(conversations)
        if k < len(conversations) and isinstance(value, str) \
                and _respelled(conversations[k]["from"], value) == conversations[k]["value"]:
            conversations[k]["value"] = value
    tools = original.get("tools")
    if isinstance(tools, str) and respelled_tools(tools) == out["tools"] and _default_tool_prompt_reads(tools):
        out["tools"] = tools
    return out


def _default_tool_prompt_reads(text: str) -> bool:
    """Whether LLaMA-Factory's default (ReAct) tool prompt, ``DefaultToolUtils.tool_formatter``, reads the tools
    text as it is: each tool (or its ``function``) with a ``name``, ``parameters.properties`` an object of objects,
    enum values strings and ``items`` objects. A recorded spelling it would fail on (KeyError: 'parameters') is
    not put back: the tools are written as the rules above spell them."""
    try:
        tools = loads(text)
    except ValueError:
        return False
    if not isinstance(tools, list):
        return False
    for tool in tools:
        if not isinstance(tool, dict):
            return False
        function = tool.get("function", "") if tool.get("type") == "function" else tool
        parameters = function.get("parameters") if isinstance(function, dict) else None
        if not isinstance(function.get("name") if isinstance(function, dict) else None, str) \
                or not isinstance(parameters, dict) or not isinstance(parameters.get("properties"), dict) \
                or not isinstance(parameters.get("required", []), list):
            return False
        for spec in parameters["properties"].values():
            if not isinstance(spec, dict) or (spec.get("enum") and not _string_list(spec["enum"])) \
                    or (spec.get("items") and not isinstance(spec["items"], dict)):
                return False
    return True


def _string_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _respelled(tag: str, value: str) -> Optional[str]:
    """How this writer spells a recorded turn, read as the reader reads it (None if it does not read)."""
    if tag not in (GPT, FUNCTION):
        return value  # human and observation values are written as they are read
    try:
        if tag == FUNCTION:
            reasoning, calls = read_call_value(value, "")
            text = calls_text([tool_call("", name, arguments) for name, arguments in calls], "")
        else:
            reasoning, text = split_think(value)
        return with_reasoning(reasoning, text)
    except ToolUseDataError:
        return None


def respelled_tools(text: str) -> Optional[str]:
    try:
        return tools_text(tools_of(text))
    except ToolUseDataError:
        return None


def dataset_info_entry(file_name: str, columns_used: set[str]) -> dict:
    """The ``dataset_info.json`` entry of one exported file; ``system``, ``tools`` and media columns are listed
    only when some row uses them."""
    columns = {"messages": "conversations"}
    for column in ("system", "tools", *MEDIA_COLUMNS):
        if column in columns_used:
            columns[column] = column
    return {"file_name": file_name, "formatting": "sharegpt", "columns": columns}


def columns_used(row: dict) -> set[str]:
    return {column for column in ("system", "tools", *MEDIA_COLUMNS) if row.get(column)}


# -- how LLaMA-Factory reads a value (the reader, source.py, uses these too) -------------------------


def read_call_value(value: str, field: str) -> tuple[Optional[str], list[tuple[str, dict]]]:
    """A function_call value -> (reasoning or None, [(name, arguments)]), as LLaMA-Factory's FunctionFormatter
    reads it under its templates' default tool_call_words: where the value holds ``<tool_call>...</tool_call>``
    (Qwen's spelling of a call), the text between the first pair is the calls' JSON, and the rest is trained as it
    is before the calls, so it may only be a thought spelled ``<think>\\n...\\n</think>\\n\\n`` (other text, a
    second block too, is an error); otherwise :func:`split_call_thought` finds the thought and the rest is JSON."""
    span = _TOOL_CALL_SPAN.search(value)
    if span is None:
        reasoning, text = split_call_thought(value)
        return reasoning, parse_calls(text, field)
    calls = parse_calls(span.group(1), field)
    rest = value.replace(span.group(0), "")  # (every copy, as LLaMA-Factory removes it)
    reasoning, other = split_call_thought(rest)
    if other or (reasoning is not None and rest != f"{THINK_OPEN}{reasoning}{THINK_CLOSE}"):
        raise InvalidValueError(f"text beside the {CALL_MARKERS[0]} block of a function_call (a second block too: "
                                f"only the first is read as calls): LLaMA-Factory trains it as it is before the "
                                f"calls; only a thought spelled {THINK_OPEN!r}...{THINK_CLOSE!r} may go with the "
                                f"block", field=field)
    return reasoning, calls


def split_call_thought(value: str) -> tuple[Optional[str], str]:
    """A function_call value -> (reasoning or None, the text LLaMA-Factory parses as the calls' JSON), as its
    FunctionFormatter splits it: the first ``<think>\\n...\\n</think>\\n\\n`` found is the thought, and every copy
    of it is removed. Other spellings (``<think>...</think>`` without those newlines) are not a thought to it:
    they stay in the text, which then is not JSON."""
    match = _CALL_THOUGHT.search(value)
    if match is None:
        return None, value
    return match.group(1), value.replace(match.group(0), "")


def parse_calls(text: str, field: str) -> list[tuple[str, dict]]:
    """A function_call value (after its reasoning) -> [(name, arguments)], exactly as LLaMA-Factory reads it:
    JSON of ``{"name", "arguments"}`` or a list of them; arguments an object."""
    try:
        value = loads(text)
    except ValueError as exc:
        hint = (f" (its thought must be spelled {THINK_OPEN!r}...{THINK_CLOSE!r})" if "<think>" in text else "")
        raise InvalidJsonError(f"function_call value {_unreadable(text, exc)}{hint}", field=field) from None
    calls = value if isinstance(value, list) else [value]
    if not calls:
        raise InvalidValueError("function_call holds no call", field=field)
    out = []
    for j, call in enumerate(calls):
        where = f"{field}[{j}]" if isinstance(value, list) else field
        if not isinstance(call, dict):
            raise InvalidValueError(f"a call must be a JSON object of name and arguments, got {json_kind(call)}",
                                    field=where)
        if "name" not in call:
            raise MissingFieldError("a call needs a name", field=f"{where}.name")
        if not isinstance(call["name"], str) or not call["name"]:  # a name given, of the wrong kind: not a missing one
            shown = '""' if call["name"] == "" else json_kind(call["name"])
            raise InvalidValueError(f"a call's name must be non-empty text, not {shown}", field=f"{where}.name")
        if "arguments" not in call:
            raise MissingFieldError("a call needs 'arguments' (LLaMA-Factory fails on 'parameters')",
                                    field=f"{where}.arguments")
        if not isinstance(call["arguments"], dict):
            raise InvalidValueError(f"arguments must be a JSON object, {_not_an_object(call['arguments'])}",
                                    field=f"{where}.arguments")
        out.append((call["name"], call["arguments"]))
    return out


def _not_an_object(arguments: Any) -> str:
    """What call arguments that are no JSON object are, as an error says it (a list or null is not text)."""
    return f"got {json_kind(arguments)}" + (" (text would be double-encoded)" if isinstance(arguments, str) else "")


def _unreadable(text: str, exc: ValueError) -> str:
    """Why JSON text the reader refused cannot be read, and whether LLaMA-Factory (``json.loads``) fails on it
    too: it reads ``1e400`` as infinity and a lone surrogate escape as it is, where it fails on malformed text."""
    what = "is JSON that cannot be read exactly" if is_json_syntax(text) else "is not JSON"
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return f"{what} ({json_reason(exc)}; LLaMA-Factory fails on it)"
    return f"{what} ({json_reason(exc)})"


def tools_of(text: str) -> list[dict]:
    if not text:
        return []
    try:
        tools = loads(text)
    except ValueError as exc:
        raise InvalidJsonError(f"tools {_unreadable(text, exc)}", field="tools") from None
    if not isinstance(tools, list):
        raise InvalidValueError(f"tools must be the JSON text of an array; it holds a JSON {json_kind(tools)}",
                                field="tools")
    return [parse_tool(check_tool_spelling(tool, f"tools[{i}]"), f"tools[{i}]") for i, tool in enumerate(tools)]


def check_tool_spelling(tool: Any, field: str) -> Any:
    """A tool in a spelling LLaMA-Factory reads as the tool ``parse_tool`` makes of it. ``parse_tool`` also takes
    ms-swift's spellings, which LLaMA-Factory does not: a tool as JSON text (each of its tool formatters calls
    ``tool.get``, and the whole file fails), ``parameters`` as JSON text (its default tool prompt fails on the
    file; the others train the schema as a quoted string) and a ``name_for_model`` other than ``name`` (it reads
    ``name``)."""
    if not isinstance(tool, dict):
        raise InvalidValueError(f"a tool must be a JSON object, got {json_kind(tool)}: LLaMA-Factory's tool "
                                f"formatters read each tool as an object (it fails on the file)", field=field)
    wrapped = isinstance(tool.get("function"), dict) and "type" in tool
    function, where = (tool["function"], f"{field}.function") if wrapped else (tool, field)
    if isinstance(function.get("parameters"), str):
        raise InvalidValueError("tool parameters must be a JSON object, not JSON text: LLaMA-Factory's default tool "
                                "prompt fails on it, and its other templates train the schema as a quoted string",
                                field=f"{where}.parameters")
    if "name_for_model" in function and function["name_for_model"] != function.get("name"):
        raise InvalidValueError("LLaMA-Factory reads a tool's name from 'name', not 'name_for_model'",
                                field=f"{where}.name")
    return tool


LLAMAFACTORY_FORMAT = Format(
    name="llamafactory",
    description="LLaMA-Factory sharegpt rows (human/gpt/function_call/observation in strict alternation, tools "
                "as JSON text), registered in a dataset_info.json by `export`",
    features=LLAMAFACTORY_FEATURES,
    write=unified_to_llamafactory,
)
