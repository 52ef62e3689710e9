"""NESTFUL gold answers: decoding HF's text, and whether a row has one at all. A JSON ``null`` gold answer is an
answer: upstream's pipeline writes every gold answer as ``json.dumps`` of the row's value (``src/eval.py``), so a
null one reaches its scorer as the text ``null``, which it parses and counts. Only a row without ``gold_answer``
has none. Both are ``None`` once decoded, so the package's rows keep the difference in ``gold_answer_text``."""
from __future__ import annotations

import ast
import json
from typing import Any, Mapping

from tooluse_datasets.codec import dumps, loads_json_or_literal, try_loads
from tooluse_datasets.errors import ToolUseDataError

NULL_TEXT = "null"  # json.dumps(None): the text of a null gold answer in upstream's result files


def decode_gold_answer(text: str) -> Any:
    """json -> ``ast.literal_eval`` -> the text itself. Never ``eval``.

    A value JSON cannot hold (sets, complex, NaN...) stays the text; tuples become lists, which is what
    the official pipeline's ``json.dumps`` makes of them. So does text that reads as a value but is not how that
    value is written: HF's text is ``json.dumps`` or ``str()`` of the answer, and neither writes 11.0 as
    ``"11.00"`` or [2] as ``"    [2]"``, so such text is a string answer, ``str()``-ed (the toy rows hold both).
    """
    try:
        value = loads_json_or_literal(text)
    except ToolUseDataError:
        return text
    return value if _written_as_read(text) else text


def _written_as_read(text: str) -> bool:
    """Whether ``text`` is what ``json.dumps`` (ASCII-escaped or not) or ``str()`` writes for the value it reads
    as. Only a string answer ``str()``-ed gives text of another spelling (padding, trailing zeros, ``0x10``)."""
    ok, value = try_loads(text)
    try:
        if ok:
            return text in (json.dumps(value), json.dumps(value, ensure_ascii=False))
        return str(ast.literal_eval(text.strip())) == text  # (a tuple as str() writes it, before it is a list)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return True  # a value no writer can write again (an int past str()'s limit): keep the reading


def stored_as_text(row: Mapping) -> bool:
    """HF parquet rows (and upstream's result files) store every structured column as text; GitHub rows store
    them natively."""
    return isinstance(row.get("output"), str) or isinstance(row.get("tools"), str)


def has_gold_answer(row: Mapping) -> bool:
    """``row``: an upstream row (GitHub or HF form), a line of a result file, a raw row of the package or a
    unified row's ``meta``."""
    if row.get("gold_answer") is not None:
        return True
    if "gold_answer_text" in row:
        # The package's rows: a null answer keeps its text (HF's, or "null" for GitHub's null), which decodes
        # to null; without a text, or with one that says otherwise (a gold_answer set to None), there is none.
        text = row["gold_answer_text"]
        return isinstance(text, str) and decode_gold_answer(text) is None
    # Upstream's own rows: in JSON a null is the answer; in a text column (HF) a null cell holds no text at all.
    return "gold_answer" in row and not stored_as_text(row)


def text_column_note(meta: Mapping, answer: Any) -> list[str]:
    """Why a string answer that is the gold answer's own text lost: a text column (HF's) holds ``str()`` of the
    answer, which for a string looking like JSON (``'{"a": 1}'``) is also the text of the value it spells, and the
    loader reads the value. One note, or none (a mismatch without that cause)."""
    text = meta.get("gold_answer_text")
    if isinstance(answer, str) and answer == text and not isinstance(meta.get("gold_answer"), str):
        return ["the answer is the gold answer's text itself: a text column (HF's) writes a string answer and the "
                "value it spells alike, and it was read as the value"]
    return []


def mismatch_text(result: Any, meta: Mapping) -> str:
    """Why an execution ``result`` of a row's gold calls is not its gold answer (``meta``: the row's meta): what
    the calls gave, the gold, and the sandbox's notes on why an answer that reads as the gold does not count
    (upstream's check crashing on an ambiguous ==, a gold float without a '.', a text column's reading)."""
    return "; ".join([f"the gold calls give {result.answer_text()}, not the gold answer "
                      f"{dumps(meta.get('gold_answer'))}", *result.notes,
                      *text_column_note(meta, (result.answer or {}).get("value"))])
