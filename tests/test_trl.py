"""Unified datasets go straight into TRL's SFTTrainer: every source's bundled sample, four real chat templates
(tests/chat_templates.py), a tiny model built from a config and a byte-level tokenizer built here (no
download). Checks that every message renders (final answers included) and that every call's arguments reach
the text the trainer tokenizes bit for bit. Needs the ``trl`` extra (torch, transformers, trl)."""
from __future__ import annotations

import json
import struct

import pytest

pytest.importorskip("trl", reason="TRL tests need the trl extra: pip install -e '.[trl]'")
import datasets  # noqa: E402
from jinja2.exceptions import TemplateError  # noqa: E402
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM  # noqa: E402
from trl import SFTConfig, SFTTrainer  # noqa: E402
from trl.data_utils import is_conversational  # noqa: E402

import tooluse_datasets as td  # noqa: E402
from tooluse_datasets.registry import source_names  # noqa: E402
from chat_templates import SPECIAL_TOKENS, TEMPLATES  # noqa: E402

# What each template renders by design (from its own logic): text beside calls, reasoning, result quoting.
RENDERS_TEXT_BESIDE_CALLS = {"qwen2.5": True, "qwen3": True, "hermes3": False, "llama3.1": False, "mistral": False,
                             "granite": False, "llama3.2": False, "deepseekv3": True, "toolace": False,
                             "glm4moe": True}
RENDERS_SYSTEM_BEFORE_ANSWER = set(TEMPLATES) - {"mistral"}  # Mistral: only with a last user turn
RENDERS_REASONING = {"qwen3", "glm4moe"}  # after the last user query only
QUOTES_RESULTS = {"llama3.1", "llama3.2", "toolace"}  # tool results go through tojson
EOS = {"qwen2.5": "<|im_end|>", "qwen3": "<|im_end|>", "hermes3": "<|im_end|>", "llama3.1": "<|eot_id|>",
       "mistral": "</s>", "granite": "<|end_of_text|>", "llama3.2": "<|eot_id|>", "deepseekv3": "<｜end▁of▁sentence｜>",
       "toolace": "<|eot_id|>", "glm4moe": "<|user|>"}
# What a user does before training under a template that refuses the rows as they are.
REMEDY = {"mistral": td.short_call_ids, "llama3.1": td.one_call_per_turn, "llama3.2": td.one_call_per_turn}


def byte_tokenizer(template: str) -> PreTrainedTokenizerFast:
    """A lossless tokenizer: one token per byte (byte-level BPE without merges) plus the templates' markers."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE(vocab={ch: i for i, ch in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    name = next(k for k, v in TEMPLATES.items() if v == template)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|begin_of_text|>", eos_token=EOS[name],
                                   pad_token="<|endoftext|>", additional_special_tokens=SPECIAL_TOKENS)
    fast.chat_template = template
    return fast


def tiny_model(vocab_size: int) -> Qwen2ForCausalLM:
    config = Qwen2Config(vocab_size=vocab_size, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=32768)
    return Qwen2ForCausalLM(config)


def text_rows(source: str, cache_dir: str) -> datasets.Dataset:
    """Every split of the sample as one dataset; rows with media (they need a vision model) left out."""
    splits = td.load(source, data_files=td.sample_files(source), cache_dir=cache_dir)
    ds = td.exact(datasets.concatenate_datasets(list(splits.values())))
    return ds.select([i for i, row in enumerate(ds) if not any(c in row for c in td.MEDIA_COLUMNS)])


HERMES_TYPES = {"string", "number", "integer", "boolean", "array", "object"}


def refusal(template: str, row: dict):
    """The error a template's own logic raises on a row it cannot render, or None. Llama 3.1 refuses a turn
    with several calls; Hermes 3's type macro recurses forever on a type name outside its map (e.g. the
    ``null`` of NESTFUL's ``["string", "null"]``)."""
    if template in ("llama3.1", "llama3.2") and any(len(m.get("tool_calls", [])) > 1 for m in row["messages"]):
        return TemplateError
    if template == "mistral" and any(len(call["id"]) != 9 for m in row["messages"] for call in m.get("tool_calls", [])):
        return TemplateError
    if template == "hermes3":
        types = [p.get("type") for t in row["tools"]
                 for p in (t["function"].get("parameters") or {}).get("properties", {}).values()]
        if any(isinstance(k, list) and set(k) - HERMES_TYPES for k in types):
            return RecursionError
    return None


def last_user_index(messages: list[dict]) -> int:
    return max(i for i, m in enumerate(messages) if m["role"] == "user")


def floats_in(value) -> list[float]:
    if isinstance(value, float):
        return [value]
    if isinstance(value, dict):
        return [f for v in value.values() for f in floats_in(v)]
    if isinstance(value, list):
        return [f for v in value for f in floats_in(v)]
    return []


def spelled_call(call: dict, template: str) -> str:
    """How ``template`` writes a call's arguments: JSON (``tojson``) for most; GLM-4-MoE writes each argument as
    ``<arg_key>``/``<arg_value>`` (strings unquoted, other values through ``tojson``); ToolACE as
    ``key=value`` with Python's ``%s`` followed by a literal ``r`` (its template formats with ``"%sr"``)."""
    name, arguments = call["function"]["name"], call["function"]["arguments"]
    if template == "glm4moe":
        pairs = "".join(f"<arg_key>{k}</arg_key>\n<arg_value>{v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}"
                        "</arg_value>\n" for k, v in arguments.items())
        return f"<tool_call>{name}\n{pairs}</tool_call>"
    if template == "toolace":
        return f"{name}(" + ", ".join(f"{k}={'%s' % (v,)}r" for k, v in arguments.items()) + ")"
    return json.dumps(arguments, ensure_ascii=False)  # transformers' tojson


