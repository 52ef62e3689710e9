"""The ToolMind message protocol: roles, tag wrappers, the card's transition FSM, call JSON.

Everything here is shared by the reader (``source.py``) and the writer (``writer.py``), so that what one
parses the other renders back byte for byte.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from tooluse_datasets.codec import loads, python_json_text, try_loads
from tooluse_datasets.errors import InvalidJsonError, InvalidValueError, MissingFieldError, as_json, json_kind

ROLES = ("system", "user", "reasoning", "tool_call", "tool_output", "answer")

# role -> the tag its content is wrapped in (system and user content is plain text).
WRAPPER_TAG: dict[str, str] = {
    "reasoning": "think",
    "tool_call": "tool_call",
    "tool_output": "tool_response",
    "answer": "answer",
}

# The card rejects empty <think>, <tool_call> and <answer> blocks; a tool may return nothing, so an empty
# <tool_response> is within its format (an upstream tool message with empty content, wrapped).
MAY_BE_EMPTY = frozenset({"tool_response"})

# The card's "Validated Transitions": role -> roles allowed next (None = start of the conversation).
# Grammar: system (user reasoning (tool_call tool_output reasoning)* answer)+
TRANSITIONS: dict[Optional[str], frozenset[str]] = {
    None: frozenset({"system"}),
    "system": frozenset({"user"}),
    "user": frozenset({"reasoning"}),
    "reasoning": frozenset({"tool_call", "answer"}),
    "tool_call": frozenset({"tool_output"}),
    "tool_output": frozenset({"reasoning"}),
    "answer": frozenset({"user"}),
}
FINAL_ROLES = frozenset({"answer"})
# Sibling datasets (e.g. text_to_terminal) sample rows that stop right after a call.
FINAL_ROLES_WITH_TRAILING_CALL = frozenset({"answer", "tool_call"})

# Call JSON keys: the card's `arguments`; the DR-Tulu ancestor writes `parameters`.
ARGUMENT_KEYS = ("arguments", "parameters")

# How the `messages` column was serialized. Python's json.dumps defaults (", " / ": " separators, as the
# viewer shows) with ensure_ascii on or off; a native list column; or text neither reproduces.
ENCODING_ASCII = "json-ascii"
ENCODING_UTF8 = "json-utf8"
ENCODING_LIST = "list"
ENCODING_VERBATIM = "verbatim"
DEFAULT_ENCODING = ENCODING_ASCII


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# Stdlib decoder (C scanner): ``raw_decode(text, pos)`` consumes exactly one brace/bracket-balanced JSON
# value starting at ``pos`` (strings and escapes respected) and reports where it ends. Used to find tool
# catalogs inside free text and to tell how far a truncated messages cell parses. Integers are exact;
# NaN/Infinity are refused, as everywhere else in the package.
BALANCED_DECODER = json.JSONDecoder(parse_constant=_reject_constant)

@dataclass(frozen=True)
class FsmViolation:
    index: int       # message at which the FSM fails (len(roles) - 1 for a bad ending)
    message: str


def fsm_violation(roles: Sequence[str], *, allow_trailing_call: bool = False) -> Optional[FsmViolation]:
    """The first place where ``roles`` breaks the card's FSM, or None if the sequence is valid."""
    previous: Optional[str] = None
    for i, role in enumerate(roles):
        allowed = TRANSITIONS.get(previous, frozenset())
        if role not in allowed:
            after = "at the start" if previous is None else f"after {as_json(previous)}"
            return FsmViolation(i, f"{as_json(role)} {after} breaks the ToolMind FSM (allowed: {_roles_text(allowed)})")
        previous = role
    final = FINAL_ROLES_WITH_TRAILING_CALL if allow_trailing_call else FINAL_ROLES
    if previous not in final:
        last = max(len(roles) - 1, 0)
        ending = "an empty conversation" if previous is None else f"a conversation ending on {as_json(previous)}"
        return FsmViolation(last, f"{ending} breaks the ToolMind FSM (it must end on {_roles_text(final)})")
    return None


