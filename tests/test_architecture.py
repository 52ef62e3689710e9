"""The shape of the package: no import cycles; every registered source gets the same round-trip checks for
free; and a new source is one folder plus one registry line (a throwaway source, written to a temporary
folder here, loads in every config and mode, joins the ``all`` mix, validates and mirrors with its own card)."""
from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import orjson
import pytest

import tooluse_datasets as td
from tooluse_datasets import registry
from tooluse_datasets.formats import FORMATS

from conftest import PROJECT_ROOT

PACKAGES = {"tooluse_datasets": PROJECT_ROOT / "tooluse_datasets", "tooluse_datasets.builders": PROJECT_ROOT / "builders"}


def _modules() -> dict[str, Path]:
    out = {}
    for package, root in PACKAGES.items():
        for path in root.rglob("*.py"):
            if "execution" in path.parts and path.name == "child.py":
                continue  # runs in the sandbox's own interpreter, imports nothing of ours
            parts = path.relative_to(root).with_suffix("").parts
            name = ".".join((package, *parts[:-1])) if parts[-1] == "__init__" else ".".join((package, *parts))
            out[name] = path
    return out


def _resolve(target: str, modules: dict[str, Path]) -> str:
    """The module of ours that ``target`` (a module, or a name defined in one) lives in; "" if none."""
    while target and target not in modules:
        target = target.rpartition(".")[0]
    return target


def _imports(name: str, path: Path, modules: dict[str, Path], text: str | None = None) -> set[str]:
    """Package modules ``name`` imports anywhere in its text (module level, functions, type-checking blocks):
    each imported name maps to its submodule, or to the module it comes from. Imports of ``name``'s own parent
    packages are left out: they are initialised (or being initialised) before ``name`` runs, so a package
    importing its own submodules is not a cycle, while every other edge through a package's ``__init__``
    still counts."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text() if text is None else text)):
        if isinstance(node, ast.Import):
            targets = [_resolve(alias.name, modules) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            targets = [f"{origin}.{alias.name}" if f"{origin}.{alias.name}" in modules else _resolve(origin, modules)
                       for alias in node.names]
        else:
            continue
        found.update(t for t in targets if t and t != name and not name.startswith(t + "."))
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every set of modules that import one another, directly or through others (strongly connected
    components of more than one module, Tarjan's algorithm)."""
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return cycles


def test_the_import_graph_has_no_cycle():
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert _cycles(graph) == [], f"import cycles: {_cycles(graph)}"


def test_a_planted_reverse_import_is_a_cycle():
    """The check above can fail: ``loading`` imports ``codec`` (through other modules), so a planted
    ``from tooluse_datasets import loading`` (or ``from . import loading``) in ``codec``, even inside a function,
    closes a cycle. (It once went unseen: the import also counted as one of the top package, which put
    ``tooluse_datasets`` in the cycle, and cycles through a package were dropped as a package importing its
    own children.)"""
    modules = _modules()
    codec = "tooluse_datasets.codec"
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    for planted in ("from tooluse_datasets import loading", "from . import loading"):
        text = modules[codec].read_text() + f"\n\ndef _planted():\n    {planted}\n"
        cycles = _cycles({**graph, codec: _imports(codec, modules[codec], modules, text)})
        assert any(codec in c for c in cycles), planted


@pytest.mark.parametrize("source", registry.source_names())
def test_every_source_round_trips_its_sample_and_streams_what_it_prepares(source, cache_dir):
    files = td.sample_files(source)
    module = registry.builder_class(source)
    unified = td.load(source, "unified", data_files=files, cache_dir=cache_dir)
    raw = td.load(source, "raw", data_files=files, cache_dir=cache_dir)
    src = module.SOURCE_CLASS()
    for split in unified:
        for u, r in zip(unified[split], raw[split], strict=True):
            back = src.from_unified(u)
            assert orjson.dumps({k: back.get(k) for k in r}) == orjson.dumps(r), f"{source} {u['id']}"
    for config in ("unified", "raw"):
        streamed = td.load(source, config, data_files=files, streaming=True)
        mapped = unified if config == "unified" else raw
        assert {s: list(d) for s, d in streamed.items()} == {s: list(d) for s, d in mapped.items()}


THROWAWAY = '''
"""A toy source: rows {question, tool, arguments, result, answer} in JSON Lines."""
from datasets import Features, Json, Value

from tooluse_datasets.builder import ToolUseBuilder
from tooluse_datasets.errors import MissingFieldError
from tooluse_datasets.schema import message, tool_call, unified_row
from tooluse_datasets.source import Source


class ToySource(Source):
    name = "throwaway"
    pretty_name = "Throwaway toy source"
    description = "One call per row, for the architecture test."
    raw_features = Features({"question": Value("string"), "tool": Value("string"), "arguments": Json(),
                             "result": Value("string"), "answer": Value("string")})

    def to_raw(self, native, ctx):
        for key in self.raw_features:
            if native.get(key) is None:
                raise MissingFieldError(f"row lacks {key!r}", field=key)
        return {key: native[key] for key in self.raw_features}

    def to_unified(self, raw, ctx):
        tool = {"type": "function", "function": {"name": raw["tool"], "description": "a toy tool",
                "parameters": {"type": "object", "properties": {k: {} for k in raw["arguments"]}}}}
        return unified_row(
            id=f"throwaway/toy/{ctx.row}", source="throwaway", subset="toy", tools=[tool],
            messages=[message("user", raw["question"]),
                      message("assistant", "", tool_calls=[tool_call("call_0", raw["tool"], raw["arguments"])]),
                      message("tool", raw["result"], tool_call_id="call_0", name=raw["tool"]),
                      message("assistant", raw["answer"])])

    def from_unified(self, row):
        messages = row["messages"]
        call = messages[1]["tool_calls"][0]["function"]
        return {"question": messages[0]["content"], "tool": call["name"], "arguments": call["arguments"],
                "result": messages[2]["content"], "answer": messages[3]["content"]}


class Builder(ToolUseBuilder):
    SOURCE_CLASS = ToySource
'''


