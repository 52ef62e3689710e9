"""NESTFUL v1 (the 2024 paper's 300 samples, upstream ``data_v1/``): three groups, each a data file of
``{input, output}`` samples and a spec file of tools.

| group | data / spec | spec dialect |
|---|---|---|
| ``executable`` | 85 samples / 39 RapidAPI specs | ``query_parameters`` or ``path_parameters`` (``type``, ``required``, ``default``, ``allowed_values``, ``enum``...), plus ``method``, ``endpoint``, ``host``, ``url``, ``output_parser`` |
| ``glaive`` | 169 / 70 | ``query_parameters`` or ``parameters`` (JSON-Schema-like, ``required`` per property) |
| ``sgd`` | 46 / 30 | ``arguments`` with ``required``, ``allowed_values``, ``default_value`` |

A v1 sample has no ``sample_id``, ``tools`` or ``gold_answer``: its tools are its group's spec file (the whole
catalog, or with the option ``v1_tools="used"`` only the specs its calls name; a spec the file lists twice alike is
one tool), and it ends with a ``var_result`` pseudo-call naming the outputs that make the answer. Labels have no ``$`` (``var1``).

Mapping: every spec becomes an OpenAI function tool whose ``parameters`` is a JSON Schema object
(per-property ``required`` flags collected into ``required``; ``optional: true`` means not required;
``allowed_values``/``possible_values`` -> ``enum`` (a list; text such as ``"1-100"`` goes into the
description); ``default``/``default_value`` -> ``default``;
``example`` -> ``examples``; capitalised or free-text types mapped as for v2), keeping ``output_parameters``
and, for RapidAPI specs, ``http`` (method, endpoint, host, url, where the parameters go, output_parser).
References follow the spec's v1 rule: a whole value ``$var1.field$`` or ``$var3$`` (the whole output), also
inside lists and objects, and references embedded in longer strings (``"Meeting ID: $var1.event_id$"``)
become ``call_graph`` edges (``output_field`` null for a whole-output reference). ``var_result`` is not a tool
call (no tool has that name); its arguments stay in ``meta.result``. ``meta`` keeps the upstream output and
specs verbatim, so raw -> unified -> raw is exact. Upstream defects are typed errors: a call to a tool
missing from the group's specs, a duplicated label, a reference to no earlier call.
"""
from __future__ import annotations

import dataclasses
import os
import re
from typing import Any, Iterator, Optional, Sequence

from tooluse_datasets.codec import dumps, dumps_parsed, loads, loads_stored
from tooluse_datasets.errors import (InvalidJsonError, InvalidValueError, JsonValueError, MissingFieldError,
                                     ToolUseDataError, json_kind, wrapped_rows_error)
from tooluse_datasets.schema import message, tool_call, unified_row
from tooluse_datasets.shards.documents import read_document
from tooluse_datasets.shards.files import open_text_file
from tooluse_datasets.shards.json_text import UTF8_BOM, not_json_text
from tooluse_datasets.shards.paths import (COMPRESSION_SUFFIXES, display_path, file_labels, file_stem,
                                          without_query)
from tooluse_datasets.shards.shard import DOCUMENT, RawBatch, Shard
from tooluse_datasets.source import RowContext, Upstream, UpstreamFile

from .specs import check_call, check_references, json_schema_property, label_key
from .upstream import UPSTREAM

GROUP_FILES = {
    "executable": ("data_v1/executable/executable-data.json", "data_v1/executable/executable-spec.json"),
    "glaive": ("data_v1/non-executable/non-executable-glaive-data.json",
               "data_v1/non-executable/non-executable-glaive-spec.json"),
    "sgd": ("data_v1/non-executable/non-executable-sgd-data.json", "data_v1/non-executable/non-executable-sgd-spec.json"),
}
GROUP_COUNTS = {"executable": (85, 39), "glaive": (169, 70), "sgd": (46, 30)}  # samples, specs

# The v1 files at the pinned revision: each split lists its data file, then its spec file.
V1_UPSTREAM = Upstream(
    host="github", repo=UPSTREAM.repo, revision=UPSTREAM.revision,
    files=tuple(UpstreamFile(split=group, path=path, num_rows=count)
                for group, paths in GROUP_FILES.items() for path, count in zip(paths, GROUP_COUNTS[group])),
    homepage=UPSTREAM.homepage, license=UPSTREAM.license,
)

RESULT_CALL = "var_result"
PARAMETER_KEYS = ("query_parameters", "path_parameters", "parameters", "arguments")
HTTP_KEYS = ("method", "endpoint", "host", "url", "output_parser")
TOOLS_MODES = ("catalog", "used")


