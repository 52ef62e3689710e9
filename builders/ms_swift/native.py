"""ms-swift's dataset stage: a row as found in a file -> the row as ms-swift's preprocessor leaves it.

This is the ``raw`` config. It mirrors ``MessagesPreprocessor`` and the row checks of ms-swift 4.6
(spec §1-§3, §6-§9): column aliases, ``messages`` given as text, ``role``/``from`` and
``content``/``value`` keys, role aliases, role-less ShareGPT pairs, OpenAI ``tool_calls`` and Anthropic
``tool_use``/``tool_result`` blocks, the ``system`` column, ``tools`` in any container, media aliases.
Rows ms-swift would silently delete here (unknown role, null content, empty messages, bad
``rejected_response``) raise a typed error instead. What ms-swift silently removes (unknown message keys,
unknown columns) is kept in ``extra`` so nothing is lost.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any, Optional

from tooluse_datasets.codec import try_loads
from tooluse_datasets.errors import (InvalidValueError, JsonValueError, MissingFieldError, ToolUseDataError, json_kind,
                                     shown, wrapped_rows_error)

from .parsing import parse_json_or_literal, storable

MESSAGES_COLUMNS = ("messages", "conversations", "conversation")
SYSTEM_COLUMNS = ("system", "system_prompt")
MEDIA_COLUMNS = {"images": ("images", "image"), "audios": ("audios", "audio"), "videos": ("videos", "video")}

# ms-swift's role names and aliases (MessagesPreprocessor.to_std_messages). Only the function_call /
# function_response / observation(s) aliases are also matched with hyphens for underscores (function-call);
# "tool-call" or "tool-response" stay unknown roles, whose rows ms-swift drops.
HYPHENATED_ALIASES = ("function_call", "function_response", "observation", "observations")
ROLE_ALIASES = {
    "system": "system",
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "gpt": "assistant",
    "bot": "assistant",
    "tool_call": "tool_call",
    "function_call": "tool_call",
    "tool_response": "tool_response",
    "function_response": "tool_response",
    "observation": "tool_response",
    "observations": "tool_response",
    "tool": "tool",
}
RESULT_ROLES = ("tool_response", "tool")

# Message key aliases. When a message has both spellings the later one wins, as in ms-swift's _to_std_key.
ROLE_KEYS = ("role", "from")
CONTENT_KEYS = ("content", "value")
SHAREGPT_USER_KEYS = ("user", "human")
SHAREGPT_ASSISTANT_KEYS = ("assistant", "gpt", "bot")

# Content blocks understood inside a list-valued content, besides Anthropic tool_use/tool_result:
# {"type": "text", "text"}, {"type": K, K: url} and {"type": K_url, K_url: url | {"url"}} for K in image,
# audio, video (ms-swift's remove_messages_media), and Anthropic {"type": "image", "source": {...}}.
BLOCK_MEDIA_KINDS = {"image": "images", "audio": "audios", "video": "videos"}
ANTHROPIC_TOOL_BLOCKS = ("tool_use", "tool_result")
CONTENT_BLOCK_TYPES = ("text",) + tuple(BLOCK_MEDIA_KINDS) + tuple(f"{k}_url" for k in BLOCK_MEDIA_KINDS)

# Key of the unified ``meta`` where the reader keeps the ms-swift text the unified fields cannot reproduce
# (see source.py); a source column of that name would be ambiguous.
ORIGINAL_KEY = "ms_swift_original"

_MISSING = object()


@dataclasses.dataclass
class Message:
    """A message on its way to the raw form; ``index`` is its position in the file's messages (for errors)."""

    index: int
    role: str
    content: Any
    loss: Any = None
    loss_scale: Any = None
    name: Any = None
    extra: dict = dataclasses.field(default_factory=dict)
    tool_calls: Optional[list] = None  # OpenAI assistant calls, consumed by normalize_provider_formats
    media: dict = dataclasses.field(default_factory=dict)  # kind -> URLs from content blocks, in tag order
    # Where in the file this message comes from, for errors found in the raw messages (see file_field): the
    # field of the file (default: the message itself), and (raw suffix, file suffix) pairs for the parts
    # spelled differently there (an OpenAI call's ``.content.name`` is ``.function.name``...).
    origin: Optional[str] = None
    renames: tuple = ()
    # Whether ms-swift's OpenAI conversion sees this message as a tool result: it looks for results by the
    # file's own "role" key, before reading aliases ("role": "tool" or "tool_response", not "from": "tool" or
    # "role": "observation"), and re-sorts only those by tool_call_id.
    openai_result: bool = False
    # Whether ms-swift converts this message's list content block by block as Anthropic (anthropic_to_messages):
    # in a row it converts as Anthropic (see anthropic_row), a list under the file's own "content" key. Only there
    # is an image block read from its "source"; elsewhere its template reads the block's "image" key.
    anthropic_blocks: bool = False

    @property
    def where(self) -> str:
        return f"messages[{self.index}]"

    def file_field(self, suffix: str) -> str:
        """The field of the file holding ``messages[k]{suffix}`` of the raw row, this message being raw
        message ``k``: the raw list counts the messages that calls, blocks and the system column expand to,
        the file counts its own."""
        for raw, file in self.renames:
            if suffix == raw or suffix.startswith((raw + ".", raw + "[")):
                return (self.origin or self.where) + file + suffix[len(raw):]
        return (self.origin or self.where) + suffix

    def as_raw(self) -> dict:
        return {"role": self.role, "content": self.content, "loss": self.loss, "loss_scale": self.loss_scale,
                "name": self.name, "extra": self.extra}


