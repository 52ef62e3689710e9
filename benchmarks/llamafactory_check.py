"""Checks a folder written by ``tooluse-datasets export --format llamafactory`` with LLaMA-Factory 0.9.5 itself.

    benchmarks/.venv-llamafactory/bin/python benchmarks/llamafactory_check.py DIR [--templates qwen,llama3] [--table]

Run it with the Python of the environment that ``benchmarks/llamafactory_env.sh`` makes (LLaMA-Factory 0.9.5
pins ``datasets<=4.0``, which cannot share this package's venv); it imports nothing from this package.

For every entry of ``DIR/dataset_info.json`` it goes the way ``llamafactory-cli train`` (stage ``sft``) does:
``get_train_args`` with ``dataset_dir=DIR``, ``load_tokenizer``, ``get_template_and_fix_tokenizer`` and
``get_dataset`` (its json loading, sharegpt converter and supervised processor), under each template given.
The tokenizer is built here, offline: byte-level with no merges, so decoding ``input_ids`` gives back the exact
text the template produced. Then, per row of the file, it checks that LLaMA-Factory kept the row (loaded,
converted, encoded) and that the encoded text holds the row unaltered: human turns and observations verbatim
in the input, every gpt turn verbatim in its own trained span (the labels), every function_call's reasoning
verbatim and each call's name followed by its arguments, found as JSON in the trained span and equal to the
file's arguments value for value (floats bit for bit, an integer still an integer, keys in order). It also counts
the tools whose whole definition is in the input as a JSON value (``tools_whole`` of ``tools``): templates that
write each tool as JSON (``qwen``, ``qwen3``, ``llama3``) show every one; the ``default`` ReAct prompt prints
each tool's name, description and parameters' names, types, descriptions, enum and item types only.

Rows that LLaMA-Factory refuses or drops are re-run one by one to name the row and LLaMA-Factory's reason.
Rows with images need a vision template: text templates refuse them (reported as ``needs_vision``), and they
are encoded under ``llava`` (ReAct-style tool format) with an offline LLaVA processor; an image the folder does
not hold is stood in for by a generated 28x28 picture (counted as ``generated_images``). Sequences are not cut
(``cutoff_len`` is huge): truncation is a training setting, not a property of the rows.

Default templates: ``default`` (ReAct style, what most of LLaMA-Factory's templates use), ``qwen``, ``qwen3``
(reasoning) and ``llama3``. Others can be named: ``mistral`` (and every template built on its ``Llama2Template``)
fails on call turns with reasoning, ``glm4`` on parallel calls (LLaMA-Factory's own limits); templates whose
calls are not JSON (``glm4_moe``, ``minimax2``, ``lfm2``, ``seed_oss``) encode, but this check cannot find
their arguments and reports them altered.

Prints one JSON line per file (``--table``: a Markdown table instead); exit status 1 if any row was dropped,
altered, lost a call or failed under any template given.

``--aligned`` checks nothing: it prints, per entry of ``DIR/dataset_info.json``, the rows as LLaMA-Factory's
loader and converter give them (``_prompt``, ``_response``, ``_system``, ``_tools``, ``_images``...), one JSON line
``{"entry", "rows"}`` each; any entry, whatever its columns and tags (``tests/test_llamafactory_real.py`` compares
them with what the ``llamafactory`` source reads from the same entries).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import struct
import sys
import tempfile

TEXT_TEMPLATES = ("default", "qwen", "qwen3", "llama3")
VISION_TEMPLATE = "llava"  # Qwen2-VL's processor needs torchvision's video processor, which CPU torch lacks
MEDIA_TAGS = {"images": "<image>", "videos": "<video>", "audios": "<audio>"}
THINK_OPEN, THINK_CLOSE = "<think>\n", "\n</think>\n\n"
TOOL_CALL_SPAN = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)  # templates' default tool_call_words
IGNORE_INDEX = -100
DROPPED = "dropped by LLaMA-Factory's supervised processor (no valid prompt/response after conversion)"
IMAGE_TOKEN = "<image>"  # LLaVA's image token, added whole so the text decodes back as written


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folder", help="a folder written by `tooluse-datasets export --format llamafactory`")
    p.add_argument("--templates", default=",".join(TEXT_TEMPLATES), help="comma-separated LLaMA-Factory templates")
    p.add_argument("--table", action="store_true", help="print a Markdown table instead of JSON lines")
    p.add_argument("--aligned", action="store_true",
                   help="print each entry's rows as LLaMA-Factory's converter gives them (no check)")
    args = p.parse_args()
    if not os.path.isfile(os.path.join(args.folder, "dataset_info.json")):
        p.error(f"{args.folder}: no dataset_info.json: not a folder written by "
                "`tooluse-datasets export --format llamafactory`")
    if importlib.util.find_spec("llamafactory") is None:  # this package's venv cannot hold it (datasets<=4.0)
        p.error(f"LLaMA-Factory is not installed for {sys.executable}: run this with "
                "benchmarks/.venv-llamafactory/bin/python (bash benchmarks/llamafactory_env.sh makes it)")

    # LLaMA-Factory logs and prints examples on stdout: the report keeps stdout, everything else goes to stderr.
    report = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    work = tempfile.mkdtemp(prefix="lf-check-")
    os.environ.update({"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_DATASETS_CACHE": f"{work}/hf-cache",
                       "LLAMAFACTORY_VERBOSITY": "WARN"})
    try:
        checker = Checker(os.path.abspath(args.folder), work, [t for t in args.templates.split(",") if t])
        if args.aligned:
            for name in checker.entries:
                rows = [dict(row) for row in checker.load_and_convert(name)]
                report.write(json.dumps({"entry": name, "rows": rows}, ensure_ascii=False) + "\n")
            report.flush()
            return 0
        results = [checker.check_entry(name, entry) for name, entry in checker.entries.items()]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.table:
        print_table(results, report)
    else:
        for result in results:
            report.write(json.dumps(result, ensure_ascii=False) + "\n")
    report.flush()
    return 0 if all(r["ok"] for r in results) else 1


class Checker:
    def __init__(self, folder: str, work: str, templates: list[str]):
        from importlib.metadata import version

        self.folder, self.work, self.templates = folder, work, templates
        with open(os.path.join(folder, "dataset_info.json"), encoding="utf-8") as f:
            self.entries = json.load(f)
        self.versions = {p: version(p) for p in ("llamafactory", "datasets", "transformers", "torch")}
        self.text_model = build_tokenizer(os.path.join(work, "text-model"), vision=False)
        self.vision_model = None  # built on the first file with images

    # --- LLaMA-Factory's own entry points, called as its trainer calls them -------------------------------------
    def lf_setup(self, template: str, name: str, model_dir: str, media_dir: str | None = None):
        from llamafactory.data import get_template_and_fix_tokenizer
        from llamafactory.hparams import get_train_args
        from llamafactory.model import load_tokenizer

        options = dict(model_name_or_path=model_dir, stage="sft", do_train=True, finetuning_type="full",
                       template=template, dataset=name, dataset_dir=self.folder, cutoff_len=10**9,
                       output_dir=os.path.join(self.work, "out"), overwrite_cache=True, report_to="none")
        if media_dir:
            options["media_dir"] = media_dir
        model_args, data_args, training_args, _, _ = get_train_args(options)
        tokenizer_module = load_tokenizer(model_args)  # a fresh tokenizer: templates add their own special tokens
        lf_template = get_template_and_fix_tokenizer(tokenizer_module["tokenizer"], data_args)
        return lf_template, model_args, data_args, training_args, tokenizer_module

    def load_and_convert(self, name: str, template: str = "default", model_dir: str | None = None,
                         media_dir: str | None = None):
        """The file loaded and converted as ``get_dataset`` does before encoding (media paths resolved against
        ``media_dir`` here, as LLaMA-Factory's converter resolves them)."""
        from llamafactory.data.loader import _get_merged_dataset

        setup = self.lf_setup(template, name, model_dir or self.text_model, media_dir)
        _, model_args, data_args, training_args, _ = setup
        return _get_merged_dataset(data_args.dataset, model_args, data_args, training_args, "sft")

    def encode_file(self, template: str, name: str):
        """``get_dataset`` as training calls it: the file's rows encoded, or LLaMA-Factory's error."""
        from llamafactory.data import get_dataset

        setup = self.lf_setup(template, name, self.text_model)
        lf_template, model_args, data_args, training_args, tokenizer_module = setup
        try:
            module = get_dataset(lf_template, model_args, data_args, training_args, "sft", **tokenizer_module)
        except Exception as exc:  # noqa: BLE001 - LLaMA-Factory's own refusal is the finding
            return None, f"{type(exc).__name__}: {exc}", tokenizer_module["tokenizer"]
        return list(module["train_dataset"]), None, tokenizer_module["tokenizer"]

    def encode_rows(self, template: str, name: str, aligned, indices: list[int], model_dir: str,
                    media_dir: str | None = None) -> tuple[dict[int, tuple], object]:
        """Rows one at a time through LLaMA-Factory's supervised processor: {row: (encoded or None, reason)}."""
        from llamafactory.data.loader import _get_preprocessed_dataset

        setup = self.lf_setup(template, name, model_dir, media_dir)
        lf_template, _, data_args, training_args, tokenizer_module = setup
        out = {}
        for i in indices:
            try:
                encoded = _get_preprocessed_dataset(aligned.select([i]), data_args, training_args, "sft",
                                                    lf_template, tokenizer_module["tokenizer"],
                                                    tokenizer_module["processor"])
                rows = list(encoded)
                out[i] = (rows[0], None) if rows else (None, DROPPED)
            except Exception as exc:  # noqa: BLE001
                # With one row, LLaMA-Factory says a dropped row this way (it has no example to print).
                no_row = isinstance(exc, RuntimeError) and str(exc).startswith("Cannot find valid samples")
                out[i] = (None, DROPPED if no_row else f"{type(exc).__name__}: {exc}")
        return out, tokenizer_module["tokenizer"]

    # --- one file ------------------------------------------------------------------------------------------------
    def check_entry(self, name: str, entry: dict) -> dict:
        path = os.path.join(self.folder, entry["file_name"])
        with open(path, encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
        result = {"file": entry["file_name"], "rows_in_file": len(rows), **self.versions, "templates": {}}
        try:
            aligned = self.load_and_convert(name)
        except Exception as exc:  # noqa: BLE001
            result.update(ok=False, error=f"loading: {type(exc).__name__}: {exc}")
            return result
        result["rows_loaded"] = len(aligned)
        # The converter keeps a row it rejects as an empty prompt and response (the processor then drops it).
        broken = [i for i, r in enumerate(aligned) if not r["_prompt"] or not r["_response"]]
        result["rows_converted"] = len(aligned) - len(broken)
        result["converter_rejected"] = broken
        media_rows = [i for i, row in enumerate(rows) if any(row.get(c) for c in MEDIA_TAGS)]
        ok = len(aligned) == len(rows) and not broken

        for template in self.templates:
            outcome = self.check_template(template, name, rows, aligned, media_rows, self.text_model)
            result["templates"][template] = outcome
            ok = ok and outcome["ok"]
        if media_rows:
            outcome = self.check_vision(name, rows, media_rows)
            result["templates"][VISION_TEMPLATE] = outcome
            ok = ok and outcome["ok"]
        result["ok"] = ok
        return result

    def check_template(self, template, name, rows, aligned, media_rows, model_dir) -> dict:
        encoded, error, tokenizer = self.encode_file(template, name)
        outcome = {"rows_encoded": None, "failed": {}, "needs_vision": [], "file_error": error}
        if encoded is not None and len(encoded) == len(rows):
            by_row = {i: (e, None) for i, e in enumerate(encoded)}
        else:
            # Refused or short: which rows, and why, one row at a time.
            by_row, tokenizer = self.encode_rows(template, name, aligned, list(range(len(aligned))), model_dir)
        outcome["rows_encoded"] = sum(1 for e, _ in by_row.values() if e is not None)
        for i, (e, reason) in by_row.items():
            if e is None and i in media_rows and "does not support" in reason:
                outcome["needs_vision"].append(i)  # LLaMA-Factory's answer to images under a text template
            elif e is None:
                outcome["failed"][i] = reason
        text_rows = {i: e for i, (e, _) in by_row.items() if e is not None}
        outcome.update(check_contents(rows, text_rows, tokenizer))
        outcome["ok"] = not outcome["failed"] and not outcome["altered"] and (
            outcome["rows_encoded"] + len(outcome["needs_vision"]) == len(rows))
        return outcome

    def check_vision(self, name, rows, media_rows) -> dict:
        if self.vision_model is None:
            self.vision_model = build_tokenizer(os.path.join(self.work, "vision-model"), vision=True)
        media_dir, generated = stand_in_images(self.folder, rows, media_rows, os.path.join(self.work, "media", name))
        aligned = self.load_and_convert(name, VISION_TEMPLATE, self.vision_model, media_dir)
        by_row, tokenizer = self.encode_rows(VISION_TEMPLATE, name, aligned, media_rows, self.vision_model, media_dir)
        outcome = {"rows": media_rows, "rows_encoded": sum(1 for e, _ in by_row.values() if e is not None),
                   "generated_images": generated,
                   "failed": {i: reason for i, (e, reason) in by_row.items() if e is None}}
        outcome.update(check_contents(rows, {i: e for i, (e, _) in by_row.items() if e is not None}, tokenizer))
        outcome["ok"] = not outcome["failed"] and not outcome["altered"]
        return outcome


# --- what the encoded text must hold ---------------------------------------------------------------------------
def check_contents(rows: list[dict], encoded: dict[int, dict], tokenizer) -> dict:
    counts = {"calls": 0, "calls_intact": 0, "observations": 0, "observations_intact": 0, "answers": 0,
              "answers_intact": 0, "tools": 0, "tools_whole": 0}
    altered: dict[int, list[str]] = {}
    for i, e in encoded.items():
        problems = check_row(rows[i], e, tokenizer, counts)
        if problems:
            altered[i] = problems
    return {**counts, "altered": altered}


def check_row(row: dict, encoded: dict, tokenizer, counts: dict) -> list[str]:
    problems = []
    text = tokenizer.decode(encoded["input_ids"], skip_special_tokens=False)
    spans = trained_spans(encoded, tokenizer)
    turns = row["conversations"]
    assistant_turns = [t for t in turns if t["from"] in ("gpt", "function_call")]
    if len(spans) != len(assistant_turns):
        problems.append(f"{len(spans)} trained spans for {len(assistant_turns)} assistant turns")
    if row.get("system") and row["system"] not in text:
        problems.append("system text not in the input")
    tools = json.loads(row["tools"]) if row.get("tools") else []
    for tool in tools:
        tool_name = (tool.get("function") or {}).get("name") if tool.get("type") == "function" else tool.get("name")
        if tool_name not in text:
            problems.append(f"tool {tool_name!r} not in the input")
    # Whole: the tool's definition as a JSON value in the input, every key of its schema (output_parameters,
    # nested properties, defaults...) included; templates that write each tool as JSON show it so. The default
    # (ReAct) prompt prints names, descriptions, types, enum and item types only: a count, not an alteration.
    if tools:
        shown = {exact(value) for _, _, value in json_objects(text)}
        counts["tools"] += len(tools)
        counts["tools_whole"] += sum(exact(tool) in shown or exact(tool.get("function")) in shown for tool in tools)

    cursor = 0  # human turns and observations, in order, in the whole input
    span_index = 0
    for k, turn in enumerate(turns):
        value, tag = turn["value"], turn["from"]
        if tag == "system":  # a leading system turn (files from elsewhere; exports use the system column)
            if value not in text:
                problems.append(f"conversations[{k}] (system) not in the input")
            continue
        if tag in ("human", "observation"):
            found = find_in_order(text, media_free_pieces(value), cursor)
            if tag == "observation":
                counts["observations"] += 1
                counts["observations_intact"] += found is not None
            if found is None:
                problems.append(f"conversations[{k}] ({tag}) not verbatim in the input")
            else:
                cursor = found
            continue
        span = spans[span_index] if span_index < len(spans) else ""
        span_index += 1
        if tag == "gpt":
            counts["answers"] += 1
            if value in span:
                counts["answers_intact"] += 1
            else:
                problems.append(f"conversations[{k}] (gpt) not verbatim in its trained span")
            continue
        thought, calls = split_function_value(value)
        if thought is not None and thought not in span:
            problems.append(f"conversations[{k}] reasoning not verbatim in its trained span")
        counts["calls"] += len(calls)
        missing = calls_missing(span, calls)
        counts["calls_intact"] += len(calls) - len(missing)
        for j in missing:
            problems.append(f"conversations[{k}] call {j} ({calls[j][0]}) not found with exact arguments")
    return problems


def trained_spans(encoded: dict, tokenizer) -> list[str]:
    """The decoded runs of trained tokens (labels not ignored), one per assistant turn."""
    spans, run = [], []
    for label in encoded["labels"]:
        if label == IGNORE_INDEX:
            if run:
                spans.append(run)
                run = []
        else:
            run.append(label)
    if run:
        spans.append(run)
    return [tokenizer.decode(s, skip_special_tokens=False) for s in spans]


def media_free_pieces(value: str) -> list[str]:
    """A turn's text around its media tags (vision plugins replace the tags with their own tokens)."""
    pieces = [value]
    for tag in MEDIA_TAGS.values():
        pieces = [part for piece in pieces for part in piece.split(tag)]
    return [p for p in pieces if p]


def find_in_order(text: str, pieces: list[str], start: int):
    for piece in pieces:
        at = text.find(piece, start)
        if at < 0:
            return None
        start = at + len(piece)
    return start


def split_function_value(value: str) -> tuple[str | None, list[tuple[str, object]]]:
    """A function_call value as the file holds it: optional <think> block, then JSON of a call or a list, that
    JSON maybe between <tool_call> and </tool_call> (FunctionFormatter, default tool_call_words, parses the text
    between them as the calls and keeps the rest before them)."""
    thought = None
    span = TOOL_CALL_SPAN.search(value)
    if span:
        thought, value = value.replace(span.group(0), "") or None, span.group(1)
    elif value.startswith(THINK_OPEN) and THINK_CLOSE in value:
        end = value.index(THINK_CLOSE) + len(THINK_CLOSE)
        thought, value = value[:end], value[end:]
    parsed = json.loads(value)
    calls = parsed if isinstance(parsed, list) else [parsed]
    return thought, [(c["name"], c["arguments"]) for c in calls]


def calls_missing(span: str, calls: list[tuple[str, object]]) -> list[int]:
    """Calls not found in order in the span: the name, then a JSON value equal to the arguments."""
    candidates = json_objects(span)
    missing, cursor = [], 0
    for j, (name, arguments) in enumerate(calls):
        want = exact(arguments)
        spelled = {name, json.dumps(name, ensure_ascii=False)}
        for start, end, value in candidates:
            if start >= cursor and exact(value) == want and any(s in span[cursor:start] for s in spelled):
                cursor = end
                break
        else:
            missing.append(j)
    return missing


def json_objects(text: str) -> list[tuple[int, int, object]]:
    decoder = json.JSONDecoder()
    found = []
    for start, ch in enumerate(text):
        if ch == "{":
            try:
                value, end = decoder.raw_decode(text, start)
            except ValueError:
                continue
            found.append((start, end, value))
    return found


def exact(value):
    """A comparable form that tells 1 from 1.0 and compares floats by their bits; keys keep their order."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return (type(value).__name__, value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        return ("float", struct.pack(">d", value))
    if isinstance(value, list):
        return ("list", tuple(exact(v) for v in value))
    return ("dict", tuple((k, exact(v)) for k, v in value.items()))


# --- offline model folders -------------------------------------------------------------------------------------
def build_tokenizer(folder: str, vision: bool) -> str:
    """A byte-level tokenizer with no merges (every text decodes back as it was), saved like a model folder;
    with ``vision``, a LLaVA processor around it so ``load_tokenizer`` finds a processor as for a VL model."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    core = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                        clean_up_tokenization_spaces=False)
    if not vision:
        tokenizer.save_pretrained(folder)
        return folder
    from transformers import LlavaProcessor
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    # LLaVA-1.5's layout at a small scale: 28x28 crops in 14x14 patches, one class token dropped ("default").
    tokenizer.add_special_tokens({"additional_special_tokens": [IMAGE_TOKEN]})
    image_processor = CLIPImageProcessorPil(size={"shortest_edge": 28}, crop_size={"height": 28, "width": 28})
    processor = LlavaProcessor(image_processor=image_processor, tokenizer=tokenizer, patch_size=14,
                               vision_feature_select_strategy="default", num_additional_image_tokens=1)
    processor.save_pretrained(folder)
    return folder


def stand_in_images(folder: str, rows: list[dict], media_rows: list[int], media_dir: str) -> tuple[str, int]:
    """A media folder holding every image the rows name: the export folder's own file where it has one,
    else a generated 28x28 picture (the samples name placeholder paths)."""
    from PIL import Image

    generated = 0
    for i in media_rows:
        for image in rows[i].get("images") or []:
            target = os.path.join(media_dir, image)
            if os.path.exists(target):
                continue
            os.makedirs(os.path.dirname(target) or media_dir, exist_ok=True)
            source = os.path.join(folder, image)
            if os.path.isfile(source):
                os.symlink(source, target)
            else:
                Image.new("RGB", (28, 28), (200, 120, 40)).save(target, format="PNG")
                generated += 1
    return media_dir, generated


def print_table(results: list[dict], out) -> None:
    out.write("| file | rows | loaded | converted | template | encoded | calls intact | observations intact "
              "| answers intact | dropped / failed / altered |\n|" + "---|" * 10 + "\n")
    for r in results:
        if "error" in r:
            out.write(f"| {r['file']} | {r['rows_in_file']} | error: {r['error']} |" + " |" * 7 + "\n")
            continue
        for template, t in r["templates"].items():
            issues = [f"failed {sorted(t['failed'])}" if t["failed"] else "",
                      f"altered {sorted(t['altered'])}" if t["altered"] else "",
                      f"needs a vision template: {t['needs_vision']}" if t.get("needs_vision") else ""]
            out.write(f"| {r['file']} | {r['rows_in_file']} | {r['rows_loaded']} | {r['rows_converted']} | {template} "
                      f"| {t['rows_encoded']} | {t['calls_intact']}/{t['calls']} "
                      f"| {t['observations_intact']}/{t['observations']} | {t['answers_intact']}/{t['answers']} "
                      f"| {'; '.join(i for i in issues if i) or 'none'} |\n")


if __name__ == "__main__":
    sys.exit(main())
