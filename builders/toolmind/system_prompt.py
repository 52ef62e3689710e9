"""The ToolMind system prompt: find the tool catalog in it, keep the domain instructions, render one back.

The card says the system turn holds "tool-use protocol + JSON tool schemas + domain-specific instructions",
in that order, but the layout of the schema block is not published (spec §5). The reader is therefore
tolerant: it scans the text for JSON values that start a line (or follow ``<tools>`` or ``<tool>``, in any case and
with attributes), and keeps those that are tool definitions, whichever of these layouts the row uses:

* one JSON array of tools;
* one JSON object per line (or pretty-printed objects, glaive style; or one per markdown list item, ``- {...}``);
* objects inside a ``<tools>...</tools>`` block (Hermes) or a ``<tool>...</tool>`` block (BUTTON);

each tool OpenAI-wrapped (``{"type": "function", "function": {...}}``) or bare (``{name, description,
parameters}``), with JSON-Schema parameters or xLAM-style parameter blocks (``{"radius": {"description",
"type": "str", "default"}}``, also under ``"arguments"``, When2Call's ``"type": "dict"``). Parsing never
fails: when nothing is found the row gets ``tools=[]`` and a flag. The exact text is kept by the caller, so
none of this normalisation has to be reversible.

Rows from other sources are written in one layout (:func:`render_system_prompt`): protocol, catalog, instructions.
Where the scan would read that text back otherwise (instructions holding a line of JSON that looks like a tool,
a ``<tools>`` block, a lead-in line or surrounding whitespace; tools the scan would normalise or merge), the
writer adds an ``## Instructions`` heading (:func:`render_marked_system_prompt`), and a text in exactly that
marked layout is read as it says: each catalog line one tool as written, the rest the instructions verbatim.
"""
from __future__ import annotations

import bisect
import functools
import json
import re
from dataclasses import dataclass, field
from typing import Any, Optional

from tooluse_datasets.codec import BIG_INT_MARK, dumps, json_bytes, loads_stored, may_nest_deep, try_loads
from tooluse_datasets.errors import JsonValueError

from .protocol import BALANCED_DECODER

PROTOCOL_HEADING = "## Tool-Use Protocol"

# Items 1-4 and the start of item 5 are verbatim (viewer cell, identical in three sibling datasets); the
# end of item 5 was cut by the viewer and is ours.
PROTOCOL_TEXT = (
    "## Tool-Use Protocol\n\n"
    "1. Reason inside <think>...</think> tags.\n"
    "2. Invoke one tool per turn using <tool_call> with JSON (keys: \"name\", \"arguments\").\n"
    "3. Environment returns results inside <tool_response>...</tool_response>.\n"
    "4. Reason again before the next action.\n"
    "5. When done or if no tool is needed, give the final answer inside <answer>...</answer>."
)
TOOLS_HEADING = "## Available Tools"
# Starts the instructions where the writer marks them (render_marked_system_prompt): what follows is their text.
INSTRUCTIONS_HEADING = "## Instructions"

# Where a tool catalog can start: a JSON array/object opening a line (or a markdown list item: "- {...}", "1. {...}"),
# or right after <tools> or <tool>. (Searched as "\n" + text: a pattern with a literal first character is scanned
# ~10x faster than one using ^.)
_ITEM_MARK = r"(?:[-*+]|\d+[.)])[ \t]+"
_LINE_START = re.compile(r"\n[ \t]*(?:" + _ITEM_MARK + r")?[\[{]")
_ITEM_PREFIX = re.compile(r"[ \t]*" + _ITEM_MARK)
# The tags in any case and with attributes, as prompts spell them (<TOOLS>, <tools type="json">); not <tool_call>.
_TOOLS_TAG = r"<tools?(?:[ \t][^<>\n]*)?(?<!/)>"
_AFTER_TOOLS_TAG = re.compile(_TOOLS_TAG + r"[ \t\r\n]*[\[{]", re.IGNORECASE)
_ENDS_WITH_TOOLS_TAG = re.compile(_TOOLS_TAG + r"\Z", re.IGNORECASE)
_NUMBERED_ITEM = re.compile(r"(\d+)\.\s")
_TOOLS_CLOSE = re.compile(r"\A\s*</tools?[ \t]*>", re.IGNORECASE)


@dataclass
class SystemPrompt:
    tools: list[dict] = field(default_factory=list)   # OpenAI function tools (and custom tools, refused by the reader)
    instructions: str = ""                              # domain text: the prompt without protocol and catalog
    tools_found: bool = False                           # a tool catalog was recognised
    # A tool was read by the stdlib's balanced scan, which takes 1e400 for inf and keeps lone surrogates (the
    # exact reader, orjson, refuses both): its values are not known to be storable as they are.
    scanned: bool = False
    # A value among the catalog's is not JSON (a tool cut short or mistyped): it is left in the instructions, where
    # its text is, and the row is flagged, so that a tool missing from `tools` does not go unnoticed.
    unreadable: bool = False