def native_to_raw(native: dict) -> tuple[dict, list[Message], dict[str, str]]:
    """One row of a file -> the raw row ``{messages, tools, images, audios, videos, extra}``, the
    :class:`Message` each raw message was made from (its ``file_field`` names the part of the file an error in
    that raw message is about), and the file's name for each raw column it read (``{"messages": "conversations",
    "images": "image"}``)."""
    row = dict(native)
    # Unlike the other columns, the messages column is found by its exact name: ms-swift picks its messages
    # preprocessor only when a column is named so (AutoPreprocessor), and drops every row of a file that has
    # "Messages" instead.
    messages_column = next((name for name in MESSAGES_COLUMNS if name in row), None)
    aliases = [key for key in row if isinstance(key, str) and key.lower() in MESSAGES_COLUMNS]
    if messages_column not in (None, "messages") and len({key.lower() for key in aliases}) > 1:
        # ms-swift renames a column to messages (in any case) only when one alias is there: it reads none and drops
        # the row.
        others = ("both " if len(aliases) == 2 else "") + " and ".join(repr(key) for key in aliases)
        raise InvalidValueError(f"row has {others} and no 'messages': ms-swift renames none of them to messages "
                                f"and drops the row; keep one of them", field=messages_column)
    if messages_column is None:
        raise wrapped_rows_error(row, MESSAGES_COLUMNS) or MissingFieldError(
            "an ms-swift agent row needs a messages column (messages, conversations or conversation)"
            + layout_hint(row), field="messages")
    columns = {"messages": messages_column}
    for kind, names in MEDIA_COLUMNS.items():
        column = column_of(row, names)
        if column is not None:
            columns[kind] = column
    try:
        raw, messages = _read_row(row, columns)
    except ToolUseDataError as exc:
        raise in_columns(exc, columns)
    return raw, messages, columns


def in_columns(exc: ToolUseDataError, columns: dict[str, str]) -> ToolUseDataError:
    """``exc`` naming the file's column where it names the raw column read from it (``conversations[3].content``
    for ``messages[3].content``, ``image[0]`` for ``images[0]``): the reader names the columns it reads by their
    raw names throughout, whatever the file calls them."""
    field = exc.field
    for raw, file in columns.items():
        if raw != file and field and (field == raw or field.startswith((raw + "[", raw + "."))):
            exc.field = file + field[len(raw):]
            break
    return exc


def _read_row(row: dict, columns: dict[str, str]) -> tuple[dict, list[Message]]:
    messages_value = row.pop(columns["messages"])
    system_column, system = take_column(row, SYSTEM_COLUMNS)
    tools = normalize_tools(row.pop("tools", None))
    media = {kind: media_list(row.pop(columns[kind]), kind, columns[kind]) if kind in columns else []
             for kind in MEDIA_COLUMNS}
    if ORIGINAL_KEY in row:
        raise InvalidValueError(f"column name {ORIGINAL_KEY!r} is reserved by this reader", field=ORIGINAL_KEY)

    messages = normalize_provider_formats(standard_messages(parse_messages_value(messages_value, columns["messages"])))
    for kind in MEDIA_COLUMNS:
        from_blocks = [url for m in messages for url in m.media.get(kind, [])]
        if from_blocks:
            if media[kind]:
                raise InvalidValueError(f"the row has {kind[:-1]} content blocks and column {columns[kind]!r}; "
                                        f"ms-swift refuses the mix", field=kind)
            media[kind] = from_blocks
    if system is not None:
        if not isinstance(system, str):
            raise InvalidValueError(f"the system column must be a string, got {json_kind(system)}",
                                    field=system_column)
        if messages[0].role == "system":
            row[system_column] = system  # ms-swift ignores it when messages[0] is a system message; keep it
        else:
            messages.insert(0, Message(-1, "system", system, origin=system_column, renames=((".content", ""),)))
    raw_messages = [m.as_raw() for m in messages]
    check_rejected_response(row, raw_messages)
    # A null column is absent: Parquet gives a row lacking a column other rows have one (so does ms-swift's loader
    # for JSON Lines), so the same rows read from either format give the same extra.
    extra = {key: value for key, value in row.items() if value is not None}
    return {"messages": raw_messages, "tools": tools, **media, "extra": extra}, messages


# --------------------------------------------------------------------------------------------------
# Columns
# --------------------------------------------------------------------------------------------------


def layout_hint(row: dict) -> str:
    """What a row without messages is, when it is the Hub layout of a dataset ms-swift registers with a
    preprocessor of its own (see upstream.py), or has its messages under a name in other case, else ''."""
    misspelled = [key for key in row if isinstance(key, str) and key.lower() in MESSAGES_COLUMNS]
    if misspelled:
        return (f"; the row has {misspelled[0]!r}, but ms-swift reads messages only from a column of one of these "
                f"exact (lowercase) names, and drops every row of a file without one")
    columns = {key.lower() for key in row if isinstance(key, str)}
    if {"query", "answers"} <= columns:
        return ("; query/answers columns are the layout of Salesforce/xlam-function-calling-60k, which ms-swift "
                "turns into tool_call messages only through its registered dataset (swift sft --dataset "
                "LLM-Research/xlam-function-calling-60k), not from a file")
    if "target_action_reprs" in columns:
        return ("; this is the layout of osunlp/Multimodal-Mind2Web, whose conversations ms-swift builds only "
                "through its registered dataset (swift sft --dataset swift/Multimodal-Mind2Web), not from a file")
    return ""


def take_column(row: dict, names: tuple[str, ...]) -> tuple[Optional[str], Any]:
    """Pop the column :func:`column_of` finds: ``(its name, its value)``, or ``(None, None)``."""
    column = column_of(row, names)
    return (column, row.pop(column)) if column is not None else (None, None)


