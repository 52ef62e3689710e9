"""Call ids rewritten for chat templates that accept only one shape of id.

Mistral's templates (Mistral-7B-Instruct-v0.3, Mistral-Nemo, Mistral-Small) raise unless every
``tool_calls[].id`` and ``tool_call_id`` is exactly 9 characters, as Mistral's tokenizer writes them, while the
sources keep their own ids (NESTFUL ``$var_1``, ``call_0``, OpenAI ``call_…``), which the writers and golden
outputs depend on. :func:`short_call_ids` rewrites them per row, for ``ds.map``.
"""
from __future__ import annotations

import hashlib
import re
import string
from collections.abc import Mapping

from .row_rewrite import check_call_ids, row_rewrite

ALPHABET = string.digits + string.ascii_letters
# A whole argument value that references a call's output without its closing `$` (NESTFUL "$var_1.result")
_OPEN_REFERENCE = re.compile(r"\$[^$.]+\.[^$]+")
# One missing its leading `$` (NESTFUL v1 "var1.product_id$": label, field): text, no edge, which
# nestful.undefined_reference reports by the label it names (any label: short_call_ids renames them)
REFERENCE_WITHOUT_LEADING_DOLLAR = re.compile(r"([^$.]+)\.([^$]+)\$")


@row_rewrite
def short_call_ids(row: dict, length: int = 9) -> dict:
    """``row`` with every call id replaced by ``length`` alphanumeric characters, the ``tool_call_id`` of each
    result and the ``consumer``/``producer`` of each ``call_graph`` edge by its call's new id (an id naming no
    call of the row gets an id of its own the same way), and the label in each argument value an edge lists as a
    reference too (NESTFUL ``$var_1.result$`` -> ``$<new id>.result$``).

    Deterministic: the new id is a hash of the row's ``id`` and the old id, so the same row gives the same ids
    in every run and process (``ds.map(td.short_call_ids)``, map-style or streaming); distinct old ids get
    distinct new ones. The row is not changed in place; any message shape works (decoded or complete). A call
    without an id, or a malformed message, is a typed error naming the field.
    """
    if not isinstance(length, int) or isinstance(length, bool) or length < 1:
        raise ValueError(f"length must be a positive integer, got {length!r}")
    check_call_ids(row["messages"])
    new_ids: dict[str, str] = {}

    def rewrite(old: str) -> str:
        if old not in new_ids:
            taken = set(new_ids.values())
            if len(taken) >= len(ALPHABET) ** length:  # every id of that length is taken: drawing would never end
                raise ValueError(f"row {row.get('id')!r} has more than {len(taken)} distinct call ids, more than "
                                 f"ids of {length} alphanumeric characters can tell apart; use a larger length")
            salt = 0
            while (candidate := _hashed_id(row.get("id"), old, salt, length)) in taken:
                salt += 1  # two old ids of one row hashed alike: draw again, deterministically
            new_ids[old] = candidate
        return new_ids[old]

    # consumer's old id -> argument path -> the old ids of the producers a reference there names
    referenced: dict[str, dict[str, set]] = {}
    for edge in row.get("call_graph") or ():
        if isinstance(edge, Mapping) and all(isinstance(edge.get(k), str)
                                             for k in ("consumer", "argument", "producer")):
            referenced.setdefault(edge["consumer"], {}).setdefault(edge["argument"], set()).add(edge["producer"])

    earlier: dict[str, str] = {}  # label (the old id without its `$`s) -> old id, of the calls renamed so far
    v1 = str(row.get("subset") or "").startswith("v1-")  # NESTFUL's v1 rows

    def renamed(call: Mapping) -> dict:
        out = _renamed(call)
        function = out.get("function")
        if earlier and v1 and isinstance(function, Mapping) and isinstance(function.get("arguments"), Mapping):
            # a reference missing its leading `$` names its call too: left old, its finding would be gone (v1
            # rows only, which nestful.undefined_reference reads so: elsewhere "1.5$" is a price, not call "1")
            out = {**out, "function": {**function, "arguments": _strings(function["arguments"], without_dollar)}}
        if isinstance(call["id"], str) and call["id"].replace("$", ""):
            earlier.setdefault(call["id"].replace("$", ""), call["id"])
        return out

    def without_dollar(text: str) -> str:
        m = REFERENCE_WITHOUT_LEADING_DOLLAR.fullmatch(text)
        if m is None or m.group(1) not in earlier:
            return text
        return f"{rewrite(earlier[m.group(1)]).replace('$', '')}.{m.group(2)}$"

    def _renamed(call: Mapping) -> dict:
        paths, function = referenced.get(call["id"], {}), call.get("function")
        # a reference names its call by the label without its `$`s; left old, it would name a call the row no
        # longer has (the row then failed nestful.undefined_reference, and its raw row named no producer)
        # (in sorted order: which of two old ids hashed alike draws again follows it, and a set's order is not the
        # same in every process)
        labels = {old.replace("$", ""): rewrite(old)
                  for old in sorted(set().union(*paths.values())) if old.strip("$")}
        if not labels or not isinstance(function, Mapping) or not isinstance(function.get("arguments"), Mapping):
            return {**call, "id": rewrite(call["id"])}
        pattern = re.compile(r"\$(" + "|".join(map(re.escape, labels)) + r")(?=[.$]|\Z)")

        def rename(text: str) -> str:
            new = pattern.sub(lambda m: "$" + labels[m.group(1)], text)
            # "$var_1.result" is read as the closed reference for var_N labels only: under the new id it needs its
            # closing `$`, or it would be text (no call_graph edge read back, passed as is by the executor)
            return new + "$" if new != text and _OPEN_REFERENCE.fullmatch(text) else new

        arguments = {name: _referencing(value, name, paths, rename) for name, value in function["arguments"].items()}
        return {**call, "id": rewrite(call["id"]), "function": {**function, "arguments": arguments}}

    messages = []
    for m in row["messages"]:
        m = dict(m)
        if m.get("tool_calls"):
            m["tool_calls"] = [renamed(call) for call in m["tool_calls"]]
        if m.get("tool_call_id") is not None:
            m["tool_call_id"] = rewrite(m["tool_call_id"])
        messages.append(m)
    out = {**row, "messages": messages}
    if isinstance(row.get("call_graph"), list):  # its edges name calls by id: left old, they would name no call
        out["call_graph"] = [{**edge, **{key: rewrite(edge[key]) for key in ("consumer", "producer")
                                         if isinstance(edge.get(key), str)}} if isinstance(edge, Mapping) else edge
                             for edge in row["call_graph"]]
    return out


def _referencing(value, path: str, paths: Mapping, rename) -> object:
    """``value`` (an argument's, at ``path``) with ``rename`` applied to the strings at ``paths``, named as
    ``call_graph`` names them (``a[0]``, ``a.b``)."""
    if isinstance(value, str):
        return rename(value) if path in paths else value
    if isinstance(value, list):
        return [_referencing(v, f"{path}[{i}]", paths, rename) for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        return {k: _referencing(v, f"{path}.{k}", paths, rename) for k, v in value.items()}
    return value


def _strings(value, change) -> object:
    """``value`` with ``change`` applied to every string in it, inside lists and objects too."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, list):
        return [_strings(v, change) for v in value]
    if isinstance(value, Mapping):
        return {k: _strings(v, change) for k, v in value.items()}
    return value


def _hashed_id(row_id, old_id, salt: int, length: int) -> str:
    digest = hashlib.sha256(repr((row_id, old_id, salt)).encode("utf-8")).digest()
    n = int.from_bytes(digest, "big")
    return "".join(ALPHABET[(n // len(ALPHABET) ** i) % len(ALPHABET)] for i in range(length))