def assert_rendered(row: dict, text: str, template: str) -> int:
    """Every message of ``row`` in ``text`` as ``template`` renders it; returns the float arguments checked."""
    messages = row["messages"]
    checked = 0
    for i, m in enumerate(messages):
        where = f"{row['id']} messages[{i}] ({template})"
        calls = m.get("tool_calls", [])
        if m["role"] == "system" and template not in RENDERS_SYSTEM_BEFORE_ANSWER:
            pass
        elif m["role"] in ("system", "user") or (m["role"] == "assistant" and not calls):
            assert m["content"].strip() in text, f"{where}: content not rendered"
        if calls and m["content"] and RENDERS_TEXT_BESIDE_CALLS[template]:
            assert m["content"] in text, f"{where}: text beside calls not rendered"
        if m.get("reasoning_content") and template in RENDERS_REASONING and i > last_user_index(messages):
            assert m["reasoning_content"].strip("\n") in text, f"{where}: reasoning not rendered"
        for call in calls:
            arguments = call["function"]["arguments"]
            spelled = spelled_call(call, template)
            assert call["function"]["name"] in text and spelled in text, f"{where}: call not rendered"
            if template in ("glm4moe", "toolace"):  # every value spelled exactly (%s and tojson keep floats' digits)
                checked += len(floats_in(arguments))
                continue
            start = text.index(spelled)
            back = json.loads(text[start:start + len(spelled)])
            originals, reread = floats_in(arguments), floats_in(back)
            assert [struct.pack("<d", f) for f in reread] == [struct.pack("<d", f) for f in originals]
            checked += len(originals)
        if m["role"] == "tool":
            shown = json.dumps(m["content"], ensure_ascii=False) if template in QUOTES_RESULTS else m["content"]
            assert shown in text, f"{where}: tool result not rendered"
    return checked


@pytest.fixture(scope="module")
def samples(tmp_path_factory) -> dict[str, datasets.Dataset]:
    cache_dir = str(tmp_path_factory.mktemp("cache"))
    return {source: text_rows(source, cache_dir) for source in source_names()}


def test_unified_rows_are_conversational_text_data_for_trl(samples, cache_dir):
    for source, ds in samples.items():
        first = next(iter(ds))
        assert is_conversational(first)
        assert not ({"image", "images"} & set(first)), f"{source}: TRL would take this for vision data"
    # The ms-swift row that does carry an image keeps it, so TRL sees vision data there.
    ms = td.load("ms_swift", data_files=td.sample_files("ms_swift"), split="train", cache_dir=cache_dir)
    with_image = ms.select([i for i, row in enumerate(ms) if "images" in row])
    assert len(with_image) == 1 and next(iter(with_image))["images"] == ["receipts/lunch_2024-05-17.jpg"]
    assert len(samples["ms_swift"]) == len(ms) - 1


@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_every_message_and_every_float_renders_under_each_template(samples, template):
    tokenizer = byte_tokenizer(TEMPLATES[template])
    floats = refused = rendered = 0
    for source, ds in samples.items():
        for row in ds:
            error = refusal(template, row)
            if error is not None:
                with pytest.raises(error):
                    tokenizer.apply_chat_template(row["messages"], tools=row["tools"], tokenize=False)
                refused += 1
                if template not in REMEDY:
                    continue
                row = REMEDY[template](row)
            text = tokenizer.apply_chat_template(row["messages"], tools=row["tools"], tokenize=False)
            floats += assert_rendered(row, text, template)
            rendered += 1
    assert rendered >= 20 and floats >= 2
    assert (refused > 0) == (template in ("llama3.1", "llama3.2", "hermes3", "mistral"))


@pytest.mark.parametrize("source", source_names())
def test_sft_trainer_tokenizes_every_row_exactly_and_trains(source, samples, tmp_path):
    """A real SFTTrainer prepares the dataset with its own map (chat template, tokenization), then trains two
    steps. The text behind its input_ids is checked against every message and every float."""
    template = {"nestful": "qwen3", "ms_swift": "hermes3"}.get(source, "qwen2.5")
    ds = samples[source]
    tokenizer = byte_tokenizer(TEMPLATES[template])
    config = SFTConfig(output_dir=str(tmp_path), max_steps=2, per_device_train_batch_size=2, max_length=None,
                       report_to="none", save_strategy="no", logging_steps=1, use_cpu=True, bf16=False,
                       gradient_checkpointing=False, dataset_num_proc=None, disable_tqdm=True)
    trainer = SFTTrainer(model=tiny_model(len(tokenizer)), args=config, train_dataset=ds, processing_class=tokenizer)
    prepared = trainer.train_dataset
    assert len(prepared) == len(ds)
    floats = 0
    for row, ids in zip(ds, prepared["input_ids"]):
        text = tokenizer.decode(ids)
        assert text == tokenizer.apply_chat_template(row["messages"], tools=row["tools"], tokenize=False)
        floats += assert_rendered(row, text, template)
    if source == "nestful":
        assert floats >= 2  # 12.5 and 0.3 among them
    result = trainer.train()
    assert result.global_step == 2


def test_sft_trainer_takes_a_map_style_mix_of_sources_as_text_data(samples, cache_dir, tmp_path):
    """Sources mixed by probability with datasets.interleave_datasets go to SFTTrainer as they are: the mix used to
    come back with plain Features, every row carrying ``images: []``, and TRL refused it as vision data."""
    parts = [td.load("nestful", data_files=td.sample_files("nestful"), split="train", cache_dir=cache_dir),
             td.load("toolmind", data_files=td.sample_files("toolmind"), split="synthetic", cache_dir=cache_dir)]
    mixed = datasets.interleave_datasets(parts, probabilities=[0.5, 0.5], seed=0)
    assert not any("images" in row or any(m.get("tool_calls") == [] for m in row["messages"]) for row in mixed)
    tokenizer = byte_tokenizer(TEMPLATES["qwen2.5"])
    config = SFTConfig(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=2, max_length=None,
                       report_to="none", save_strategy="no", use_cpu=True, bf16=False, disable_tqdm=True)
    trainer = SFTTrainer(model=tiny_model(len(tokenizer)), args=config, train_dataset=mixed,
                         processing_class=tokenizer)
    for row, ids in zip(mixed, trainer.train_dataset["input_ids"]):
        assert tokenizer.decode(ids) == tokenizer.apply_chat_template(row["messages"], tools=row["tools"],
                                                                      tokenize=False)
    assert trainer.train().global_step == 1


