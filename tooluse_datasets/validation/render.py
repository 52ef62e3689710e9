"""A validation result as text: splits, then every rule checked with its counts and example rows, then the
rows the reader skipped, then the verdict."""
from __future__ import annotations

from ..errors import count_of, one_line, plain_printable
from .registry import all_rules, selection_items

MAX_SHOWN_CHARS = 160


def render_table(result) -> str:
    """``result``: a :class:`tooluse_datasets.validation.run.ValidationResult`."""
    total = result.total()
    lines = [f"{result.source} ({result.config}): {count_of(total.read.rows_read, 'row')} read, "
             f"{total.read.skipped} skipped; {count_of(total.rules.checked, 'unified row')} checked by "
             f"{count_of(len(result.rules_checked), 'rule')}: "
             f"{total.rules.failed} with errors, {total.rules.warned} with warnings", ""]
    lines += _columns(["split", "read", "skipped", "checked", "errors", "warnings"],
                      [[name, part.read.rows_read, part.read.skipped, part.rules.checked, part.rules.failed,
                        part.rules.warned] for name, part in result.splits.items()])
    lines.append("")
    severity = {r.id: r.severity for r in all_rules()}
    rows, examples = [], {}
    for rule_id in result.rules_checked:
        count = total.rules.counts.get(rule_id)
        rows.append([rule_id, severity.get(rule_id, "?"), count.rows if count else 0, count.findings if count else 0])
        if count and count.examples:  # (--examples 0 keeps none: no heading over nothing)
            examples[rule_id] = count.examples
    lines += _columns(["rule", "severity", "rows", "findings"], rows)
    for rule_id, shown in examples.items():
        lines.append(f"\n{rule_id}, e.g.:")
        lines += [f"  {one_line(e['id'])}  {one_line(e['field'] or '-')}: {_short(e['message'])}" for e in shown]
    if total.read.skipped:
        lines.append("\nrows skipped by the reader (read errors):")
        lines += [f"  {one_line(reason)} x{n}" for reason, n in total.read.by_reason.most_common()]
        lines += [f"  e.g. {one_line(e.where)}: {_short(e.message)}"
                  for e in total.read.examples[:3]]
    failures = result.failures()
    fail_on = ",".join(selection_items(result.fail_on))
    what = [", ".join(f"{k} ({n} row{'s' if n != 1 else ''})" for k, n in failures.items())] if failures else []
    what += [result.nothing_checked] if result.nothing_checked else []
    if what:
        lines.append(f"\nFAILED (fail on {fail_on}): {'; '.join(what)}")
    else:
        lines.append(f"\nPASSED (fail on {fail_on})")
    # ids, fields, file names and messages quote the data: no control character of theirs reaches the terminal,
    # and no line break of theirs starts a line of its own (an id ending in "\nPASSED" would read as the verdict)
    return plain_printable("\n".join(lines))


def _columns(header: list[str], rows: list[list]) -> list[str]:
    cells = [header] + [[one_line(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]


def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= MAX_SHOWN_CHARS else text[: MAX_SHOWN_CHARS - 3] + "..."