# -- files -> groups ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class V1Group:
    """One v1 split: its data files and the spec file their calls use. ``group`` labels its rows (ids
    ``nestful/v1-<group>/<row>``, subset ``v1-<group>``): the group the spec file's name tells, whatever split
    holds it, so a row's id does not depend on which other files were loaded; else the split's name."""

    name: str
    data_files: tuple[str, ...]
    spec_file: str
    group: str


def _file_name(path: str) -> str:
    """The lower-case name of a v1 file without compression suffixes (``executable-spec.json.gz`` ->
    ``executable-spec.json``), as it is read: decompressed."""
    name = os.path.basename(without_query(path.split("::")[0])).lower()
    while name.endswith(COMPRESSION_SUFFIXES):
        name = name[: name.rindex(".")]
    return name


def group_of(path: str) -> Optional[str]:
    """``executable``/``glaive``/``sgd`` from a v1 file name (``non-executable-glaive-spec.json`` -> glaive; a
    compressed copy, ``...-spec.json.gz``, too)."""
    stem = _file_name(path)
    for group in GROUP_FILES:
        if re.search(rf"(^|-){group}-(data|spec)\.json$", stem):
            return group
    return None


def is_spec_file(path: str) -> bool:
    return _file_name(path).endswith("spec.json")


def v1_groups(files_by_split: dict[str, Sequence[str]]) -> list[V1Group]:
    """Pair data and spec files. A split holding one spec file is one group (split) under the split's name; a
    ``train`` split holding several (``data_dir=.../data_v1``) is regrouped by file name."""
    groups = []
    for split, files in files_by_split.items():
        specs = [f for f in files if is_spec_file(f)]
        data = [f for f in files if not is_spec_file(f)]
        if len(specs) == 1:
            if not data:
                raise MissingFieldError(f"v1 split {split!r} has a spec file but no data file", file=specs[0])
            groups.append(V1Group(split, tuple(data), specs[0], group_of(specs[0]) or split))
            continue
        by_group: dict[str, dict[str, list[str]]] = {}
        for f in files:
            group = group_of(f)
            if group is None:
                raise InvalidValueError(f"v1 split {split!r} holds {len(specs)} spec files and {f!r} names no group "
                                        f"({', '.join(GROUP_FILES)}); give one split per data/spec pair", file=f)
            by_group.setdefault(group, {"data": [], "spec": []})["spec" if is_spec_file(f) else "data"].append(f)
        for group, parts in by_group.items():
            if len(parts["spec"]) != 1 or not parts["data"]:
                raise MissingFieldError(f"v1 group {group!r} needs one spec file and data files, got "
                                        f"{parts['spec']} / {parts['data']}", file=(parts["spec"] or parts["data"])[0])
            groups.append(V1Group(group, tuple(parts["data"]), parts["spec"][0], group))
    return groups


@dataclasses.dataclass
class SpecCatalog:
    """A group's spec file as read: the specs, and an error for each element that is no spec or no tool can be made
    of (skipped at its index, as a data file's bad array elements are, while the others are used)."""

    specs: list[dict]
    problems: list[ToolUseDataError]
    # Each spec's JSON text, written once when the file is read: every row given the catalog gets its own specs
    # read back from these (with_tools), and the tool cache is keyed by them.
    texts: list[str] = dataclasses.field(default_factory=list)


def read_spec_catalog(path: str) -> SpecCatalog:
    """The specs of a v1 spec file: elements that are no spec, or that no tool can be made of, are problems. A file
    that is not a JSON array at all raises a typed error naming it."""
    where = dict(file=display_path(path), field="<file>")
    with open_text_file(path) as f:
        data = f.read().removeprefix(UTF8_BOM)
    kind = not_json_text(data[:4096])
    if kind:
        raise InvalidValueError(f"spec file holds {kind}, not JSON text", **where)
    try:
        elements: list = loads(data)
    except (ValueError, RecursionError) as exc:
        if not data.lstrip().startswith(b"["):
            raise InvalidJsonError(f"spec file is not valid JSON ({exc})", **where) from None
        # An array with a bad element (a cut end, NaN...): each element on its own, as data files are read.
        elements = [item for batch in read_document(Shard(path, DOCUMENT), batch_size=1 << 30)
                    for _, item in batch.items]
    if not isinstance(elements, list):
        raise InvalidValueError(f"a v1 spec file must hold a JSON array of specs, not a JSON "
                                f"{json_kind(elements)}", **where)
    specs, texts, problems = [], [], []
    for i, spec in enumerate(elements):
        if isinstance(spec, ToolUseDataError):
            problems.append(spec.at(file=display_path(path), row=i))
        elif not isinstance(spec, dict):
            problems.append(InvalidValueError(f"a spec must be a JSON object, not a JSON {json_kind(spec)}",
                                              file=display_path(path), row=i, field="<row>"))
        elif not isinstance(spec.get("name"), str):
            problems.append(InvalidValueError("a spec needs its name as a string", file=display_path(path), row=i,
                                              field="name"))
        else:
            try:
                # one spec no tool can be made of would fail every row given the catalog
                tool = v1_tool(spec, field="")
            except ToolUseDataError as exc:
                problems.append(exc.at(file=display_path(path), row=i))
                continue
            text = dumps_parsed(spec)
            specs.append(spec)
            texts.append(text)
            _remember_tool(text, tool)
    return SpecCatalog(specs, problems, texts)


