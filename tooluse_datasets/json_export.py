"""JSON columns leaving datasets for other tools exactly: ``to_json`` and the polars format.

``Dataset.to_json`` (map-style or streamed):
datasets writes each batch through pandas: the batch becomes a DataFrame, its ``Json`` columns are decoded to
Python values (``json_decode_field``) and pandas' ujson writes them with 10 significant digits, 15 at most
(``0.30000000000000004`` as ``0.3``, ``5e-324`` as ``4.940656458e-324``, ``-0.0`` as ``0.0``). Here each JSON
value is handed to pandas as a placeholder string instead, and the placeholder is replaced in pandas' text by
the stored JSON text itself (read first, so that only JSON is written). Everything else stays pandas': orient,
lines, the other columns, ``force_ascii`` (which the JSON text follows too).

``with_format("polars")`` of a dataset with :class:`ExactFeatures`: its JSON leaves stay the stored JSON text, as
``to_polars()`` and ``polars.from_arrow`` give them. datasets decoded them to Python values and had polars infer a
type of them: a row or batch failed in datasets' own polars decoder (TypeError: 'dict' object is not callable), a
column holding an integer beyond 128 bits was polars' OverflowError, and polars typed a column by its first
objects, so a later object's other keys were lost (``{"b": 2}`` after ``{"a": 1}`` came back ``{"a": None}``).
"""
from __future__ import annotations

import contextvars
import re
import secrets
from typing import Any, Optional

from datasets import Features, Json

from .codec import loads
from .datasets_patches import patched_once
from .exact_features import ExactFeatures, _along_path, _decoded_leaf, _stored_text, json_leaves_replaced

# The JSON texts of the batch being written, and the placeholder prefix standing for them in pandas' text (random
# per batch, so that no text of the data can be taken for one); None outside a batch of to_json.
_BATCH: contextvars.ContextVar[Optional[tuple[str, list[str]]]] = contextvars.ContextVar("_BATCH", default=None)


def _json_text_field(example: Any, json_field_path: list) -> Any:
    """datasets' ``json_decode_field`` as ``to_json`` calls it: each JSON leaf under ``json_field_path`` becomes a
    placeholder for its text. Text that is not JSON (``NaN``, text written by others) goes as the package's
    ``to_list`` reads it (datasets' way), and so does every leaf outside a batch of ``to_json``."""
    return _along_path(example, json_field_path, _placeholder)


def _placeholder(stored: Any) -> Any:
    batch = _BATCH.get()
    if batch is None:
        return _decoded_leaf(stored)
    try:
        text = _stored_text(stored)
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        loads(text)
    except (ValueError, TypeError):  # InvalidJsonError and UnicodeDecodeError are ValueErrors
        return _decoded_leaf(stored)
    prefix, texts = batch
    # JSON whitespace only (the big-integer mark, another writer's indentation): a line of JSON Lines stays one line
    text = text.strip()
    if "\n" in text or "\r" in text:
        text = text.replace("\r", " ").replace("\n", " ")
    texts.append(text)
    return f"{prefix}{len(texts) - 1}"


_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def _ascii_escaped(text: str) -> str:
    """JSON ``text`` with each non-ASCII character written as ``\\uXXXX`` (a surrogate pair beyond the BMP), as
    pandas' ``force_ascii`` writes strings: in JSON text such characters are only found inside strings."""
    def escape(match: re.Match) -> str:
        units = match.group().encode("utf-16-be")
        return "".join(f"\\u{int.from_bytes(units[i:i + 2], 'big'):04x}" for i in range(0, len(units), 2))

    return _NON_ASCII.sub(escape, text)


def _install_exact_to_json() -> None:
    """Installed once per process on import: ``JsonDatasetWriter._batch_json`` with JSON leaves written as their
    text (:func:`_json_text_field` in place of the ``json_decode_field`` it calls). A datasets without it is left
    as it is."""
    try:
        import datasets.io.json as datasets_io_json
    except ImportError:
        return
    writer = getattr(datasets_io_json, "JsonDatasetWriter", None)
    original = getattr(writer, "_batch_json", None)
    if original is None or not hasattr(datasets_io_json, "json_decode_field"):
        return
    datasets_io_json.json_decode_field = _json_text_field

    def batch_json(self, args):
        prefix, texts = f"tooluse-json-{secrets.token_hex(8)}-", []
        token = _BATCH.set((prefix, texts))
        try:
            out = original(self, args)
        finally:
            _BATCH.reset(token)
        if not texts:
            return out
        *_, to_json_kwargs = args
        if to_json_kwargs.get("force_ascii", True):
            texts = [t if t.isascii() else _ascii_escaped(t) for t in texts]
        encoding = self.encoding
        placeholder = re.compile(b'"' + re.escape(prefix.encode()) + rb'(\d+)"')
        return placeholder.sub(lambda m: texts[int(m.group(1))].encode(encoding), out)

    writer._batch_json = patched_once(original, batch_json, "_writes_exact_json")


def _install_polars_format_keeping_json_text() -> None:
    """Installed once per process on import: datasets' polars decoder, given :class:`ExactFeatures`, decodes no
    JSON leaf (:func:`_json_as_text`); other features are decoded as datasets decodes them."""
    try:
        from datasets.formatting.polars_formatter import PolarsFeaturesDecoder
    except ImportError:
        return
    original = PolarsFeaturesDecoder.__init__

    def init(self, features):
        original(self, features)
        if isinstance(features, ExactFeatures):
            self.features = Features({name: _json_as_text(f) for name, f in features.items()})

    PolarsFeaturesDecoder.__init__ = patched_once(original, init, "_keeps_json_text")


def _json_as_text(feature: Any) -> Any:
    """``feature`` with each JSON leaf left undecoded (its stored text)."""
    return json_leaves_replaced(feature, lambda leaf: Json(decode=False))


_install_exact_to_json()
_install_polars_format_keeping_json_text()
