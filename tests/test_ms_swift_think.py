"""``split_think`` reads a leading ``<think>`` block without the regex engine (it was ~5% of converting ms-swift
rows): it must split every text exactly as the pattern it replaces does."""
from __future__ import annotations

import itertools
import json
import random
import re

import pytest

from tooluse_datasets.builders.ms_swift.parsing import split_think

from conftest import shared_data

# The definition split_think implements.
LEADING_THINK = re.compile(r"\A<think>\n?(.*?)\n?</think>\n*", re.DOTALL)


def by_pattern(text: str):
    match = LEADING_THINK.match(text)
    return (None, text) if match is None else (match.group(1), text[match.end():])


def test_split_think_matches_the_pattern_on_every_short_combination():
    pieces = ["<think>", "</think>", "\n", "\n\n", "a", "<", "/", "think>", "</think", "\r"]
    checked = 0
    for k in range(5):
        for combo in itertools.product(pieces, repeat=k):
            body = "".join(combo)
            for text in (body, "<think>" + body, "<think>\n" + body, "<think>\n\n" + body):
                assert split_think(text) == by_pattern(text), repr(text)
                checked += 1
    assert checked > 40_000


def test_split_think_matches_the_pattern_on_random_texts():
    rng = random.Random(0)
    alphabet = ["\n", "x", " ", "</think>", "<think>", "</think", "hink>", "<", "\r\n", "思"]
    for _ in range(50_000):
        text = rng.choice(["<think>", "<think>\n", ""]) + "".join(
            rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
        assert split_think(text) == by_pattern(text), repr(text)


def test_split_think_matches_the_pattern_on_real_rows():
    texts = []
    for name in ("agent_support_doc_examples_en.jsonl", "agent_support_doc_examples_zh.jsonl",
                 "custom_dataset_doc_agent_rows_en.jsonl"):
        for line in shared_data("ms_swift", name).read_text(encoding="utf-8").splitlines():
            if line.strip():
                texts += [m["content"] for m in json.loads(line).get("messages", [])
                          if isinstance(m, dict) and isinstance(m.get("content"), str)]
    assert any(t.startswith("<think>") for t in texts)
    for text in texts:
        assert split_think(text) == by_pattern(text), repr(text)


def _read_back(tmp_path, writer: str, row: dict) -> dict:
    import tooluse_datasets as td
    from tooluse_datasets.codec import dumps
    from tooluse_datasets.formats import output_format

    path = tmp_path / f"{writer}.jsonl"
    path.write_text(dumps(output_format(writer).write(row)) + "\n", encoding="utf-8")
    reader = {"swift": "ms_swift", "llamafactory": "llamafactory"}[writer]
    return next(iter(td.load(reader, data_files=str(path), split="train", streaming=True)))


def test_reasoning_holding_a_closing_think_tag_is_refused_not_cut_where_it_would_end_the_block(tmp_path):
    # A real ms-swift row (its docs' example with reasoning before a call), given reasoning that quotes the tag:
    # written inside <think>...</think>, its first </think> would end the block, and the row would come back
    # with the reasoning cut there and the rest taken for the turn's text.
    import tooluse_datasets as td
    from tooluse_datasets.errors import ConversionError
    from tooluse_datasets.formats import output_format

    path = shared_data("ms_swift", "agent_support_doc_examples_en.jsonl")
    row = list(td.load("ms_swift", data_files=str(path), split="train", streaming=True))[1]
    call_turn, answer = row["messages"][1], row["messages"][3]
    assert call_turn["tool_calls"] and call_turn["reasoning_content"] and not answer.get("tool_calls")
    quoting = call_turn["reasoning_content"] + " Its title bar reads </think> literally."
    for writer in ("swift", "llamafactory"):
        assert _read_back(tmp_path, writer, row)["messages"] == row["messages"]
    call_turn["reasoning_content"] = quoting
    with pytest.raises(ConversionError) as err:
        output_format("swift").write(row)
    assert err.value.field == "messages[1].reasoning_content"
    # LLaMA-Factory finds a call turn's thought by its whole spelling ("\n</think>\n\n"): this one reads back
    assert _read_back(tmp_path, "llamafactory", row)["messages"] == row["messages"]
    answer["reasoning_content"] = quoting  # an answer's thought ends at the first </think>, as ms-swift's does
    with pytest.raises(ConversionError) as err:
        output_format("llamafactory").write(row)
    assert err.value.field == "messages[3].reasoning_content"
