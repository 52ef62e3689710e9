"""The generic rules: every unified row, whatever its source.

Each rule yields ``(field, message)`` pairs; its id, severity and one-line description are its registration.
Rules marked ``structural`` are the invariants writers rely on; ``validation.validate_unified`` raises the first
of their findings as a typed error. Source-native rules live in ``builders/<source>/rules.py``.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Iterator, Optional

from ..errors import MissingFieldError, UnknownToolError, as_json, cut
from ..schema import ROLES
from .registry import rule
from .schemas import CompiledSchema, argument_errors, compile_parameters, type_name, undeclared_keys
from .view import RowView, tool_calls_of

Findings = Iterator[tuple[Optional[str], str]]

# Keys every row has, and their container types. Media columns may be absent (decoded rows leave them out
# when empty); meta may hold any JSON value.
_ROW_STRINGS = ("id", "source", "subset")
_ROW_LISTS = ("tools", "messages", "call_graph")
_OPTIONAL_LISTS = ("images", "audios", "videos")
_MESSAGE_OPTIONAL_STRINGS = ("reasoning_content", "tool_call_id", "name")
_EDGE_KEYS = ("consumer", "argument", "producer", "output_field")


# -- shape ------------------------------------------------------------------------------------------------


@rule("row.fields", "error", "A unified field is missing or has the wrong type (the shape the other rules "
      "need; checked on every row, whatever the selection).", error=MissingFieldError, structural=True)
def row_fields(view: RowView) -> Findings:
    row = view.row
    for key in _ROW_STRINGS + _ROW_LISTS + ("meta",):
        if key not in row:
            yield key, f"unified row lacks {as_json(key)}"
    for key in _ROW_STRINGS:
        if key in row and not isinstance(row[key], str):
            yield key, f"{key} must be a string, got {type_name(row[key])}"
    for key in _ROW_LISTS:
        if key in row and not isinstance(row[key], list):
            yield key, f"{key} must be a list, got {type_name(row[key])}"
    for key in _OPTIONAL_LISTS:
        if row.get(key) is not None and not isinstance(row[key], list):
            yield key, f"{key} must be a list, got {type_name(row[key])}"
        for j, item in enumerate(row.get(key) if isinstance(row.get(key), list) else ()):
            if not isinstance(item, str):
                yield f"{key}[{j}]", f"a media entry is a path or URL (a string), got {type_name(item)}"
    edges = row.get("call_graph") if isinstance(row.get("call_graph"), list) else []
    for i, edge in enumerate(edges):
        if not isinstance(edge, dict):
            yield f"call_graph[{i}]", f"a call_graph edge must be an object, got {type_name(edge)}"
            continue
        for key in _EDGE_KEYS:  # (named one by one: the message listed every key as a Python tuple)
            if edge.get(key) is not None and not isinstance(edge[key], str):
                yield f"call_graph[{i}].{key}", f"{key} must be a string or null, got {type_name(edge[key])}"
    if not isinstance(row.get("messages"), list):
        return
    for i, m in enumerate(row["messages"]):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            yield where, f"a message must be an object, got {type_name(m)}"
            continue
        for key in ("role", "content"):
            if key not in m:
                yield f"{where}.{key}", f"message lacks {as_json(key)}"
        if m.get("role") is not None and not isinstance(m["role"], str):
            yield f"{where}.role", f"role must be a string, got {type_name(m['role'])}"
        for key in _MESSAGE_OPTIONAL_STRINGS:
            if m.get(key) is not None and not isinstance(m[key], str):
                yield f"{where}.{key}", f"{key} must be a string or null, got {type_name(m[key])}"
        calls = m.get("tool_calls")
        if calls is not None and not isinstance(calls, list):
            yield f"{where}.tool_calls", f"tool_calls must be a list, got {type_name(calls)}"
            continue
        for j, call in enumerate(calls or []):
            cwhere = f"{where}.tool_calls[{j}]"
            if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
                yield cwhere, 'a call must be an object with a "function" object'
                continue
            if call.get("id") is not None and not isinstance(call["id"], str):
                yield f"{cwhere}.id", f"a call id must be a string, got {type_name(call['id'])}"
            name = call["function"].get("name")
            if name is not None and not isinstance(name, str):
                yield f"{cwhere}.function.name", f"a function name must be a string, got {type_name(name)}"


# -- tools ------------------------------------------------------------------------------------------------


@rule("tool.not_function", "error", "A tool is not an OpenAI function tool "
      "(`{\"type\": \"function\", \"function\": {\"name\": ...}}`, the name a non-empty string).",
      structural=True)
def tool_not_function(view: RowView) -> Findings:
    for i, tool in enumerate(view.tools):
        if not (isinstance(tool, dict) and tool.get("type") == "function" and isinstance(tool.get("function"), dict)
                and isinstance(tool["function"].get("name"), str) and tool["function"]["name"]):
            # (an empty name names nothing: a call to "" is call.fields, and no call can name the tool)
            yield f"tools[{i}]", "tool is not an OpenAI function tool with a name"


@rule("tool.duplicate_name", "warning", "Two tools of the row have the same name (which schema a call "
      "means is ambiguous; the first is used).")
def tool_duplicate_name(view: RowView) -> Findings:
    for i, tool in enumerate(view.tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        first = view.functions.get(name, (i,))[0] if isinstance(name, str) else i
        if first != i:
            yield f"tools[{i}].function.name", f"tool name {as_json(name)} is also tools[{first}]"


@rule("tool.invalid_schema", "error", "A tool's `parameters` is not a valid JSON Schema for an object "
      "(checked against its draft's metaschema; a `$ref` that points to nothing in it or loops without "
      "descending counts too), whether the row calls the tool or not: the model is shown the whole catalog. "
      "Its calls' arguments cannot be checked (no `arguments.schema` finding for them).")
def tool_invalid_schema(view: RowView) -> Findings:
    # Every tool of the catalog, called or not: the catalog is part of what the model is trained on, and a
    # schema no validator accepts is a defect there whatever the calls do. To keep such rows, select the rules
    # that concern calls (validate="arguments.*,call.*,...") rather than "error".
    for i, compiled in _compiled_tools(view):
        if compiled.problem:
            yield f"tools[{i}].function.parameters", compiled.problem


@rule("tool.unknown_dialect", "warning", "A tool's `parameters` names in `$schema` no JSON Schema draft known "
      "here (draft-03, draft-04, draft-06, draft-07, 2019-09, 2020-12, under `http` or `https`): it is checked "
      "as draft-07, which may not be the draft its author meant (a later draft's keywords, such as "
      "`unevaluatedProperties`, are then ignored).")
def tool_unknown_dialect(view: RowView) -> Findings:
    for i, compiled in _compiled_tools(view):
        if compiled.unknown_dialect:
            yield f"tools[{i}].function.parameters.$schema", compiled.unknown_dialect


def _compiled_tools(view: RowView) -> list[tuple[int, CompiledSchema]]:
    """``(index in tools, compiled parameters)`` of every tool with parameters, computed once per row for the
    two rules above. Every tool, not only the first of each name (view.functions): a broken second tool of a
    name would otherwise be reported only as tool.duplicate_name."""
    if "compiled_tools" not in view.memo:
        out = []
        for i, tool in enumerate(view.tools):
            function = tool.get("function") if isinstance(tool, dict) else None
            if not isinstance(function, dict) or function.get("parameters") is None:
                continue  # not a function tool (tool.not_function says so), or no parameters: it takes none (OpenAI)
            out.append((i, compile_parameters(function["parameters"])))
        view.memo["compiled_tools"] = out
    return view.memo["compiled_tools"]


# -- messages ---------------------------------------------------------------------------------------------


@rule("message.role", "error", f"A message's role is not one of {', '.join(ROLES)}.", structural=True)
def message_role(view: RowView) -> Findings:
    for i, m in enumerate(view.messages):
        if m.get("role") not in ROLES:
            yield f"messages[{i}].role", f"role {as_json(m.get('role'))} is not one of {as_json(list(ROLES))}"


@rule("message.content", "error", "A message's content is null or not a string (an empty string is "
      "the unified form of no text).", structural=True)
def message_content(view: RowView) -> Findings:
    for i, m in enumerate(view.messages):
        if "content" in m and not isinstance(m["content"], str):
            kind = type_name(m["content"])  # ("an array", "an object", "a number")
            shown = "null (use an empty string)" if m["content"] is None else f"a{'n' * (kind[0] in 'aeiou')} {kind}"
            yield f"messages[{i}].content", f"content is {shown}"


# -- calls ------------------------------------------------------------------------------------------------


@rule("call.not_assistant", "error", "A message other than an assistant message carries tool_calls.",
      structural=True)
def call_not_assistant(view: RowView) -> Findings:
    for i, m in enumerate(view.messages):
        if tool_calls_of(m) and m.get("role") != "assistant":
            yield f"messages[{i}].tool_calls", "only assistant messages carry tool_calls"


@rule("call.fields", "error", "A call has no id, no function name or no arguments.", error=MissingFieldError,
      structural=True)
def call_fields(view: RowView) -> Findings:
    for c in view.calls:
        if not (isinstance(c.id, str) and c.id):
            yield f"{c.field}.id", "call has no id"
        if not (isinstance(c.name, str) and c.name):
            yield f"{c.field}.function.name", "call has no function name"
        if c.arguments is None:  # other values that are not an object: arguments.not_object
            yield f"{c.field}.function.arguments", "call has no arguments"


@rule("call.not_function", "error", "A call's `type` is not `function` (the schema's only call type; every writer "
      "writes the call as a function call all the same).", structural=True)
def call_not_function(view: RowView) -> Findings:
    for c in view.calls:
        kind = c.call.get("type")
        if kind is not None and kind != "function":  # (None: a row built without it, read as a function call)
            yield f"{c.field}.type", f"call type {as_json(kind)} is not \"function\""


@rule("call.duplicate_id", "error", "Two calls of the row have the same id (results cannot say which "
      "they answer).", structural=True)
def call_duplicate_id(view: RowView) -> Findings:
    seen: set = set()
    for c in view.calls:
        if not (isinstance(c.id, str) and c.id):
            continue
        if c.id in seen:
            yield f"{c.field}.id", f"call id {as_json(c.id)} is not unique in the row"
        seen.add(c.id)


@rule("call.unknown_tool", "error", "A call names a tool that is not in the row's `tools` (rows with no "
      "tools at all are `call.no_tools`).", error=UnknownToolError, structural=True)
def call_unknown_tool(view: RowView) -> Findings:
    if not view.tools:
        return
    for c in view.calls:
        if isinstance(c.name, str) and c.name and c.name not in view.functions:
            yield f"{c.field}.function.name", f"call to {as_json(c.name)}, which is not in tools"


@rule("call.no_tools", "warning", "The row makes calls but its `tools` is empty, so the calls cannot be "
      "checked and a model sees no catalog (e.g. a ToolMind system prompt whose catalog was not found).")
def call_no_tools(view: RowView) -> Findings:
    if view.calls and not view.tools:
        yield "tools", f"{len(view.calls)} call(s) but no tools"


@rule("arguments.not_object", "error", "A call's arguments are not a JSON object.")
def arguments_not_object(view: RowView) -> Findings:
    for c in view.calls:
        if c.arguments is not None and not isinstance(c.arguments, dict):  # None: call.fields
            yield f"{c.field}.function.arguments", f"arguments must be a JSON object, got {type_name(c.arguments)}"


@rule("arguments.schema", "error", "A call's arguments break the called tool's `parameters` JSON Schema "
      "(required keys, types, enums, `additionalProperties: false`, ...); references to other calls' "
      "outputs (`call_graph`) are not checked as literals.")
def arguments_schema(view: RowView) -> Findings:
    for where, name, message, checked in _schema_checks(view):
        if checked:
            yield where, f"{cut(name)}: {message}"


@rule("arguments.unchecked", "warning", "A call's argument could not be checked against its tool's schema: a "
      "`pattern` or `patternProperties` pattern ran over its time limit on it (0.1 s; it backtracks "
      "catastrophically), so the argument neither passes nor breaks the schema.")
def arguments_unchecked(view: RowView) -> Findings:
    for where, name, message, checked in _schema_checks(view):
        if not checked:
            yield where, f"{cut(name)}: {message}"


def _schema_checks(view: RowView) -> list[tuple[str, str, str, bool]]:
    """``(field, tool name, message, checked)`` of every call's arguments against its tool's schema, computed
    once per row for the two rules above."""
    if "schema_checks" not in view.memo:
        out = []
        for c in view.calls:
            function = _called_function(view, c.name)
            if function is None or not isinstance(c.arguments, dict):
                continue  # call.unknown_tool / call.no_tools / arguments.not_object say why
            compiled = compile_parameters(function["parameters"])
            if compiled.validator is None:
                continue  # tool.invalid_schema says why
            unchecked = view.references.get(c.id, ()) if isinstance(c.id, str) else ()
            for path, message, checked in argument_errors(compiled, c.arguments, unchecked):
                where = f"{c.field}.function.arguments" + (f".{path}" if path and not path.startswith("[") else path)
                out.append((where, c.name, message, checked))
        view.memo["schema_checks"] = out
    return view.memo["schema_checks"]


@rule("arguments.undeclared_key", "warning", "A call passes a top-level argument its tool's schema does not "
      "declare in `properties` (its own, or those of an `allOf`/`anyOf`/`oneOf`, `if`/`then`/`else` or "
      "`dependentSchemas` subschema) while leaving `additionalProperties` (and, from draft 2019-09, "
      "`unevaluatedProperties`) unset, or any argument to a tool without `parameters` (allowed by JSON Schema, "
      "but the tool lists what it reads: likely an invented parameter).")
def arguments_undeclared_key(view: RowView) -> Findings:
    for c in view.calls:
        function = view.function(c.name)
        if function is None:
            continue  # call.unknown_tool / call.no_tools say why
        parameters = function.get("parameters")
        described = _xlam_parameters(function)
        # a tool without parameters takes none, as the readers write it ({"type": "object", "properties": {}})
        for key in undeclared_keys(_NO_PARAMETERS if parameters is None else parameters, c.arguments):
            if key not in described:
                yield (f"{c.field}.function.arguments.{key}",
                       f"{cut(c.name)} declares no parameter {as_json(key)}")


_NO_PARAMETERS = {"type": "object", "properties": {}}


def _xlam_parameters(function: dict) -> set:
    """The parameters an xLAM-style block under ``arguments`` describes (``{"city": {"type": "str", ...}}``), as
    ToolMind's graph_syn tools list theirs: the ms-swift reader keeps the block beside the empty parameters
    ms-swift sees, and the tool does list what it reads. (A dict of values, not of specs, is no such block.)"""
    block = function.get("arguments")
    return set(block) if isinstance(block, dict) and all(isinstance(v, dict) for v in block.values()) else set()


def _called_function(view: RowView, name: Any) -> Optional[dict]:
    """The called tool's function object when it has parameters to check against."""
    function = view.function(name)
    return None if function is None or function.get("parameters") is None else function


