"""LLaMA-Factory sharegpt format: ``SOURCE`` (conversions), ``Builder`` (a datasets builder class) and its
``LlamaFactoryConfig``.

The ``llamafactory`` writer (unified rows of any source -> LLaMA-Factory rows) is
:data:`.writer.LLAMAFACTORY_FORMAT`; ``tooluse-datasets export SOURCE --format llamafactory`` also writes the
``dataset_info.json`` that registers the files.
"""
import os
from dataclasses import dataclass
from typing import Optional

from tooluse_datasets.builder import ToolUseBuilder, ToolUseConfig
from tooluse_datasets.errors import LOCAL_FILES_HINT, DataNotFoundError

from .layout import entry_digest, layout_of
from .source import LlamaFactoryOptions, LlamaFactorySource

SOURCE = LlamaFactorySource()


@dataclass
class LlamaFactoryConfig(ToolUseConfig, LlamaFactoryOptions):
    """A LLaMA-Factory builder config: the output format (``name``), the shared options and the file's names
    (``columns``, ``tags``, or ``dataset_info`` + ``dataset``; see :class:`LlamaFactoryOptions`)."""


class Builder(ToolUseBuilder):
    """``LlamaFactoryBuilder(config_name="unified" | "raw" | "llamafactory" | ..., data_files=...)``: one split per
    data_files key (default ``train``), subset = file stem (its path where files of the load share a stem: see
    ``shards.paths.file_labels``). There is no default upstream: pass data_files, or
    ``dataset_info=`` and ``dataset=`` (the entry's file_name)."""

    SOURCE_CLASS = LlamaFactorySource
    BUILDER_CONFIG_CLASS = LlamaFactoryConfig

    @classmethod
    def data_files_from_options(cls, config_kwargs: dict) -> Optional[list[str]]:
        # dataset_info= without data_files: the entry's file_name (relative to the dataset_info.json folder).
        if config_kwargs.get("dataset_info") is None:
            return None
        options = LlamaFactoryOptions(**{k: config_kwargs.get(k) for k in ("columns", "tags", "dataset_info",
                                                                             "dataset")})
        return list(layout_of(options).files())

    @classmethod
    def data_folder_from_options(cls, config_kwargs: dict) -> Optional[str]:
        # (LLaMA-Factory reads every file of a folder file_name: anything written there joins the dataset)
        if config_kwargs.get("dataset_info") is None:
            return None
        options = LlamaFactoryOptions(**{k: config_kwargs.get(k) for k in ("columns", "tags", "dataset_info",
                                                                             "dataset")})
        path = layout_of(options).file_path
        return path if path is not None and os.path.isdir(path) else None

    @classmethod
    def local_inputs_digest(cls, config_kwargs: dict) -> Optional[str]:
        # The entry's columns and tags decide the rows; the dataset_info.json can be edited under the same path.
        return entry_digest(config_kwargs)

    def _download_upstream(self, dl_manager, source):
        raise DataNotFoundError(
            f"{source.name} has no default upstream files.\nPass data_files= (local paths, hf:// or https:// URLs) or "
            f"data_dir=, or dataset_info= (a dataset_info.json or its folder) and dataset= (its entry), or try the "
            f"bundled sample: data_files=tooluse_datasets.sample_files({source.name!r})",
            command_hint=f"{LOCAL_FILES_HINT}, or a dataset_info.json entry with --option dataset_info=PATH "
                         f"--option dataset=NAME")


LlamaFactoryBuilder = Builder

__all__ = ["SOURCE", "Builder", "LlamaFactoryBuilder", "LlamaFactoryConfig", "LlamaFactoryOptions",
           "LlamaFactorySource"]