def test_sft_trainer_tokenizes_a_streamed_mix_of_sources_as_each_row_renders(cache_dir, tmp_path):
    """A mix of streams goes to SFTTrainer as it is, and TRL's own tokenizing map reads its rows in the shape they
    decode in: with the plain Features datasets gives a mix of streams, every answer carried ``tool_calls: []``
    and Hermes-3 (``tool_calls is not defined``) trained on an empty call turn in place of each final answer;
    filtered after mixing, the mix carried ``images: []`` and TRL refused it as vision data."""
    parts = [td.load("toolmind", data_files=td.sample_files("toolmind"), split="synthetic", streaming=True,
                     cache_dir=cache_dir),
             td.load("ms_swift", data_files=td.sample_files("ms_swift"), split="train", streaming=True,
                     cache_dir=cache_dir)]
    tokenizer = byte_tokenizer(TEMPLATES["hermes3"])
    config = SFTConfig(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=2, max_length=None,
                       report_to="none", save_strategy="no", use_cpu=True, bf16=False, disable_tqdm=True)
    for mixed in (datasets.interleave_datasets(parts), datasets.concatenate_datasets(parts),
                  datasets.interleave_datasets(parts).filter(lambda row: not row.get("images"))):
        trainer = SFTTrainer(model=tiny_model(len(tokenizer)), args=config, train_dataset=mixed,
                             processing_class=tokenizer)
        rows, prepared = list(mixed), list(trainer.train_dataset)
        assert [r["id"] for r in prepared] == [r["id"] for r in rows] and len(rows) >= 10
        for row, p in zip(rows, prepared):
            text = tokenizer.decode(p["input_ids"])
            assert text == tokenizer.apply_chat_template(row["messages"], tools=row["tools"], tokenize=False)
            assert_rendered(row, text, "hermes3")
    assert trainer.train().global_step == 1


def test_sft_trainer_renders_every_answer_after_select_columns(samples, tmp_path):
    """Keeping only the columns training reads (``select_columns(["messages", "tools"])``) keeps the rows' shape:
    the result's features used to be rebuilt as plain ``Features``, every answer then carried ``tool_calls: []``
    and Hermes-3 rendered it as an empty call turn, so the trainer never saw a final answer."""
    ds = samples["toolmind"].select_columns(["messages", "tools"])
    tokenizer = byte_tokenizer(TEMPLATES["hermes3"])
    config = SFTConfig(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=2, max_length=None,
                       report_to="none", save_strategy="no", use_cpu=True, bf16=False, disable_tqdm=True)
    trainer = SFTTrainer(model=tiny_model(len(tokenizer)), args=config, train_dataset=ds, processing_class=tokenizer)
    answers = 0
    for row, ids in zip(samples["toolmind"], trainer.train_dataset["input_ids"]):
        text = tokenizer.decode(ids)
        assert_rendered(row, text, "hermes3")
        answers += sum(1 for m in row["messages"] if m["role"] == "assistant" and not m.get("tool_calls"))
    assert answers >= 10


TEMPLATE_NAMES = {"qwen2.5": "Qwen2.5", "qwen3": "Qwen3", "hermes3": "Hermes 3", "llama3.1": "Llama 3.1",
                  "mistral": "Mistral", "granite": "Granite", "llama3.2": "Llama 3.2", "deepseekv3": "DeepSeek-V3",
                  "toolace": "ToolACE", "glm4moe": "GLM-4"}


def test_mirror_card_names_the_templates_plain_rows_break_and_its_remedy_renders_every_answer(tmp_path):
    """A mirror read with plain ``load_dataset`` gives messages with every key (``tool_calls: []`` on answers).
    The card's TRL section named only Llama 3.1 as hurt by that, while Hermes 3 (``tool_calls is not defined``)
    silently rendered every final answer as an empty call turn. Every template whose rendering of the plain rows
    differs from the chat shape must be named there, and the remedy it gives must render every answer."""
    from mirror_support import build_sample_mirror

    folder = build_sample_mirror("ms_swift", tmp_path / "mirrors", configs=["unified"])
    cache_dir = str(tmp_path / "cache")
    plain = datasets.load_dataset(str(folder), "unified", split="train", cache_dir=cache_dir)
    plain = plain.select_columns(["messages", "tools"])  # the card's snippet
    remedied = td.exact(plain)
    reference = list(td.load("ms_swift", data_files=td.sample_files("ms_swift"), split="train", cache_dir=cache_dir))

    def rendered(tokenizer, messages, tools):
        try:
            return tokenizer.apply_chat_template(messages, tools=tools, tokenize=False)
        except TemplateError as exc:
            return exc

    hurt = set()
    for template, text in TEMPLATES.items():
        tokenizer = byte_tokenizer(text)
        for row, plain_row, fixed in zip(reference, plain, remedied):
            expected = rendered(tokenizer, row["messages"], row["tools"])
            assert str(rendered(tokenizer, fixed["messages"], fixed["tools"])) == str(expected)
            if str(rendered(tokenizer, plain_row["messages"], plain_row["tools"])) != str(expected):
                hurt.add(template)
    assert "hermes3" in hurt  # the silent one: final answers lost

    card = (folder / "README.md").read_text(encoding="utf-8")
    trl = card[card.index("### TRL"):card.index("### ms-swift") if "### ms-swift" in card else card.index("## Schema")]
    assert [TEMPLATE_NAMES[t] for t in sorted(hurt) if TEMPLATE_NAMES[t] not in trl] == []
    assert "tooluse_datasets.exact(train)" in trl

    # The remedy through TRL's own map: every final answer reaches the tokens Hermes 3 trains on.
    tokenizer = byte_tokenizer(TEMPLATES["hermes3"])
    config = SFTConfig(output_dir=str(tmp_path / "out"), max_steps=1, per_device_train_batch_size=2, max_length=None,
                       report_to="none", save_strategy="no", use_cpu=True, bf16=False, disable_tqdm=True)
    trainer = SFTTrainer(model=tiny_model(len(tokenizer)), args=config, train_dataset=remedied,
                         processing_class=tokenizer)
    for row, ids in zip(reference, trainer.train_dataset["input_ids"]):
        if refusal("hermes3", row) is None:
            assert_rendered(row, tokenizer.decode(ids), "hermes3")