def parse_system_prompt(text: str) -> SystemPrompt:
    """Tools and domain instructions of a system text. Never raises."""
    if "\n" not in text and "\r" in text:
        text = text.replace("\r", "\n")  # lines ending in CR alone (classic Mac OS): read as lines, not one line
    marked = _parse_marked(text)
    if marked is not None:
        return marked
    spans, tools, scanned, failed = _scan_tool_catalog(text)
    if not spans:
        return SystemPrompt([], _strip_protocol(text).strip(), False)
    # A value cut short before the first tool starts the catalog: the lines introducing the catalog come before
    # it (`<tools>`, the sentence announcing the tags), and its text stays in the instructions, where it is.
    broken = _unreadable_in_catalog(text, spans, failed) if failed else []
    start = min([spans[0][0], *broken])
    head = _instructions_before(text[:start])
    opening = text[start:spans[0][0]].strip()
    # Text between two catalog values is instructions too (a domain prompt after the catalog that repeats a
    # tool, as glaive's "SYSTEM: ... -\n{tool}" does, or a second catalog with a heading of its own): only the
    # lines introducing the next value and a closing </tools> (or code fence) are left out, as around a single
    # catalog. (Between the tools of a one-per-line catalog there is only a line break: nothing to look at.)
    fenced = _open_fence(text[: spans[0][0]])
    gaps = []
    for i in range(1, len(spans)):
        if (gap := text[spans[i - 1][1]:spans[i][0]]).strip(_SEPARATORS):  # (not only the commas of a list)
            gaps.append(_strip_lead_in(_strip_close(gap, fenced)))
            fenced = _open_fence(gap, fenced)
    after = text[spans[-1][1]:]
    if any(at >= spans[-1][1] for at in broken):
        # A value cut short after the last tool: the catalog's </tools> (or fence) closes after its text.
        after = _strip_close_after(after, fenced, _ends_with_tools_tag(_last_line(text[:start])))
    tail = _strip_close(after, fenced).strip()
    instructions = "\n\n".join(part for part in (head, opening, *gaps, tail) if part)
    return SystemPrompt(_distinct(tools), instructions, True, scanned, bool(broken))


def _distinct(tools: list[dict]) -> list[dict]:
    """The tools without repeats of an identical definition (a catalog and a domain prompt that lists the same
    tool again): a tool listed twice is one tool. Definitions that differ, even under one name, all stay."""
    if len(tools) < 2:
        return tools
    try:
        if len({tool["function"]["name"] for tool in tools}) == len(tools):  # the usual case: nothing written out
            return tools
    except (KeyError, TypeError):  # (normalised tools all have a name: kept for safety)
        pass
    seen: set[bytes] = set()
    out = []
    for tool in tools:
        key = json_bytes(tool)
        if key not in seen:
            seen.add(key)
            out.append(tool)
    return out


def render_system_prompt(tools: list[dict], instructions: str) -> str:
    """A system text in the card's order (protocol, schemas, domain instructions); tools one JSON per line."""
    parts = [PROTOCOL_TEXT]
    if tools:
        parts.append(TOOLS_HEADING + "\n\n" + "\n".join(json.dumps(t, ensure_ascii=False) for t in tools))
    if instructions:
        parts.append(instructions)
    return "\n\n".join(parts)


def render_marked_system_prompt(tools: list[dict], instructions: str) -> str:
    """:func:`render_system_prompt` with the instructions under :data:`INSTRUCTIONS_HEADING` (also when empty),
    which :func:`parse_system_prompt` reads back as written whatever they hold."""
    catalog = render_system_prompt(tools, "")
    return f"{catalog}\n\n{INSTRUCTIONS_HEADING}\n\n{instructions}"


def _parse_marked(text: str) -> Optional[SystemPrompt]:
    """The tools and instructions of a text in exactly the marked layout, else None. The layout is checked
    before any JSON is read (most texts fail at the first character compared), and each catalog line must be
    an OpenAI function tool spelled as the writer spells it."""
    head = PROTOCOL_TEXT + "\n\n"
    if not text.startswith(head):
        return None
    pos = catalog_start = len(head)
    if text.startswith(TOOLS_HEADING + "\n\n", pos):
        catalog_start = pos + len(TOOLS_HEADING) + 2
        pos = text.find("\n\n", catalog_start) + 2
        if pos < 2:
            return None
    if not text.startswith(INSTRUCTIONS_HEADING + "\n\n", pos):
        return None  # (checked before the catalog is split: the card's own texts have no such heading)
    lines = text[catalog_start:pos - 2].split("\n") if pos > catalog_start else []
    tools = []
    for line in lines:
        ok, tool = try_loads(line)
        if not (ok and isinstance(tool, dict) and tool.get("type") == "function"
                and isinstance(tool.get("function"), dict) and isinstance(tool["function"].get("name"), str)
                and json.dumps(tool, ensure_ascii=False) == line):
            return None
        tools.append(tool)
    scanned = any(may_nest_deep(line) for line in lines)  # as the scan says of deep values (SystemPrompt.scanned)
    return SystemPrompt(tools, text[pos + len(INSTRUCTIONS_HEADING) + 2:], bool(tools), scanned)


