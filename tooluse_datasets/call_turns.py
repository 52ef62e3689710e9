"""Several calls of one assistant turn split into one turn per call, for chat templates that render one.

Llama 3.1's and Llama 3.2's templates raise "This model only supports single tool-calls at once!" on an
assistant turn with several ``tool_calls``, which most NESTFUL and ToolMind rows have. :func:`one_call_per_turn`
rewrites such a turn per row, for ``ds.map``, as those models call tools: one call, its results, the next call.
"""
from __future__ import annotations

from .errors import InvalidValueError
from .pairing import call_groups
from .row_rewrite import check_call_ids, row_rewrite


@row_rewrite
def one_call_per_turn(row: dict) -> dict:
    """``row`` with each assistant turn of several calls split into one turn per call, in order, each followed
    by the results that answer it (by ``tool_call_id``, in their order). The first turn keeps the text and
    reasoning; the others have ``content: ""`` and no reasoning. A result that answers no call of its turn stays
    after the turn's last call and its results. Everything else is unchanged; the row is not changed in place;
    any message shape works (decoded or complete). A call without an id, two calls of one turn with the same id,
    or a malformed message, is a typed error naming the field."""
    messages = row["messages"]
    check_call_ids(messages)
    out: list[dict] = []
    for turn, end in call_groups(messages):
        calls = messages[turn].get("tool_calls") or []
        if len(calls) < 2:
            out.extend(messages[turn:end])
            continue
        results = messages[turn + 1:end]
        ids = {call["id"] for call in calls}
        if len(ids) < len(calls):  # each result would follow every call of its id: written twice
            k = next(k for k, call in enumerate(calls) if call["id"] in {c["id"] for c in calls[:k]})
            raise InvalidValueError(f"call id {calls[k]['id']!r} is not unique in the turn, so its results cannot "
                                    f"be told apart", field=f"messages[{turn}].tool_calls[{k}].id")
        for k, call in enumerate(calls):
            split = {**messages[turn], "tool_calls": [call]}
            if k:
                split["content"] = ""
                if "tool_call_id" in split:  # the complete shape keeps every key
                    split["reasoning_content"] = None
                else:
                    split.pop("reasoning_content", None)
            out.append(split)
            out.extend(r for r in results if r.get("tool_call_id") == call["id"])
        out.extend(r for r in results if r.get("tool_call_id") not in ids)
    return {**row, "messages": out}
