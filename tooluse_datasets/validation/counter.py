"""Per-rule counts over many rows, mergeable across processes and shards.

``ValidationCounter`` is what ``validate``, ``stats``, the skip-counting filter of ``load(validate=...)`` and
the mirror's dataset cards count with. Its ``to_dict()`` is JSON (manifests, worker results) and keeps the
keys the card template reads (``checked``, ``failed``, ``by_reason``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Optional, Union

from .check import findings_of
from .registry import Finding, Rule, RuleSelection, all_rules, chosen_rules, get_rule


@dataclass
class RuleCount:
    severity: str
    rows: int = 0         # rows with at least one finding of the rule
    findings: int = 0
    examples: list[dict] = field(default_factory=list)  # {"id", "field", "message"}

    def to_dict(self) -> dict:
        return {"severity": self.severity, "rows": self.rows, "findings": self.findings, "examples": self.examples}


def check_max_examples(max_examples: object) -> None:
    """Refused before any row: the count is compared when a rule first fails, after rows were read ("'<' not
    supported between 'int' and 'str'")."""
    if type(max_examples) is not int or max_examples < 0:
        raise ValueError(f"max_examples must be a whole number of rows, 0 or more, got {max_examples!r}")


class ValidationCounter:
    """Runs the selected rules on each row (:meth:`check`) and counts, per rule, the rows failing it and a few
    example rows (id, field, message). ``failed`` counts rows with an error finding, ``warned`` rows with a
    warning finding."""

    MAX_EXAMPLES = 3

    def __init__(self, rules: RuleSelection | list[Rule] = None, *, max_examples: int = MAX_EXAMPLES,
                 source: Union[None, str, list[str]] = None):
        # ``source``: the source (or a mix's member sources) whose rows are counted; the rules of other sources are
        # left out (they would be listed as checked, failing no row they could never check)
        check_max_examples(max_examples)
        self.rules: list[Rule] = chosen_rules(rules, source=source)
        self.max_examples = max_examples
        self.checked = 0
        self.failed = 0
        self.warned = 0
        self.counts: dict[str, RuleCount] = {}
        self.rules_checked: list[str] = [r.id for r in self.rules]

    # -- counting ---------------------------------------------------------------------------------------

    def check(self, row: dict) -> list[Finding]:
        """Check one row, count it, and return its findings."""
        findings = findings_of(row, self.rules)
        self.add(row.get("id") if isinstance(row, dict) else None, findings)
        return findings

    def add(self, row_id: Optional[str], findings: list[Finding]) -> None:
        """Count one row's findings (already computed)."""
        self.checked += 1
        severities = set()
        for rule_id in dict.fromkeys(f.rule for f in findings):
            first = next(f for f in findings if f.rule == rule_id)
            count = self.counts.get(rule_id)
            if count is None:
                count = self.counts[rule_id] = RuleCount(get_rule(rule_id).severity)
            count.rows += 1
            count.findings += sum(1 for f in findings if f.rule == rule_id)
            if len(count.examples) < self.max_examples:
                count.examples.append({"id": row_id, "field": first.field, "message": first.message})
            severities.add(count.severity)
        self.failed += "error" in severities
        self.warned += "warning" in severities

    def observe(self, rows: Iterable[dict]) -> Iterator[dict]:
        """Yield ``rows`` unchanged, checking each on the way (count while another consumer iterates)."""
        for row in rows:
            self.check(row)
            yield row

    def rows_failing(self, rule_id: str) -> int:
        count = self.counts.get(rule_id)
        return count.rows if count else 0

    # -- combining and storing --------------------------------------------------------------------------

    def merge(self, other: "ValidationCounter") -> "ValidationCounter":
        self.checked += other.checked
        self.failed += other.failed
        self.warned += other.warned
        for rule_id, theirs in other.counts.items():
            mine = self.counts.setdefault(rule_id, RuleCount(theirs.severity))
            mine.rows += theirs.rows
            mine.findings += theirs.findings
            room = self.max_examples - len(mine.examples)
            mine.examples.extend(theirs.examples[: max(room, 0)])
        # (further rows are checked by every rule it lists as checked, as a counter read back is)
        have = {r.id for r in self.rules}
        self.rules += [r for r in other.rules if r.id not in have]
        self.rules_checked += [r for r in other.rules_checked if r not in self.rules_checked]
        return self

    def to_dict(self) -> dict[str, Any]:
        ordered = sorted(self.counts.items())
        return {
            "checked": self.checked,
            "failed": self.failed,
            "warned": self.warned,
            "by_reason": {k: c.rows for k, c in ordered if c.severity == "error"},
            "warnings": {k: c.rows for k, c in ordered if c.severity == "warning"},
            "rules": {k: c.to_dict() for k, c in ordered},
            "rules_checked": list(self.rules_checked),
        }


    @classmethod
    def from_dict(cls, data: dict[str, Any], *, max_examples: int = MAX_EXAMPLES) -> "ValidationCounter":
        check_max_examples(max_examples)
        counter = cls.__new__(cls)
        counter.max_examples = max_examples
        counter.checked = data.get("checked", 0)
        counter.failed = data.get("failed", 0)
        counter.warned = data.get("warned", 0)
        # (examples kept as max_examples says, as counting and merging keep them)
        counter.counts = {k: RuleCount(v["severity"], v["rows"], v["findings"],
                                       list(v.get("examples", []))[:max_examples])
                          for k, v in data.get("rules", {}).items()}
        counter.rules_checked = list(data.get("rules_checked", []))
        # the rules it counted, to check further rows by (none, and each row checked by row.fields alone would
        # have been counted as passing); an id this process does not register is left out
        known = {r.id: r for r in all_rules()}
        counter.rules = [known[rule_id] for rule_id in counter.rules_checked if rule_id in known]
        return counter

    def __repr__(self) -> str:
        failing = ", ".join(f"{k} x{c.rows}" for k, c in sorted(self.counts.items()))
        return f"ValidationCounter({self.checked} checked, {self.failed} failed{': ' + failing if failing else ''})"
