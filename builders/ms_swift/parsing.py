"""How ms-swift reads the text inside its rows: JSON-or-literal values, tools, tool calls and ``<think>``.

The reader (ms-swift -> unified) and the ``swift`` writer (unified -> ms-swift) share these functions so
that what one writes the other reads back to the same values.
"""
from __future__ import annotations

from typing import Any, Optional

from tooluse_datasets.codec import dumps, loads_json_or_literal, python_json_text, try_loads
from tooluse_datasets.errors import (ConversionError, InvalidJsonError, InvalidValueError, JsonValueError,
                                     MissingFieldError, json_kind, shown)

# ms-swift's own spelling of "no parameters" (``tool.get('parameters') or {}`` renders as an empty object);
# the unified schema always carries a JSON Schema object, so a tool without parameters gets this one.
EMPTY_PARAMETERS: dict = {"type": "object", "properties": {}}

# A leading reasoning block. The writer emits "<think>\n{reasoning}\n</think>\n" (ms-swift docs, example 2);
# the reader also accepts it without the inner newlines and with any number of newlines after it
# (Qwen3 writes "</think>\n\n"): what the pattern r"\A<think>\n?(.*?)\n?</think>\n*" (DOTALL) matches, read by
# split_think without the regex engine.

# Keys of a tool's function object that the reader folds into name/description/parameters.
_TOOL_ALIAS_KEYS = ("name", "name_for_model", "description", "description_for_model", "parameters")


def parse_json_or_literal(text: str, field: str, what: str) -> Any:
    """Parse ``text`` the way ms-swift's ``_parse_json`` does: JSON first, then a Python literal
    (``ast.literal_eval``: single quotes, ``True``/``None``). Never ``eval``.

    A literal is turned into plain JSON values (tuples become lists); a value JSON cannot hold (sets,
    bytes, non-string keys, NaN) is an :class:`InvalidValueError`.
    """
    try:
        return loads_json_or_literal(text)
    except JsonValueError as exc:
        raise InvalidValueError(f"{what} is {exc.message}", field=field) from None
    except InvalidJsonError as exc:
        raise InvalidJsonError(f"{what} is {exc.message}: {_preview(text)}", field=field) from None


def storable(value: Any, field: str) -> Any:
    """``value`` if JSON text can hold it (nested at most ``codec.MAX_DEPTH`` deep, finite numbers, string keys),
    else the :class:`JsonValueError` naming ``field``: values read from JSON text nest up to 1,024 levels, and
    storing the row would otherwise refuse it naming no field."""
    try:
        dumps(value)
    except JsonValueError as exc:
        raise exc.at(field=field) from None
    return value


def spaced_dumps(value: Any, field: Optional[str] = None) -> str:
    """JSON text as ms-swift's docs and templates write it: ``json.dumps`` spacing, non-ASCII kept.

    ``codec.dumps`` runs first only to refuse what JSON cannot hold exactly (NaN, infinities, non-string
    keys, nesting deeper than ``codec.MAX_DEPTH``), which ``json.dumps`` would write silently; the error
    names ``field``. The text itself is exact: Python writes floats as their shortest round-trip repr and
    integers of any size digit for digit. This spelling (rather than the compact codec form) makes rows
    copied from the ms-swift docs read and write back byte for byte.
    """
    try:
        dumps(value)
    except JsonValueError as exc:
        raise (exc.at(field=field) if field is not None else exc) from None
    return python_json_text(value)


def spaced_list_text(texts: list[str]) -> str:
    """``python_json_text`` of a list, from the texts of its items (each written by :func:`spaced_dumps`): the
    list adds a level of nesting, which must not make an item at the depth limit too deep to write."""
    return "[" + ", ".join(texts) + "]"


def spaced_call_text(name: str, arguments: Any, field: str, key: str = "arguments") -> str:
    """``python_json_text({"name": name, key: arguments})``, the arguments checked on their own (naming
    ``field``): arguments may nest as deep as storage allows, the object around them is one level more."""
    return '{"name": ' + python_json_text(name) + ", " + python_json_text(key) + ": " + \
        spaced_dumps(arguments, field) + "}"