def test_sft_trainer_trains_on_every_answer_of_a_mapped_dataset(samples, tmp_path):
    """The README's rewrites are maps (``ds.map(td.reasoning_in_content)`` for a template without reasoning).
    datasets gave a map-style ``map`` output plain ``Features``, so its rows reached SFTTrainer with every key:
    ``images: []`` (TRL refused the text as vision data) and ``tool_calls: []`` on each answer, which Hermes-3
    renders as an empty call turn, the answer lost."""
    ds = samples["toolmind"]
    mapped = ds.map(td.reasoning_in_content)
    tokenizer = byte_tokenizer(TEMPLATES["hermes3"])
    config = SFTConfig(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=2, max_length=None,
                       report_to="none", save_strategy="no", use_cpu=True, bf16=False, disable_tqdm=True)
    trainer = SFTTrainer(model=tiny_model(len(tokenizer)), args=config, train_dataset=mapped,
                         processing_class=tokenizer)
    answers = reasoning = 0
    for row, ids in zip(ds, trainer.train_dataset["input_ids"]):
        expected = td.reasoning_in_content(row)
        text = tokenizer.decode(ids)
        assert text == tokenizer.apply_chat_template(expected["messages"], tools=expected["tools"], tokenize=False)
        assert_rendered(expected, text, "hermes3")
        answers += sum(1 for m in row["messages"] if m["role"] == "assistant" and not m.get("tool_calls"))
        reasoning += sum(1 for m in row["messages"] if m.get("reasoning_content") and not m.get("tool_calls"))
    assert answers >= 10 and reasoning >= 1
    assert trainer.train().global_step == 1


def trained_spans(tokenizer, ids: list[int], labels: list[int]) -> list[str]:
    """The text of each run of tokens the loss covers (labels other than -100)."""
    spans, run = [], []
    for token, label in zip(ids, labels):
        if label != -100:
            run.append(token)
        elif run:
            spans.append(tokenizer.decode(run))
            run = []
    return spans + ([tokenizer.decode(run)] if run else [])


@pytest.mark.parametrize("source", source_names())
def test_assistant_only_loss_trains_every_call_and_answer_and_no_result(source, samples, tmp_path):
    """``SFTConfig(assistant_only_loss=True)`` under TRL's own Qwen3 template (TRL swaps in its training version,
    with generation markers): the loss covers each call's name and arguments and each final answer, and neither a
    tool result nor a user turn."""
    import os

    import trl

    tokenizer = byte_tokenizer(TEMPLATES["qwen3"])
    with open(os.path.join(os.path.dirname(trl.__file__), "chat_templates", "qwen3.jinja"), encoding="utf-8") as f:
        tokenizer.chat_template = f.read()
    config = SFTConfig(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=2, max_length=None,
                       report_to="none", save_strategy="no", use_cpu=True, bf16=False, disable_tqdm=True,
                       assistant_only_loss=True)
    ds = samples[source]
    trainer = SFTTrainer(model=tiny_model(len(tokenizer)), args=config, train_dataset=ds, processing_class=tokenizer)
    checked = 0
    for row, prepared in zip(ds, trainer.train_dataset):
        spans = trained_spans(tokenizer, prepared["input_ids"], prepared["labels"])
        # the trained text without what the assistant says (an answer may quote a result)
        said = sorted([m["content"].strip() for m in row["messages"] if m["role"] == "assistant" and m["content"]]
                      + [json.dumps(c["function"]["arguments"], ensure_ascii=False)
                         for m in row["messages"] for c in m.get("tool_calls", [])], key=len, reverse=True)
        rest = []
        for span in spans:
            for text in said:
                span = span.replace(text, "")
            rest.append(span)
        for m in row["messages"]:
            calls = m.get("tool_calls", [])
            for call in calls:
                arguments = json.dumps(call["function"]["arguments"], ensure_ascii=False)
                assert any(call["function"]["name"] in s and arguments in s for s in spans), (row["id"], arguments)
                checked += 1
            if m["role"] == "assistant" and not calls and m["content"].strip():
                assert any(m["content"].strip() in s for s in spans), (row["id"], m["content"][:60])
                checked += 1
            if m["role"] in ("tool", "user") and m["content"].strip():
                assert not any(m["content"].strip() in s for s in rest), (row["id"], m["role"], m["content"][:60])
    assert checked >= len(ds)
    assert trainer.train().global_step == 1


# -- streams, packing, worker processes, eval sets, and the exact spans assistant_only_loss trains ------------------

GENERATION_OPEN, GENERATION_CLOSE = "\x02generation\x02", "\x03endgeneration\x03"


def trl_template(name: str) -> str:
    import os

    import trl

    with open(os.path.join(os.path.dirname(trl.__file__), "chat_templates", f"{name}.jinja"), encoding="utf-8") as f:
        return f.read()


def generation_blocks(tokenizer, template: str, row: dict) -> list[str]:
    """The text of each ``{% generation %}`` block of ``template`` rendered on ``row``: what transformers' assistant
    mask, and so TRL's ``assistant_only_loss``, must train, no more and no less."""
    import re

    marked = re.sub(r"{%-?\s*generation\s*-?%}", "{{- '%s' }}" % GENERATION_OPEN, template)
    marked = re.sub(r"{%-?\s*endgeneration\s*-?%}", "{{- '%s' }}" % GENERATION_CLOSE, marked)
    text = tokenizer.apply_chat_template(row["messages"], tools=row["tools"], tokenize=False, chat_template=marked)
    return re.findall(re.escape(GENERATION_OPEN) + "(.*?)" + re.escape(GENERATION_CLOSE), text, re.S)