def column_of(row: dict, names: tuple[str, ...]) -> Optional[str]:
    """The first of ``names`` present in ``row`` (case-insensitive, as ms-swift's column renaming); the other
    aliases stay in the row, i.e. in ``extra``. With two aliases present ms-swift renames neither
    (``safe_rename_columns``): it reads only a column already named ``names[0]`` (``system`` beside
    ``system_prompt``), and none beside ``System`` and ``system_prompt``."""
    by_lower = {key.lower(): key for key in row if isinstance(key, str)}
    present = [by_lower[name] for name in names if name in by_lower]
    if len(present) > 1:
        return names[0] if names[0] in row else None
    return present[0] if present else None


def normalize_tools(value: Any) -> list:
    """``tools`` as ms-swift's ``_normalize_tools`` leaves it: a list of JSON values (each a tool object or
    the text of one). A string holding no JSON stays as one entry, which fails when the tool is parsed; a null
    entry is an :class:`InvalidValueError` (not left out: ms-swift does not train such a row)."""
    if value is None:
        return []
    if isinstance(value, bytes):  # (refused as "tools[0]: Type is not JSON serializable", a tool of its own)
        raise _binary_tools("tools")
    if isinstance(value, str):
        if not value.strip():
            # ms-swift keeps it as one tool, [""], which its template cannot parse ("tool: None"): every such
            # row fails to encode and swift sft drops it, as it does for a null tool
            raise InvalidValueError("tools is empty text; ms-swift reads it as one tool it cannot parse and does "
                                    "not train the row (write [] or leave the column null for no tools)",
                                    field="tools")
        ok, parsed = try_loads(value)
        value = parsed if ok else value
    if not isinstance(value, list):
        value = [value]
    for i, tool in enumerate(value):
        if tool is None:  # ms-swift's template asserts every tool is an object: it cannot encode the row
            raise InvalidValueError("a tool is null; ms-swift fails on it (its template needs every tool to be an "
                                    "object) and does not train the row", field=f"tools[{i}]")
        if isinstance(tool, bytes):  # a list of binary texts: the same column, written as a list
            raise _binary_tools(f"tools[{i}]")
    return value


def _binary_tools(field: str) -> JsonValueError:
    return JsonValueError(f"{field} is binary data (a Parquet column written without the UTF-8 annotation), not the "
                          f"JSON text or list of tools ms-swift reads: write it as a string column", field=field)


def media_list(value: Any, kind: str, column: str) -> list:
    """Media paths/URLs of the file's ``column`` (read as ``kind``); a single entry is wrapped in a list. Videos
    may also be lists of frame paths. Errors name ``kind`` in their field (:func:`in_columns` puts the file's
    column there) and ``column`` in their text, the name the user wrote."""
    if value is None:
        return []
    if isinstance(value, dict) and kind != "images":
        # ms-swift wraps a single object in a list for images only (_cast_mm_data): an audio or video object is read
        # as the list of its keys, "path" taken for a file name
        raise InvalidValueError(f"column {column!r} is a single object; ms-swift reads its keys as paths (give a "
                                f"list of paths)", field=kind)
    bare = isinstance(value, (str, dict))  # one entry given without a list: errors name the column itself
    if bare:
        value = [value]
    if not isinstance(value, list):
        raise InvalidValueError(f"column {column!r} must be a list of paths or URLs, got {json_kind(value)}",
                                field=kind)
    out = []
    for j, item in enumerate(value):
        where = kind if bare else f"{kind}[{j}]"
        if isinstance(item, dict) and item.get("bytes") is None and isinstance(item.get("path"), str):
            item = item["path"]  # datasets' Image storage {"bytes": None, "path": ...}
        if isinstance(item, str) or (kind == "videos" and isinstance(item, list)
                                     and all(isinstance(frame, str) for frame in item)):
            for f, path in enumerate([item] if isinstance(item, str) else item):
                if not path.strip():
                    # ms-swift keeps it and fails loading it (an image path "" is read as no file, or as the
                    # working directory), so it does not train the row
                    raise InvalidValueError(f"an entry of column {column!r} is an empty path, which names no file; "
                                            f"ms-swift fails to load it and does not train the row (leave the entry "
                                            f"out, or give [] or null for none)",
                                            field=where if isinstance(item, str) else f"{where}[{f}]")
            out.append(item)
        else:
            got = ("embedded bytes, which are not supported" if isinstance(item, dict) and item.get("bytes") is not None
                   else json_kind(item))
            raise InvalidValueError(f"entries of column {column!r} must be paths or URLs (strings), got {got}",
                                    field=where)
    return out


def check_rejected_response(extra: dict, messages: list[dict]) -> None:
    """The conditions under which ms-swift deletes an RLHF row (``_check_rejected_response`` and
    ``_compat_rejected_response``): null, not a string or message list, a user message in it, or equal to
    the chosen response.

    "Equal" is ms-swift's test: a string equal to the last message's content; a list of one message whose
    contents (its OpenAI ``tool_calls`` read as call messages, see :func:`rejected_contents`) equal that of the
    chosen response when the chosen response (everything after the last user message) is one message too. A
    one-message rejected response that repeats the final answer of a chosen trajectory with tool calls differs
    from it, and ms-swift trains on the pair."""
    if "rejected_response" not in extra:
        return
    rejected = extra["rejected_response"]
    if rejected is None:
        raise InvalidValueError("rejected_response is null; ms-swift drops such rows", field="rejected_response")
    if isinstance(rejected, str):
        if rejected == messages[-1]["content"]:
            raise InvalidValueError("rejected_response equals the chosen response; ms-swift drops such rows",
                                    field="rejected_response")
        return
    if not isinstance(rejected, list) or not all(isinstance(m, dict) for m in rejected):
        got = (json_kind(rejected) if not isinstance(rejected, list) else
               f"an array holding a JSON {json_kind(next(m for m in rejected if not isinstance(m, dict)))}")
        raise InvalidValueError(f"rejected_response must be a string or a list of messages, got {got}",
                                field="rejected_response")
    for k, m in enumerate(rejected):
        if "role" not in m:  # ms-swift reads every rejected message's role (a KeyError drops the row)
            raise InvalidValueError("a rejected_response message has no role; ms-swift drops such rows",
                                    field=f"rejected_response[{k}].role")
        if m.get("role") == "user":
            raise InvalidValueError("rejected_response may not contain user messages", field=f"rejected_response[{k}]")
    last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=-1)
    chosen = messages[last_user + 1:]
    if len(rejected) != 1 or len(chosen) != 1:
        return
    # One message against one: ms-swift compares their contents (a KeyError on a missing one drops the row).
    if "content" not in rejected[0] and not rejected[0].get("tool_calls"):
        raise InvalidValueError("the rejected_response message has no content; ms-swift drops such rows",
                                field="rejected_response[0].content")
    if rejected_contents(rejected[0]) == [chosen[0]["content"]]:
        raise InvalidValueError("rejected_response equals the chosen response; ms-swift drops such rows",
                                field="rejected_response")


