"""Statistics of unified rows, computed in one pass (used by ``stats`` and the dataset cards)."""
from __future__ import annotations

from collections import Counter
from typing import Iterable

from .codec import dumps


def split_statistics(rows: Iterable[dict]) -> dict:
    n = turns = calls = arg_bytes = 0
    max_calls = 0
    roles: Counter[str] = Counter()
    tools: set[str] = set()
    for row in rows:
        n += 1
        turns += len(row["messages"])
        row_calls = 0
        for m in row["messages"]:
            roles[m["role"]] += 1
            for c in m["tool_calls"]:
                row_calls += 1
                tools.add(c["function"]["name"])
                arg_bytes += len(dumps(c["function"]["arguments"]).encode())
        calls += row_calls
        max_calls = max(max_calls, row_calls)
    return {
        "rows": n,
        "messages": turns,
        "messages_per_row": round(turns / n, 2) if n else 0.0,
        "tool_calls": calls,
        "tool_calls_per_row": round(calls / n, 2) if n else 0.0,
        "max_tool_calls_in_a_row": max_calls,
        "distinct_tools_called": len(tools),
        "mean_argument_bytes": round(arg_bytes / calls, 1) if calls else 0.0,
        "roles": dict(sorted(roles.items())),
    }
