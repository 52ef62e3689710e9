"""Sources, by name. Adding a source = its folder under builders/ + one line here.

Modules are imported on first use (``importlib``), so that this registry imports no builder and the
builders, the ``all`` mix and ``load`` can all look sources up without import cycles.
"""
from __future__ import annotations

import difflib
import importlib
from importlib import resources

# source name -> module exposing ``Builder`` (a ToolUseBuilder subclass); "all" mixes every other source
SOURCES: dict[str, str] = {
    "nestful": "tooluse_datasets.builders.nestful",
    "ms_swift": "tooluse_datasets.builders.ms_swift",
    "toolmind": "tooluse_datasets.builders.toolmind",
    "llamafactory": "tooluse_datasets.builders.llamafactory",
    "all": "tooluse_datasets.mix",
}
MIX = "all"


def source_names() -> list[str]:
    """The real sources (every registered name but the ``all`` mix), in registry order."""
    return [name for name in SOURCES if name != MIX]


def builder_class(source: str) -> type:
    """The source's ``Builder`` (a :class:`tooluse_datasets.builder.ToolUseBuilder` subclass)."""
    _check_source(source)
    builder = importlib.import_module(SOURCES[source]).Builder
    named = builder.SOURCE_CLASS.name
    if named != source:  # (its rows would say another source than the one loaded, validated and mixed by name)
        raise TypeError(f"source {source!r} is registered for {SOURCES[source]}, whose Builder reads source "
                        f"{named!r}: register it under that name, or name its Source class {source!r}")
    return builder


def sample_files(source: str) -> dict[str, list[str]]:
    """The small self-written sample bundled with a source (used by the offline demo and tests).
    For ``"all"``: source name -> files, the ``data_files`` shape that source takes."""
    if source == MIX:
        return {name: sample_files(name)["train"] for name in source_names()}
    _check_source(source)
    folder = resources.files(SOURCES[source]) / "dummy_data"
    files = sorted(str(p) for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
    return {"train": files}


def _check_source(source: str) -> None:
    if isinstance(source, str) and source in SOURCES:
        return
    meant = meant_source(source)
    hint = f" (did you mean {meant!r}?)" if meant else ""
    raise ValueError(f"unknown source {source!r}{hint}; choose one of {source_names()}, or {MIX!r} for all of them")


def meant_source(name) -> str | None:
    """The registered name an unknown ``name`` stands for: "ms-swift", "ToolMind", "tool_mind", "llama_factory"
    spelled otherwise, else a name one typo away ("nestfull", "toolmnd", "llamafactroy"); None if none is close."""
    key = name.lower().replace("-", "").replace("_", "") if isinstance(name, str) else None
    if not key:
        return None
    spelled = {registered.replace("_", ""): registered for registered in SOURCES}
    if key in spelled:
        return spelled[key]
    return next((spelled[close] for close in difflib.get_close_matches(key, spelled, 1, 0.8)), None)