def rejected_contents(message: dict) -> list:
    """The contents ms-swift compares for a one-message rejected response (``normalize_openai_tool_calls``,
    which the chosen messages went through on reading): an assistant message's OpenAI ``tool_calls`` become one
    ``{"name", "arguments"}`` per call, after its text if it has any. So a rejected call written with
    ``content: null`` (or ``""``) that repeats the chosen call is equal to it."""
    calls = message.get("tool_calls") if message.get("role") == "assistant" else None
    if not calls:
        return [message.get("content")]
    if not isinstance(calls, list):
        raise InvalidValueError(f"rejected_response tool_calls must be a list of calls, got {json_kind(calls)}; "
                                "ms-swift drops such rows",
                                field="rejected_response[0].tool_calls")
    contents = [message["content"]] if message.get("content") else []
    for j, call in enumerate(calls):
        function = call.get("function", call) if isinstance(call, dict) else None
        if not isinstance(function, dict) or "name" not in function:
            raise InvalidValueError("a rejected_response tool call needs a function name; ms-swift drops such rows",
                                    field=f"rejected_response[0].tool_calls[{j}]")
        arguments = function.get("arguments", {})
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)  # ms-swift's reading: text that is not JSON stays text
            except (ValueError, RecursionError):  # (nested too deep: compared as text)
                pass
        contents.append({"name": function["name"], "arguments": arguments})
    return contents


# --------------------------------------------------------------------------------------------------
# Messages: text, keys, roles
# --------------------------------------------------------------------------------------------------


def parse_messages_value(value: Any, column: str) -> list[dict]:
    if isinstance(value, str):
        value = parse_json_or_literal(value, column, f"{column} text")
    # (named as the file names the column: conversations, conversation or messages)
    if value is None:
        raise MissingFieldError(f"{column} is null", field=column)
    if not isinstance(value, list):
        raise InvalidValueError(f"{column} must be an array, got {json_kind(value)}", field=column)
    if not value:
        raise MissingFieldError(f"{column} is empty; ms-swift drops such rows", field=column)
    for i, message in enumerate(value):
        if not isinstance(message, dict):
            raise InvalidValueError(f"a message must be an object, got {json_kind(message)}",
                                    field=f"messages[{i}]")
    return value


def standard_messages(messages: list[dict]) -> list[Message]:
    """Key and role aliases -> :class:`Message`; role-less ShareGPT pairs are expanded."""
    if not any(key in messages[0] for key in ROLE_KEYS + CONTENT_KEYS):
        return sharegpt_pairs(messages)
    out = [standard_message(m, i) for i, m in enumerate(messages)]
    check_one_provider_format(messages)
    if anthropic_row(messages):
        check_anthropic_blocks(messages)
        for m, written in zip(out, messages):
            m.anthropic_blocks = isinstance(written.get("content"), list)
    return out


def standard_message(message: dict, index: int) -> Message:
    fields = dict(message)
    where = f"messages[{index}]"
    # Errors name the keys the file wrote (from, value): the raw message's role and content are read from them.
    # A missing one is named as its pair is spelled: a message written with from lacks a value, not a content.
    role_key, content_key = last_key(fields, ROLE_KEYS), last_key(fields, CONTENT_KEYS)
    role_key, content_key = (role_key or ("from" if content_key == "value" else "role"),
                             content_key or ("value" if role_key == "from" else "content"))
    renames = tuple((f".{raw}", f".{key}") for raw, key in (("role", role_key), ("content", content_key)) if raw != key)
    role = pop_alias(fields, ROLE_KEYS)
    content = pop_alias(fields, CONTENT_KEYS)
    if role is _MISSING or role is None:
        raise MissingFieldError("message has no role (role or from)", field=f"{where}.{role_key}")
    if not isinstance(role, str):
        raise InvalidValueError(f"role must be a string, got {json_kind(role)}", field=f"{where}.{role_key}")
    canonical = ROLE_ALIASES.get(role)
    if canonical is None and role.replace("-", "_") in HYPHENATED_ALIASES:
        canonical = ROLE_ALIASES[role.replace("-", "_")]
    if canonical is None:
        raise InvalidValueError(f"role {shown(role)} is not one ms-swift accepts (system, user, assistant, tool_call, "
                                f"tool_response, tool or an alias); ms-swift drops the row",
                                field=f"{where}.{role_key}")
    loss = fields.pop("loss", None)
    if isinstance(loss, str):
        # ms-swift tests loss for truth (LossScale._inner_call): "false" and "0" train the message, "" does not
        raise InvalidValueError(f"loss is text ({shown(loss)}); ms-swift tests it for truth, so any text but \"\" "
                                f"trains the message, \"false\" included: write the JSON boolean true or false",
                                field=f"{where}.loss")
    out = Message(index, canonical, None if content is _MISSING else content,
                  loss=loss, loss_scale=fields.pop("loss_scale", None), renames=renames)
    if canonical in RESULT_ROLES:
        out.name = fields.pop("name", None)  # ms-swift 4.6 keeps name on tool messages only
        out.openai_result = message.get("role") in RESULT_ROLES
    if canonical == "assistant":
        calls = fields.pop("tool_calls", None)
        if calls is not None and not isinstance(calls, list):
            raise InvalidValueError(f"tool_calls must be a list, got {json_kind(calls)}", field=f"{where}.tool_calls")
        out.tool_calls = calls or None
    # calls on a message of another role (user, tool...) are refused too: ms-swift drops them as well
    check_provider_keys(message, where, message.get("tool_calls"))
    # (datasets' to_json writes the swift config's "name": null on every message but results)
    out.extra = keys_with_values(fields)
    if out.content is None and not out.tool_calls:
        raise MissingFieldError("message content is null or missing; ms-swift drops the row",
                                field=f"{where}.{content_key}")
    return out