@pytest.fixture
def throwaway(tmp_path, monkeypatch):
    folder = tmp_path / "throwaway_source"
    (folder / "dummy_data").mkdir(parents=True)
    (folder / "__init__.py").write_text(textwrap.dedent(THROWAWAY))
    (folder / "card.md").write_text("A toy source written by the architecture test.\n")
    rows = [{"question": f"What is {i} + 0.1?", "tool": "add", "arguments": {"a": i, "b": 0.1},
             "result": str(i + 0.1), "answer": f"It is {i + 0.1}."} for i in range(4)]
    (folder / "dummy_data" / "toy.jsonl").write_text("".join(orjson.dumps(r).decode() + "\n" for r in rows))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(registry.SOURCES, "throwaway", "throwaway_source")  # the one registry line
    return rows


def test_one_folder_and_one_registry_line_make_a_source(throwaway, tmp_path, cache_dir):
    files = td.sample_files("throwaway")
    assert [Path(f).name for f in files["train"]] == ["toy.jsonl"]
    for config in FORMATS:
        mapped = td.load("throwaway", config, data_files=files, split="train", cache_dir=cache_dir)
        streamed = td.load("throwaway", config, data_files=files, split="train", streaming=True)
        assert list(mapped) == list(streamed) and len(mapped) == len(throwaway), config
    unified = list(td.load("throwaway", data_files=files, split="train", streaming=True))
    assert unified[3]["messages"][1]["tool_calls"][0]["function"]["arguments"] == {"a": 3, "b": 0.1}
    mixed = list(td.load("all", data_files=td.sample_files("all"), split="train", streaming=True))
    assert sum(r["source"] == "throwaway" for r in mixed) == len(throwaway)
    result = td.validate("throwaway", data_files=files)
    assert result.total().rules.checked == len(throwaway)

    from tooluse_datasets.mirror import MirrorRequest, build_mirror

    folder = build_mirror(MirrorRequest("throwaway", data_files=files, configs=["unified", "raw"]), tmp_path / "mirror")
    card = (folder / "README.md").read_text()
    assert "A toy source written by the architecture test." in card


def test_a_source_options_class_must_be_mixed_into_its_builder_config(throwaway, tmp_path, monkeypatch):
    """An options class the builder's config lacks is refused where the builder is defined, saying what to write
    (every load of such a source failed with an AttributeError on its first option)."""
    import sys

    module = tmp_path / "throwaway_source" / "__init__.py"
    text = module.read_text().replace("from tooluse_datasets.source import Source", textwrap.dedent('''
        from dataclasses import dataclass

        from tooluse_datasets.builder import ToolUseConfig
        from tooluse_datasets.source import Source, SourceOptions


        @dataclass
        class ToyOptions(SourceOptions):
            greeting: str = "Hello"
        '''))
    text = text.replace('    name = "throwaway"\n', '    name = "throwaway"\n    options_class = ToyOptions\n')
    text = text.replace('message("user", raw["question"])', 'message("user", self.options.greeting + raw["question"])')
    module.write_text(text)
    monkeypatch.delitem(sys.modules, "throwaway_source", raising=False)
    advice = r"ToyOptions is not mixed into BUILDER_CONFIG_CLASS.*class Config\(ToolUseConfig, ToyOptions\)"
    with pytest.raises(TypeError, match=advice):
        registry.builder_class("throwaway")

    mixed = "@dataclass\nclass ToyConfig(ToolUseConfig, ToyOptions):\n    pass\n\n\nclass Builder("
    module.write_text(text.replace("class Builder(", mixed).replace(
        "    SOURCE_CLASS = ToySource\n", "    SOURCE_CLASS = ToySource\n    BUILDER_CONFIG_CLASS = ToyConfig\n"))
    monkeypatch.delitem(sys.modules, "throwaway_source", raising=False)
    rows = td.load("throwaway", data_files=td.sample_files("throwaway"), split="train", streaming=True, greeting="Hi! ")
    assert next(iter(rows))["messages"][0]["content"] == "Hi! What is 0 + 0.1?"


def test_a_source_registered_under_another_name_than_its_own_is_refused(throwaway, monkeypatch):
    """Its rows said the Source's name, not the one it was loaded by, validated by and mixed under."""
    monkeypatch.setitem(registry.SOURCES, "toy", "throwaway_source")
    with pytest.raises(TypeError, match="'toy' is registered for throwaway_source, whose Builder reads source "
                                        "'throwaway'"):
        td.load("toy", data_files={"train": [str(Path(f)) for f in td.sample_files("throwaway")["train"]]},
                split="train", streaming=True)
    with pytest.raises(TypeError, match="'toy' is registered"):
        td.load("all", data_files=td.sample_files("all"), split="train", streaming=True)