# --------------------------------------------------------------------------------------------------
# Scanning
# --------------------------------------------------------------------------------------------------


def _scan_tool_catalog(text: str) -> tuple[list[tuple[int, int]], list[dict], bool, list[int]]:
    """Character spans of the JSON values that are tool definitions, the tools, in order, whether one was
    read by the balanced scan (see SystemPrompt.scanned), and where a value starts that is not JSON."""
    spans: list[tuple[int, int]] = []
    tools: list[dict] = []
    scanned = False
    failed: list[int] = []
    consumed = 0
    repair_budget = [_REPAIR_SCANS_PER_TEXT * len(text)]  # (see _decode_without_trailing_commas)
    starts = _candidate_starts(text)
    i = 0
    while i < len(starts):
        start = starts[i]
        i += 1
        if start < consumed:
            continue
        line = _line_at(text, start)
        found = _LINE_TOOLS.get(line, _UNSEEN) if line else _NOT_ONE_VALUE
        if found is _UNSEEN:
            found = _line_tools(line)
        if found is _NOT_ONE_VALUE:
            decoded = _decode_balanced(text, start, repair_budget)
            if decoded is None:
                failed.append(start)
                # A tool cut short before the next on its line (`{...}, {...}` with a closing brace lost): the
                # next is read where it starts, whole; the cut one is flagged where it is, as any other.
                following_start = _whole_tool_after_cut(text, start, repair_budget)
                if following_start is not None and following_start not in starts:
                    bisect.insort(starts, following_start, lo=i)
                continue
            value, end = decoded
            found = _as_tools(value)
            scanned = scanned or found is not None
        else:
            end = start + len(line)
            found = None if found is None else loads_stored(found)
        if found is None:
            # An empty array where a catalog is introduced ("## Available Tools\n\n[]": no tools, as json.dumps
            # writes them) is the catalog, empty: neither it nor its heading is instructions.
            if not (_EMPTY_ARRAY.fullmatch(text, start, end) and _introduces_tools(text[:start])):
                continue
            found = []
        spans.append((_item_start(text, start), end))
        tools.extend(found)
        consumed = end
        # A value right after this one on its line (`<tools>{...} {...}</tools>`, `{...}, {...}`) is the
        # catalog's next: no line start marks it.
        following = _SAME_LINE_VALUE.match(text, end)
        if following is not None and following.end() not in starts:
            bisect.insort(starts, following.end(), lo=i)
    return spans, tools, scanned, failed


# What may separate two catalog values on one line (or close a line before the next value): spaces and a comma
# (or a semicolon, as catalogs written as a list of statements end each tool).
_SAME_LINE_VALUE = re.compile(r"[ \t]*[,;]?[ \t]*(?=[\[{])")
_SEPARATORS = " \t\r\n,;"
_EMPTY_ARRAY = re.compile(r"\[[ \t\r\n]*\]")
# Where a catalog value may follow one that ends in a closing bracket on its line (the end of a value cut short).
_AFTER_CLOSED_VALUE = re.compile(r"[}\]][ \t]*[,;]?[ \t]*(?=[\[{])")


def _whole_tool_after_cut(text: str, start: int, repair_budget: list[int]) -> Optional[int]:
    """Where a whole tool starts after the object at ``start``, on its line, that is not JSON: the first value
    after a closing bracket that holds tools and ends its line, or is followed by the next value or a closing
    tag. (Values nested in the cut one, `"anyOf": [{...}, {...}]`, hold no tool or are followed by their
    parent's bracket.) An array cut short is not looked into: where its tools end is unknown."""
    if text[start] != "{":
        return None
    line_end = text.find("\n", start)
    for match in _AFTER_CLOSED_VALUE.finditer(text, start + 1, len(text) if line_end < 0 else line_end):
        decoded = _decode_balanced(text, match.end(), repair_budget)
        if decoded is None or _as_tools(decoded[0]) is None:
            continue
        if _ENDS_CATALOG_VALUE.match(text, decoded[1]):
            return match.end()
    return None


# What may follow a catalog value on its line: the line's end, the next value, or a closing tag.
_ENDS_CATALOG_VALUE = re.compile(r"[ \t]*(?:\r?$|[,;]?[ \t]*[\[{]|</tools?[ \t]*>)", re.IGNORECASE | re.MULTILINE)


# How a catalog value that is not JSON starts: an object with a key, or a list of objects (prose that opens a
# line with a bracket, "[Note] ..." or "{name} will ...", does not).
_JSON_START = re.compile(r'[\[{][ \t\r\n]*["{]')


