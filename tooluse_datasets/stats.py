"""Statistics of unified rows, computed in one pass (used by ``stats`` and the dataset cards)."""
from __future__ import annotations

from collections import Counter

from .codec import dumps
from .distributions import Distributions


class SplitStatistics:
    """Accumulates statistics row by row, so that a writer can feed rows as it streams them
    (``mirror`` computes card statistics while it writes Parquet, in the same pass)."""

    def __init__(self) -> None:
        self.rows = 0
        self.messages = 0
        self.tool_calls = 0
        self.max_calls = 0
        self.argument_bytes = 0
        self.max_argument_bytes = 0
        self.tools_offered = 0
        self.roles: Counter[str] = Counter()
        self.tools_called: set[str] = set()
        self.distributions = Distributions()  # what the plots draw, from the same pass

    def add(self, row: dict) -> None:
        messages = row["messages"]
        self.rows += 1
        self.messages += len(messages)
        self.tools_offered += len(row["tools"])
        row_calls = 0
        add_message = self.distributions.add_message
        for m in messages:
            add_message(m)
            self.roles[m["role"]] += 1
            for c in m.get("tool_calls") or ():  # decoded rows leave empty keys out
                row_calls += 1
                self.tools_called.add(c["function"]["name"])
                size = len(dumps(c["function"]["arguments"]).encode())
                self.argument_bytes += size
                self.max_argument_bytes = max(self.max_argument_bytes, size)
        self.tool_calls += row_calls
        self.max_calls = max(self.max_calls, row_calls)
        self.distributions.add_row(len(messages), row_calls, len(row["tools"]))

    def merge(self, other: "SplitStatistics") -> "SplitStatistics":
        """Add the counts of ``other`` (rows of another shard of the same split)."""
        self.rows += other.rows
        self.messages += other.messages
        self.tool_calls += other.tool_calls
        self.max_calls = max(self.max_calls, other.max_calls)
        self.argument_bytes += other.argument_bytes
        self.max_argument_bytes = max(self.max_argument_bytes, other.max_argument_bytes)
        self.tools_offered += other.tools_offered
        self.roles.update(other.roles)
        self.tools_called |= other.tools_called
        self.distributions.merge(other.distributions)
        return self

    def to_state(self) -> dict:
        """Everything :meth:`merge` needs, as JSON (shard results travel between processes and are saved)."""
        return {"rows": self.rows, "messages": self.messages, "tool_calls": self.tool_calls,
                "max_calls": self.max_calls, "argument_bytes": self.argument_bytes,
                "max_argument_bytes": self.max_argument_bytes, "tools_offered": self.tools_offered,
                "roles": dict(sorted(self.roles.items())), "tools_called": sorted(self.tools_called),
                "distributions": self.distributions.to_state()}

    @classmethod
    def from_state(cls, state: dict) -> "SplitStatistics":
        stats = cls()
        for key in ("rows", "messages", "tool_calls", "max_calls", "argument_bytes", "max_argument_bytes",
                    "tools_offered"):
            setattr(stats, key, state[key])
        stats.roles = Counter(state["roles"])
        stats.tools_called = set(state["tools_called"])
        stats.distributions = Distributions.from_state(state["distributions"])
        return stats

    def result(self) -> dict:
        n, calls = self.rows, self.tool_calls
        return {
            "rows": n,
            "messages": self.messages,
            "messages_per_row": round(self.messages / n, 2) if n else 0.0,
            "tool_calls": calls,
            "tool_calls_per_row": round(calls / n, 2) if n else 0.0,
            "max_tool_calls_in_a_row": self.max_calls,
            "distinct_tools_called": len(self.tools_called),
            "tools_offered_per_row": round(self.tools_offered / n, 2) if n else 0.0,
            "mean_argument_bytes": round(self.argument_bytes / calls, 1) if calls else 0.0,
            "max_argument_bytes": self.max_argument_bytes,
            "roles": dict(sorted(self.roles.items())),
        }