def keys_with_values(fields: dict, read: tuple[str, ...] = ()) -> dict:
    """The keys of ``fields`` other than ``read``, kept for ``extra``, without the null ones: a null key is absent,
    as Parquet's struct padding is read and as ms-swift drops it, so JSON and Parquet rows give the same extra."""
    return {key: value for key, value in fields.items() if key not in read and value is not None}


def check_provider_keys(message: dict, where: str, calls: Optional[list]) -> None:
    """ms-swift converts OpenAI calls and Anthropic blocks before it reads key and role aliases
    (``MessagesPreprocessor.normalize_provider_messages``): ``tool_calls`` only on a ``"role": "assistant"``
    message, with its text taken from ``content``, and Anthropic blocks only under ``content``. Spelled with
    the aliases, it drops the calls or the text beside them, or trains on the blocks as ``<tool_use>`` and
    ``<tool_result>`` text: refused rather than read as calls ms-swift never sees. So is OpenAI's legacy
    ``function_call``, which it never converts."""
    if calls and message.get("role") != "assistant":
        raise InvalidValueError(f"tool_calls on a message whose role is not given as \"role\": \"assistant\" "
                                f"(here {last_key(message, ROLE_KEYS)}: {message[last_key(message, ROLE_KEYS)]!r}); "
                                f"ms-swift drops these calls", field=f"{where}.tool_calls")
    if message.get("function_call") is not None:
        # OpenAI's legacy single call: ms-swift removes the key with the other keys it does not know and trains the
        # message's text alone, as if no call had been made
        raise InvalidValueError("an OpenAI legacy function_call, which ms-swift does not read: it drops the call and "
                                "trains the message's text alone (give the call in tool_calls, or as a tool_call "
                                "message)", field=f"{where}.function_call")
    value = message.get("value")
    if calls and value is not None and value != "":
        raise InvalidValueError("text under value beside tool_calls; ms-swift reads only content there and drops "
                                "it", field=f"{where}.value")
    if has_tool_blocks(value):
        raise InvalidValueError("Anthropic tool_use/tool_result blocks under value; ms-swift converts them only "
                                "under content and trains on them here as <tool_use>/<tool_result> text",
                                field=f"{where}.value")


def check_one_provider_format(messages: list[dict]) -> None:
    """ms-swift converts a row as OpenAI when any of its messages has ``tool_calls``, else as Anthropic: in a row
    with OpenAI calls, Anthropic tool blocks stay blocks, trained on as ``<tool_use>``/``<tool_result>`` text."""
    if not any(m.get("tool_calls") for m in messages):
        return
    for i, m in enumerate(messages):
        if has_tool_blocks(m.get("content")):
            raise InvalidValueError("Anthropic tool_use/tool_result blocks in a row with OpenAI tool_calls; ms-swift "
                                    "converts such a row as OpenAI only and trains on these blocks as text",
                                    field=f"messages[{i}].content")


def anthropic_row(messages: list[dict]) -> bool:
    """Whether ms-swift converts the row as Anthropic: it has no OpenAI ``tool_calls`` and a list ``content``
    holds a ``tool_use``/``tool_result`` block or an ``image`` block with a ``source``. ms-swift looks for these
    by reading ``type`` from each element of every list ``content``, in order, until it finds one
    (``normalize_provider_messages``): an element it reaches that is not an object (a tool result ``[1, 2]``)
    fails there, and ms-swift drops the row."""
    if any(m.get("tool_calls") for m in messages):
        return False
    for i, m in enumerate(messages):
        content = m.get("content")
        if not isinstance(content, list):
            continue
        for k, block in enumerate(content):
            if not isinstance(block, dict):
                raise InvalidValueError(f"a list content has an element that is not an object "
                                        f"({json_kind(block)}); ms-swift fails reading it as a content block "
                                        f"and drops the row (give a JSON result as text)",
                                        field=f"messages[{i}].content[{k}]")
            if block.get("type") in ANTHROPIC_TOOL_BLOCKS or (block.get("type") == "image" and "source" in block):
                return True
    return False


