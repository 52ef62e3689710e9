"""What the per-row rewrites (:func:`short_call_ids`, :func:`one_call_per_turn`, :func:`reasoning_in_content`,
:func:`drop_trailing_results`) take: a unified row, decoded or complete, or a batch of them
(``ds.map(f, batched=True)``). Messages are checked first, so that a malformed row is a typed error naming
the row and field rather than a ``KeyError`` from inside the rewrite, or a row rewritten wrongly in silence."""
from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, Callable

from .errors import InvalidValueError, MissingFieldError, ToolUseDataError, json_kind
from .schema import check_role

RowRewrite = Callable[..., dict]


def row_rewrite(rewrite: RowRewrite) -> RowRewrite:
    """``rewrite`` of one row, run on rows whose messages :func:`check_messages` accepts, taking a batch as well:
    each of its rows rewritten on its own, every column kept. Errors name the row by its ``id``."""

    @functools.wraps(rewrite)
    def per_row(row: Any, *args: Any, **kwargs: Any) -> dict:
        if not isinstance(row, Mapping):
            raise InvalidValueError(f"a unified row must be an object, got {json_kind(row)}")
        if not _is_batch(row):
            return _checked(rewrite, row, args, kwargs)
        columns = {key: row[key] for key in row}  # each column of a lazy batch decoded once
        rows = [{key: values[i] for key, values in columns.items()} for i in range(len(columns["messages"]))]
        out = [_checked(rewrite, one, args, kwargs) for one in rows]
        return {key: [r[key] for r in out] for key in columns}

    return per_row


def _is_batch(row: Mapping) -> bool:
    """Whether ``row`` is a batch: every column a list of one value per row, its ``id`` a list too (a row's is a
    string), or without ids each row's messages a list (a row's messages are objects). A batch row whose messages
    are not a list is then that row's error, not the batch read as one row."""
    messages = row.get("messages")
    if not isinstance(messages, list) or not messages:
        return False
    if not all(isinstance(values, list) and len(values) == len(messages) for values in row.values()):
        return False
    return isinstance(row.get("id"), list) or all(isinstance(m, list) for m in messages)


def _checked(rewrite: RowRewrite, row: Mapping, args: tuple, kwargs: dict) -> dict:
    try:
        check_messages(row)
        return rewrite(row, *args, **kwargs)
    except ToolUseDataError as exc:
        row_id = row.get("id")
        if isinstance(row_id, str) and getattr(exc, "row_id", None) is None:
            exc.row_id = row_id  # named in the error's location (ToolUseDataError.location), once
        raise


def check_messages(row: Mapping) -> None:
    """The containers the rewrites walk: a list of message objects, each message's ``tool_calls`` absent, null
    or a list of call objects, its text fields strings or null. Anything else is a typed error naming the field."""
    if "messages" not in row:
        raise MissingFieldError("unified row lacks 'messages'", field="messages")
    messages = row["messages"]
    if not isinstance(messages, list):
        raise InvalidValueError(f"messages must be a list, got {json_kind(messages)}", field="messages")
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, Mapping):
            raise InvalidValueError(f"a message must be an object, got {json_kind(m)}", field=where)
        check_role(m, i)
        for key in ("content", "reasoning_content", "tool_call_id"):
            if m.get(key) is not None and not isinstance(m[key], str):
                raise InvalidValueError(f"{key} must be a string or null, got {json_kind(m[key])}",
                                        field=f"{where}.{key}")
        calls = m.get("tool_calls")
        if calls is not None and not isinstance(calls, list):
            raise InvalidValueError(f"tool_calls must be a list, got {json_kind(calls)}", field=f"{where}.tool_calls")
        for k, call in enumerate(calls or ()):
            if not isinstance(call, Mapping):
                raise InvalidValueError(f"a call must be an object, got {json_kind(call)}",
                                        field=f"{where}.tool_calls[{k}]")


def check_call_ids(messages: list) -> None:
    """Every call has an id, a string: the rewrites that pair results with calls by id need one (an id-less
    call answered by id-less results would take every one of them). Run after :func:`check_messages`."""
    for i, m in enumerate(messages):
        for k, call in enumerate(m.get("tool_calls") or ()):
            call_id = call.get("id")
            if call_id is None:
                raise MissingFieldError("call has no id (its results cannot name it)",
                                        field=f"messages[{i}].tool_calls[{k}].id")
            if not isinstance(call_id, str):
                raise InvalidValueError(f"a call id must be a string, got {json_kind(call_id)}",
                                        field=f"messages[{i}].tool_calls[{k}].id")
