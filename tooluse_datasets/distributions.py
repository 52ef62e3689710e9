"""Distributions of unified rows a user checks first (turns, calls per row, tools per row, content lengths), per
split, and their PNG plots (``stats --plots DIR``; the mirror card can embed the same files).

:class:`Distributions` is an accumulator fed row by row in the pass that computes the other statistics; it keeps
counts of values (``Counter``), so its memory follows the number of distinct values, not of rows, and shard
results merge. :func:`plot_distributions` needs matplotlib (the ``plots`` extra).
"""
from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

# measure -> (file name, x label, log-scaled x)
MEASURES = {
    "turns": ("turns.png", "messages per row", False),
    "calls_per_row": ("calls_per_row.png", "tool calls per row", False),
    "tools_per_row": ("tools_per_row.png", "tools offered per row", False),
    "content_chars": ("content_chars.png", "characters per message (content + reasoning)", True),
}


class Distributions:
    """Value counts of the measures in :data:`MEASURES`, for one split."""

    def __init__(self) -> None:
        self.counts: dict[str, Counter[int]] = {name: Counter() for name in MEASURES}

    def add(self, row: dict) -> None:
        messages = row["messages"]
        for m in messages:
            self.add_message(m)
        self.add_row(len(messages), sum(len(m.get("tool_calls") or ()) for m in messages), len(row.get("tools") or ()))

    # The two halves of add, for a caller that walks the messages anyway (SplitStatistics): one walk, not two.
    def add_message(self, message: dict) -> None:
        self.counts["content_chars"][len(message.get("content") or "") + len(message.get("reasoning_content") or "")] += 1

    def add_row(self, turns: int, calls: int, tools: int) -> None:
        self.counts["turns"][turns] += 1
        self.counts["calls_per_row"][calls] += 1
        self.counts["tools_per_row"][tools] += 1

    def merge(self, other: "Distributions") -> "Distributions":
        for name, counts in other.counts.items():
            self.counts[name].update(counts)
        return self

    def to_state(self) -> dict:
        return {name: {str(v): n for v, n in sorted(c.items())} for name, c in self.counts.items()}

    @classmethod
    def from_state(cls, state: dict) -> "Distributions":
        out = cls()
        for name, counts in state.items():
            out.counts[name] = Counter({int(v): n for v, n in counts.items()})
        return out


def plot_distributions(by_split: dict[str, Distributions], out_dir: str | Path, title: str = "") -> list[Path]:
    """One PNG per measure in ``out_dir``, every split as its own histogram (share of rows, or of messages for
    content length). Returns the files written. PNGs carry no timestamp or version, so the same data gives the
    same bytes (mirrors stay reproducible)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, (file_name, label, log_x) in MEASURES.items():
        fig, ax = plt.subplots(figsize=(7, 3.6), dpi=100)
        every_value = sorted({v for dist in by_split.values() for v in dist.counts[name]})
        bins = _bins(every_value, log_x) if every_value else 10  # shared, so splits compare bar by bar
        for split, dist in by_split.items():
            counts = dist.counts[name]
            total = sum(counts.values())
            if not total:
                continue
            values = sorted(counts)
            # A log-scaled axis has no place for 0 (call turns have no content): their number is in the legend.
            empty = f", {counts[0]:,} empty" if log_x and counts.get(0) else ""
            ax.hist(values, bins=bins, weights=[counts[v] / total for v in values], histtype="step", linewidth=1.5,
                    label=f"{split} (n={total:,}{empty})")
        if log_x:
            ax.set_xscale("log")
        ax.set_xlabel(label)
        ax.set_ylabel("share of messages" if name == "content_chars" else "share of rows")
        ax.set_title(f"{title}: {label}" if title else label, fontsize=10)
        if ax.has_data():
            ax.legend(fontsize=7)
        fig.tight_layout()
        path = out / file_name
        partial = path.with_name(path.name + ".partial")
        try:
            fig.savefig(partial, format="png", metadata={"Software": None})
            os.replace(partial, path)  # an interrupted run leaves no cut-off picture under the final name
        finally:
            partial.unlink(missing_ok=True)
            plt.close(fig)
        written.append(path)
    return written


def _bins(values: list[int], log_x: bool):
    low, high = values[0], values[-1]
    if log_x:
        import numpy as np

        return np.geomspace(max(low, 1), max(high, 2) + 1, 40)
    if high - low <= 40:
        return [v - 0.5 for v in range(low, high + 2)]
    import numpy as np

    # 40 bins over every split's range (a bare 40 would give each split 40 bins over its own range)
    return np.linspace(low - 0.5, high + 0.5, 41)
