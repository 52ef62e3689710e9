"""Tool-use (function-calling) training data as first-class Hugging Face datasets."""
from . import datasets_patches  # noqa: F401  (installs the patches keeping exact features through datasets' operations)
from . import json_export  # noqa: F401  (installs to_json and the polars format keeping JSON columns exact)
from .call_ids import short_call_ids
from .call_turns import one_call_per_turn
from .codec import dumps, loads
from .errors import (ConversionError, DataNotFoundError, InvalidJsonError, InvalidValueError, JsonValueError,
                     MissingFieldError, RuleViolationError, SkipReport, ToolUseDataError, UndefinedReferenceError,
                     UnknownToolError)
from .exact_features import ExactFeatures, ExactJson, decode_row
from .inline_reasoning import reasoning_in_content
from .loading import exact, features, load, sample_files
from .registry import source_names as _source_names
from .schema import FIELD_DOCS, MEDIA_COLUMNS, UNIFIED_FEATURES, complete_row, strip_empty
from .trailing_results import drop_trailing_results
from .validation import validate, validate_unified

__version__ = "0.1.0"

# The sources, by name; each loads on its own in every format, raw included. "all" (every source in one schema,
# one train split, no raw format) is accepted by load() and sample_files() beside them but is not one of them.
# (registry.SOURCES maps every registered name, "all" too, to its module.)
SOURCES: tuple[str, ...] = tuple(_source_names())

__all__ = [
    "load", "validate", "exact", "features", "sample_files", "SOURCES", "UNIFIED_FEATURES", "FIELD_DOCS", "validate_unified",
    "strip_empty", "complete_row", "short_call_ids", "one_call_per_turn", "reasoning_in_content", "drop_trailing_results", "MEDIA_COLUMNS", "ExactFeatures", "ExactJson", "decode_row", "dumps", "loads", "SkipReport", "ToolUseDataError",
    "InvalidJsonError", "InvalidValueError", "MissingFieldError", "UndefinedReferenceError", "UnknownToolError",
    "JsonValueError", "ConversionError", "RuleViolationError", "DataNotFoundError", "__version__",
]
