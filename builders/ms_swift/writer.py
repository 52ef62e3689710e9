"""The ``swift`` format: unified rows -> rows that ``swift sft`` trains on as written (spec §10).

Every row has the same five columns and no nulls::

    {"messages": [{"role", "content", "name"}, ...], "tools": "<JSON text>", "images": [...], "audios": [...],
     "videos": [...]}

* ``tools`` is JSON text of OpenAI function tools, in every row (``"[]"`` when none). Each tool needs a
  non-empty description: ms-swift's react/qwen agent templates fail without one. A tool without one is a
  :class:`ConversionError` (this writer does not invent descriptions); a tool without ``parameters`` gets
  ``{"type": "object", "properties": {}}``, which is what ms-swift makes of a missing schema. An integer in a
  tool beyond 64 bits is a :class:`ConversionError`: ms-swift's load of the file fails on it (every row lost).
* An assistant turn becomes, in order: one ``assistant`` message with ``"<think>\\n{reasoning}\\n</think>\\n"``
  and the visible text (followed by ``"\\n"`` when calls come next: hermes puts them right after it), then one
  ``tool_call`` message per call, content ``{"name", "arguments"}`` as JSON text, then its results as
  ``tool_response`` messages in call order (matched by ``tool_call_id``), each with the ``name`` of its call
  (ms-swift 4.6 keeps it there for the agent templates that print it; it drops ``name`` on other messages, null
  in Arrow). A turn whose calls have no results is written as it is (call-only SFT, as NESTFUL rows are).
* Grounding rows (``objects`` in ``meta``, read from ms-swift's ``objects`` column) are a
  :class:`ConversionError`: written without ``objects``, their ``<ref-object>``/``<bbox>`` tags would be
  trained on as text.
* Not representable, hence not written: call ids and ``tool_call_id`` (ms-swift pairs results with calls by
  position), ``meta`` (``loss``, ``rejected_response``, ``label``...
  need every row of a file to agree, so a per-row writer cannot emit them), ``call_graph``.

A unified row that cannot be written this way without losing or inventing data raises
:class:`ConversionError` naming the field; with ``on_error="skip"`` it is counted and skipped.
"""
from __future__ import annotations

import re
from typing import Any

from datasets import Features, List, Value

from tooluse_datasets import pairing
from tooluse_datasets.errors import ConversionError, InvalidValueError, count_of
from tooluse_datasets.formats import Format
from tooluse_datasets.schema import complete_row
from tooluse_datasets.validation import validate_unified

from .parsing import EMPTY_PARAMETERS, MEDIA_TAGS, call_text, join_think, spaced_dumps, spaced_list_text

SWIFT_FEATURES = Features(
    {
        # `name`: the tool of a tool_response (null on every other message, whose `name` ms-swift drops)
        "messages": List({"role": Value("string"), "content": Value("string"), "name": Value("string")}),
        "tools": Value("string"),
        "images": List(Value("string")),
        "audios": List(Value("string")),
        "videos": List(Value("string")),
    }
)


# ms-swift's template pairs each user or result turn with the assistant turn after it (Template._swift_encode):
# results followed by a user message fail to encode ("response_role: user"), and swift sft drops the row.
USER_AFTER_RESULTS = ("a user message right after tool results: ms-swift needs an assistant message after the "
                      "results, fails to encode the row and drops it")


def unified_to_swift(row: dict) -> dict:
    """One unified row -> one ``swift`` row (see the module docstring for the rules)."""
    validate_unified(row, require_known_tools=False)
    row = complete_row(row)
    check_no_objects(row.get("meta"))
    messages = swift_messages(row["messages"])
    tools = [_tool_text(tool, f"tools[{i}]") for i, tool in enumerate(row["tools"])]
    out = {"messages": messages, "tools": spaced_list_text(tools)}
    for column, tag in MEDIA_TAGS.items():
        out[column] = list(row.get(column) or [])
        check_media_tags(messages, out[column], column, tag)
    return out