# A spec's JSON text -> its tool's, for the specs of the catalogs read lately, so that no spec is made a tool
# again for every row given its catalog. Each row gets its own specs (with_tools) and tools (catalog_tool), read
# back from JSON text at C speed: a streamed row edited in place does not change the next.
_CATALOG_TOOLS: dict[str, str] = {}
CATALOG_TOOLS_KEPT = 4096  # specs; v1's three catalogs have 139


def _remember_tool(spec_text: str, tool: dict) -> None:
    if len(_CATALOG_TOOLS) >= CATALOG_TOOLS_KEPT:
        _CATALOG_TOOLS.clear()  # (the rows of a catalog no longer here make its tools again: the same tools)
    _CATALOG_TOOLS[spec_text] = dumps(tool)


def catalog_tool(spec: Any, field: str) -> dict:
    """The tool of a spec: read back from the one made when its catalog was read, else made now (a raw row
    from elsewhere)."""
    try:
        known = _CATALOG_TOOLS.get(dumps_parsed(spec))
    except (JsonValueError, TypeError):  # not JSON (a raw row from elsewhere): v1_tool says what is wrong
        known = None
    return loads_stored(known) if known is not None else v1_tool(spec, field)


def read_specs(path: str) -> list[dict]:
    """The usable specs of a v1 spec file (elements that are no spec left out: see :func:`read_spec_catalog`)."""
    return read_spec_catalog(path).specs


# The keys with_tools attaches to a sample (upstream samples have none of them).
ATTACHED_KEYS = ("tools", "group", "data_file")


def with_tools(sample: Any, catalog: SpecCatalog, group: str, tools: str = "catalog",
               data_file: Optional[str] = None) -> Any:
    """A v1 sample with its tools (the group's catalog, or the specs its calls name) and group attached (and
    ``data_file``, its file's stem, when the group has several). A sample holding one of those keys itself is an
    error item: its value would be replaced without a word (or, ``data_file``, end up in the row's id)."""
    if tools not in TOOLS_MODES:
        raise ValueError(f"tools must be one of {TOOLS_MODES}, got {tools!r}")
    if not isinstance(sample, dict):
        return sample
    own = next((key for key in ATTACHED_KEYS if key in sample), None)
    if own is not None:
        return InvalidValueError(f"a v1 sample holds its own {own!r} key, which the loader sets from the group's "
                                 f"files (upstream samples have none)", field=own)
    texts = catalog.texts
    if tools == "used":
        # (a name that is no string, a list say, names no spec: the row's own check reports it, typed)
        output = sample.get("output")
        names = {c["name"] for c in output if isinstance(c, dict) and isinstance(c.get("name"), str)} \
            if isinstance(output, list) else set()
        texts = [text for spec, text in zip(catalog.specs, texts) if spec["name"] in names]
    # Specs the row has to itself: a streamed row edited in place does not change the next. A spec the file
    # lists again, identical (glaive lists 6 twice), is one tool: a second copy adds nothing but a second tool
    # of the same name in the row.
    own = [loads_stored(text) for text in dict.fromkeys(texts)]
    return {**sample, "tools": own, "group": group, **({"data_file": data_file} if data_file else {})}


# -- the builder's hooks (NestfulSource.plan / read with data_version="v1") ---------------------------------


def v1_plan(files_by_split: dict[str, Sequence[str]], shard_bytes: int) -> list:
    """One split per group; its shards are the data files, its selection the group (with the spec file)."""
    from tooluse_datasets.shards.plan import plan_file
    from tooluse_datasets.source import SplitPlan

    return [SplitPlan(g.name, tuple(s for f in g.data_files for s in plan_file(f, shard_bytes)), g)
            for g in v1_groups(files_by_split)]