# What a format example holds where JSON wants a value or a key: `{"name": <function-name>, ...}` (chat
# templates), `{"name": "...", "arguments": {...}}` (the card). (A closing tag is no placeholder: a tool cut
# short right before `</tools>` stops there.)
_PLACEHOLDER = re.compile(r"<[^</>\n][^<>\n]*>|\.\.\.|\u2026")
_EXPECTING_VALUE_OR_KEY = ("Expecting value", "Expecting property name enclosed in double quotes")


def _unreadable_in_catalog(text: str, spans: list[tuple[int, int]], failed: list[int]) -> list[int]:
    """Where the values that are not JSON (``failed``: where each starts) and belong to the catalog start: one
    between its first and last tool, right after its last (only whitespace and a comma between), or right before
    its first (nothing but whitespace and a comma after the bracket that ends it, or where the catalog starts: after
    a line introducing it, or in the code fence its first tool is in). A format example is none of the catalog's.
    A value that is a list item starts at its marker."""
    first, last = spans[0][0], spans[-1][1]
    broken = []
    for value_start in failed:
        if not _JSON_START.match(text, value_start) or _is_format_example(text, value_start):
            continue
        start = _item_start(text, value_start)
        if first < start < last or (start >= last and not text[last:start].strip(_SEPARATORS)):
            broken.append(start)
        elif start < first and text[start:first].rstrip(_SEPARATORS)[-1:] in ("}", "]"):
            broken.append(start)
        elif start < first and _introduces_tools(text[:start]):
            broken.append(start)  # where a catalog starts (an array cut short takes every tool in it along)
        elif start < first and _open_fence(text[:start]) and not _FENCE_LINE.search(text, start, first):
            broken.append(start)  # in the code fence the first tool is in
    return broken


def _introduces_tools(before: str) -> bool:
    """Whether ``before`` ends on a line that introduces a tool catalog: ``<tools>``/``<tool>``, or a heading or a
    line ending in ':' that names tools or functions ("## Available Tools", "You may call these functions:")."""
    stripped = before.rstrip()
    line = stripped[stripped.rfind("\n") + 1:].strip()
    if not _is_lead_in(line):
        return False
    lowered = line.lower()
    return _ends_with_tools_tag(line) or "tool" in lowered or "function" in lowered


def _is_format_example(text: str, start: int) -> bool:
    """Whether the value at ``start`` stops being JSON at a placeholder: an example of the call format, not a
    tool cut short or mistyped (which stops at its end, or at the typo)."""
    try:
        BALANCED_DECODER.raw_decode(text, start)
    except json.JSONDecodeError as exc:
        return exc.msg in _EXPECTING_VALUE_OR_KEY and _PLACEHOLDER.match(text, exc.pos) is not None
    except (ValueError, RecursionError):
        pass
    return False


# A catalog line (one JSON value filling its line) -> its tools as stored JSON text, None if it holds no tool,
# _NOT_ONE_VALUE if it is not a JSON value on its own. Tool definitions repeat across rows (the same APIs),
# so most lines are parsed and normalised once; the tools are re-read from the text, fresh for every row.
_LINE_TOOLS: dict[str, Any] = {}
_LINE_TOOLS_MAX = 8192
_UNSEEN, _NOT_ONE_VALUE = object(), object()


def _line_at(text: str, start: int) -> str:
    """The rest of the line from ``start``, if it may hold one JSON value (ends with a bracket), else ""."""
    line_end = text.find("\n", start)
    line = text[start: len(text) if line_end < 0 else line_end].rstrip()
    return line if line and line[-1] in "}]" else ""


def _line_tools(line: str) -> Any:
    ok, value = try_loads(line)
    if not ok:
        found: Any = _NOT_ONE_VALUE
    else:
        try:
            texts = _tool_texts(value)
            found = None if texts is None else _stored_list(texts)
        except JsonValueError:  # too deep to cache as text: read like a catalog that does not fill its line
            found = _NOT_ONE_VALUE
    if len(_LINE_TOOLS) >= _LINE_TOOLS_MAX:
        _LINE_TOOLS.clear()
    _LINE_TOOLS[line] = found
    return found


def _item_start(text: str, start: int) -> int:
    """Where the line of the value at ``start`` starts if only a list item's marker comes before it on that line
    (the marker goes with the value, not into the instructions), else ``start``."""
    line_start = text.rfind("\n", 0, start) + 1
    return line_start if line_start < start and _ITEM_PREFIX.fullmatch(text, line_start, start) else start


def _candidate_starts(text: str) -> list[int]:
    # The bracket is a match's last character: m.end() - 1 in "\n" + text, so m.end() - 2 in text.
    starts = [m.end() - 2 for m in _LINE_START.finditer("\n" + text)]
    after_tags = [m.end() - 1 for m in _AFTER_TOOLS_TAG.finditer(text)]
    # A catalog on its lead-in line ("Tools: {...}", "You have access to the following tools: [{...}]")
    after_lead_ins = [m.end() - 1 for m in _LEAD_IN_VALUE.finditer(text) if _introduces_tools(m.group()[:-1])]
    if after_tags or after_lead_ins:
        starts = sorted(set(starts).union(after_tags, after_lead_ins))
    return starts


