"""Pairing tool results with the calls they answer, for formats that have no call ids (ms-swift, LLaMA-Factory):
there a result is paired with a call by its position, so each call group must be followed by exactly one
result per call, and the unified ``tool_call_id``s decide their order."""
from __future__ import annotations

from typing import Iterator

from .errors import ConversionError, as_json, count_of


def call_groups(messages: list[dict], start: int = 0) -> Iterator[tuple[int, int]]:
    """``(i, end)`` for each message from ``start`` on, in order. When ``messages[i]`` makes tool calls,
    ``messages[i + 1:end]`` are the tool messages right after it (its results, not yielded on their own);
    otherwise ``end == i + 1``. A tool message that follows no call turn is yielded on its own, for the
    caller to refuse."""
    i = start
    while i < len(messages):
        end = i + 1
        if messages[i].get("tool_calls"):
            while end < len(messages) and messages[end].get("role") == "tool":
                end += 1
        yield i, end
        i = end


def results_in_call_order(messages: list[dict], turn: int, end: int, *, target: str) -> list[dict]:
    """The tool results ``messages[turn + 1:end]`` answering the calls of ``messages[turn]``, in call order
    (``end`` as :func:`call_groups` gives it).

    None at all is a call-only turn. Otherwise there must be exactly one result per call, each naming its
    call by ``tool_call_id``: ``target`` (the format's name, for the messages) pairs by position only, so a
    result it cannot place is a :class:`ConversionError` naming the field.
    """
    start = turn + 1
    results = messages[start:end]
    if not results:
        return []
    calls = messages[turn]["tool_calls"]
    if len(results) != len(calls):
        raise ConversionError(f"the assistant turn makes {count_of(len(calls), 'tool call')}, followed by "
                              f"{count_of(len(results), 'tool result')}; {target} pairs results with calls by position",
                              field=f"messages[{turn}].tool_calls")
    call_ids = [c.get("id") for c in calls]  # (a call without one: a result cannot name it, said below)
    known = set(call_ids)  # looked up once per result: a list made a turn of many calls quadratic
    by_id: dict[str, dict] = {}
    for k, result in enumerate(results):
        where = f"messages[{start + k}].tool_call_id"
        call_id = result.get("tool_call_id")
        if call_id is None:
            raise ConversionError("tool result has no tool_call_id, so its call (and its position) is unknown",
                                  field=where)
        if call_id not in known:
            raise ConversionError(f"tool result answers {as_json(call_id)}, which is not a call of the preceding "
                                  f"assistant turn", field=where)
        if call_id in by_id:
            raise ConversionError(f"two tool results answer call {as_json(call_id)}", field=where)
        by_id[call_id] = result
    return [by_id[call_id] for call_id in call_ids]