# -- pairing of calls and results -------------------------------------------------------------------------


@rule("pairing.unknown_call", "error", "A tool result's `tool_call_id` names no call made before it.",
      structural=True)
def pairing_unknown_call(view: RowView) -> Findings:
    made: set = set()
    for i, m in enumerate(view.messages):
        made.update(c.get("id") for c in tool_calls_of(m))
        if m.get("role") == "tool" and m.get("tool_call_id") is not None and m["tool_call_id"] not in made:
            yield f"messages[{i}].tool_call_id", f"tool result answers unknown call {as_json(m['tool_call_id'])}"


@rule("pairing.count", "error", "An assistant turn's calls and the results answering them differ in number "
      "(a call answered twice, or some calls answered and others not); results without `tool_call_id` count "
      "for the turn they follow. Turns with no result at all are call-only rows and pass.")
def pairing_count(view: RowView) -> Findings:
    turn_of: dict[Any, int] = {}          # call id -> message index of its turn
    answers: Counter = Counter()          # call id -> results naming it
    unlabelled: Counter = Counter()       # turn -> results without tool_call_id after it
    last_turn: Optional[int] = None
    for i, m in enumerate(view.messages):
        calls = tool_calls_of(m)
        if calls:
            last_turn = i
            for c in calls:
                turn_of.setdefault(c.get("id"), i)
        elif m.get("role") == "tool":
            call_id = m.get("tool_call_id")
            if call_id is None:
                if last_turn is not None:
                    unlabelled[last_turn] += 1
            elif call_id in turn_of:
                answers[call_id] += 1
        else:  # a user message or an answer ends the turn: a result after it follows no turn's calls
            last_turn = None
    for i, m in enumerate(view.messages):
        calls = tool_calls_of(m)
        if not calls:
            continue
        for j, c in enumerate(calls):
            if answers[c.get("id")] > 1:
                yield (f"messages[{i}].tool_calls[{j}]",
                       f"call {as_json(c.get('id'))} is answered {answers[c.get('id')]} times")
        ids = {c.get("id") for c in calls}
        answered = sum(min(answers[x], 1) for x in ids) + unlabelled[i]
        if answered and answered != len(calls):
            yield f"messages[{i}].tool_calls", f"the turn makes {len(calls)} call(s) but {answered} result(s) answer them"