# A line of prose up to a colon and the bracket opening a value (no quote or bracket before it: not a key of JSON)
_LEAD_IN_VALUE = re.compile(r'^[^"\[{\n]*:[ \t]*[\[{]', re.MULTILINE)


def _decode_balanced(text: str, start: int, repair_budget: list[int]) -> Optional[tuple[Any, int]]:
    """A value that does not fill its line (pretty-printed, or followed by text): the balanced scan."""
    try:
        return BALANCED_DECODER.raw_decode(text, start)
    except json.JSONDecodeError as exc:
        return _decode_without_trailing_commas(text, start, exc, repair_budget)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than the stdlib reads
        return None


# The characters the repairs of one system text may scan (_decode_without_trailing_commas), as a multiple of its
# length: a value that never closes (cut short) is scanned to the end of the text, so that a text of many such
# values would otherwise cost seconds.
_REPAIR_SCANS_PER_TEXT = 2
# What tells where a JSON value ends and which of its commas close nothing: strings (skipped whole), brackets, and
# commas before a closing bracket.
_VALUE_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]|,(?=[ \t\r\n]*[\]}])')


def _decode_without_trailing_commas(text: str, start: int, exc: json.JSONDecodeError,
                                    budget: list[int]) -> Optional[tuple[Any, int]]:
    """The value at ``start`` if all that keeps it from being JSON is commas right before closing brackets
    (``[{...}, {...},]``, ``{..., "required": ["q"],}``, as hand-edited catalogs have them), read as if they were
    absent, and where it ends in ``text``; else None. (What else is not JSON stays so: a tool cut short is flagged.)
    The value's text is scanned once, however many such commas it holds; ``budget``: the characters the text's
    repairs may still scan (decreased)."""
    if _trailing_comma(text, start, exc) is None or budget[0] <= 0:
        return None
    depth, commas, end = 0, [], len(text)
    for token in _VALUE_TOKENS.finditer(text, start):
        char = text[token.start()]
        if char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
            if depth == 0:
                end = token.end()
                break
        elif char == ",":
            commas.append(token.start())
    budget[0] -= end - start
    if depth:
        return None
    source = "".join(text[left + 1:right] for left, right in zip([start - 1, *commas], [*commas, end]))
    try:
        value, stop = BALANCED_DECODER.raw_decode(source)
    except (ValueError, RecursionError):
        return None
    return (value, end) if stop == len(source) else None


def _trailing_comma(source: str, start: int, exc: json.JSONDecodeError) -> Optional[int]:
    """Where the comma is if ``exc`` (decoding ``source`` from ``start``) stops at one right before a closing
    bracket, else None. The stdlib says so at the comma from Python 3.13 ("Illegal trailing comma before end of
    array"), and before that at the bracket, as of any missing value ("Expecting value")."""
    pos = exc.pos
    if exc.msg.startswith("Illegal trailing comma"):
        return pos if source[pos:pos + 1] == "," else None
    if exc.msg not in _EXPECTING_VALUE_OR_KEY or source[pos:pos + 1] not in ("]", "}"):
        return None
    comma = pos - 1
    while comma > start and source[comma] in " \t\r\n":
        comma -= 1
    return comma if source[comma] == "," else None


def _as_tools(value: Any) -> Optional[list[dict]]:
    """The tools a decoded JSON value holds, or None if it is not a tool definition (or a list of them)."""
    try:
        texts = _tool_texts(value)
    except JsonValueError:  # a tool that cannot be stored as it is: normalised as it is, refused where it is stored
        return _normalized_tools(value, normalize_tool)
    return None if texts is None else [loads_stored(text) for text in texts]


def _tool_texts(value: Any) -> Optional[list[str]]:
    """:func:`_as_tools` as the stored JSON text of each tool (:func:`_normalized_text`). Raises
    :class:`JsonValueError` for a tool nested too deep to store."""
    return _normalized_tools(value, _normalized_text)


def _normalized_tools(value: Any, normalize: Any) -> Optional[list]:
    if isinstance(value, dict) and isinstance(value.get("tools"), list) and "name" not in value:
        value = value["tools"]
    if isinstance(value, dict):
        tool = normalize(value)
        return [tool] if tool is not None else None
    if isinstance(value, list) and value:
        tools = [normalize(v) for v in value]
        if all(t is not None for t in tools):
            return tools
    return None


def _stored_list(texts: list[str]) -> str:
    """The stored JSON text of the list of these stored texts: joined, unless one holds an integer beyond 64 bits
    (marked text, read by the stdlib) or the list could nest one level too deep (then written anew, refused
    where it is too deep)."""
    joined = "[" + ",".join(texts) + "]"
    if any(text[:1] == BIG_INT_MARK for text in texts) or may_nest_deep(joined):
        return dumps([loads_stored(text) for text in texts])
    return joined


