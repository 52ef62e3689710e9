"""The README's examples run as a user copies them.

Every ```python block of README.md runs in a subprocess, offline (HF_HUB_OFFLINE, HF_DATASETS_OFFLINE, a fresh
HF_HOME), in a folder holding the files the blocks name (`data.jsonl`, `data.parquet`...), made from the bundled
samples. A block that cannot run here is listed in NOT_RUN with the reason; a new block that is not listed must
run. The calls of every block, run or not, and the `td.load(...)` examples in the prose must name real functions
and options, and every `tooluse-datasets` command line must name a real command and real flags.
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tooluse_datasets as td
from tooluse_datasets.cli import build_parser
from tooluse_datasets.registry import builder_class

README = Path(__file__).resolve().parents[1] / "README.md"

# The blocks assume the package imported as in the README's first block
PRELUDE = "import tooluse_datasets as td\n"

# Blocks that cannot run here, by their key line (the first line that is not the prelude's import), with why
NOT_RUN = {
    'ds = td.load("nestful", split="train")                       # pinned upstream revision, Arrow cache':
        "reads the pinned upstream files (network) and needs a tokenizer from the Hub",
    "from datasets.distributed import split_dataset_by_node":
        "streams ToolMind's upstream file from the Hub (network)",
    "from trl import SFTConfig, SFTTrainer":
        "downloads a model from the Hub and trains it",
    'ds = td.load("nestful", execute=True, executable_functions="NESTFUL/data_v2/executable_functions")  # rows: the pinned upstream file':
        "reads the pinned upstream file (network) and needs upstream's executable functions",
    'ds = td.load("toolmind")                                                  # all seven splits, from the Hub':
        "reads ToolMind's upstream file from the Hub (network)",
}


@dataclasses.dataclass
class Block:
    line: int  # of the block's first line in README.md
    code: str

    @property
    def key(self) -> str:
        lines = [line for line in self.code.splitlines() if line.strip()]
        return next((line for line in lines if line.strip() != PRELUDE.strip()), lines[0])


def readme_blocks(lang: str) -> list[Block]:
    lines = README.read_text(encoding="utf-8").splitlines()
    blocks, start, body = [], None, []
    for number, line in enumerate(lines, 1):
        if start is None:
            if line.strip() == "```" + lang:
                start, body = number + 1, []
        elif line.startswith("```"):
            blocks.append(Block(start, "\n".join(body) + "\n"))
            start = None
        else:
            body.append(line)
    return blocks


PYTHON_BLOCKS = readme_blocks("python")


def _write_inputs(folder: Path) -> None:
    """The files the README's blocks name, from the bundled samples."""
    samples = {source: td.sample_files(source)["train"][0] for source in td.SOURCES}
    for name, source in {"data.jsonl": "ms_swift", "my_agent_data.jsonl": "ms_swift",
                         "nestful_data.jsonl": "nestful", "data.parquet": "toolmind"}.items():
        shutil.copyfile(samples[source], folder / name)
    # ms-swift preference rows: the sample's rows, each with its rejected response
    with open(samples["ms_swift"], encoding="utf-8") as src, open(folder / "dpo.jsonl", "w", encoding="utf-8") as out:
        for line in src:
            if line.strip():
                out.write(json.dumps({**json.loads(line), "rejected_response": "I cannot help with that."}) + "\n")


def _offline_env(folder: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", HF_HOME=str(folder / "hf-home"),
               HF_DATASETS_CACHE=str(folder / "hf-home" / "datasets"))
    return env


def test_not_run_lists_only_blocks_that_exist():
    keys = {block.key for block in PYTHON_BLOCKS}
    assert not set(NOT_RUN) - keys, f"NOT_RUN names blocks the README no longer has: {set(NOT_RUN) - keys}"


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=lambda b: f"README.md:{b.line}")
def test_python_block_runs(block, tmp_path):
    compile(PRELUDE + block.code, f"README.md:{block.line}", "exec")  # every block is Python, run or not
    if block.key in NOT_RUN:
        pytest.skip(NOT_RUN[block.key])
    _write_inputs(tmp_path)
    script = tmp_path / "block.py"
    script.write_text(PRELUDE + block.code, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=_offline_env(tmp_path),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (
        f"README.md:{block.line} ({block.key!r}) fails; fix the README or list it in NOT_RUN with the reason:\n"
        f"{done.stderr[-3000:]}")


def _load_keywords(source: str | None) -> set[str]:
    """What td.load takes: its own arguments and the source's options."""
    import inspect
    own = {name for name, p in inspect.signature(td.load).parameters.items() if p.kind != p.VAR_KEYWORD}
    if source in td.SOURCES:
        own |= {field.name for field in dataclasses.fields(builder_class(source).SOURCE_CLASS.options_class)}
    return own


def _check_calls(code: str, where: str) -> None:
    for node in ast.walk(ast.parse(code)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "td"):
            continue
        assert hasattr(td, node.func.attr), f"{where}: td.{node.func.attr} does not exist"
        if node.func.attr == "load":
            source = node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) else None
            for keyword in node.keywords:
                if keyword.arg is not None:
                    assert keyword.arg in _load_keywords(source), (
                        f"{where}: td.load({source!r}, ...) has no argument or option {keyword.arg!r}")


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=lambda b: f"README.md:{b.line}")
def test_python_block_names_real_calls(block):
    _check_calls(PRELUDE + block.code, f"README.md:{block.line}")


def test_inline_load_examples_name_real_options():
    text = README.read_text(encoding="utf-8")
    examples = re.findall(r"`(td\.load\([^`]*\))`", text)
    assert examples
    for example in examples:
        try:
            ast.parse(example)
        except SyntaxError:
            continue  # an elided example (`td.load(..., validate=RULES)`) names its option in the text
        _check_calls(example, example)


def _command_flags() -> dict[str, set[str]]:
    subparsers = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {name: {flag for action in parser._actions for flag in action.option_strings}
            for name, parser in subparsers.choices.items()}


def test_command_lines_name_real_commands_and_flags():
    flags = _command_flags()
    text = README.read_text(encoding="utf-8")
    lines = re.findall(r"tooluse-datasets (?:-v )?([a-z]+)\b([^`\n]*)", text)
    assert lines
    for command, rest in lines:
        if command == "generated":  # the card's marker, `<!-- BEGIN/END tooluse-datasets generated section -->`
            continue
        assert command in flags, f"README names a command 'tooluse-datasets {command}' the CLI does not have"
        for flag in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", rest):
            assert flag in flags[command], f"README: 'tooluse-datasets {command}' has no flag {flag} ({rest.strip()})"