def streamed_text_rows(source: str, cache_dir: str):
    split = "synthetic" if source == "toolmind" else "train"
    stream = td.load(source, data_files=td.sample_files(source), split=split, streaming=True, cache_dir=cache_dir)
    return stream.filter(lambda row: not row.get("images"))


@pytest.mark.parametrize("template", ["qwen3_training", "glm4moe_training"])
def test_assistant_only_loss_on_a_stream_trains_exactly_the_templates_generation_blocks(template, cache_dir, tmp_path):
    """A stream (``td.load(..., streaming=True)``, ``max_steps``) under a template with ``{% generation %}`` markers:
    per row, the trained tokens are the template's generation blocks, text for text and count for count; no tool
    result, user turn, system prompt or tool catalog is among them, and every call and final answer is."""
    text = trl_template(template)
    tokenizer = byte_tokenizer(TEMPLATES["qwen3"])
    tokenizer.chat_template = text
    config = SFTConfig(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=2, max_length=None,
                       report_to="none", save_strategy="no", use_cpu=True, bf16=False, disable_tqdm=True,
                       assistant_only_loss=True)
    checked = 0
    for source in ("nestful", "ms_swift", "llamafactory"):
        stream = streamed_text_rows(source, cache_dir)
        trainer = SFTTrainer(model=tiny_model(len(tokenizer)), args=config, train_dataset=stream,
                             processing_class=tokenizer)
        rows, prepared = list(stream), list(trainer.train_dataset)
        assert [p["id"] for p in prepared] == [r["id"] for r in rows] and rows
        for row, p in zip(rows, prepared):
            spans = trained_spans(tokenizer, p["input_ids"], p["labels"])
            blocks = generation_blocks(tokenizer, text, row)
            assert spans == blocks, row["id"]
            trained = sum(1 for label in p["labels"] if label != -100)
            assert trained == sum(len(tokenizer(b, add_special_tokens=False)["input_ids"]) for b in blocks), row["id"]
            said = "".join(spans)
            # the trained text without what the assistant says (a result can be a value a call passed on)
            own = sorted([m["content"].strip() for m in row["messages"] if m["role"] == "assistant"]
                         + [spelled_call(c, "glm4moe" if template.startswith("glm4moe") else "qwen3")
                            for m in row["messages"] for c in m.get("tool_calls", [])], key=len, reverse=True)
            rest = said
            for piece in filter(None, own):
                rest = rest.replace(piece, "")
            for m in row["messages"]:
                if m["role"] in ("tool", "user", "system") and m["content"].strip():
                    assert m["content"].strip() not in rest, (row["id"], m["role"])
                for call in m.get("tool_calls", []):
                    assert call["function"]["name"] in said, row["id"]
                if m["role"] == "assistant" and not m.get("tool_calls") and m["content"].strip():
                    assert m["content"].strip() in said, row["id"]
            for tool in row["tools"]:
                assert json.dumps(tool, ensure_ascii=False) not in said, (row["id"], tool["function"]["name"])
                assert tool["function"]["description"] not in rest, (row["id"], tool["function"]["name"])
            checked += 1
        assert trainer.train().global_step == 1
    assert checked >= 10


@pytest.mark.parametrize("streaming", [False, True], ids=["map-style", "streaming"])
def test_packing_keeps_every_rows_tokens_and_labels_whole(streaming, cache_dir, tmp_path):
    """``packing=True`` (TRL's best-fit packing) on a td.load dataset, map-style and streamed, with
    ``assistant_only_loss``: each packed sequence is rows laid end to end, and every row's tokens and labels are
    there once, as the row alone is tokenized."""
    tokenizer = byte_tokenizer(TEMPLATES["qwen3"])
    tokenizer.chat_template = trl_template("qwen3_training")
    ds = td.load("nestful", data_files=td.sample_files("nestful"), split="train", streaming=streaming,
                 cache_dir=cache_dir)
    alone = SFTConfig(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=1, max_length=None,
                      report_to="none", save_strategy="no", use_cpu=True, bf16=False, disable_tqdm=True,
                      assistant_only_loss=True)
    expected = sorted((tuple(p["input_ids"]), tuple(p["labels"]))
                      for p in SFTTrainer(model=tiny_model(len(tokenizer)), args=alone, train_dataset=ds,
                                          processing_class=tokenizer).train_dataset)
    longest = max(len(ids) for ids, _ in expected)
    packed_config = SFTConfig(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=1,
                              max_length=2 * longest, packing=True, report_to="none", save_strategy="no",
                              use_cpu=True, bf16=False, disable_tqdm=True, assistant_only_loss=True)
    trainer = SFTTrainer(model=tiny_model(len(tokenizer)), args=packed_config, train_dataset=ds,
                         processing_class=tokenizer)
    pieces, sequences = [], 0
    for p in trainer.train_dataset:
        sequences += 1
        start = 0
        for length in p["seq_lengths"]:
            pieces.append((tuple(p["input_ids"][start:start + length]), tuple(p["labels"][start:start + length])))
            start += length
        assert start == len(p["input_ids"]) <= 2 * longest
    assert sorted(pieces) == expected and sequences < len(expected)
    assert trainer.train().global_step == 1


