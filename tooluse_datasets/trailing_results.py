"""Tool results that end a conversation, dropped so that it ends on the calls that asked for them.

A row whose conversation ends on tool results, with no assistant turn after them (an agent trace cut after its
last call), has nothing a trainer learns from those results: they would only be the prompt of a next turn.
LLaMA-Factory drops such a row whole (its turns must end on an assistant turn), losing its calls too, so the
``llamafactory`` writer refuses it. :func:`drop_trailing_results` rewrites it per row, for ``ds.map``, to end on
its last call turn, which LLaMA-Factory trains as the response: every call is kept. The source option
``trailing_results="drop"`` (``load(..., "llamafactory", trailing_results="drop")``, ``export
--drop-trailing-results``) has the pipeline do it to each unified row before the writer, so that a row the writer
still refuses is named by its file, row and input field as any other.
"""
from __future__ import annotations

import difflib
from functools import partial
from typing import Callable, Optional

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


# ``trailing_results=`` (an option of every source): what happens to a row ending on tool results in the formats
# whose writer refuses it. "refuse": the writer's error (on_error decides); "drop": the row is written without
# them, as :func:`drop_trailing_results` makes it.
REFUSE, DROP = "refuse", "drop"
TRAILING_RESULTS = (REFUSE, DROP)
# The formats whose writer refuses a conversation that ends on tool results (the others write it as it is).
REFUSING_FORMATS = ("llamafactory",)


def check_trailing_results(value: str, fmt: Optional[str]) -> None:
    """``trailing_results=value`` is one of :data:`TRAILING_RESULTS` (a misspelling names the value meant), and
    "drop" is asked of a format in :data:`REFUSING_FORMATS` (``fmt`` None: the format is not known here)."""
    if value not in TRAILING_RESULTS:
        meant = difflib.get_close_matches(str(value).lower(), TRAILING_RESULTS, 1)
        hint = f" (did you mean {meant[0]!r}?)" if meant else ""
        raise ValueError(f"option trailing_results must be {' or '.join(map(repr, TRAILING_RESULTS))}, got "
                         f"{value!r}{hint}")
    if value == DROP and fmt is not None and fmt not in REFUSING_FORMATS:
        # (another format writes such rows as they are: the option would change nothing, silently)
        raise ValueError(f"trailing_results={DROP!r} applies to the formats whose writer refuses rows ending on tool "
                         f"results ({', '.join(REFUSING_FORMATS)}), not {fmt!r}")


def writer_for(fmt: str, write: Callable[[dict], dict], trailing_results: str) -> Callable[[dict], dict]:
    """The writer of ``fmt`` that the ``trailing_results`` option asks for: ``write`` itself, or with "drop" and a
    format that refuses rows ending on results, ``write`` of each row without them."""
    if trailing_results != DROP or fmt not in REFUSING_FORMATS:
        return write
    return partial(_write_trimmed, write)


def _write_trimmed(write: Callable[[dict], dict], row: dict) -> dict:
    # (a module-level function: the converter holding it is pickled to worker processes)
    return write(drop_trailing_results(row))