def check_anthropic_blocks(messages: list[dict]) -> None:
    """In a row ms-swift converts as Anthropic (``anthropic_to_messages``), every list ``content`` is read block by
    block: only text, image (with a base64 or URL ``source``), tool_use and tool_result blocks, and a tool_result's
    list content of text and image blocks only, and text and image blocks only in a message with a ``role`` key (it
    gives their text that role). Any other block (``image_url``, ``audio``...), or text beside blocks under ``from``,
    makes ms-swift drop the row: refused here, naming the block or the key."""
    def check(blocks: list, where: str, allowed: tuple[str, ...]) -> None:
        for k, block in enumerate(blocks):
            field = f"{where}[{k}]"
            if not isinstance(block, dict):
                raise InvalidValueError(f"a content block must be an object, got {json_kind(block)}; ms-swift "
                                        f"drops the row", field=field)
            kind = block.get("type")
            if kind not in allowed:
                raise InvalidValueError(f"content block type {shown(kind)} in a row ms-swift converts as Anthropic "
                                        f"(it has tool_use/tool_result or Anthropic image blocks), where ms-swift "
                                        f"takes {', '.join(allowed)} blocks only and drops the row",
                                        field=f"{field}.type")
            if kind == "image" and not _anthropic_image_source(block.get("source")):
                raise InvalidValueError("an Anthropic image block needs a source of type base64 (with media_type "
                                        "and data) or url (with a url); ms-swift drops the row", field=f"{field}.source")
            if kind == "tool_result" and isinstance(block.get("content"), list):
                check(block["content"], f"{field}.content", ("text", "image"))

    for i, m in enumerate(messages):
        if isinstance(m.get("content"), list):
            check(m["content"], f"messages[{i}].content", ("text", "image", "tool_use", "tool_result"))
            if "role" not in m and any(b["type"] not in ANTHROPIC_TOOL_BLOCKS for b in m["content"]):
                # text and images become a message of the message's role, which ms-swift reads from "role" only
                raise InvalidValueError("text or image blocks in a message whose role is given under from, in a row "
                                        "ms-swift converts as Anthropic: its conversion reads role there and drops "
                                        "the row", field=f"messages[{i}].from")


def _anthropic_image_source(source: Any) -> bool:
    if not isinstance(source, dict):
        return False
    if source.get("type") == "base64":
        return bool(source.get("media_type")) and bool(source.get("data"))
    return source.get("type") == "url" and bool(source.get("url"))


def has_tool_blocks(value: Any) -> bool:
    return is_block_list(value) and any(b.get("type") in ANTHROPIC_TOOL_BLOCKS for b in value)


def sharegpt_pairs(messages: list[dict]) -> list[Message]:
    """``[{"human": q, "assistant": a}, ...]`` -> user/assistant messages (ms-swift's sharegpt_to_messages)."""
    out = []
    for i, pair in enumerate(messages):
        fields = dict(pair)
        user_key = last_key(fields, SHAREGPT_USER_KEYS)
        assistant_key = last_key(fields, SHAREGPT_ASSISTANT_KEYS)
        user = pop_alias(fields, SHAREGPT_USER_KEYS)
        assistant = pop_alias(fields, SHAREGPT_ASSISTANT_KEYS)
        if user is _MISSING or user is None:
            raise MissingFieldError("a role-less (ShareGPT) pair needs a user/human text", field=f"messages[{i}].human")
        if assistant is _MISSING or assistant is None:
            raise MissingFieldError("a role-less (ShareGPT) pair needs an assistant/gpt/bot text",
                                    field=f"messages[{i}].assistant")
        out += [Message(i, "user", user, extra=fields, renames=((".content", f".{user_key}"), (".role", f".{user_key}"))),
                Message(i, "assistant", assistant,
                        renames=((".content", f".{assistant_key}"), (".role", f".{assistant_key}")))]
    return out


def last_key(fields: dict, keys: tuple[str, ...]) -> Optional[str]:
    """The key :func:`pop_alias` takes its value from."""
    present = [key for key in keys if key in fields]
    return present[-1] if present else None


def pop_alias(fields: dict, keys: tuple[str, ...]) -> Any:
    value = _MISSING
    for key in keys:
        if key in fields:
            value = fields.pop(key)
    return value


# --------------------------------------------------------------------------------------------------
# Provider formats (spec §8): OpenAI tool_calls, Anthropic tool_use/tool_result, content blocks
# --------------------------------------------------------------------------------------------------


def normalize_provider_formats(messages: list[Message]) -> list[Message]:
    out: list[Message] = []
    last_call_ids: list = []
    i = 0
    while i < len(messages):
        m = messages[i]
        if m.tool_calls:
            produced, last_call_ids = openai_call_turn(m)
            out += produced
            end = i + 1
            while end < len(messages) and messages[end].role in RESULT_ROLES:
                end += 1
            results = [with_block_text(r) for r in messages[i + 1:end]]
            out += in_call_order(results, last_call_ids, "tool_call_id",
                                 sortable=all(r.openai_result for r in results))
            i = end
            continue
        if is_block_list(m.content) and m.role == "assistant" and has_block(m.content, "tool_use"):
            produced, last_call_ids = anthropic_call_turn(m)
            out += produced
        elif is_block_list(m.content) and m.role in ("user",) + RESULT_ROLES and has_block(m.content, "tool_result"):
            # ms-swift converts tool_result blocks whatever the message's role: a "tool" message holding them is
            # one result per block, not one result whose text is the blocks' JSON
            out += anthropic_results(m, last_call_ids)
        else:
            out.append(with_block_text(m))
        i += 1
    return out


def named(call: dict) -> dict:
    """The call's ``name`` entry, absent when the call has none: ms-swift drops a row whose call lacks the key
    (its converters index ``name``) but keeps one whose name is null or empty."""
    return {"name": call["name"]} if "name" in call else {}