def test_dataset_num_proc_and_a_nestful_eval_dataset_tokenize_each_row_as_it_renders(cache_dir, tmp_path):
    """``dataset_num_proc=2`` (TRL's maps in two processes, each reading rows through the exact decoder) and an
    ``eval_dataset`` from NESTFUL: both prepared as each row renders, and the trainer evaluates on it."""
    train = text_rows("ms_swift", cache_dir)
    evaluation = td.load("nestful", data_files=td.sample_files("nestful"), split="train", cache_dir=cache_dir)
    tokenizer = byte_tokenizer(TEMPLATES["qwen2.5"])
    config = SFTConfig(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=2,
                       per_device_eval_batch_size=2, max_length=None, report_to="none", save_strategy="no",
                       use_cpu=True, bf16=False, disable_tqdm=True, dataset_num_proc=2)
    trainer = SFTTrainer(model=tiny_model(len(tokenizer)), args=config, train_dataset=train, eval_dataset=evaluation,
                         processing_class=tokenizer)
    for ds, prepared in ((train, trainer.train_dataset), (evaluation, trainer.eval_dataset)):
        assert len(prepared) == len(ds)
        for row, ids in zip(ds, prepared["input_ids"]):
            text = tokenizer.decode(ids)
            assert text == tokenizer.apply_chat_template(row["messages"], tools=row["tools"], tokenize=False)
            assert_rendered(row, text, "qwen2.5")
    assert trainer.train().global_step == 1
    assert trainer.evaluate()["eval_loss"] > 0


@pytest.mark.parametrize("streaming", [False, True], ids=["map-style", "streaming"])
def test_big_integers_negative_zero_and_escapes_reach_every_template_and_the_trainer_as_the_source_wrote_them(
        streaming, cache_dir, tmp_path):
    """Each source's row calling a tool with integers beyond 64 bits, ``-0.0``, ``5e-324``, unicode escapes and
    nested objects, its tool using ``$ref``/``anyOf``/``oneOf``: the row decodes to the source's values (no float
    for an integer, no ``None`` added), the tool's schema comes back whole, every template renders the arguments
    as ``tojson`` spells those values, and SFTTrainer's tokens hold them."""
    from tricky_values import ARGUMENTS, PARAMETERS, bits, write_files

    spelled = json.dumps(ARGUMENTS, ensure_ascii=False)  # transformers' tojson
    assert "123456789012345678901234567890" in spelled and "-0.0" in spelled and "5e-324" in spelled
    parts = []
    for source, path, split in write_files(tmp_path / "rows"):
        ds = td.load(source, data_files=path, split=split, streaming=streaming, cache_dir=cache_dir)
        (row,) = list(ds)
        (call,) = [c for m in row["messages"] for c in m.get("tool_calls", [])]
        assert bits(call["function"]["arguments"]) == bits(ARGUMENTS), row["id"]
        if source != "nestful":  # NESTFUL's parameters are the properties alone
            assert bits(row["tools"][0]["function"]["parameters"]) == bits(PARAMETERS), row["id"]
        for name, template in TEMPLATES.items():
            rendered = REMEDY[name](row) if name in REMEDY else row
            text = byte_tokenizer(template).apply_chat_template(rendered["messages"], tools=rendered["tools"],
                                                                tokenize=False)
            if name == "glm4moe":  # one <arg_value> per argument, strings unquoted
                assert all(f"<arg_value>{v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}</arg_value>"
                           in text for v in ARGUMENTS.values()), (row["id"], name)
            elif name == "toolace":  # Python's %s of each value
                assert all(f"={'%s' % (v,)}r" in text for v in ARGUMENTS.values()), (row["id"], name)
            else:
                assert spelled in text, (row["id"], name)
        parts.append(ds.select_columns(["id", "messages", "tools"]))
    mixed = datasets.concatenate_datasets(parts)
    tokenizer = byte_tokenizer(TEMPLATES["qwen2.5"])
    config = SFTConfig(output_dir=str(tmp_path / "out"), max_steps=1, per_device_train_batch_size=2, max_length=None,
                       report_to="none", save_strategy="no", use_cpu=True, bf16=False, disable_tqdm=True,
                       dataset_num_proc=None if streaming else 2)
    trainer = SFTTrainer(model=tiny_model(len(tokenizer)), args=config, train_dataset=mixed, processing_class=tokenizer)
    prepared = list(trainer.train_dataset)
    assert len(prepared) == 5
    assert all(spelled in tokenizer.decode(p["input_ids"]) for p in prepared)
    assert trainer.train().global_step == 1


def prompt_and_completion(row: dict) -> dict:
    """TRL's conversational prompt-completion form of a unified row ending on an assistant turn: that turn is the
    completion (``completion_only_loss`` trains it alone), the conversation before it the prompt."""
    return {"prompt": row["messages"][:-1], "completion": row["messages"][-1:]}


@pytest.mark.parametrize("streaming", [False, True], ids=["map-style", "streaming"])
def test_completion_only_loss_on_prompt_completion_rows_trains_exactly_each_last_turn(streaming, cache_dir, tmp_path):
    """Unified rows mapped into TRL's prompt-completion columns (``remove_columns=["messages"]``) go to SFTTrainer,
    whose ``completion_only_loss`` then trains each row's last assistant turn (its calls or its answer) and
    nothing before it. Map-style, the media columns the map carried over came back as ``images: []`` on every row
    (only rows holding unified ``messages`` left them out), and TRL refused the text dataset as vision data."""
    tokenizer = byte_tokenizer(TEMPLATES["qwen2.5"])
    config = SFTConfig(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=2, max_length=None,
                       report_to="none", save_strategy="no", use_cpu=True, bf16=False, disable_tqdm=True)
    trained = 0
    for source, split in (("nestful", "train"), ("ms_swift", "train"), ("toolmind", "synthetic"),
                          ("llamafactory", "train")):
        ds = td.load(source, data_files=td.sample_files(source), split=split, streaming=streaming, cache_dir=cache_dir)
        ds = ds.filter(lambda row: not row.get("images") and row["messages"][-1]["role"] == "assistant")
        pairs = ds.map(prompt_and_completion, remove_columns=["messages"])
        rows, originals = list(pairs), list(ds)
        assert [r["id"] for r in rows] == [r["id"] for r in originals] and rows, source
        for row, original in zip(rows, originals):
            assert not set(td.MEDIA_COLUMNS) & set(row), (row["id"], "TRL would take this for vision data")
            assert row["prompt"] + row["completion"] == original["messages"], row["id"]  # exact, in chat shape
        trainer = SFTTrainer(model=tiny_model(len(tokenizer)), args=config, train_dataset=pairs,
                             processing_class=tokenizer)
        assert trainer.completion_only_loss
        for row, prepared in zip(rows, trainer.train_dataset):
            whole = tokenizer.apply_chat_template(row["prompt"] + row["completion"], tools=row["tools"], tokenize=False)
            prompt = tokenizer.apply_chat_template(row["prompt"], tools=row["tools"], tokenize=False,
                                                   add_generation_prompt=True)
            assert tokenizer.decode(prepared["input_ids"]) == whole and whole.startswith(prompt), row["id"]
            (span,) = trained_spans(tokenizer, prepared["input_ids"], prepared["labels"])
            assert span == whole[len(prompt):], row["id"]
            (last,) = row["completion"]
            for call in last.get("tool_calls", []):
                assert spelled_call(call, "qwen2.5") in span, row["id"]
            assert last["content"].strip() in span, row["id"]
            trained += 1
    assert trained >= 15
    assert trainer.train().global_step == 1