def with_specs(batches: Iterator, group: V1Group, tools: str, shard: Shard, resume: Optional[tuple[int, int]] = None
               ) -> Iterator:
    """Batches of v1 samples with the group's specs attached (the spec file is read once per shard).

    Nothing is lost without a word: the spec file's bad elements come first, as error items of the group's
    first shard (once per group, and not again when reading resumes), so they are raised or counted as skips
    naming the spec file and index; a spec file that cannot be read at all makes each data row an error
    naming the spec file (its tools are unknown), instead of ending the shard."""
    try:
        catalog: Optional[SpecCatalog] = read_spec_catalog(group.spec_file)
        unreadable = None
    except ToolUseDataError as exc:
        catalog, unreadable = None, exc
    if catalog is not None and catalog.problems and resume is None and _opens_group(shard, group):
        yield RawBatch([(e.row, e) for e in catalog.problems], [(0, 0)] * len(catalog.problems))
    # Ids are <group>/<row>: with several data files in the group, the file's name tells rows apart (its stem, or
    # its path where two files of the group share a stem: file_labels).
    stem = file_labels(group.data_files).get(shard.file, file_stem(shard.file)) if len(group.data_files) > 1 else None
    for batch in batches:
        if catalog is None:
            items = [(n, s if isinstance(s, ToolUseDataError) else _no_specs(unreadable, group)) for n, s in batch.items]
        else:
            items = [(n, with_tools(s, catalog, group.group, tools, data_file=stem)) for n, s in batch.items]
        yield dataclasses.replace(batch, items=items)


def _opens_group(shard: Shard, group: V1Group) -> bool:
    """The shard is where the group's first data file starts."""
    return shard.file == group.data_files[0] and shard.start == 0 and (not shard.row_groups or shard.row_groups[0] == 0)


def _no_specs(error: ToolUseDataError, group: V1Group) -> ToolUseDataError:
    """A data row's error when its group's spec file cannot be read (the row's file and number are filled in
    where it is reported)."""
    return type(error)(f"the {group.name} spec file {display_path(group.spec_file)} cannot be read, so the row's "
                       f"tools are unknown ({error.message})", field="tools")


# -- native -> raw -> unified --------------------------------------------------------------------------


def v1_to_raw(native: dict, ctx: RowContext) -> dict:
    """A v1 sample in the raw NESTFUL shape: no sample_id or gold answer; ``extra.group`` names its group."""
    if not isinstance(native, dict):
        raise InvalidValueError(f"a v1 sample must be a JSON object, got {json_kind(native)}", field="<row>")
    for key in ("input", "output"):
        if native.get(key) is None:
            raise wrapped_rows_error(native, ("input", "output")) or MissingFieldError(f"v1 samples need {key!r}",
                                                                                       field=key)
    if not isinstance(native["input"], str):
        raise InvalidValueError(f"input must be a string, got {json_kind(native['input'])}", field="input")
    if not isinstance(native["output"], list) or not all(isinstance(c, dict) for c in native["output"]):
        got = (json_kind(native["output"]) if not isinstance(native["output"], list) else
               f"an array holding a JSON {json_kind(next(c for c in native['output'] if not isinstance(c, dict)))}")
        raise InvalidValueError(f"output must be a list of call objects, got {got}", field="output")
    extra = {k: v for k, v in native.items() if k not in ("input", "output", "tools", "group")}
    return {"sample_id": None, "input": native["input"], "output": native["output"], "tools": native.get("tools") or [],
            "gold_answer": None, "gold_answer_text": None, "extra": {"group": native.get("group") or ctx.split, **extra}}