def _roles_text(roles: frozenset) -> str:
    """Roles as a message lists them (``"answer" or "tool_call"``), not as a Python list."""
    return " or ".join(map(as_json, sorted(roles))) or "no further message"


# --------------------------------------------------------------------------------------------------
# Wrappers
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Unwrapped:
    text: str     # what is inside the tags, surrounding whitespace removed
    exact: bool   # wrap(text, tag, padding) gives the original content byte for byte


def wrapper_padding(content: str, tag: str) -> str:
    """``"\\n"`` if the content is written ``<tag>\\n...\\n</tag>`` (DR-Tulu style), else ``""`` (the card)."""
    s = content.strip()
    inner = s[len(tag) + 2: len(s) - len(tag) - 3]
    return "\n" if len(inner) >= 2 and inner[0] == "\n" and inner[-1] == "\n" else ""


def unwrap(content: str, tag: str, padding: str, field: str) -> Unwrapped:
    """Strip exactly one outer ``<tag>...</tag>``; raise a typed error naming ``field`` if it is missing."""
    open_tag, close_tag = f"<{tag}>", f"</{tag}>"
    s = content.strip()
    if not s.startswith(open_tag):
        shown = s[:40] + ("..." if len(s) > 40 else "")
        raise InvalidValueError(f"content must be wrapped in {open_tag}...{close_tag}, got {shown!r}", field=field)
    if len(s) < len(open_tag) + len(close_tag) or not s.endswith(close_tag):
        closed = s.rfind(close_tag, len(open_tag))
        if closed >= 0:  # closed, then text: a result or answer with prose after it is no unterminated block
            after = s[closed + len(close_tag):]
            shown = after[:40] + ("..." if len(after) > 40 else "")
            raise InvalidValueError(f"text after the closing {close_tag}: {shown!r} (the content must be one "
                                    f"{open_tag}...{close_tag} block and nothing else)", field=field)
        raise InvalidValueError(f"unterminated {open_tag} wrapper: the content does not end with {close_tag}",
                                field=field)
    inner = s[len(open_tag): len(s) - len(close_tag)]
    text = inner.strip()
    # content == wrap(text, tag, padding), decided without building a copy of a possibly 100 KB text:
    # no whitespace outside the tags, and exactly `padding` on each side inside them.
    exact = (len(s) == len(content) and len(inner) == len(text) + 2 * len(padding)
             and inner.startswith(padding) and inner.endswith(padding))
    return Unwrapped(text, exact)


def wrap(text: str, tag: str, padding: str = "") -> str:
    return f"<{tag}>{padding}{text}{padding}</{tag}>"


# Where a message closes one block and opens the next ("</think>\n<think>"): the card wraps each reasoning,
# result and answer turn in one block (several results are several tool_output turns, consecutive reasoning
# turns were merged), so a message holding several is outside its grammar. A tag only quoted in the text
# ("Reason inside <think>...</think> tags") is no seam.
_BLOCK_SEAMS = {tag: re.compile(rf"</{tag}>\s*<{tag}>") for tag in WRAPPER_TAG.values()}


def block_count(text: str, tag: str) -> int:
    """How many ``<tag>`` blocks a message's content (or the text inside its outer tags) holds: 1 + its seams."""
    return 1 + len(_BLOCK_SEAMS[tag].findall(text))


def blocks(text: str, tag: str) -> list[str]:
    """The texts of the blocks inside a message's outer tags (one for a message the card's grammar allows)."""
    return [block.strip() for block in _BLOCK_SEAMS[tag].split(text)]


# --------------------------------------------------------------------------------------------------
# Calls
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParsedCall:
    name: str
    arguments: dict
    key: str          # which key held the arguments: "arguments" or "parameters"


def dump_json(value: Any, ensure_ascii: bool) -> str:
    """JSON text as Python's ``json.dumps`` writes it by default (", " and ": " separators), for the writer's
    rows (cycle-checked: they may come from users)."""
    return python_json_text(value, ensure_ascii, check_circular=True)


def render_call(name: str, arguments: Any, key: str, ensure_ascii: bool) -> str:
    return dump_json({"name": name, key: arguments}, ensure_ascii)


