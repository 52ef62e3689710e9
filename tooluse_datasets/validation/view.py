"""What several rules need to know about one unified row, computed once per row.

Rows come in two shapes, both accepted: as the builder writes them (every message key present) and as they
decode (a null or empty message key and empty media columns left out). Rules read optional keys through
:func:`tool_calls_of` / ``.get`` and never assume the full shape. Every rule but ``row.fields`` runs only on
rows whose container shape ``row.fields`` accepted (a list of dict messages, dict calls with a ``function``
object), so they may index those without checks.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Optional


def tool_calls_of(message: dict) -> list:
    return message.get("tool_calls") or []


@dataclass(frozen=True)
class CallRef:
    message: int          # index of the assistant message
    position: int         # index in its tool_calls
    call: dict

    @property
    def field(self) -> str:
        return f"messages[{self.message}].tool_calls[{self.position}]"

    @property
    def id(self) -> Any:
        return self.call.get("id")

    @property
    def name(self) -> Any:
        return self.call["function"].get("name")

    @property
    def arguments(self) -> Any:
        return self.call["function"].get("arguments")


class RowView:
    """A unified row plus lazily computed facts (calls in order, tools by name)."""

    def __init__(self, row: dict):
        self.row = row
        self.memo: dict = {}  # facts several rules share, computed once per row by the first that needs them

    @property
    def messages(self) -> list:
        return self.row["messages"]

    @property
    def tools(self) -> list:
        return self.row["tools"]

    @property
    def source(self) -> Optional[str]:
        return self.row.get("source")

    @cached_property
    def calls(self) -> list[CallRef]:
        return [CallRef(i, j, call) for i, m in enumerate(self.messages) for j, call in enumerate(tool_calls_of(m))]

    @cached_property
    def functions(self) -> dict[str, tuple[int, dict]]:
        """Tool name -> (index in ``tools``, its ``function`` object); the first tool of a name wins."""
        out: dict[str, tuple[int, dict]] = {}
        for i, tool in enumerate(self.tools):
            function = tool.get("function") if isinstance(tool, dict) else None
            if isinstance(function, dict) and isinstance(function.get("name"), str):
                out.setdefault(function["name"], (i, function))
        return out

    def function(self, name: Any) -> Optional[dict]:
        """The ``function`` object of the first tool named ``name``; None if no tool has that name."""
        entry = self.functions.get(name) if isinstance(name, str) else None
        return None if entry is None else entry[1]

    @cached_property
    def call_ids(self) -> set:
        return {c.id for c in self.calls if isinstance(c.id, str) and c.id}

    @cached_property
    def references(self) -> dict[str, set[str]]:
        """Call id -> argument paths whose value is a reference to another call's output (``call_graph``);
        such values stand for a value the call produces at run time, so they are not checked as literals."""
        out: dict[str, set[str]] = {}
        for edge in self.row.get("call_graph") or []:
            if isinstance(edge, dict) and isinstance(edge.get("consumer"), str) and isinstance(edge.get("argument"), str):
                out.setdefault(edge["consumer"], set()).add(edge["argument"])
        return out