def test_prompt_completion_columns_decode_in_chat_shape_whatever_type_the_writer_inferred(cache_dir):
    """A map writing final answers as completions, typed by inference from its first rows (ToolMind's answers, with
    reasoning; here one row per write), gave the later answers without reasoning ``reasoning_content: None``:
    each completion comes back as the message it was."""
    parts = [td.load("toolmind", data_files=td.sample_files("toolmind"), split="synthetic", cache_dir=cache_dir),
             td.load("ms_swift", data_files=td.sample_files("ms_swift"), split="train", cache_dir=cache_dir)]
    ds = datasets.concatenate_datasets(parts).filter(
        lambda row: not row.get("images") and row["messages"][-1]["role"] == "assistant"
        and not row["messages"][-1].get("tool_calls"))
    pairs = ds.map(prompt_and_completion, remove_columns=["messages"], writer_batch_size=1)
    without_reasoning = 0
    for row, original in zip(pairs, ds):
        assert row["completion"] == original["messages"][-1:], row["id"]
        without_reasoning += "reasoning_content" not in original["messages"][-1]
    assert without_reasoning >= 1
    # TRL's preference columns (an implicit prompt) hold a conversation too: no media keys on text rows.
    preferences = ds.map(lambda row: {"chosen": row["messages"],
                                      "rejected": row["messages"][:-1] + [{"role": "assistant", "content": "No."}]},
                         remove_columns=["messages"])
    assert all(not set(td.MEDIA_COLUMNS) & set(row) and row["chosen"][-1]["content"] for row in preferences)


def test_a_prompt_completion_map_past_writer_batch_size_keeps_every_completion_only_with_the_messages_type(
        cache_dir, tmp_path):
    """README: past ``writer_batch_size`` (1,000) rows, datasets types a map's new columns from its first rows, so a
    later completion with keys the first ones lack stops the map (a call turn after answers) or loses them silently
    (an argument the first calls lack; a value cast to their type). With the messages' type, every completion comes
    back as written."""
    tool = {"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object"}}}

    def call(arguments):
        return {"role": "assistant", "content": "",
                "tool_calls": [{"id": "c", "type": "function",
                                "function": {"name": "f", "arguments": json.dumps(arguments)}}]}

    later = {"x": 1060, "y": 0.1}
    # (the later call is written in a batch beside a call of the first ones' type: alone in its batch, it stops the map)
    files = {"answers_first": [{"role": "assistant", "content": f"a{i}"} for i in range(1001)] + [call(later)],
             "text_x_first": [call({"x": f"s{i}"}) for i in range(1001)] + [call(later)]}
    loaded = {}
    for name, lasts in files.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps({"tools": [tool], "messages": [{"role": "user", "content": "q"}, last]})
                                + "\n" for last in lasts), encoding="utf-8")
        loaded[name] = td.load("ms_swift", data_files=str(path), split="train", cache_dir=cache_dir)

    with pytest.raises(TypeError, match="Couldn't cast array of type"):
        loaded["answers_first"].map(prompt_and_completion, remove_columns=["messages"])
    inferred = loaded["text_x_first"].map(prompt_and_completion, remove_columns=["messages"])
    assert inferred[-1]["completion"][0]["tool_calls"][0]["function"]["arguments"] == {"x": "1060"}

    for ds in loaded.values():
        features = datasets.Features({**ds.features, "prompt": ds.features["messages"],
                                      "completion": ds.features["messages"]})
        del features["messages"]
        pairs = ds.map(prompt_and_completion, remove_columns=["messages"], features=features)
        assert [row["completion"] for row in pairs] == [row["messages"][-1:] for row in ds]
        assert pairs[-1]["completion"][0]["tool_calls"][0]["function"]["arguments"] == later


def test_a_saved_dataset_read_back_with_load_from_disk_trains_every_answer_after_exact(cache_dir, tmp_path):
    """README: ``datasets.load_from_disk`` gives a saved ``td.load`` dataset plain ``Json()`` features, its rows every
    key (``images: []``, ``tool_calls: []`` on each answer): SFTTrainer refuses it as vision data, and after
    ``select_columns(["messages", "tools"])`` Hermes 3 trains each final answer as an empty call turn.
    ``td.exact`` gives it back in the decoded shape, every answer trained."""
    ds = td.load("toolmind", data_files=td.sample_files("toolmind"), split="synthetic", cache_dir=cache_dir)
    ds.save_to_disk(str(tmp_path / "saved"))
    plain = datasets.load_from_disk(str(tmp_path / "saved"))
    tokenizer = byte_tokenizer(TEMPLATES["hermes3"])
    config = SFTConfig(output_dir=str(tmp_path / "out"), max_steps=1, per_device_train_batch_size=2, max_length=None,
                       report_to="none", save_strategy="no", use_cpu=True, bf16=False, disable_tqdm=True)
    with pytest.raises(ValueError, match="vision-related"):
        SFTTrainer(model=tiny_model(len(tokenizer)), args=config, train_dataset=plain, processing_class=tokenizer)
    columns = SFTTrainer(model=tiny_model(len(tokenizer)), args=config,
                         train_dataset=plain.select_columns(["messages", "tools"]), processing_class=tokenizer)
    empty_turn = "<|im_start|>assistant<|im_end|>"
    assert all(empty_turn in tokenizer.decode(ids) for ids in columns.train_dataset["input_ids"])

    exact = td.exact(plain)
    assert list(exact) == list(ds)
    trainer = SFTTrainer(model=tiny_model(len(tokenizer)), args=config, train_dataset=exact, processing_class=tokenizer)
    answers = 0
    for row, ids in zip(ds, trainer.train_dataset["input_ids"]):
        text = tokenizer.decode(ids)
        assert empty_turn not in text
        assert_rendered(row, text, "hermes3")
        answers += sum(1 for m in row["messages"] if m["role"] == "assistant" and not m.get("tool_calls"))
    assert answers >= 9
    assert trainer.train().global_step == 1


