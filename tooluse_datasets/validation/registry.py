"""The one registry of validation rules over unified rows: ids, severities, descriptions, selection.

A rule is a function ``check(view) -> iterable of (field, message)`` registered with :func:`rule`. The generic
rules live in ``tooluse_datasets/validation/rules.py``; a source's own rules live in its folder
(``builders/<source>/rules.py``) and register with the same decorator. The registry finds those modules by
convention through ``tooluse_datasets.registry.SOURCES`` the first time rules are asked for, never at import
time, so no source module is imported by ``import tooluse_datasets`` and no import cycle can form.
"""
from __future__ import annotations

import fnmatch
import importlib
import importlib.util
import threading
from dataclasses import dataclass
from typing import Any, Callable, Collection, Iterable, Iterator, Literal, Optional, Sequence, Union

from ..errors import InvalidValueError, ToolUseDataError

Severity = Literal["error", "warning"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning")

# Pseudo id accepted where rules are selected for failing (``--fail-on``): rows the reader skipped.
READ_ERRORS = "read"

Check = Callable[["RowView"], Iterable[tuple[Optional[str], str]]]  # noqa: F821 (see view.py)


@dataclass(frozen=True)
class Finding:
    """One violation of a rule in one row: which rule, what, and where (a field path such as
    ``messages[2].tool_calls[0].function.arguments.city``; None for the row as a whole)."""

    rule: str
    message: str
    field: Optional[str]


@dataclass(frozen=True)
class Rule:
    id: str
    severity: Severity
    description: str
    check: Check
    # Sources whose rows the rule applies to (None: every row). Source-native rules name their source.
    sources: Optional[tuple[str, ...]] = None
    # The typed error a finding becomes when a check raises instead of counting (validate_unified).
    error: type[ToolUseDataError] = InvalidValueError
    # Part of the structural check every writer relies on (validate_unified).
    structural: bool = False

    def applies_to(self, row: dict) -> bool:
        return self.sources is None or row.get("source") in self.sources

    def checks_source(self, source: Union[None, str, list[str]]) -> bool:
        """Whether the rule can check a row loaded from ``source`` (None: any source; the ``all`` mix holds
        every source's rows; a list: the member sources a mix read, see :func:`sources_read`)."""
        from ..registry import MIX

        if isinstance(source, list):
            return any(self.checks_source(s) for s in source)
        return source in (None, MIX) or self.sources is None or source in self.sources

    def findings(self, view) -> Iterator[Finding]:
        for field, message in self.check(view):
            yield Finding(self.id, short_message(message), field)


# The length of a finding's message. Messages quote the data (a tool name, a role, a call id): a name of a
# megabyte came back whole in every example of the reports (validate --json, stats, skipped-row records).
MAX_MESSAGE_CHARS = 240


def short_message(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 3] + "..."


_RULES: dict[str, Rule] = {}
_discovered = False
_discovery_lock = threading.RLock()


def rule(id: str, severity: Severity, description: str, *, sources: Optional[Sequence[str]] = None,
         error: type[ToolUseDataError] = InvalidValueError, structural: bool = False) -> Callable[[Check], Check]:
    """Register ``check`` as rule ``id`` (a decorator; registering is the one line a rule needs)."""
    if severity not in SEVERITIES:
        raise ValueError(f"severity must be one of {SEVERITIES}, got {severity!r}")

    def register(check: Check) -> Check:
        if id in _RULES and _RULES[id].check is not check:
            raise ValueError(f"validation rule {id!r} is registered twice")
        _RULES[id] = Rule(id, severity, description, check, tuple(sources) if sources else None, error, structural)
        return check

    return register


def _discover() -> None:
    """Import the generic rules and every source's ``rules`` module (once, on first use)."""
    global _discovered
    if _discovered:
        return
    with _discovery_lock:
        if _discovered:
            return
        from .. import registry as sources

        importlib.import_module(f"{__package__}.rules")
        for module in sources.SOURCES.values():
            package = importlib.util.find_spec(module)
            if package is None or package.submodule_search_locations is None:
                continue  # a plain module (the "all" mix) has no rules of its own
            if importlib.util.find_spec(f"{module}.rules") is not None:
                importlib.import_module(f"{module}.rules")
        _discovered = True


def all_rules() -> list[Rule]:
    """Every registered rule: the generic ones in definition order, then each source's."""
    _discover()
    return list(_RULES.values())


def get_rule(rule_id: str) -> Rule:
    _discover()
    try:
        return _RULES[rule_id]
    except KeyError:
        raise ValueError(f"unknown validation rule {rule_id!r}; rules: {', '.join(_RULES)}") from None


def structural_rules() -> list[Rule]:
    return [r for r in all_rules() if r.structural]


RuleSelection = Union[None, bool, str, Iterable[str]]


def read_once(selection: RuleSelection) -> RuleSelection:
    """A selection given as an iterator (a generator of rule ids) as a tuple: it is read more than once (checked,
    then selected), and read again it was empty, which selects every rule (rules=) or nothing (fail_on=)."""
    return tuple(selection) if isinstance(selection, Iterator) else selection


def selection_items(selection: RuleSelection, name: Optional[str] = None) -> list[str]:
    """``"a,b"``, ``["a", "b"]``, ``True`` (= ``"error"``) or None/False (= nothing) -> items. ``name``: the
    argument the selection was given as, for the error (``validate``, ``rules``, ``fail_on``)."""
    if selection is None or selection is False:
        return []
    if selection is True:
        return ["error"]
    if isinstance(selection, str):
        selection = selection.split(",")
    items = list(selection) if isinstance(selection, Iterable) and not isinstance(selection, (bytes, dict)) else None
    if items is None or not all(isinstance(item, str) for item in items):
        given = f"{name} must be" if name else "a rule selection is"
        raise TypeError(f"{given} a string (\"error\", \"call.*,tool.*\"), a list of them, True or None; "
                        f"got {selection!r:.80}")
    items = [item.strip() for item in items]
    return [item for item in items if item]


def select_rules(selection: RuleSelection, *, default_all: bool = True, allow_read: bool = False,
                 source: Union[None, str, list[str]] = None) -> list[Rule]:
    """The rules named by a selection, in registry order. An item is a rule id, a severity (``error``,
    ``warning``), ``all``, or a glob over ids (``arguments.*``, ``toolmind.*``). With ``allow_read`` the item
    ``read`` (rows the reader skipped) is accepted and left to the caller (see :func:`selects_read_errors`).
    An empty selection means every rule when ``default_all``, else none. With ``source``, only the rules that
    check that source's rows: another source's own rule would count none of them."""
    items = selection_items(selection)
    if not items and not default_all:
        return []  # before discovery: a load that validates nothing imports no rule module (nor jsonschema)
    rules = all_rules()
    if not items:
        return [r for r in rules if r.checks_source(source)]
    chosen: set[str] = set()
    for item in items:
        if item == READ_ERRORS and allow_read:
            continue
        if item == "all":
            matched = [r.id for r in rules]
        elif item in SEVERITIES:
            matched = [r.id for r in rules if r.severity == item]
        else:
            matched = [r.id for r in rules if fnmatch.fnmatchcase(r.id, item)]
        if not matched:
            known = ", ".join(r.id for r in rules)
            extra = f", {READ_ERRORS}" if allow_read else ""
            raise ValueError(f"{item!r} names no validation rule (rule ids, globs such as 'arguments.*', "
                             f"error, warning, all{extra}); rules: {known}")
        chosen.update(matched)
    return [r for r in rules if r.id in chosen and r.checks_source(source)]


def chosen_rules(rules: Union[RuleSelection, Iterable[Rule]], *,
                 source: Union[None, str, list[str]] = None) -> list[Rule]:
    """``rules`` as :func:`~.check.check_row` and ``ValidationCounter`` take them: rules (a list, a tuple, a
    set, a generator), or a selection as :func:`select_rules` takes it (``"arguments.*"``, None: all)."""
    if isinstance(rules, Iterator):  # (a generator of rules: read twice below, the second time empty)
        rules = list(rules)
    named = isinstance(rules, str) or (isinstance(rules, Collection) and rules
                                       and all(isinstance(r, str) for r in rules))
    if (named or rules is False) and not selection_items(rules):  # ([] stays no rule: a counter that merges others)
        # check_row(row, os.environ.get("RULES", "")) ran every rule, where validate="" and rules="" are refused;
        # so did check_row(row, False), which validate=False reads as checking nothing
        raise ValueError(f"rules={rules!r} names no rule: give rule ids, globs such as 'arguments.*', error, warning "
                         "or all, or None for every rule")
    if isinstance(rules, Collection) and not isinstance(rules, str) and all(isinstance(r, Rule) for r in rules):
        if isinstance(rules, Sequence):
            return list(rules)
        # (a set's order differs between processes: its rules run in registry order, as a selection's do)
        order = {r.id: i for i, r in enumerate(all_rules())}
        return sorted(rules, key=lambda r: (order.get(r.id, len(order)), r.id))
    return select_rules(rules, source=source)  # ("error" was iterated as rules, failing with AttributeError)


def refuse_rules_of_other_sources(source: Union[str, Iterable[str]], **selections: RuleSelection) -> None:
    """A rule id or glob of a selection (``rules``, ``fail_on``, ``validate``) that names only other sources' rules
    could never check a row of ``source`` (or of any of several sources): a ValueError saying so, rather than a run
    of no rule, one that could never fail on it or a filter dropping no row."""
    sources = [source] if isinstance(source, str) else sorted(source)
    for name, selection in selections.items():
        foreign = [item for item in selection_items(selection) if item not in (READ_ERRORS, "all", *SEVERITIES)
                   and not any(select_rules(item, source=s) for s in sources)]
        if foreign:
            raise ValueError(f"{name} names {', '.join(map(repr, foreign))}, which checks rows of "
                             f"{', '.join(sorted({s for i in foreign for r in select_rules(i) for s in r.sources}))} "
                             f"only: it does not apply to {' or '.join(sources)} rows")


def sources_read(source: str, data_files: Any = None) -> Union[str, list[str]]:
    """The sources whose rows a load of ``source`` holds: for the ``all`` mix given ``data_files`` by source name,
    those sources (``toolmind.*`` checks no row of ``{"ms_swift": ...}``), else ``source``."""
    from ..registry import MIX, source_names

    if source != MIX or not isinstance(data_files, dict):
        return source
    return [name for name in data_files if name in source_names()] or source


def selects_read_errors(selection: RuleSelection) -> bool:
    return READ_ERRORS in selection_items(selection)


def rules_table() -> str:
    """Every rule as a Markdown table (README.md embeds it; a test keeps the two equal)."""
    lines = ["| rule | severity | rows checked | description |", "|---|---|---|---|"]
    for r in all_rules():
        scope = "every row" if r.sources is None else ", ".join(f"`{s}`" for s in r.sources)
        lines.append(f"| `{r.id}` | {r.severity} | {scope} | {r.description} |")
    return "\n".join(lines)
