"""The ``toolmind`` output format: unified rows -> strict ToolMind rows that pass the card's FSM.

Features, and why: ``messages`` is a JSON **string** of ``[{role, content}]`` and ``split`` a string, exactly
the upstream file's two columns, so anything written for the upstream parquet (the card's own snippet:
``json.loads(row["messages"])``) reads our output unchanged, and a ToolMind row round-trips byte for byte.
Two columns are added: ``id`` (the unified id, to join back) and ``bridges`` (indices, in the decoded
message list, of the reasoning turns this writer inserted; ``[]`` for rows that needed none). Our reader
recognises the ``bridges`` column and leaves those turns out of ``reasoning_content``.

Mapping (inverse of the reader): one ``tool_call`` message per call, each followed by its result; a
``reasoning`` turn before every call and answer. Where the unified turn has no reasoning the FSM still
needs one, so a short template ("bridge") is inserted and listed in ``bridges`` - never silently. A unified
row that cannot be written without inventing content (a result with no call, a call with no result, a
turn without content or calls, two user turns in a row, a row not ending on an answer) raises
``ConversionError`` naming the message.

Rows that came from ToolMind are restored exactly: the original system text (when tools and instructions
are unchanged), original contents recorded in ``meta``, the bridge texts, the JSON encoding of the column.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any, Optional

from datasets import Features, List, Value

from tooluse_datasets.codec import json_bytes, try_loads
from tooluse_datasets.errors import ConversionError, ToolUseDataError
from tooluse_datasets.formats import Format
from tooluse_datasets.schema import complete_row
from tooluse_datasets.validation import validate_unified

from . import protocol as P
from .system_prompt import parse_system_prompt, render_marked_system_prompt, render_system_prompt

TOOLMIND_FEATURES = Features(
    {
        "messages": Value("string"),
        "split": Value("string"),
        "id": Value("string"),
        "bridges": List(Value("int32")),
    }
)

# Bridge reasoning, by where the FSM needs it. Our own wording (the upstream converter's 12 templates per
# kind are not published); the variant is picked from the row id and position, so output is deterministic.
BRIDGE_TEMPLATES: dict[str, tuple[str, ...]] = {
    "call": (
        "To handle this request I need to call `{name}`.",
        "The `{name}` tool can provide what is needed here, so I will call it.",
        "Let me use `{name}` to get the required information.",
        "I should call `{name}` before answering.",
    ),
    "next_call": (
        "That result is in. Next I need to call `{name}`.",
        "With that output available, the next step is `{name}`.",
        "Now I will continue with `{name}`.",
        "The previous call finished; `{name}` comes next.",
    ),
    "answer": (
        "I have the information needed to answer.",
        "That is enough to reply to the user now.",
        "I can now give the final answer.",
        "Everything needed is available, so I will answer.",
    ),
}


@dataclass
class WrittenMessages:
    messages: list[dict] = field(default_factory=list)   # [{role, content}]
    bridges: list[int] = field(default_factory=list)     # indices of inserted reasoning turns


@dataclass(frozen=True)
class _Style:
    """How a row's contents are rendered; defaults for rows from other sources."""

    padding: str = ""
    call_key: str = "arguments"
    ensure_ascii: bool = False
    overrides: Optional[dict] = None       # str(index) -> original content (ToolMind rows only)
    bridge_texts: Optional[dict] = None    # str(index) -> original bridge text (ToolMind rows only)

    @classmethod
    def of(cls, row: dict) -> "_Style":
        meta = row.get("meta")
        if row.get("source") != "toolmind" or not isinstance(meta, dict):
            return cls()
        # Recorded contents and bridge texts are keyed by position in the original sequence; a row kept
        # whole (source_messages) is re-shaped by this writer, so its positions no longer match.
        positional = "source_messages" not in meta
        # Recorded values of another shape than the reader records (a hand-edited meta) are not used.
        padding, call_key = meta.get("wrapper_padding"), meta.get("call_key")
        content, bridges = meta.get("content"), meta.get("bridges")
        return cls(padding=padding if isinstance(padding, str) else "",
                   call_key=call_key if call_key in ("arguments", "parameters") else "arguments",
                   ensure_ascii=meta.get("messages_encoding", P.DEFAULT_ENCODING) != P.ENCODING_UTF8,
                   overrides=(content or None) if positional and isinstance(content, dict) else None,
                   bridge_texts=(bridges or None) if positional and isinstance(bridges, dict) else None)


