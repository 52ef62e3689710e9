"""Running rules on one row: the findings, or (for writers) the first finding as a typed error."""
from __future__ import annotations

from typing import Optional, Sequence, Union

from ..codec import dumps
from ..errors import InvalidValueError, JsonValueError, json_kind
from ..schema import MEDIA_COLUMNS
from .registry import Finding, Rule, RuleSelection, all_rules, chosen_rules, get_rule, structural_rules
from .view import RowView

# Checked first on every row: the other rules rely on the container shape it accepts.
SHAPE_RULE = "row.fields"


def check_row(row: dict, rules: Union[Sequence[Rule], RuleSelection] = None) -> list[Finding]:
    """Every finding of ``rules`` (default: all; rules, or a selection as ``ValidationCounter`` takes it:
    ``"arguments.*"``) on a unified row. A row whose shape ``row.fields`` rejects gets only those findings,
    whatever the selection: the other rules cannot read it."""
    return findings_of(row, chosen_rules(rules))


def findings_of(row: dict, rules: Optional[Sequence[Rule]]) -> list[Finding]:
    """:func:`check_row` of rules already selected (None: all), as counters and filters check each row."""
    if not isinstance(row, dict):
        return [Finding(SHAPE_RULE, f"a unified row must be an object, got {json_kind(row)}", None)]
    view = RowView(row)
    findings = _run(get_rule(SHAPE_RULE), view)
    if findings:
        return findings
    for r in all_rules() if rules is None else rules:
        if r.id != SHAPE_RULE and r.applies_to(row):
            findings.extend(_run(r, view))
    return findings


def _run(r: Rule, view: RowView) -> list[Finding]:
    try:
        return list(r.findings(view))
    except Exception as exc:  # a shape no rule foresaw must be a counted finding, not a crashed run
        return [Finding(r.id, f"the row could not be checked ({type(exc).__name__}: {exc})", None)]


def validate_unified(row: dict, *, require_known_tools: bool = True) -> None:
    """Check the invariants every unified row keeps (the structural validation rules, README: Validation
    rules) and that its JSON values can be written exactly, and raise the first finding as a typed error
    naming the field. Accepts rows as built and as decoded (empty keys left out). ``require_known_tools=False``:
    calls may name tools outside ``tools``."""
    rules = [r for r in structural_rules() if require_known_tools or r.id != "call.unknown_tool"]
    for finding in findings_of(row, rules):
        raise get_rule(finding.rule).error(finding.message, field=finding.field)
    _check_text(row)
    _check_json_values(row)


def _check_text(row: dict) -> None:
    """Every text field of the row is Unicode text, or InvalidValueError naming it: a string built in Python may
    hold a lone surrogate (``"\\ud800"``), which no UTF-8 file can carry. Written, it failed later naming no
    field (swift, llamafactory) or came out escaped as JSON that the reader then refuses (toolmind)."""
    texts = [(key, row.get(key)) for key in ("id", "source", "subset")]
    for i, m in enumerate(row["messages"]):
        texts += [(f"messages[{i}].{key}", m.get(key)) for key in ("content", "reasoning_content", "name",
                                                                   "tool_call_id")]
        for k, call in enumerate(m.get("tool_calls") or ()):
            texts += [(f"messages[{i}].tool_calls[{k}].id", call.get("id")),
                      (f"messages[{i}].tool_calls[{k}].function.name", call["function"].get("name"))]
    # media paths too: a file name that is no UTF-8, as os.listdir decodes it
    texts += [(f"{key}[{j}]", path) for key in MEDIA_COLUMNS for j, path in enumerate(row.get(key) or ())]
    for field, text in texts:
        if isinstance(text, str) and not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise InvalidValueError(f"lone surrogate \\u{ord(text[exc.start]):04x} at character {exc.start}: not "
                                        "Unicode text, which no UTF-8 file can hold (text decoded with "
                                        "errors='surrogateescape' or sliced between a surrogate pair)",
                                        field=field) from None


def _check_json_values(row: dict) -> None:
    """Every JSON value of the row (tools, call arguments, meta) can be written exactly, or JsonValueError
    naming its field: a row built in Python may hold NaN, sets or non-string keys, which writers that render
    JSON text themselves would otherwise write as invalid JSON or change silently."""
    leaves = [(f"tools[{j}]", tool) for j, tool in enumerate(row["tools"])]
    leaves += [(f"messages[{i}].tool_calls[{k}].function.arguments", call["function"]["arguments"])
               for i, m in enumerate(row["messages"]) for k, call in enumerate(m.get("tool_calls") or ())]
    leaves.append(("meta", row.get("meta")))
    for field, value in leaves:
        try:
            dumps(value)
        except JsonValueError as exc:
            raise exc.at(field=field) from None
