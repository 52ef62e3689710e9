"""Progress of long commands (export, validate, stats): a rich progress line on a terminal, nothing in a pipe or
a log file, so that redirected output stays clean. The libraries' own bars (datasets preparing a split,
huggingface_hub downloading) follow the same rule while a command runs (:func:`library_bars_on_terminal_only`)."""
from __future__ import annotations

import contextlib
import sys
from typing import Iterable, Iterator, Optional, TypeVar

T = TypeVar("T")


def progress(rows: Iterable[T], description: str, total: Optional[int] = None) -> Iterator[T]:
    """Yield ``rows``, showing a counter (and a bar when ``total`` is known) on stderr if it is a terminal (and
    datasets' bars are not turned off: ``HF_DATASETS_DISABLE_PROGRESS_BARS=1``, ``disable_progress_bars()``)."""
    import datasets

    if not (_stderr_is_terminal() and datasets.is_progress_bar_enabled()):
        yield from rows
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
    with Progress(*columns, transient=True, console=_stderr_console()) as bar:
        task = bar.add_task(description, total=total)
        for row in rows:
            yield row
            bar.advance(task)


@contextlib.contextmanager
def library_bars_on_terminal_only() -> Iterator[None]:
    """Turn datasets' and huggingface_hub's tqdm bars off while the block runs if stderr is not a terminal: they
    draw whatever stderr is, and in a CI log or a ``2> file`` every update is one more line. A bar the user forced
    on (``HF_DATASETS_DISABLE_PROGRESS_BARS=0``, ``HF_HUB_DISABLE_PROGRESS_BARS=0``) is left on."""
    if _stderr_is_terminal():
        yield
        return
    import datasets
    from datasets import config as datasets_config
    from huggingface_hub import constants as hub_constants
    from huggingface_hub import utils as hub_utils

    off_datasets = datasets_config.HF_DATASETS_DISABLE_PROGRESS_BARS is not False and datasets.is_progress_bar_enabled()
    off_hub = hub_constants.HF_HUB_DISABLE_PROGRESS_BARS is not False and not hub_utils.are_progress_bars_disabled()
    if off_datasets:
        datasets.disable_progress_bars()
    if off_hub:
        hub_utils.disable_progress_bars()
    try:
        yield
    finally:  # as they were (a caller of main() in its own process keeps its settings)
        if off_datasets:
            datasets.enable_progress_bars()
        if off_hub:
            hub_utils.enable_progress_bars()


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced by an object without it, or closed
        return False


def _stderr_console():
    from rich.console import Console

    return Console(stderr=True)