@rule("pairing.name", "warning", "A tool result's `name` differs from the name of the call it answers.")
def pairing_name(view: RowView) -> Findings:
    names = {c.id: c.name for c in view.calls}
    for i, m in enumerate(view.messages):
        if m.get("role") == "tool" and m.get("name") is not None and m.get("tool_call_id") in names:
            called = names[m["tool_call_id"]]
            if m["name"] != called:
                yield f"messages[{i}].name", f"result named {as_json(m['name'])} answers a call to {as_json(called)}"


# -- conversation grammar ---------------------------------------------------------------------------------


@rule("grammar.system_first", "error", "A system message is not the first message.")
def grammar_system_first(view: RowView) -> Findings:
    for i, m in enumerate(view.messages):
        if i > 0 and m.get("role") == "system":
            yield f"messages[{i}].role", "a system message may only come first"


@rule("grammar.tool_after_call", "error", "A tool result does not follow an assistant turn with calls "
      "(directly or after other results).")
def grammar_tool_after_call(view: RowView) -> Findings:
    previous: Optional[dict] = None
    for i, m in enumerate(view.messages):
        if m.get("role") == "tool":
            if previous is None or not tool_calls_of(previous):
                role = previous.get("role") if previous is not None else None
                article = "an" if isinstance(role, str) and role[:1] in "aeiou" else "a"  # ("a assistant message")
                after = "at the start" if previous is None else f"after {article} {role} message without calls"
                yield f"messages[{i}].role", f"tool result {after}"
            continue  # results after results stay attached to the same calls
        previous = m