def write_toolmind_row(row: dict) -> dict:
    """``from_unified`` of the ``toolmind`` format. A row read from ToolMind that cannot be written is a
    ConversionError naming the row's own message (``messages[3]``), as loading names it, the unified field in
    its message: the unified positions are not the file's."""
    given = row
    try:
        # Rows a user built or edited may be malformed: name the field rather than fail on it with a KeyError.
        validate_unified(row, require_known_tools=False)
        row = complete_row(row)
        written = toolmind_messages(row)
    except ConversionError as exc:
        if exc.field:
            exc.read_from(_input_field(given, exc.field))  # (the row as given: compared with the row as read)
        raise
    return {"messages": messages_text(row, written.messages), "split": split_value(row), "id": row["id"],
            "bridges": written.bridges}


def _input_field(row: dict, field: str) -> Optional[str]:
    # The package's source (default options), initialised before this module runs: its module imports this one.
    from . import SOURCE

    try:
        return SOURCE.input_field(row, field)
    except Exception:  # (finding the place must never hide the error itself)
        return None


def toolmind_messages(row: dict, *, allow_trailing_call: bool = False) -> WrittenMessages:
    """The ToolMind message list of a unified row (raises ConversionError if it has none)."""
    return _Writer(row, allow_trailing_call).write()


def messages_text(row: dict, messages: list[dict]) -> str:
    """The `messages` column: the original text of a ToolMind row when it still decodes to ``messages``,
    else Python's json.dumps (the upstream serializer, per the viewer's ", " / ": " separators)."""
    meta = row.get("meta") if isinstance(row.get("meta"), dict) else {}
    native = row.get("source") == "toolmind"
    verbatim = meta.get("messages_text") if native else None
    if verbatim is not None:
        ok, decoded = try_loads(verbatim)
        if ok and decoded == messages:
            return verbatim
    ensure_ascii = native and meta.get("messages_encoding", P.DEFAULT_ENCODING) != P.ENCODING_UTF8
    return P.dump_json(messages, ensure_ascii)


def split_value(row: dict) -> Optional[str]:
    """ToolMind rows keep their `split` value; other sources say where they come from (``nestful/math``)."""
    meta = row.get("meta") if isinstance(row.get("meta"), dict) else {}
    if row.get("source") == "toolmind":
        return None if meta.get("no_split_value") else row["subset"]
    return f"{row['source']}/{row['subset']}" if row.get("subset") else row["source"]