def renders_call(text: str, name: str, arguments: Any, key: str, ensure_ascii: bool) -> bool:
    """``text == render_call(...)`` for ``arguments`` parsed from JSON (no cycle to check), skipping the
    rendering when the text cannot be it."""
    return text.startswith('{"name": ') and text == python_json_text({"name": name, key: arguments}, ensure_ascii)


def parse_call(text: str, field: str, *, arguments_key: str, tolerant: bool = False) -> ParsedCall:
    """The ``{"name", "arguments"}`` object inside ``<tool_call>``.

    The object must carry ``name`` and ``arguments_key`` (the card validates these keys), whose value is an
    object or a JSON string holding one (glaive heritage, decoded: the caller keeps the text it came from). The
    reader applies this in every mode. ``tolerant`` (the writer, recognising text it recorded): the other
    argument key is accepted too.
    """
    try:
        value = loads(text)
    except (ValueError, TypeError, RecursionError) as exc:  # the reason says what is wrong (a NaN, 1e400, a cut)
        raise InvalidJsonError(f"tool call is not valid JSON ({exc}): {text[:60]!r}{'...' if len(text) > 60 else ''}",
                               field=field) from None
    if not isinstance(value, dict):
        raise InvalidValueError(f"tool call must be a JSON object, got {json_kind(value)}", field=field)
    if "name" not in value:
        raise MissingFieldError("tool call has no name", field=f"{field}.name")
    name = value["name"]
    if not isinstance(name, str) or not name:  # a name given, of the wrong kind: not a missing one
        shown = '""' if name == "" else json_kind(name)
        raise InvalidValueError(f"tool call name must be non-empty text, not {shown}", field=f"{field}.name")
    keys = (arguments_key,) + (tuple(k for k in ARGUMENT_KEYS if k != arguments_key) if tolerant else ())
    key = next((k for k in keys if k in value), None)
    if key is None:
        # Calls spelled with the other key (DR-Tulu's "parameters") are read with the option naming it.
        other = next((k for k in ARGUMENT_KEYS if k in value and k not in keys), None)
        hint = f" but has {other!r} (read such rows with arguments_key={other!r})" if other else ""
        raise MissingFieldError(f"tool call lacks {' or '.join(map(repr, keys))}{hint}",
                                field=f"{field}.{arguments_key}")
    arguments = value[key]
    if isinstance(arguments, str):
        decoded_ok, decoded = try_loads(arguments)
        if decoded_ok and isinstance(decoded, dict):
            arguments = decoded
        else:
            raise InvalidValueError(f"tool call {key} must be a JSON object or a JSON string holding one, got the "
                                    f"string {arguments[:60]!r}{'...' if len(arguments) > 60 else ''}",
                                    field=f"{field}.{key}")
    if not isinstance(arguments, dict):
        raise InvalidValueError(f"tool call {key} must be a JSON object, got {json_kind(arguments)}",
                                field=f"{field}.{key}")
    return ParsedCall(name, arguments, key)


_BETWEEN_CALLS = re.compile(r"\s*</tool_call>\s*<tool_call>\s*")


def scan_call_blocks(text: str) -> Optional[list[str]]:
    """The blocks of ``<tool_call>`` text as consecutive JSON values separated by ``</tool_call> <tool_call>``
    (whitespace allowed), or None if the text is not that."""
    blocks: list[str] = []
    pos = 0
    while True:
        try:
            _value, end = BALANCED_DECODER.raw_decode(text, pos)
        except (ValueError, RecursionError):
            return None
        blocks.append(text[pos:end])
        if end == len(text):
            return blocks
        between = _BETWEEN_CALLS.match(text, end)
        if between is None or between.end() == len(text):
            return None
        pos = between.end()


def call_count(content: str) -> int:
    """How many calls a ``tool_call`` message holds, as the reader splits them: a call whose arguments quote
    ``<tool_call>`` is one call."""
    s = content.strip()
    if s.startswith("<tool_call>") and s.endswith("</tool_call>"):
        scanned = scan_call_blocks(s[len("<tool_call>"):-len("</tool_call>")].strip())
        if scanned is not None:
            return len(scanned)
    return max(content.count("<tool_call>"), 1)