def test_sft_trainer_reads_a_reported_stream_before_training_and_the_report_counts_those_reads(cache_dir, tmp_path):
    """README: SFTTrainer reads a stream while it is built (its first rows, several times, through its own maps),
    and a ``report`` given to ``td.load`` counts each of those reads as a pass, logging its skips again: an 8-line
    file with 2 bad rows, filtered, reports 32 rows read and 8 skipped before any step. Loaded alone with its own
    report, the file's counts are its own."""
    (sample,) = [f for f in td.sample_files("ms_swift")["train"] if f.endswith("agent_rows.jsonl")]
    with open(sample, encoding="utf-8") as f:
        good = f.read()  # 3 rows
    path = tmp_path / "rows.jsonl"
    path.write_text(good + "{not json\n" + '{"messages": 5}\n' + good, encoding="utf-8")
    alone = td.SkipReport()
    list(td.load("ms_swift", data_files=str(path), split="train", streaming=True, on_error="skip", report=alone,
                 cache_dir=cache_dir))
    assert (alone.rows_read, alone.skipped) == (8, 2)
    report = td.SkipReport()
    stream = td.load("ms_swift", data_files=str(path), split="train", streaming=True, on_error="skip", report=report,
                     cache_dir=cache_dir).filter(lambda row: not row.get("images"))
    tokenizer = byte_tokenizer(TEMPLATES["qwen2.5"])
    config = SFTConfig(output_dir=str(tmp_path / "out"), max_steps=1, per_device_train_batch_size=1, max_length=None,
                       report_to="none", save_strategy="no", use_cpu=True, bf16=False, disable_tqdm=True)
    SFTTrainer(model=tiny_model(len(tokenizer)), args=config, train_dataset=stream, processing_class=tokenizer)
    assert (report.rows_read, report.skipped) == (32, 8)


def test_assistant_only_loss_with_max_length_drops_the_rows_whose_trained_tokens_all_lie_past_it(cache_dir, tmp_path):
    """README: TRL truncates each row to ``max_length`` and, with ``assistant_only_loss``, drops without a word a row
    left with no trained token (its tool catalog and prompt longer than ``max_length``): the dataset it trains is
    shorter than the one given, by exactly the rows whose first trained token lies past ``max_length``."""
    tokenizer = byte_tokenizer(TEMPLATES["qwen3"])
    tokenizer.chat_template = trl_template("qwen3_training")
    ds = td.load("toolmind", data_files=td.sample_files("toolmind"), split="synthetic", cache_dir=cache_dir)

    def prepared(max_length):
        config = SFTConfig(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=1, max_length=max_length,
                           report_to="none", save_strategy="no", use_cpu=True, bf16=False, disable_tqdm=True,
                           assistant_only_loss=True)
        return SFTTrainer(model=tiny_model(len(tokenizer)), args=config, train_dataset=ds,
                          processing_class=tokenizer).train_dataset

    whole = list(prepared(None))
    first_trained = [next(i for i, label in enumerate(p["labels"]) if label != -100) for p in whole]
    max_length = sorted(first_trained)[-3] + 1  # the two rows trained latest start past it
    kept = [p["input_ids"][:max_length] for p, first in zip(whole, first_trained) if first < max_length]
    truncated = prepared(max_length)
    assert len(ds) - len(truncated) == 2 and truncated["input_ids"] == kept


@pytest.mark.parametrize("streaming", [False, True], ids=["map-style", "streaming"])
def test_the_all_mix_trains_its_image_rows_as_text_unless_they_are_filtered_out(streaming, cache_dir, tmp_path):
    """README: TRL tells vision data from the first row only. The samples' ``all`` mix opens on NESTFUL's text rows,
    so SFTTrainer takes it as text and trains its 2 ms-swift rows with images as text, the ``<image>`` tag a literal
    and the image never read; ``filter(lambda r: not r.get("images"))`` leaves them out."""
    files = {source: td.sample_files(source) for source in source_names()}
    ds = td.load("all", data_files=files, split="train", streaming=streaming, cache_dir=cache_dir)
    rows = list(ds)
    with_images = [i for i, row in enumerate(rows) if row.get("images")]
    assert len(rows) == 37 and len(with_images) == 2 and "images" not in rows[0]
    tokenizer = byte_tokenizer(TEMPLATES["qwen2.5"])
    config = SFTConfig(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=2, max_length=None,
                       report_to="none", save_strategy="no", use_cpu=True, bf16=False, disable_tqdm=True)
    prepared = list(SFTTrainer(model=tiny_model(len(tokenizer)), args=config, train_dataset=ds,
                               processing_class=tokenizer).train_dataset)
    assert len(prepared) == len(rows)
    assert all("<image>" in tokenizer.decode(prepared[i]["input_ids"]) for i in with_images)
    text = ds.filter(lambda row: not row.get("images"))
    kept = list(SFTTrainer(model=tiny_model(len(tokenizer)), args=config, train_dataset=text,
                           processing_class=tokenizer).train_dataset)
    assert len(kept) == len(rows) - 2 and not any("<image>" in tokenizer.decode(p["input_ids"]) for p in kept)