def openai_call_turn(m: Message) -> tuple[list[Message], list]:
    """An assistant message with ``tool_calls`` -> [assistant text if any] + one tool_call per call
    (ms-swift's ``normalize_openai_tool_calls``: a call without ``function`` is read flat, missing
    ``arguments`` are ``{}``, text arguments are parsed as JSON when they are JSON)."""
    text, media = ("", {}) if m.content is None else content_text(m.content, f"{m.where}.content", m.anthropic_blocks)
    calls, ids = [], []
    for k, call in enumerate(m.tool_calls or []):
        if not isinstance(call, dict):
            raise InvalidValueError(f"an OpenAI tool call must be an object, got {json_kind(call)}",
                                    field=f"{m.where}.tool_calls[{k}]")
        function = call.get("function", call)
        if not isinstance(function, dict):
            raise InvalidValueError(f"an OpenAI tool call's function must be an object, got {json_kind(function)}",
                                    field=f"{m.where}.tool_calls[{k}].function")
        arguments = function.get("arguments", {})
        if isinstance(arguments, str):
            ok, parsed = try_loads(arguments)
            arguments = parsed if ok else arguments
        storable(arguments, f"{m.where}.tool_calls[{k}].function.arguments")
        extra = keys_with_values(call, ("type", "function", "name", "arguments"))
        function_field = ".function" if "function" in call else ""
        calls.append(Message(m.index, "tool_call", {**named(function), "arguments": arguments}, extra=extra,
                             origin=f"{m.where}.tool_calls[{k}]", renames=((".content", function_field),)))
        ids.append(call.get("id"))
    return _call_turn(m, text, media, calls), ids


def anthropic_call_turn(m: Message) -> tuple[list[Message], list]:
    """An assistant message with ``tool_use`` blocks -> its messages in block order, as ms-swift's
    ``anthropic_to_messages``: the text (and media) blocks before a ``tool_use`` become an assistant message
    (when not empty), each ``tool_use`` a tool_call; text after the last call is an assistant message after
    the calls. Text is never moved across a call."""
    produced, ids = [], []
    texts: list[str] = []
    media: dict = {}

    def flush() -> None:
        nonlocal texts, media
        text = "".join(texts)
        if text:
            produced.append(Message(m.index, "assistant", text, media=media))
        texts, media = [], {}

    for k, block in enumerate(m.content):
        if block.get("type") == "tool_use":
            flush()
            extra = keys_with_values(block, ("type", "name", "input"))
            arguments = block.get("input", {})  # as ms-swift: a tool_use without input has no arguments
            storable(arguments, f"{m.where}.content[{k}].input")
            produced.append(Message(m.index, "tool_call", {**named(block), "arguments": arguments},
                                    extra=extra, origin=f"{m.where}.content[{k}]",
                                    renames=((".content.arguments", ".input"), (".content", ""), (".role", ".type"))))
            ids.append(block.get("id"))
        else:
            texts.append(block_text(block, f"{m.where}.content[{k}]", media, m.anthropic_blocks))
    flush()
    for p in produced:
        p.loss, p.loss_scale = m.loss, m.loss_scale
    produced[0].extra = {**produced[0].extra, **m.extra}
    return produced, ids


def _call_turn(m: Message, text: str, media: dict, calls: list[Message]) -> list[Message]:
    # As ms-swift: the assistant text is kept only if non-empty, and the message's loss/loss_scale go to
    # every message produced. Its unknown keys (kept, unlike ms-swift) go with the first one.
    produced = ([Message(m.index, "assistant", text, media=media)] if text else []) + calls
    for p in produced:
        p.loss, p.loss_scale = m.loss, m.loss_scale
    produced[0].extra = {**produced[0].extra, **m.extra}
    return produced


def anthropic_results(m: Message, call_ids: list) -> list[Message]:
    """A user (or tool) message with ``tool_result`` blocks -> its messages in block order, as ms-swift's
    ``anthropic_to_messages``: each ``tool_result`` a tool_response, the text (and media) blocks between them
    a message of the message's role. The results that open the message are put in call order (when they answer exactly the
    calls, by id); text is never moved across a result."""
    blocks = list(enumerate(m.content))
    lead = 0
    while lead < len(blocks) and blocks[lead][1].get("type") == "tool_result":
        lead += 1
    out: list[Message] = []
    texts: list[str] = []
    media: dict = {}
    users: list[Message] = []

    def flush() -> None:
        nonlocal texts, media
        text = "".join(texts)
        if text:
            users.append(Message(m.index, m.role, text, loss=m.loss, loss_scale=m.loss_scale, media=media))
            out.append(users[-1])
        texts, media = [], {}

    for n, (k, block) in enumerate(blocks):
        where = f"{m.where}.content[{k}]"
        if block.get("type") == "tool_result":
            flush()
            content, result_media = block.get("content"), {}
            if content is None:
                content = ""
            elif is_block_list(content):
                content, result_media = content_text(content, f"{where}.content", m.anthropic_blocks)
            extra = keys_with_values(block, ("type", "content"))
            # as ms-swift: the message's loss/loss_scale go to every result, as to every text between them
            out.append(Message(m.index, "tool_response", content, loss=m.loss, loss_scale=m.loss_scale, extra=extra,
                               media=result_media, origin=where, renames=((".role", ".type"),)))
            if n + 1 == lead:
                out = in_call_order(out, call_ids, "tool_use_id")
        else:
            texts.append(block_text(block, where, media, m.anthropic_blocks))
    flush()
    first = users[0] if users else out[0]
    first.extra = {**first.extra, **m.extra}
    return out


