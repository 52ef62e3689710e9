"""ms-swift's own validation rule (registered in the package's one rule registry).

ms-swift has no call ids: it pairs each result with a call by position. A unified row can be trained on by
ms-swift only if every turn's results come right after it, one per call, each naming its call (so that the
``swift`` writer can put them in call order). Checked on rows of every source: it says which rows the
``swift`` export would reject.
"""
from __future__ import annotations

from tooluse_datasets.errors import ConversionError
from tooluse_datasets.pairing import call_groups
from tooluse_datasets.validation.registry import rule

from .writer import results_in_call_order


@rule("ms_swift.pairing", "warning", "Results cannot be paired with their calls by position, as ms-swift "
      "pairs them: a turn's results must follow it directly, one per call, each naming its call by "
      "`tool_call_id` (rows the `swift` export rejects).", error=ConversionError)
def positional_pairing(view):
    messages = view.messages
    for i, end in call_groups(messages):
        if messages[i].get("role") == "tool":
            yield f"messages[{i}].role", "tool result does not directly follow the turn whose call it answers"
            continue
        try:
            results_in_call_order(messages, i, end)
        except ConversionError as exc:
            yield exc.field, exc.message