def json_text(value: Any) -> str:
    """A tool result as ms-swift trains on it: strings as they are, anything else as JSON text."""
    return value if isinstance(value, str) else spaced_dumps(value)


# --------------------------------------------------------------------------------------------------
# Tools
# --------------------------------------------------------------------------------------------------


def parse_tool(tool: Any, field: str) -> dict:
    """One entry of ``tools`` in any shape ms-swift accepts -> an OpenAI function tool.

    Accepted: a JSON (or Python-literal) string of a tool; OpenAI-wrapped ``{"type": "function",
    "function": {...}}``; bare ``{"name", "description", "parameters"}``; Qwen-Agent style
    ``name_for_model`` / ``description_for_model``; ``parameters`` as a JSON string. Other keys of the
    function (``name_for_human``, NESTFUL's ``output_parameters``...) and of the wrapper are kept.
    """
    if isinstance(tool, str):
        tool = parse_json_or_literal(tool, field, "tool")
    if not isinstance(tool, dict):
        raise InvalidValueError(f"a tool must be a JSON object, got {json_kind(tool)}", field=field)
    kind = tool.get("type", "function")
    if kind != "function":  # wrapped, or flat as the Responses API writes tools ({"type": "custom", "name"...})
        why = ": a custom tool takes free-form text, not JSON arguments" if kind == "custom" else ""
        raise InvalidValueError(f"only function tools are supported, got type {shown(kind)}{why}", field=f"{field}.type")
    wrapped = isinstance(tool.get("function"), dict) and "type" in tool
    function = tool["function"] if wrapped else tool
    where = f"{field}.function" if wrapped else field

    name_key = "name_for_model" if function.get("name_for_model") else "name"
    name = function.get(name_key)
    if name is None or name == "":
        if isinstance(tool.get("function"), dict) and not wrapped:  # ms-swift unwraps a tool only given both keys
            raise MissingFieldError("tool has a 'function' object but no 'type' beside it, so it is read as a bare "
                                    "tool, which has no name; write {\"type\": \"function\", \"function\": {...}}",
                                    field=f"{field}.type")
        raise MissingFieldError("tool has no name (name or name_for_model)", field=f"{where}.name")
    if not isinstance(name, str):  # (it is there: "has no name" sent looking for a missing key)
        raise InvalidValueError(f"tool name must be a string, got {json_kind(name)}", field=f"{where}.{name_key}")
    description = function.get("description")
    if description is None:
        description = function.get("description_for_model")
    if description is None:
        description = ""
    if not isinstance(description, str):
        raise InvalidValueError(f"tool description must be a string, got {json_kind(description)}",
                                field=f"{where}.description")
    parameters = function.get("parameters")
    if parameters is None:
        parameters = dict(EMPTY_PARAMETERS)
    elif isinstance(parameters, str):
        parameters = parse_json_or_literal(parameters, f"{where}.parameters", "tool parameters")
    if not isinstance(parameters, dict):
        raise InvalidValueError(f"tool parameters must be a JSON Schema object, got {json_kind(parameters)}",
                                field=f"{where}.parameters")

    out_function = {"name": name, "description": description, "parameters": parameters}
    # (A flat tool's "type" is the tool's, as in OpenAI's Responses API, not a key of its function.)
    out_function.update((k, v) for k, v in function.items()
                        if k not in _TOOL_ALIAS_KEYS and (wrapped or k != "type"))
    out = {"type": "function", "function": out_function}
    if wrapped:
        out.update((k, v) for k, v in tool.items() if k not in ("type", "function"))
    return storable(out, field)


# JSON Schema keywords of ms-swift 4.6's ``remove_arrow_padding`` (swift/utils/schema_utils.py): maps of names to
# sub-schemas, keywords where null is a value, and keywords where null is an item of the array value.
_SCHEMA_MAP_KEYS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")
_NULL_VALUE_KEYS = ("default", "const")
_NULL_ITEM_KEYS = ("enum", "examples")


