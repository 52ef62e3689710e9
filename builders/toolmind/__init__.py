"""ToolMind (cleaned & rectified) source: ``SOURCE`` (conversions), ``Builder`` and its ``ToolMindConfig``."""
from dataclasses import dataclass

from tooluse_datasets.builder import ToolUseBuilder, ToolUseConfig

from .source import FamilyOptions, ReaderOptions, ToolMindSource

SOURCE = ToolMindSource()


@dataclass
class ToolMindConfig(ToolUseConfig, FamilyOptions):
    """Options for the ToolMind family of "cleaned & rectified" datasets (spec §8): variations are switches,
    not forks. Pass them to ``tooluse_datasets.load("toolmind", ..., <option>=...)``.

    Args:
        messages_column: column holding the conversation, a JSON string or a native list
            (``"conversations"`` for the DR-Tulu ancestor).
        split_column: column naming the source dataset; its values become HF splits when data_files names
            no splits. None: the files have no such column (HF splits = data_files keys).
        id_column: column with a row id (``"uuid"`` for Toucan / Nemotron siblings); default: row position.
        arguments_key: key of the call arguments inside ``<tool_call>`` (``"parameters"`` for DR-Tulu).
        strict: enforce the card's FSM, the argument key and non-empty blocks (default); False converts any
            role sequence unified can express and keeps the original messages in ``meta``.
        allow_trailing_call: accept rows that end on a ``tool_call`` (text_to_terminal samples).
    """


class Builder(ToolUseBuilder):
    """``Builder(config_name="unified" | "raw" | "toolmind" | ..., data_files=..., **ToolMindConfig options)``.
    Splits: one per `split` value (``synthetic``, ``xlam_function_calling_60k``, ``APIGen_MT_5k``,
    ``glaive_function_calling_v2``, ``When2Call``, ``BUTTONInstruct``, ``tau_train``)."""

    SOURCE = SOURCE
    BUILDER_CONFIG_CLASS = ToolMindConfig

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # The options live on the config; conversions get them through a source bound to this builder
        # (Source methods receive no config).
        self.SOURCE = ToolMindSource(ReaderOptions.from_config(self.config))


ToolMindBuilder = Builder

__all__ = ["SOURCE", "Builder", "ToolMindBuilder", "ToolMindConfig", "ToolMindSource", "ReaderOptions"]
