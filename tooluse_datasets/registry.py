"""Sources and output formats, by name. Adding a source = its folder under builders/ + one line here."""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .builder import ToolUseBuilder
    from .formats import Format

# source name -> module (under builders/) exposing ``SOURCE`` and ``Builder``
SOURCES: dict[str, str] = {
    "nestful": "tooluse_datasets.builders.nestful",
    "ms_swift": "tooluse_datasets.builders.ms_swift",
    "toolmind": "tooluse_datasets.builders.toolmind",
}

# format name -> what it is; the writers of non-native formats live with the source that owns the format
FORMATS: dict[str, str] = {
    "unified": "one schema for every source: OpenAI tools + chat messages with tool_calls (default)",
    "raw": "the source's own fields, JSON strings decoded",
    "swift": "ms-swift agent format, rows that `swift sft` accepts unchanged",
    "toolmind": "strict ToolMind rows (reasoning/tool_call/tool_output/answer roles) that pass its transition FSM",
}
WRITERS: dict[str, str] = {
    "swift": "tooluse_datasets.builders.ms_swift.writer:SWIFT_FORMAT",
    "toolmind": "tooluse_datasets.builders.toolmind.writer:TOOLMIND_FORMAT",
}


def builder_class(source: str) -> type["ToolUseBuilder"]:
    if source == "all":
        from .mix import AllSourcesBuilder

        return AllSourcesBuilder
    if source not in SOURCES:
        raise ValueError(f"unknown source {source!r}; choose one of {sorted(SOURCES)} or 'all'")
    return importlib.import_module(SOURCES[source]).Builder


def writer(fmt: str) -> "Format":
    if fmt not in WRITERS:
        raise ValueError(f"format {fmt!r} has no writer; writers: {sorted(WRITERS)}")
    module, _, attr = WRITERS[fmt].partition(":")
    return getattr(importlib.import_module(module), attr)