def swift_tool(tool: Any, field: str) -> Any:
    """One entry of a row's ``tools`` as ms-swift's template reads it (``Template._preprocess_tools``): text
    parsed (JSON, else a Python literal), then every null that is not a value of ``default``/``const``, an
    item of ``enum``/``examples`` or inside an ``x-`` annotation removed, key and all, as Arrow padding (ms-swift
    4.6 cannot tell a null written in a JSON file from the padding of a Parquet file or ``Dataset.to_json``).
    So ``"unit": null`` among ``properties``, or ``"enum": null``, never reaches the model there, nor the
    unified row here."""
    if isinstance(tool, str):
        text, tool = tool, parse_json_or_literal(tool, field, "tool")
        if isinstance(tool, list):
            # ms-swift keeps a tools column that is no JSON (a Python literal) as one tool; a JSON list as one entry
            # of the list of tools is already JSON text
            why = ("give each tool as an entry of the list of tools, not the whole list as one" if try_loads(text)[0]
                   else "a tools column that is not JSON, such as a Python literal, is read as the text of one tool: "
                        "write tools as JSON text")
            raise InvalidValueError(f"the text of one tool holds an array, which ms-swift fails on: {why}",
                                    field=field)
    return without_arrow_padding(storable(tool, field))  # storable first: nested at most MAX_DEPTH deep


