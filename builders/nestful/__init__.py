"""NESTFUL source: ``SOURCE`` (conversions), ``Builder`` (a datasets builder class) and its ``NestfulConfig``."""
from dataclasses import dataclass
from typing import Optional

from tooluse_datasets.builder import ToolUseBuilder, ToolUseConfig
from tooluse_datasets.cache_keys import tree_digest

from .source import NestfulOptions, NestfulSource

SOURCE = NestfulSource()


@dataclass
class NestfulConfig(ToolUseConfig, NestfulOptions):
    """A NESTFUL builder config: the output format (``name``), the shared options and NESTFUL's own
    (``data_version``, ``execute``, ``executable_functions``...; see :class:`NestfulOptions`)."""


class Builder(ToolUseBuilder):
    """``NestfulBuilder(config_name="unified" | "raw" | ..., data_files=..., **NestfulOptions)``; split ``train``
    (v2) or ``executable``/``glaive``/``sgd`` (``data_version="v1"``)."""

    SOURCE_CLASS = NestfulSource
    BUILDER_CONFIG_CLASS = NestfulConfig

    @classmethod
    def local_inputs_digest(cls, config_kwargs: dict) -> Optional[str]:
        # Executed rows hold what the functions of a local executable_functions folder returned: the folder's
        # files are part of the cache key, so an edited function (another checkout at the same path) is run
        # again instead of the cached results served. (The default, pinned folder is checked by checksum.) The
        # folder is checked first: one that is not a functions folder fails the load or mirror here, not in
        # every shard (as a mirror's shard failure, "retry", that no retry mends). What the functions return also
        # depends on the interpreter and the libraries they import, pinned folder or not (execution.environment).
        if not config_kwargs.get("execute"):
            return None
        from .execution import check_functions_dir
        from .execution.environment import environment_digest, pinned_third_party_imports, third_party_imports

        folder = config_kwargs.get("executable_functions")
        if folder is None:
            return environment_digest(pinned_third_party_imports())
        folder = check_functions_dir(folder)
        tree = tree_digest(folder)
        return f"{tree}-{environment_digest(third_party_imports(folder, tree))}"


NestfulBuilder = Builder

__all__ = ["SOURCE", "Builder", "NestfulBuilder", "NestfulConfig", "NestfulOptions", "NestfulSource"]
