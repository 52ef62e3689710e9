"""ms-swift agent format: ``SOURCE`` (conversions) and ``Builder`` (a datasets builder class).

The ``swift`` writer (unified rows of any source -> ms-swift rows) is :data:`.writer.SWIFT_FORMAT`.
"""
from tooluse_datasets.builder import ToolUseBuilder

from .source import MsSwiftSource

SOURCE = MsSwiftSource()


class Builder(ToolUseBuilder):
    """``MsSwiftBuilder(config_name="unified" | "raw" | "swift" | ..., data_files=...)``: one split per
    data_files key (default ``train``), subset = file stem (its path where files of the load share a stem: see
    ``shards.paths.file_labels``). There is no default upstream: pass data_files."""

    SOURCE_CLASS = MsSwiftSource


MsSwiftBuilder = Builder