def swift_messages(messages: list[dict]) -> list[dict]:
    """Unified messages -> ms-swift messages; each call group is followed by its results in call order."""
    if not messages:
        raise ConversionError("the row has no messages; ms-swift drops such rows", field="messages")
    out: list[dict] = []
    for i, end in pairing.call_groups(messages):
        m = messages[i]
        where = f"messages[{i}]"
        if m["role"] == "system" and i != 0:
            raise ConversionError("ms-swift only accepts a system message as the first message", field=f"{where}.role")
        if m["role"] == "tool":
            raise ConversionError("tool result does not directly follow the assistant turn whose call it answers",
                                  field=f"{where}.role")
        out += turn_messages(m, where)
        results = results_in_call_order(messages, i, end)
        # ms-swift 4.6 keeps `name` on results, and its gemma4 and kimi_k3 agent templates print it (gemma4 writes
        # "response:unknown" without it): the name of the call answered, whatever the result message says.
        calls = m.get("tool_calls") or []
        out += [{"role": "tool_response", "content": r["content"], "name": call["function"]["name"]}
                for call, r in zip(calls, results)]
        if results and end < len(messages) and messages[end]["role"] == "user":
            raise ConversionError(USER_AFTER_RESULTS, field=f"messages[{end}].role")
    return out


def turn_messages(m: dict, where: str) -> list[dict]:
    """The ms-swift messages of one unified message, results excluded (they follow their calls).

    Also used by the reader's ``from_unified`` as the canonical form it compares source text against.
    """
    content = m["content"]
    if not isinstance(content, str):
        raise InvalidValueError("content must be a string", field=f"{where}.content")
    if m["role"] in ("system", "user"):
        return [{"role": m["role"], "content": content}]
    if m["role"] == "tool":
        return [{"role": "tool_response", "content": content}]
    reasoning = m.get("reasoning_content")
    if reasoning is not None and not isinstance(reasoning, str):
        raise InvalidValueError("reasoning_content must be a string", field=f"{where}.reasoning_content")
    check_think_block_closes_once(reasoning, f"{where}.reasoning_content", "ms-swift")
    calls = m.get("tool_calls") or []
    visible = content + "\n" if calls and content else content
    text = join_think(reasoning, visible)
    out = [{"role": "assistant", "content": text}] if text or not calls else []
    for j, call in enumerate(calls):
        function = call["function"]
        out.append({"role": "tool_call", "content": call_text(function["name"], function["arguments"],
                                                              f"{where}.tool_calls[{j}].function.arguments")})
    return out


def check_think_block_closes_once(reasoning: Any, field: str, target: str) -> None:
    """Reasoning is written inside ``<think>...</think>``, whose first ``</think>`` ends it (for the trainer's
    template and for our reader): reasoning holding one would come back cut there, the rest taken for the
    turn's text. There is no escape in that spelling, so such a row is refused."""
    if isinstance(reasoning, str) and "</think>" in reasoning:
        raise ConversionError(f"reasoning containing '</think>' would end the think block early ({target} and the "
                              "reader take the rest for the turn's text)", field=field)


def results_in_call_order(messages: list[dict], turn: int, end: int) -> list[dict]:
    """The results ``messages[turn + 1:end]`` of the calls of ``messages[turn]`` in call order (ms-swift pairs
    by position): see :func:`tooluse_datasets.pairing.results_in_call_order`."""
    return pairing.results_in_call_order(messages, turn, end, target="ms-swift")


def swift_tool(tool: dict, field: str) -> dict:
    """A unified tool as ms-swift needs it: a non-empty description and a parameters schema."""
    function = tool["function"]
    description = function.get("description")
    if not isinstance(description, str) or not description.strip():
        raise ConversionError(f"tool {function['name']!r} has no description; ms-swift's react/qwen agent "
                              "templates fail on it (add descriptions, or load with on_error='skip')",
                              field=f"{field}.function.description")
    parameters = function.get("parameters")
    if parameters is None:
        function = {**function, "parameters": dict(EMPTY_PARAMETERS)}
    elif not isinstance(parameters, dict):
        raise ConversionError("tool parameters must be a JSON Schema object", field=f"{field}.function.parameters")
    return {**tool, "function": function}


