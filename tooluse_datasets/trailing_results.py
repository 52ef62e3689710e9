"""Tool results that end a conversation, dropped so that it ends on the calls that asked for them.

A row whose conversation ends on tool results, with no assistant turn after them (an agent trace cut after its
last call), has nothing a trainer learns from those results: they would only be the prompt of a next turn.
LLaMA-Factory drops such a row whole (its turns must end on an assistant turn), losing its calls too, so the
``llamafactory`` writer refuses it. :func:`drop_trailing_results` rewrites it per row, for ``ds.map``, to end on
its last call turn, which LLaMA-Factory trains as the response: every call is kept.
"""
from __future__ import annotations

from .row_rewrite import row_rewrite


def trailing_results_start(messages: list[dict]) -> int:
    """Where the tool results that end ``messages`` start (``len(messages)`` if it does not end on one)."""
    start = len(messages)
    while start and messages[start - 1].get("role") == "tool":
        start -= 1
    return start


@row_rewrite
def drop_trailing_results(row: dict) -> dict:
    """``row`` without the tool results that end its conversation (it then ends on the call turn that asked for
    them, every call kept); a row that does not end on tool results is returned unchanged. The row is not
    changed in place; any message shape works (decoded or complete); a malformed message is a typed error naming
    the row and field."""
    messages = row["messages"]
    start = trailing_results_start(messages)
    if start == len(messages):
        return row
    return {**row, "messages": messages[:start]}