# A tool definition's stored JSON text -> its normalised tool as stored JSON text, or None if it is no tool. A
# catalog written as one JSON array is one line that rarely repeats (each row lists its own set of tools), but its
# tools do: normalising them is most of the cost of reading such a catalog. (The key is written by codec.dumps,
# which refuses NaN and infinities: orjson alone writes them as null, the key of another definition.)
_NORMALIZED: dict[str, Optional[str]] = {}
_NORMALIZED_MAX = 8192


def _normalized_text(value: Any) -> Optional[str]:
    """:func:`normalize_tool` as stored JSON text (None: not a tool), computed once per distinct definition.
    Raises :class:`JsonValueError` for a tool that cannot be stored as it is (too deep, NaN or infinite)."""
    if not isinstance(value, dict):
        return None
    key = dumps(value)
    text = _NORMALIZED.get(key, _UNSEEN)
    if text is _UNSEEN:
        tool = normalize_tool(value)
        text = None if tool is None else dumps(tool)
        if len(_NORMALIZED) >= _NORMALIZED_MAX:
            _NORMALIZED.clear()
        _NORMALIZED[key] = text
    return text


# --------------------------------------------------------------------------------------------------
# Tool normalisation
# --------------------------------------------------------------------------------------------------

_FUNCTION_KEYS = ("name", "description", "parameters", "arguments", "required")

# Python-ish parameter types of xLAM/When2Call/ToolACE-derived tools -> JSON Schema.
_PY_TYPES: dict[str, dict] = {
    "str": {"type": "string"}, "string": {"type": "string"},
    "int": {"type": "integer"}, "integer": {"type": "integer"},
    "float": {"type": "number"}, "number": {"type": "number"},
    "bool": {"type": "boolean"}, "boolean": {"type": "boolean"},
    "list": {"type": "array"}, "array": {"type": "array"}, "tuple": {"type": "array"}, "set": {"type": "array"},
    "dict": {"type": "object"}, "object": {"type": "object"},
    "null": {"type": "null"}, "none": {"type": "null"},
    "any": {},
}
_JSON_SCHEMA_TYPES = {"string", "integer", "number", "boolean", "array", "object", "null"}
_GENERIC = re.compile(r"^(list|tuple|set|sequence)\[(.+)\]$", re.IGNORECASE)


def normalize_tool(obj: Any) -> Optional[dict]:
    """An OpenAI function tool with JSON-Schema parameters, or None if ``obj`` is not a tool definition. A
    custom tool (see :func:`custom_tool`) comes back as a custom tool, for the reader to refuse."""
    if not isinstance(obj, dict):
        return None
    custom = custom_tool(obj)
    if custom is not None:
        return custom
    fn = obj.get("function")
    wrapped = isinstance(fn, dict) and obj.get("type", "function") == "function"
    base = fn if wrapped else obj
    name = base.get("name")
    if not isinstance(name, str) or not name:
        return None
    given = base.get("parameters")
    if isinstance(given, str):  # the schema's JSON text (a tools column stored as text), decoded as ms-swift does
        decoded_ok, decoded = try_loads(given)
        if decoded_ok and isinstance(decoded, dict):
            base = {**base, "parameters": decoded}
    params_key = _parameters_key(base)
    # {"name": ...} alone is as likely a call example as a tool; an OpenAI declaration is a tool whatever it
    # leaves out (description and parameters are optional there), unless it names arguments, as calls do.
    declared = wrapped and obj.get("type") == "function" and "arguments" not in fn
    # {"name", "parameters": {"query": "text"}} is a call as Llama 3.1 and DR-Tulu spell it: its parameters
    # are values, where a tool's describe them.
    described = params_key == "arguments" or (params_key == "parameters" and _describes_parameters(base[params_key]))
    if not described and "description" not in base and not declared:
        return None
    function: dict = {"name": name}
    if "description" in base:
        function["description"] = base["description"]
    if params_key is None and given is not None and not isinstance(base.get("parameters"), dict):
        # Parameters of no shape read here (a list, text): kept as given, for validation to report
        # (tool.invalid_schema), not replaced by an empty schema that says the tool takes none.
        function["parameters"] = given
    else:
        function["parameters"] = to_json_schema(base.get(params_key) if params_key else None, base.get("required"))
    # A flat declaration (OpenAI's Responses API) spells the tool's own "type" beside the function's keys.
    flat_type = not wrapped and obj.get("type") == "function"
    for key, value in base.items():
        if key not in _FUNCTION_KEYS and not (flat_type and key == "type"):
            function[key] = value  # extras (strict, response schemas...) stay inside `function`
    if "required" in base and not (isinstance(function["parameters"], dict)
                                   and isinstance(function["parameters"].get("required"), list)):
        function["required"] = base["required"]
    return {"type": "function", "function": function}