def v1_to_unified(raw: dict, ctx: RowContext) -> dict:
    group = (raw.get("extra") or {}).get("group") or ctx.split
    catalog = {t["name"] for t in raw["tools"]}
    calls, graph, producers, result = [], [], {}, None
    for i, call in enumerate(raw["output"]):
        name = call.get("name")
        if name == RESULT_CALL and "label" not in call:
            result = call.get("arguments")
            if result is not None and not isinstance(result, dict):  # (its references would go unread)
                raise InvalidValueError(f"{RESULT_CALL} arguments must be a JSON object of outputs, not a JSON "
                                        f"{json_kind(result)}", field=f"output[{i}].arguments")
            check_references(result or {}, producers, f"output[{i}].arguments", embedded=True)
            continue
        label, name, arguments = check_call(call, i, producers=producers,
                                            catalog=catalog, catalog_name=f"the {group} specs")
        for argument, producer, output_field in check_references(arguments, producers, f"output[{i}].arguments",
                                                                 embedded=True):
            graph.append({"consumer": label, "argument": argument, "producer": producer, "output_field": output_field})
        producers[label_key(label)] = label
        calls.append(tool_call(label, name, arguments))
    meta = {"data_version": "v1", "sample_id": None, "gold_answer": None, "gold_answer_text": None,
            "source_output": raw["output"], "source_tools": raw["tools"], "extra": raw.get("extra")}
    if result is not None:
        meta["result"] = result
    data_file = (raw.get("extra") or {}).get("data_file")
    return unified_row(
        id=f"nestful/v1-{group}/{f'{data_file}/' if data_file else ''}{ctx.row}", source="nestful", subset=f"v1-{group}",
        tools=[catalog_tool(spec, f"tools[{i}]") for i, spec in enumerate(raw["tools"])],
        messages=[message("user", raw["input"]), message("assistant", "", tool_calls=calls)],
        call_graph=graph, meta=meta)


# -- spec dialects -> JSON Schema -----------------------------------------------------------------------


def v1_property(spec: Any) -> tuple[Any, bool]:
    """One v1 parameter -> (JSON Schema property, required?)."""
    if not isinstance(spec, dict):
        return spec, False
    flag = spec.get("required")
    # A list is JSON Schema's own `required` of an object property (its sub-properties), not this one's flag
    required = not isinstance(flag, list) and bool(flag) and not spec.get("optional")
    out: dict = {}
    kind = spec.get("type")
    if isinstance(kind, str) and kind.strip().lower() == "enum":
        kind = None  # the enum itself says what is allowed
    if kind is not None:
        out = json_schema_property({"type": kind})
    description = spec.get("description")
    if isinstance(description, str):
        # (out's description, if any, says an unknown free-text type in words)
        out["description"] = description + (" " + out.pop("description") if out.get("description") else "")
    elif description is not None and not out.get("description"):
        out["description"] = description  # kept as it is: the tool.invalid_schema rule reports what is no text
    enum = spec.get("enum") or spec.get("allowed_values") or spec.get("possible_values")
    if isinstance(enum, list) and enum:
        out["enum"] = list(enum)
    elif enum:
        # Not a list of values ("allowed_values": "1-100", a range): an enum of its characters would refuse
        # every real value, so it is said in the description, as an unknown free-text type is.
        out["description"] = f"{out.get('description') or ''} (allowed values: {enum})".strip()
    for key in ("default", "default_value"):
        if key in spec:
            out["default"] = spec[key]
    if "example" in spec:
        out["examples"] = [spec["example"]]
    if "format" in spec:
        out["format"] = spec["format"]
    if isinstance(spec.get("items"), dict):
        out["items"] = v1_property(spec["items"])[0]
    if isinstance(spec.get("properties"), dict):
        props, req = _properties(spec["properties"])
        out["properties"] = props
        if isinstance(flag, list):
            req = list(dict.fromkeys([*(n for n in flag if isinstance(n, str)), *req]))
        if req:
            out["required"] = req
    return out, required


def _properties(specs: dict) -> tuple[dict, list]:
    props, required = {}, []
    for name, spec in specs.items():
        props[name], needed = v1_property(spec)
        if needed:
            required.append(name)
    return props, required


def v1_tool(spec: dict, field: str = "tools[]") -> dict:
    """A v1 spec (any of the three dialects) -> an OpenAI function tool with JSON Schema parameters."""
    key = next((k for k in PARAMETER_KEYS if k in spec), None)
    params = spec.get(key) if key else {}
    if not isinstance(params, dict):
        raise InvalidValueError(f"parameters must be a JSON object, got {json_kind(params)}",
                                field=f"{field}.{key}" if field else key)
    props, required = _properties(params)
    parameters: dict = {"type": "object", "properties": props}
    if required:
        parameters["required"] = required
    function: dict = {"name": spec["name"], "description": spec.get("description", ""), "parameters": parameters}
    outputs = spec.get("output_parameters")
    if isinstance(outputs, dict):
        function["output_parameters"] = {k: v1_property(v)[0] for k, v in outputs.items()}
    http = {k: spec[k] for k in HTTP_KEYS if k in spec}
    if http:
        http["parameters_in"] = "path" if key == "path_parameters" else "query"
        function["http"] = http
    return {"type": "function", "function": function}
