"""ToolMind's own validation rule (registered in the package's one rule registry)."""
from __future__ import annotations

from tooluse_datasets.validation.registry import rule

from . import protocol as P


@rule("toolmind.grammar", "warning",
      "A ToolMind row outside the card's grammar, kept whole in `meta.source_messages` (read with "
      "`strict=False`): a role sequence its transition FSM rejects (ending on a call is within it for rows "
      "read with `allow_trailing_call=True`), several calls in one `tool_call` message (the card: one tool "
      "per turn), or several `<think>`, `<tool_response>` or `<answer>` blocks in one message (the card: "
      "one block per turn).", sources=("toolmind",))
def outside_grammar(view):
    meta = view.row.get("meta")
    original = meta.get("source_messages") if isinstance(meta, dict) else None
    if not isinstance(original, list):
        return  # the reader kept no original: the row passed the grammar when it was read
    roles = [m.get("role") if isinstance(m, dict) else None for m in original]
    # A row read with allow_trailing_call (text_to_terminal) may end on a call: the reader marks such rows.
    violation = P.fsm_violation(roles, allow_trailing_call=meta.get("trailing_call_allowed") is True)
    if violation is not None:
        yield f"meta.source_messages[{violation.index}].role", violation.message
    for i, m in enumerate(original):
        content = m.get("content") if isinstance(m, dict) else None
        if not isinstance(content, str):
            continue
        if roles[i] == "tool_call":
            calls = P.call_count(content)
            if calls > 1:
                yield f"meta.source_messages[{i}].content", f"{calls} calls in one tool_call message"
        elif roles[i] in P.WRAPPER_TAG:
            tag = P.WRAPPER_TAG[roles[i]]
            blocks = P.block_count(content, tag)
            if blocks > 1:
                yield f"meta.source_messages[{i}].content", f"{blocks} <{tag}> blocks in one {roles[i]} message"