def _tool_text(tool: dict, field: str) -> str:
    """A unified tool as the ``tools`` text of a swift row holds it (:func:`swift_tool`), its integers checked."""
    text = spaced_dumps(swift_tool(tool, field), field)
    # An integer beyond 64 bits has 19 digits or more: only a tool whose text has such a run (rare; a long number
    # in a description too) is walked, which costs several times the dump itself.
    if _LONG_DIGIT_RUN.search(text):
        check_tool_integers(tool, field)
    return text


_LONG_DIGIT_RUN = re.compile(r"[0-9]{19}")


# ms-swift 4.6 stores parsed tools in a datasets ``Json`` column (map-style: pandas' ujson, which reads -2**63 to
# 2**64 - 1) or an Arrow struct (streaming: int64). An integer outside both fails its load of the whole file
# ("Value is too big!", or pyarrow's OverflowError), not just the row: refused here, naming it.
TOOL_INT_MIN, TOOL_INT_MAX = -(2**63), 2**63 - 1


def check_tool_integers(tool: Any, field: str) -> None:
    """Raise ConversionError naming the first integer of ``tool`` outside 64 bits. Iterative: tools may nest
    deeper than Python's recursion limit."""
    stack = [(tool, field)]
    while stack:
        value, where = stack.pop()
        if type(value) is int and not TOOL_INT_MIN <= value <= TOOL_INT_MAX:
            # 2**63 .. 2**64 - 1 fit ujson's unsigned range: only the streaming load (Arrow int64) fails on them;
            # below -2**63 ujson fails too ("Value is too small")
            how = ("ms-swift's streaming load (--streaming true) of a file whose tools hold one fails"
                   if TOOL_INT_MAX < value <= 2**64 - 1 else "ms-swift fails to load a file whose tools hold one")
            raise ConversionError(f"integer {value} does not fit in a signed 64-bit integer; {how} (every row of "
                                  "it), so it is not written (give it as a string or a float, or load with "
                                  "on_error='skip')", field=where)
        if isinstance(value, dict):
            stack.extend((v, f"{where}.{k}") for k, v in reversed(list(value.items())))
        elif isinstance(value, list):
            stack.extend((v, f"{where}[{i}]") for i, v in reversed(list(enumerate(value))))


def check_no_objects(meta: Any, rows: str = "swift rows", trainer: str = "ms-swift") -> None:
    """A grounding row (ms-swift's ``objects`` column, kept in ``meta``) is not written: its ``<ref-object>`` and
    ``<bbox>`` tags stand for entries of ``objects``, and without that column ms-swift trains on the tags as
    text. The column cannot be added to ``swift`` rows: ms-swift needs it as an object in the rows that have it
    (null or absent elsewhere; JSON text or ``{}`` make it drop the row), which one column type for every row of
    every source, in JSON Lines and Parquet alike, cannot give. Other writers whose format has no such column
    (``llamafactory``) refuse these rows the same way: ``rows`` and ``trainer`` name them in the message."""
    if isinstance(meta, dict) and meta.get("objects") is not None:
        raise ConversionError(f"the row has grounding objects (ms-swift's objects column), which {rows} do not "
                              f"carry; without them {trainer} would train on its <ref-object>/<bbox> tags as text "
                              "(load it with on_error='skip' to leave such rows out)", field="meta.objects")


def check_media_tags(messages: list[dict], media: list[Any], column: str, tag: str, target: str = "ms-swift") -> None:
    """Rule 9: as many tags as media. With fewer, ms-swift would prepend the missing tags to the first
    message (changing the row; LLaMA-Factory's vision plugins fail on it). Rows without media of a kind may
    contain the tag as plain text."""
    if not media:
        return
    tags = sum(m["content"].count(tag) for m in messages)
    if tags != len(media):
        raise ConversionError(f"{count_of(len(media), column.removesuffix('s'))} but {count_of(tags, f'{tag} tag')} "
                              f"in the messages; {target} needs one tag per entry", field=column)


SWIFT_FORMAT = Format(
    name="swift",
    description="ms-swift agent format: rows `swift sft` trains on as written (tools as JSON text, tool_call/"
                "tool_response messages, reasoning inline as <think>)",
    features=SWIFT_FEATURES,
    write=unified_to_swift,
)