def in_call_order(results: list[Message], call_ids: list, id_key: str, sortable: bool = True) -> list[Message]:
    """Results re-sorted into call order when every call has an id and the results answer exactly those
    ids (ms-swift 4.6); otherwise kept as given (they then pair with calls by position). One result per call
    whose ids contradict the calls' (a call answered twice, an id no call of the turn has) is refused:
    ms-swift would pair them by position, against what the ids say. ``sortable``: whether ms-swift re-sorts
    these results at all (not OpenAI results whose role is spelled with an alias, see ``Message.openai_result``):
    if not, they pair by position, and ids contradicting it are refused."""
    result_ids = [r.extra.get(id_key) for r in results]
    if not sortable:
        _check_positions_agree(results, call_ids, result_ids, id_key,
                               "ms-swift re-sorts results by id only when each is given as \"role\": \"tool\" "
                               "(or \"tool_response\"); give them so, or in call order")
        return results
    ids_usable = all(isinstance(x, str) for x in call_ids + result_ids) and len(set(call_ids)) == len(call_ids)
    if not ids_usable:
        _check_positions_agree(results, call_ids, result_ids, id_key,
                               "ids that are not all strings are not used to pair results; give the ids as "
                               "strings, or the results in call order")
        return results
    if sorted(call_ids) != sorted(result_ids):
        if len(results) != len(call_ids):
            return results  # a count mismatch: refused where results are paired, naming the turn
        seen: set = set()
        for r, result_id in zip(results, result_ids):
            if result_id not in call_ids or result_id in seen:
                why = "answers a call already answered" if result_id in seen else "names no call of its turn"
                raise InvalidValueError(f"{id_key} {shown(result_id)} {why} (the turn's calls: "
                                        f"{', '.join(map(shown, call_ids))}); ms-swift would pair the results by "
                                        f"position, against their ids", field=r.file_field(f".{id_key}"))
            seen.add(result_id)
    position = {call_id: k for k, call_id in enumerate(call_ids)}
    return sorted(results, key=lambda r: position[r.extra[id_key]])


def _check_positions_agree(results: list[Message], call_ids: list, result_ids: list, id_key: str, why: str) -> None:
    """Results that are not re-sorted by id pair with the calls by position. Where a result and the call at its
    position both give an id and the two differ, the row says one pairing and position another (ms-swift
    re-sorts by ids only under its own conditions, ``why`` says which): refused, not paired silently against
    its ids."""
    for r, call_id, result_id in zip(results, call_ids, result_ids):
        if call_id is not None and result_id is not None and (type(call_id), call_id) != (type(result_id), result_id):
            raise InvalidValueError(f"{id_key} {shown(result_id)} is not the id of the call it answers by "
                                    f"position ({shown(call_id)}), and {why}", field=r.file_field(f".{id_key}"))


def with_block_text(m: Message) -> Message:
    """A message whose content is a list of content blocks gets that content as text with media tags.
    For tool results only where ms-swift converts the blocks as Anthropic (``Message.anthropic_blocks``), and
    when every element is a content block: elsewhere ms-swift's template writes a result's list content as its
    JSON text (``StdTemplateInputs.from_dict``), text and image blocks included, and so does the reader."""
    if not is_block_list(m.content) or m.role == "tool_call":
        return m
    if m.role in RESULT_ROLES and not m.anthropic_blocks:
        return m
    if m.role in RESULT_ROLES and not all(b.get("type") in CONTENT_BLOCK_TYPES for b in m.content):
        return m
    m.content, m.media = content_text(m.content, m.file_field(".content"), m.anthropic_blocks)
    return m


def content_text(content: Any, field: str, anthropic: bool) -> tuple[str, dict]:
    """A content string, or a list of content blocks -> (text with media tags, {kind: URLs}); ``anthropic``: the
    blocks are converted as Anthropic (see :func:`block_text`)."""
    if isinstance(content, str):
        return content, {}
    if not is_block_list(content):
        raise InvalidValueError("content must be a string or a list of content blocks", field=field)
    media: dict = {}
    return "".join(block_text(block, f"{field}[{k}]", media, anthropic) for k, block in enumerate(content)), media


def block_text(block: dict, field: str, media: dict, anthropic: bool) -> str:
    """One content block -> its text (a media block -> its tag, its URL appended to ``media[kind]``). An image
    block's URL is its ``source`` where ms-swift converts the blocks as Anthropic (``anthropic``; the source was
    checked by :func:`check_anthropic_blocks`), else its ``image`` key, as ms-swift's template reads it."""
    block_type = block.get("type")
    if block_type == "text":
        text = block.get("text")
        if not isinstance(text, str):
            raise InvalidValueError("a text block needs a string text", field=f"{field}.text")
        return text
    kind = block_type[:-len("_url")] if isinstance(block_type, str) and block_type.endswith("_url") else block_type
    if not isinstance(kind, str) or kind not in BLOCK_MEDIA_KINDS:
        raise InvalidValueError(f"content block type {shown(block_type)} is not supported (text, image, image_url, "
                                f"audio, audio_url, video, video_url, tool_use, tool_result)", field=f"{field}.type")
    if anthropic and kind == "image":  # Anthropic image block
        source = block["source"]
        value = f"data:{source['media_type']};base64,{source['data']}" if source["type"] == "base64" else source["url"]
    else:
        value = block.get(block_type)
        if isinstance(value, dict):
            value = value.get("url")
    if value is None and "source" in block and kind == "image":
        raise InvalidValueError("an Anthropic image block (its image in source) where ms-swift does not convert "
                                "Anthropic blocks (a row with OpenAI tool_calls, or blocks not under content): it "
                                "reads the block's image key, and trains the <image> tag without the image",
                                field=field)
    if not isinstance(value, str) or not value:
        raise InvalidValueError(f"a {block_type} block needs a URL, path or base64 data", field=field)
    media.setdefault(BLOCK_MEDIA_KINDS[kind], []).append(value)
    return f"<{kind}>"


def is_block_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(b, dict) and "type" in b for b in value)


def has_block(blocks: list[dict], kind: str) -> bool:
    return any(b.get("type") == kind for b in blocks)