@rule("grammar.empty_final_answer", "error", "An assistant turn that makes no call has no text (an empty "
      "answer teaches the model to say nothing).")
def grammar_empty_final_answer(view: RowView) -> Findings:
    for i, m in enumerate(view.messages):
        if m.get("role") == "assistant" and not tool_calls_of(m) and isinstance(m.get("content"), str) \
                and not m["content"].strip():
            yield f"messages[{i}].content", "assistant answer is empty"


@rule("grammar.no_assistant", "error", "The row has no assistant message (nothing to train on).")
def grammar_no_assistant(view: RowView) -> Findings:
    if not any(m.get("role") == "assistant" for m in view.messages):
        yield "messages", "no assistant message"


# -- call graph -------------------------------------------------------------------------------------------


@rule("call_graph.edge", "error", "A `call_graph` edge names a consumer or producer that is no call of the "
      "row, or a producer that is not made before its consumer.")
def call_graph_edge(view: RowView) -> Findings:
    order = {c.id: k for k, c in enumerate(view.calls) if isinstance(c.id, str)}
    for k, edge in enumerate(view.row.get("call_graph") or []):
        consumer, producer = edge.get("consumer"), edge.get("producer")
        where = f"call_graph[{k}]"
        if consumer not in order:
            yield f"{where}.consumer", f"consumer {as_json(consumer)} is no call of the row"
        elif producer not in order:
            yield f"{where}.producer", f"producer {as_json(producer)} is no call of the row"
        elif order[producer] >= order[consumer]:
            yield (f"{where}.producer",
                   f"producer {as_json(producer)} is not made before its consumer {as_json(consumer)}")