def without_arrow_padding(schema: Any) -> Any:
    """``schema`` without the nulls ms-swift 4.6's ``remove_arrow_padding`` drops (see :func:`swift_tool`)."""
    if isinstance(schema, list):
        return [without_arrow_padding(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    cleaned = {}
    for key, value in schema.items():
        if key in _NULL_VALUE_KEYS or key.startswith("x-"):
            cleaned[key] = value
        elif key in _NULL_ITEM_KEYS:
            if value is not None:
                cleaned[key] = value
        elif value is None:
            continue
        elif key in _SCHEMA_MAP_KEYS and isinstance(value, dict):
            cleaned[key] = {name: without_arrow_padding(item) for name, item in value.items() if item is not None}
        else:
            cleaned[key] = without_arrow_padding(value)
    return cleaned


# --------------------------------------------------------------------------------------------------
# Tool calls
# --------------------------------------------------------------------------------------------------


def parse_call(content: Any, field: str) -> tuple[str, dict]:
    """A ``tool_call`` message's content -> ``(name, arguments)``, as ms-swift's ``_parse_tool_call``.

    ``content`` is JSON text, a Python-literal string or an object; ``arguments`` (alias ``parameters``)
    is an object, JSON text of one, or a Python-literal string of one. Everything ms-swift would drop the
    row for (no name, no arguments, unparseable text) is a typed error here.
    """
    call = parse_json_or_literal(content, field, "tool_call content") if isinstance(content, str) else content
    if isinstance(call, list):  # several calls in one message: ms-swift reads the content's name and fails
        raise InvalidValueError("tool_call content is an array; a tool_call message holds one call, and ms-swift "
                                "fails on this one (give parallel calls as consecutive tool_call messages, one call "
                                "each)", field=field)
    if not isinstance(call, dict):
        raise InvalidValueError(f"tool_call content must be an object with name and arguments, got "
                                f"{json_kind(call)}", field=field)
    if "name" not in call:  # ms-swift's KeyError: the row is dropped
        raise MissingFieldError("tool call has no name (ms-swift drops the row)", field=f"{field}.name")
    name = call["name"]
    if not isinstance(name, str) or not name:  # ms-swift keeps the row and trains the call under this name
        shown = '""' if name == "" else json_kind(name)
        raise InvalidValueError(f"tool call name must be non-empty text, not {shown} (ms-swift would train a call "
                                f"with that name)", field=f"{field}.name")
    key = "arguments" if call.get("arguments") is not None else "parameters"
    arguments = call.get(key)
    if arguments is None:
        given = next((k for k in ("arguments", "parameters") if k in call), None)
        if given is not None:  # (JSON null, or the text "null" of an OpenAI call: "neither" said the key was missing)
            raise InvalidValueError(f"tool call {given} are null, not an object (ms-swift's preprocessing keeps "
                                    f"them null)", field=f"{field}.{given}")
        raise MissingFieldError("tool call has neither arguments nor parameters (ms-swift drops the row)",
                                field=f"{field}.arguments")
    if isinstance(arguments, str):
        arguments = parse_json_or_literal(arguments, f"{field}.{key}", "tool call arguments")
    if not isinstance(arguments, dict):
        raise InvalidValueError(f"tool call arguments must be a JSON object, got {json_kind(arguments)}",
                                field=f"{field}.{key}")
    return name, storable(arguments, f"{field}.{key}")


def call_text(name: str, arguments: Any, field: str) -> str:
    """The content of a ``tool_call`` message: JSON text of ``{"name", "arguments"}``, arguments always
    present (spec §10 rule 3)."""
    if not isinstance(arguments, dict):
        raise ConversionError(f"call arguments must be a JSON object for ms-swift, got {json_kind(arguments)}",
                              field=field)
    return spaced_call_text(name, arguments, field)


# --------------------------------------------------------------------------------------------------
# Media tags
# --------------------------------------------------------------------------------------------------

# Placeholder tag of each media column, in the order ms-swift adds missing ones (image, audio, video).
MEDIA_TAGS = {"images": "<image>", "audios": "<audio>", "videos": "<video>"}


def missing_media_tags(texts: list[str], media: dict) -> str:
    """The tags ms-swift 4.6 puts before the first message's text when a row has fewer tags than media
    (``Template._add_default_tags``): per kind, in the order image, audio, video, ``tag * (entries - tags)``
    is prepended, so the result reads ``<video>…<audio>…<image>…`` (each kind before the ones added earlier).
    ``texts``: the texts it counts tags in (the system text and every message's). More tags than entries
    adds nothing (ms-swift warns and keeps the extra tags as text)."""
    prefix = ""
    for column, tag in MEDIA_TAGS.items():
        entries = media.get(column) or []
        if entries:
            missing = len(entries) - sum(text.count(tag) for text in texts)
            if missing > 0:
                prefix = tag * missing + prefix
    return prefix


# --------------------------------------------------------------------------------------------------
# Reasoning
# --------------------------------------------------------------------------------------------------


def split_think(text: str) -> tuple[Optional[str], str]:
    """``"<think>\\nR\\n</think>\\nrest"`` -> ``("R", "rest")``; without a leading think block ->
    ``(None, text)``."""
    # The pattern's lazy group ends at the first "</think>" (less one newline before it): str.find gets there 3x
    # faster than the regex engine's step-by-step lazy match, about 5% of converting ms-swift rows (measured).
    # tests/test_ms_swift_think.py checks that both read every text the same.
    if not text.startswith("<think>"):
        return None, text
    start = 8 if text.startswith("<think>\n") else 7
    end = text.find("</think>", start)
    if end < 0:
        return None, text
    stop = end - 1 if end > start and text[end - 1] == "\n" else end
    return text[start:stop], text[end + 8:].lstrip("\n")


def split_pre_call_text(text: str) -> tuple[Optional[str], str]:
    """The assistant text before calls -> (reasoning, content). One trailing newline is dropped: in ms-swift
    data it separates the text from the calls (hermes concatenates them), while unified chat templates
    put the separator themselves. The writer adds it back."""
    reasoning, content = split_think(text)
    return reasoning, content[:-1] if content.endswith("\n") else content


def join_think(reasoning: Optional[str], content: str) -> str:
    """Inverse of :func:`split_think`, in the spelling of ms-swift's docs."""
    return content if reasoning is None else f"<think>\n{reasoning}\n</think>\n{content}"


def _preview(text: str, limit: int = 80) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")