class _Writer:
    def __init__(self, row: dict, allow_trailing_call: bool):
        self.row = row
        self.allow_trailing_call = allow_trailing_call
        self.style = _Style.of(row)
        self.out = WrittenMessages()
        self.last = "system"

    def write(self) -> WrittenMessages:
        messages = self.row["messages"]
        instructions, start = "", 0
        if messages and messages[0]["role"] == "system":
            instructions, start = messages[0]["content"] or "", 1
        self._emit("system", self._system_text(instructions))
        i = start
        while i < len(messages):
            m = messages[i]
            role = m["role"]
            if role == "user":
                self._user(i, m)
                i += 1
            elif role == "assistant":
                i = self._assistant(i, m, messages)
            elif role == "tool":
                raise ConversionError("tool result answers no call (no assistant tool call right before it)",
                                      field=f"messages[{i}]")
            elif role == "system":
                raise ConversionError("system message after the start; ToolMind has one system turn, first",
                                      field=f"messages[{i}]")
            else:
                raise ConversionError(f"role {role!r} has no ToolMind equivalent", field=f"messages[{i}].role")
        ends = ("answer", "tool_call") if self.allow_trailing_call else ("answer",)
        if self.last not in ends:
            # (a row of no turns but its system message, or none, does not end on the writer's own system turn)
            what = "has no user turn" if self.last == "system" else f"ends on {self.last!r}"
            raise ConversionError(f"conversation {what}; the ToolMind FSM requires it to end on an answer",
                                  field=f"messages[{max(len(messages) - 1, 0)}]")
        return self.out

    # -- turns ---------------------------------------------------------------------------------------

    def _user(self, i: int, m: dict) -> None:
        if self.last not in ("system", "answer"):
            raise ConversionError(f"user turn after {self.last!r}; ToolMind needs an answer before the next user "
                                  "turn", field=f"messages[{i}]")
        self._emit("user", m["content"] or "")
        self.last = "user"

    def _assistant(self, i: int, m: dict, messages: list[dict]) -> int:
        """Write one assistant turn (and the results of its calls); return the next message index."""
        if self.last not in ("user", "tool_output"):
            # (the system turn is the writer's own: a row may have none)
            where = "at the start" if self.last == "system" else f"after {self.last!r}"
            raise ConversionError(f"assistant turn {where}; ToolMind needs a user turn before it",
                                  field=f"messages[{i}]")
        calls = m.get("tool_calls") or []
        reasoning = m.get("reasoning_content")
        if not calls:
            content = m.get("content") or ""
            if not content.strip():
                raise ConversionError("assistant turn has neither content nor tool calls; ToolMind cannot write an "
                                      "empty answer (the card rejects empty <answer> blocks)",
                                      field=f"messages[{i}].content")
            self._reasoning(reasoning, "answer", None, f"messages[{i}].reasoning_content")
            self._wrapped("answer", content, f"messages[{i}].content")
            self.last = "answer"
            return i + 1
        reasoning_field = f"messages[{i}].reasoning_content"
        if m.get("content"):
            # Text said alongside calls has no ToolMind slot before a call except the reasoning turn.
            reasoning = "\n\n".join(t for t in (reasoning, m["content"]) if t)
            reasoning_field = f"messages[{i}]"
        results, next_index = _match_results(i, calls, messages, self.allow_trailing_call)
        for k, (call, result) in enumerate(zip(calls, results)):
            name = call["function"]["name"]
            self._reasoning(reasoning if k == 0 else None, "call" if k == 0 else "next_call", name, reasoning_field)
            self._call(i, k, call)
            if result is None:
                self.last = "tool_call"
            else:
                j = next(j for j in range(i + 1, next_index) if messages[j] is result)
                # An empty result is an empty <tool_response> block, which the card allows (a tool that returned
                # nothing), unlike empty <think>, <tool_call> and <answer> blocks.
                self._wrapped("tool_output", result["content"] or "", f"messages[{j}].content")
                self.last = "tool_output"
        return next_index

    # -- messages ------------------------------------------------------------------------------------

    def _reasoning(self, text: Optional[str], kind: str, name: Optional[str], field: str) -> None:
        # Empty reasoning (a "<think>\n\n</think>" turn) is no reasoning: the card rejects empty <think> blocks,
        # so the FSM's reasoning turn is a marked bridge, as for a turn without any.
        if text is not None and text.strip():
            self._wrapped("reasoning", text, field)
            return
        index = len(self.out.messages)
        stored = (self.style.bridge_texts or {}).get(str(index))
        self.out.bridges.append(index)
        # A bridge read back at this position is reused only where it still fits: what it bridges to (a call of
        # this tool, or an answer) may have changed since (turns dropped before it shift the positions). A call
        # bridge fits either call kind: parallel calls read back as calls of their own.
        kinds = ("answer",) if kind == "answer" else ("call", "next_call")
        fits = isinstance(stored, str) and any(stored == t.format(name=name) for k in kinds
                                               for t in BRIDGE_TEMPLATES[k])
        self._emit("reasoning", P.wrap(stored if fits else self._bridge_text(kind, name, index),
                                       "think", self.style.padding))

    def _bridge_text(self, kind: str, name: Optional[str], index: int) -> str:
        variants = BRIDGE_TEMPLATES[kind]
        pick = zlib.crc32(f"{self.row.get('id')}#{index}".encode()) % len(variants)
        return variants[pick].format(name=name)

    def _call(self, i: int, k: int, call: dict) -> None:
        fn = call["function"]
        name, arguments = fn["name"], fn["arguments"]
        if not isinstance(arguments, dict):
            raise ConversionError("call arguments must be a JSON object", field=f"messages[{i}].tool_calls[{k}].function.arguments")
        original = self._override("tool_call")
        if original is not None and _same_call(original, name, arguments, self.style.call_key):
            self._emit("tool_call", original)
            return
        body = P.render_call(name, arguments, self.style.call_key, self.style.ensure_ascii)
        self._emit("tool_call", P.wrap(body, "tool_call", self.style.padding))

    def _wrapped(self, role: str, text: str, field: str) -> None:
        tag = P.WRAPPER_TAG[role]
        if P.block_count(text, tag) > 1:
            # "a</think>\n<think>b" would be written as two <think> blocks in one message: outside the card's
            # grammar (one block per turn), so the reader refuses it.
            raise ConversionError(f"text closing a <{tag}> block and opening another would be read back as several "
                                  f"<{tag}> blocks in one {role} message, which the card's grammar has no room for",
                                  field=field)
        original = self._override(role)
        if original is not None and _unwrapped_text(original, tag) == text:
            self._emit(role, original)
        else:
            self._emit(role, P.wrap(text, tag, self.style.padding))

    def _override(self, role: str) -> Optional[str]:
        overrides = self.style.overrides
        original = overrides.get(str(len(self.out.messages))) if overrides else None
        return original if isinstance(original, str) else None

    def _emit(self, role: str, content: str) -> None:
        self.out.messages.append({"role": role, "content": content})

    def _system_text(self, instructions: str) -> str:
        row = self.row
        meta = row.get("meta")
        if row.get("source") == "toolmind" and isinstance(meta, dict) and isinstance(meta.get("system"), str):
            # The exact upstream text, unless tools or instructions were edited since it was read.
            if _reads_as(meta["system"], row["tools"], instructions):
                return meta["system"]
        # The plain layout where the reader gets the same tools and instructions back from it (real rows of
        # every source do); else the marked one, which it reads as written.
        for render in (render_system_prompt, render_marked_system_prompt):
            text = render(row["tools"], instructions)
            if _reads_as(text, row["tools"], instructions):
                return text
        raise ConversionError("the system prompt would not read back as these tools and instructions (a tool or "
                              "the text holds characters JSON cannot carry)", field="tools")


