"""NESTFUL's own validation rules (registered in the package's one rule registry)."""
from __future__ import annotations

import re

from tooluse_datasets.call_ids import REFERENCE_WITHOUT_LEADING_DOLLAR
from tooluse_datasets.errors import UndefinedReferenceError, as_json, cut
from tooluse_datasets.validation.registry import rule

from .specs import argument_strings, executor_reference, label_key, references as argument_references


@rule("nestful.undefined_reference", "error", "A NESTFUL argument reference (`$var_2.result$`) names no "
      "earlier call's label, or an output field its tool does not list in `output_parameters` (v1 rows: "
      "also references inside longer strings, `\"5 * $var1.rate$\"`, and a reference missing its leading `$`, "
      "`\"var1.product_id$\"`, which is kept as text).",
      sources=("nestful",), error=UndefinedReferenceError)
def undefined_reference(view):
    labels: dict[str, str] = {}  # label_key of each earlier call's label -> its tool name
    # v1 rows (subset v1-<group>) also reference outputs inside longer strings ("5 * $var1.Exchange Rate$"),
    # read as references by the v1 reader: checked the same way. v2 rows are checked as upstream's executor
    # reads them (they are what verify and execute=True run): every whole argument value it takes for a
    # reference, `$label.field$` with field exactly one of the tool's outputs (no path, no whole output).
    v1 = str(view.row.get("subset") or "").startswith("v1-")
    for c in view.calls:
        if isinstance(c.arguments, dict):
            if v1:
                yield from _references_without_dollar(c, labels)
                found = argument_references(c.arguments, embedded=True, labels=labels)
            else:
                yield from _nested_references(c, labels)
                found = _executor_references(c.arguments)
            for argument, label, output_field in found:
                where = f"{c.field}.function.arguments.{argument}"
                producer = labels.get(label)
                if producer is None:
                    yield where, f"reference to {as_json(label)}, which no earlier call defines"
                    continue
                if output_field is None and not v1:  # v2: upstream's executor reads env[label][field], no whole output
                    yield where, (f"reference to {cut(label)} names no output field "
                                  f"({cut(label)}.<field>, as v2 references read)")
                    continue
                outputs = _output_parameters(view, producer)
                if (output_field is not None and outputs is not None and not _names_an_output(output_field, outputs, v1)
                        and not (v1 and _read_inside_an_element(output_field, outputs, view.function(producer)))):
                    yield where, (f"reference to {cut(label)}.{cut(output_field)}: "
                                  f"{cut(producer)} has no output {as_json(output_field)} "
                                  f"(outputs: {', '.join(cut(str(o)) for o in outputs) or 'none'})"
                                  + _nested_hint(label, output_field, outputs, v1))
        if isinstance(c.id, str) and isinstance(c.name, str):
            labels[label_key(c.id)] = c.name


# A v1 value that reads as a reference but for its leading `$` ("var1.product_id$", executable row 21): the reader
# keeps it as text (the spec's rule: a reference starts with `$`), so it is no call_graph edge and the call gets the
# text; reported so that the dependency it meant is not lost without a word.


def _references_without_dollar(c, labels):
    """v1: each whole argument value (also inside lists and objects) that is ``<label>.<field>$`` of an earlier
    call's label, its leading ``$`` missing."""
    for path, value in argument_strings(c.arguments):
        m = REFERENCE_WITHOUT_LEADING_DOLLAR.fullmatch(value)
        if m and m.group(1) in labels:
            yield (f"{c.field}.function.arguments.{path}",
                   f"{as_json(value)} reads as a reference to {m.group(1)}.{cut(m.group(2))} without its "
                   'leading "$": it is '
                   "kept as text, so the call gets this text and call_graph has no edge for it")


def _executor_references(arguments: dict):
    for name, value in arguments.items():
        read = executor_reference(value)
        if read is not None:
            yield (name, *read)


def _nested_references(c, labels):
    """v2: a reference inside a list or object, which the reader makes an edge but upstream's executor passes to
    the function as its text (it reads whole argument values only). ``labels``: the earlier calls' label keys."""
    for name, value in c.arguments.items():
        if isinstance(value, (list, dict)):
            for argument, label, output_field in argument_references({name: value}, labels=labels):
                yield (f"{c.field}.function.arguments.{argument}",
                       f"reference to {cut(label)}{'.' + cut(output_field) if output_field else ''} "
                       f"inside argument {as_json(name)}: "
                       "upstream's executor reads only a whole argument value as a reference, so the call would get "
                       "this text")


# Where the output's name ends in a path into it: v1 references read inside an output ("location.name",
# "author[0].id", "movies[0]"), as its output_parser does with "result.data[0].{param}".
_PATH_STEP = re.compile(r"[.\[]")


def _names_an_output(output_field: str, outputs: dict, v1: bool) -> bool:
    """Whether ``output_field`` is an output of the tool, or (v1) a path into one (its leading name is an output).
    v2 has no paths: upstream's executor looks the whole text after the label up among the outputs."""
    return output_field in outputs or v1 and _PATH_STEP.split(output_field, 1)[0] in outputs


# A v1 output_parser reading each field inside an element of the response ("result.data[0].{param}"), not at its top
# level ("result.{param}").
_PARSER_INSIDE_AN_ELEMENT = re.compile(r"result\s*(?:\.|\[).+\.\{param\}")


def _objects_holding(name: str, outputs: dict) -> list[str]:
    """The object outputs whose ``properties`` list ``name``."""
    return [out for out, spec in outputs.items()
            if isinstance(spec, dict) and isinstance(spec.get("properties"), dict) and name in spec["properties"]]


def _read_inside_an_element(output_field: str, outputs: dict, function) -> bool:
    """v1: whether a field that is no output of the tool is one its output_parser reads inside the response's element,
    which the spec lists as the properties of one object output. Tripadvisor_Search_Restaurant_Location lists the
    response's status, message and timestamp beside ``location``, the ``data[0]`` element its parser
    (``result.data[0].{param}``) reads ``locationId`` from: ``$var1.locationId$`` is ``result.data[0].locationId``.
    A parser reading the response itself (``result.{param}``) needs the path: ``$var1.location.localtime$``."""
    http = function.get("http") if isinstance(function, dict) else None
    parser = http.get("output_parser") if isinstance(http, dict) else None
    return (isinstance(parser, str) and _PARSER_INSIDE_AN_ELEMENT.fullmatch(parser) is not None
            and len(_objects_holding(_PATH_STEP.split(output_field, 1)[0], outputs)) == 1)


def _nested_hint(label: str, output_field: str, outputs: dict, v1: bool) -> str:
    """v1: the path that reads a field the tool lists inside an object output (the reader follows paths into an
    output)."""
    holders = _objects_holding(_PATH_STEP.split(output_field, 1)[0], outputs) if v1 else []
    return f"; it lists {holders[0]}.{output_field}, read by ${label}.{holders[0]}.{output_field}$" if holders else ""


def _output_parameters(view, tool_name: str):
    entry = view.functions.get(tool_name)
    outputs = entry[1].get("output_parameters") if entry else None
    return outputs if isinstance(outputs, dict) else None