def custom_tool(obj: dict) -> Optional[dict]:
    """An OpenAI custom tool, in the Chat Completions shape ``{"type": "custom", "custom": {"name", "description",
    "format"}}``, if ``obj`` declares one (flat as in the Responses API, or in that shape), else None. Its input is
    free text (or text a grammar describes), not JSON arguments: read as a function it would get empty parameters
    and teach calls with ``{}``."""
    if obj.get("type") != "custom":
        return None
    declared = obj["custom"] if isinstance(obj.get("custom"), dict) else obj
    if not isinstance(declared.get("name"), str) or not declared["name"]:
        return None
    return {"type": "custom", "custom": {k: v for k, v in declared.items() if not (declared is obj and k == "type")}}


def _parameters_key(base: dict) -> Optional[str]:
    if isinstance(base.get("parameters"), dict):
        return "parameters"
    args = base.get("arguments")
    # An xLAM-style block under "arguments" maps parameter names to spec objects; a call's arguments
    # ({"city": "Paris"}) do not, which keeps call examples in prose from passing for tools (nor do a call's empty
    # arguments, {"name": "get_time", "arguments": {}}: a tool without parameters is told by its description).
    if isinstance(args, dict) and args and all(isinstance(v, dict) for v in args.values()):
        return "arguments"
    return None


def _describes_parameters(params: dict) -> bool:
    """A JSON Schema object or an xLAM-style block (each parameter a spec object)."""
    return _is_schema_object(params) or all(isinstance(v, dict) for v in params.values())


def to_json_schema(params: Any, outer_required: Any = None) -> dict:
    """JSON Schema ``{"type": "object", "properties", "required"}`` from any known parameter block."""
    if not isinstance(params, dict):
        return {"type": "object", "properties": {}}
    if _is_schema_object(params):
        out = dict(params)
        if out.get("type") in ("dict", None):
            out["type"] = "object"
        if isinstance(out.get("properties"), dict):
            out["properties"] = {k: _schema_property(v) for k, v in out["properties"].items()}
        elif out.get("properties") is None:
            out["properties"] = {}
        # (properties of another shape are kept as given, for validation to report: tool.invalid_schema)
        if "required" not in out and isinstance(outer_required, list):
            out["required"] = outer_required
        return out
    # xLAM-style: {param: {"description", "type": "str, optional", "default"}}
    properties = {k: _schema_property(v) for k, v in params.items()}
    required = [k for k, v in params.items()
                if isinstance(v, dict) and "default" not in v and "optional" not in str(v.get("type", "")).lower()]
    if isinstance(outer_required, list):
        required = outer_required
    schema: dict = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def _is_schema_object(params: dict) -> bool:
    return params.get("type") in ("object", "dict") or (
        isinstance(params.get("properties"), dict) and not isinstance(params.get("properties", {}).get("type"), str))


def _schema_property(prop: Any) -> Any:
    if not isinstance(prop, dict):
        return prop
    t = prop.get("type")
    if not isinstance(t, str) or t in _JSON_SCHEMA_TYPES:
        return prop
    mapped = _python_type(t)
    out = {k: v for k, v in prop.items() if k != "type"}
    if mapped is None:
        # Free text that is no type we know: keep it readable in the description instead of guessing.
        out["description"] = f"{out.get('description') or ''} (type: {t})".strip()
        return out
    return {**mapped, **out}


def _python_type(t: str) -> Optional[dict]:
    base = t.strip()
    if base.lower().endswith(", optional"):
        base = base[: -len(", optional")].strip()
    known = _PY_TYPES.get(base.lower())
    if known is not None:
        return dict(known)
    generic = _GENERIC.match(base)
    if generic:
        inner = _python_type(generic.group(2))
        return {"type": "array", "items": inner} if inner else {"type": "array"}
    if base.lower().startswith(("dict[", "mapping[")):
        return {"type": "object"}
    if base.lower().startswith(("union[", "optional[")) or "|" in base:
        return {}
    return None


# --------------------------------------------------------------------------------------------------
# Instructions
# --------------------------------------------------------------------------------------------------


def _strip_protocol(text: str) -> str:
    """Text without a leading "## Tool-Use Protocol" heading and its numbered list."""
    stripped = text.lstrip()
    if not stripped.startswith(PROTOCOL_HEADING):
        return text
    lines = stripped.split("\n")
    if lines[0].rstrip() != PROTOCOL_HEADING:
        return text  # a first line that goes on after the heading's words is prose, not the heading
    i, last_item, blank = 1, 0, False
    while i < len(lines):
        line = lines[i]
        item = _NUMBERED_ITEM.match(line)
        if not line.strip():
            blank = True
            i += 1
        elif item and (not blank or not last_item or int(item.group(1)) == last_item + 1):
            # An item of the protocol's list; after a blank line only one that goes on with its numbering (a
            # list numbered anew, "1. ...", is the domain instructions').
            last_item, blank = int(item.group(1)), False
            i += 1
        elif last_item and not blank and line[:1] in (" ", "\t"):
            i += 1  # continuation of a list item
        else:
            break
    return "\n".join(lines[i:])