def _match_results(i: int, calls: list[dict], messages: list[dict],
                   allow_trailing_call: bool) -> tuple[list[Optional[dict]], int]:
    """The tool message answering each call among the tool messages right after message ``i``: by
    ``tool_call_id``, else in order. Unanswered calls, unmatched results and a result without an id whose
    ``name`` is not its call's are ConversionErrors."""
    end = i + 1
    while end < len(messages) and messages[end]["role"] == "tool":
        end += 1
    results: list[Optional[dict]] = [None] * len(calls)
    by_id = {c["id"]: k for k, c in enumerate(calls)}
    unlabelled: list[int] = []
    for j in range(i + 1, end):
        call_id = messages[j].get("tool_call_id")
        if call_id is None:
            unlabelled.append(j)
        elif call_id in by_id and results[by_id[call_id]] is None:
            results[by_id[call_id]] = messages[j]
        else:
            raise ConversionError(f"tool result answers no call of the assistant turn at messages[{i}] "
                                  f"(tool_call_id {call_id!r})", field=f"messages[{j}].tool_call_id")
    for k in range(len(calls)):
        if results[k] is None and unlabelled:
            j = unlabelled.pop(0)  # sources without call ids: results come in call order
            named = messages[j].get("name")
            if named is not None and named != calls[k]["function"]["name"]:
                # Its name says it answers another call: paired by position it would be written (and read
                # back) as the result of the wrong call.
                raise ConversionError(f"tool result named {named!r} has no tool_call_id and comes where the result "
                                      f"of call {calls[k]['id']!r} ({calls[k]['function']['name']}) is due; "
                                      "give it the tool_call_id of the call it answers",
                                      field=f"messages[{j}].tool_call_id")
            results[k] = messages[j]
    if unlabelled:
        raise ConversionError(f"more tool results than calls after the assistant turn at messages[{i}]",
                              field=f"messages[{unlabelled[0]}]")
    for k, result in enumerate(results):
        last_call_of_row = k == len(calls) - 1 and end == len(messages)
        if result is None and not (allow_trailing_call and last_call_of_row):
            raise ConversionError(f"call {calls[k]['id']!r} ({calls[k]['function']['name']}) has no result; ToolMind "
                                  "needs a tool_output after every tool_call", field=f"messages[{i}].tool_calls[{k}]")
    return results, end


def _reads_as(system_text: str, tools: list[dict], instructions: str) -> bool:
    """Whether the reader gets exactly these tools and instructions from a system text."""
    prompt = parse_system_prompt(system_text)
    # Tool by tool: a tool may nest as deep as storage allows, the list around it one level deeper.
    return prompt.instructions == instructions and len(prompt.tools) == len(tools) and all(
        json_bytes(a) == json_bytes(b) for a, b in zip(prompt.tools, tools))  # 1, 1.0, True differ


def _unwrapped_text(content: str, tag: str) -> Optional[str]:
    try:
        return P.unwrap(content, tag, "", "content").text
    except ToolUseDataError:
        return None


def _same_call(content: str, name: str, arguments: Any, key: str) -> bool:
    """Whether a recorded original ``<tool_call>`` content still says this call."""
    body = _unwrapped_text(content, "tool_call")
    if body is None:
        return False
    try:
        call = P.parse_call(body, "content", arguments_key=key, tolerant=True)
    except ToolUseDataError:
        return False
    return call.name == name and json_bytes(call.arguments) == json_bytes(arguments)  # 1, 1.0, True differ


TOOLMIND_FORMAT = Format(
    name="toolmind",
    description="strict ToolMind rows (reasoning/tool_call/tool_output/answer roles) that pass its transition FSM",
    features=TOOLMIND_FEATURES,
    write=write_toolmind_row,
)