@functools.lru_cache(maxsize=1024)
def _instructions_before(head: str) -> str:
    """The instructions in the text before the catalog: usually the protocol and a heading, the same text in
    row after row (hence the cache)."""
    return _strip_lead_in(_strip_protocol(head))


def _ends_with_tools_tag(line: str) -> bool:
    return line.endswith(">") and _ENDS_WITH_TOOLS_TAG.search(line) is not None


def _is_lead_in(line: str) -> bool:
    """A (stripped) line that may introduce a catalog: a heading, a line ending in ':', or one ending in a tools tag."""
    return line.startswith("#") or line.endswith(":") or _ends_with_tools_tag(line)


# Where a sentence ends inside a line: what follows it on a lead-in line introduces the catalog.
# (Not a list item's number: "2. The tools:" is one sentence.)
_SENTENCE_END = re.compile(r"(?<![\d\s])[.!?][)\"']?[ \t]+(?=\S)")


def _strip_lead_in(head: str) -> str:
    """Drop the heading / "...tags:" / ``<tools>`` (``<tool>``) / code fence lines that introduce the catalog.
    Of a lead-in line that holds sentences before the one introducing the catalog ("You are an expert in using
    functions. The functions available are detailed below:", BUTTON's), only that last sentence is dropped."""
    lines = head.rstrip().split("\n")
    while lines:
        last = lines[-1].strip()
        if last and _is_lead_in(last) and not last.startswith("#"):
            ends = [m.end() for m in _SENTENCE_END.finditer(last)]
            if ends:
                lines[-1] = last[:ends[-1]].rstrip()
                break
        if not last or _is_lead_in(last):
            lines.pop()
        elif last.startswith(_FENCES) and _open_fence("\n".join(lines)):
            lines.pop()  # the fence the catalog is in (not one closing a code block of the instructions)
        else:
            break
    return "\n".join(lines).strip()


# Markdown's two kinds of code fence: one is closed by a fence line of its own kind only.
_FENCES = ("```", "~~~")
_FENCE_LINE = re.compile(r"^[ \t]*(```|~~~)", re.MULTILINE)
# (A line may end in CRLF: Windows text.)
_FENCE_CLOSE = {fence: re.compile(r"\A\s*" + fence + r"[ \t]*\r?(?:\n|\Z)") for fence in _FENCES}


def _open_fence(text: str, fence: str = "") -> str:
    """The markdown code fence (``"```"``, ``"~~~"``) ``text`` leaves open when it starts inside ``fence``
    (``""``: none), ``""`` when it leaves none."""
    if _FENCES[0] not in text and _FENCES[1] not in text:
        return fence
    for line in _FENCE_LINE.finditer(text):
        if not fence:
            fence = line.group(1)
        elif line.group(1) == fence:
            fence = ""
    return fence


def _last_line(text: str) -> str:
    stripped = text.rstrip()
    return stripped[stripped.rfind("\n") + 1:].strip()


def _strip_close_after(after: str, fenced: str, tagged: bool) -> str:
    """The text after a catalog whose last value is not JSON without the catalog's closing ``</tools>`` (when a
    tag opened it) or, in a fence, the fence line closing it: where that value ends is unknown, so the first
    close after it is the catalog's."""
    if tagged and (close := _TOOLS_CLOSE_TAG.search(after)) is not None:
        after = after[:close.start()] + after[close.end():]
    if fenced and (fence := _FENCE_CLOSE_LINE[fenced].search(after)) is not None:
        after = after[:fence.start()] + after[fence.end():]
    return after


# (A tag on a line of its own goes with its line break, as a fence line does.)
_TOOLS_CLOSE_TAG = re.compile(r"^[ \t]*</tools?[ \t]*>[ \t]*\r?(?:\n|\Z)|</tools?[ \t]*>", re.IGNORECASE | re.MULTILINE)
_FENCE_CLOSE_LINE = {fence: re.compile(r"^[ \t]*" + fence + r"[ \t]*\r?(?:\n|\Z)", re.MULTILINE) for fence in _FENCES}


# A list comma after a catalog value that ends its line or the catalog (`{...},` as the last tool of scraped
# catalogs; a semicolon or full stop where each tool is written as a statement): a separator, as between two tools,
# not the start of the instructions. (A comma prose goes on after is the prose's.)
_TRAILING_COMMA = re.compile(r"[ \t\r\n]*[,;.](?=[ \t]*(?:\r?\n|\Z|</tools?[ \t]*>))", re.IGNORECASE)


def _strip_close(after: str, fenced: str) -> str:
    """The text after a catalog value without a trailing list comma, the ``</tools>`` (``</tool>``) and, in a
    fence, the fence closing it."""
    if (comma := _TRAILING_COMMA.match(after)) is not None:
        after = after[comma.end():]
    after = _TOOLS_CLOSE.sub("", after, count=1)
    return _FENCE_CLOSE[fenced].sub("", after, count=1) if fenced else after
