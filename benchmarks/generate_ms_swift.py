"""Deterministic synthetic rows in the ms-swift agent format (``swift sft --dataset rows.jsonl``), of any size.

    python benchmarks/generate_ms_swift.py OUT.jsonl --rows 30000 [--seed 0]

The shapes are the ones ms-swift's Agent-support and Custom-dataset docs use (spec: ms_swift.md, sections
1-5 and 15): a ``messages`` list of ``{role, content}`` with roles ``system, user, assistant, tool_call,
tool_response`` (or its alias ``tool``), ``tools`` as JSON text of OpenAI function tools, ``tool_call``
contents as JSON text ``{"name", "arguments"}``, and results as JSON or plain text. Per row, at random:

* a system message first (40 %), one to four user turns, some answered without a call;
* call rounds of one to three **parallel** calls (consecutive ``tool_call`` messages, then as many results,
  paired by position), several rounds per turn;
* an assistant message right before the calls: ``<think>\\n...\\n</think>\\n`` (docs example 2), visible
  text ending with ``"\\n"`` (the hermes advice), or both;
* nested arguments (objects, lists of objects), floats at full precision and tiny or huge magnitudes,
  integers, booleans, unicode (CJK, accents, emoji), with or without ``ensure_ascii``;
* a few multimodal rows (``<image>`` in the user turn and in a tool result, ``images`` paths);
* lengths from a few hundred characters to ~40K (log-normal; lines: median ~5K, p95 ~9K characters with the JSON escaping).

Every row is valid for both ms-swift 4.6 and the ``ms_swift`` source (equal call and result counts, an
answer at the end, a system message only first). Rows depend only on ``(seed, row index)``. Vocabulary, the
parameter catalog and texts come from ``generate_toolmind`` (self-written; nothing is copied from a dataset).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from typing import Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import generate_toolmind as tm  # noqa: E402  (sibling script: vocabulary, parameters, prose)

# Parameters with values that stress exact number handling, on top of the ToolMind catalog's.
_EXTRA_PARAMS: dict[str, dict] = {
    "ratio": {"type": "number", "description": "A ratio between 0 and 1 (full precision)"},
    "tolerance": {"type": "number", "description": "Numerical tolerance, e.g. 1e-9"},
    "budget_cents": {"type": "integer", "description": "Budget in cents (may be large)"},
    "route": {"type": "array", "description": "Waypoints of a route",
              "items": {"type": "object", "properties": {"name": {"type": "string"},
                                                         "at": {"type": "object"}}}},
}
_PARAM_SCHEMAS = {name: schema for name, (schema, _) in tm._PARAMS.items()} | _EXTRA_PARAMS
_PARAM_NAMES = tuple(_PARAM_SCHEMAS)

_UNICODE_SYSTEMS = ("你是一个乐于助人的助手，可以调用工具。", "Tu es un assistant serviable. Réponds en français.",
                    "あなたは親切なアシスタントです。", "Ты полезный ассистент. 🚀")


def _tool_pool(seed: int = 4242, size: int = 300) -> tuple[dict, ...]:
    """OpenAI function tools (``description`` always present: ms-swift's react/qwen templates need one)."""
    rng = random.Random(seed)
    pool, seen = [], set()
    while len(pool) < size:
        name = f"{rng.choice(tm._VERBS)}_{rng.choice(tm._NOUNS)}"
        if name in seen:
            name = f"{name}_{len(pool)}"
        seen.add(name)
        params = rng.sample(_PARAM_NAMES, rng.randint(1, 5))
        required = [p for p in params if rng.random() < 0.6] or params[:1]
        description = f"{name.replace('_', ' ').capitalize()}: " + " ".join(rng.choices(tm._WORDS, k=rng.randint(4, 16))) + "."
        pool.append({"type": "function", "function": {
            "name": name, "description": description,
            "parameters": {"type": "object", "properties": {p: _PARAM_SCHEMAS[p] for p in params},
                           "required": required}}})
    return tuple(pool)


_POOL = _tool_pool()


class _SwiftRow:
    """One row; texts come from the ToolMind generator's row writer (same vocabulary and value kinds)."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.text = tm._RowWriter(rng, tm.GeneratorOptions(unicode_share=0.2), "synthetic")
        self.ensure_ascii = rng.random() < 0.5
        self.result_role = "tool" if rng.random() < 0.2 else "tool_response"

    def dumps(self, value) -> str:
        return json.dumps(value, ensure_ascii=self.ensure_ascii)

    def value(self, param: str):
        rng = self.rng
        if param == "ratio":
            return rng.random()
        if param == "tolerance":
            return rng.choice((1e-9, 2.5e-7, 0.1 + 0.2, 1e-300, 5e-324)) * rng.choice((1, -1))
        if param == "budget_cents":
            return rng.choice((rng.randint(0, 10**6), rng.randint(10**12, 2**63 - 1), -rng.randint(1, 10**9)))
        if param == "route":
            return [{"name": self.text.prose(rng.randint(5, 30)),
                     "at": {"lat": rng.uniform(-90, 90), "lon": rng.uniform(-180, 180),
                            "tags": rng.sample(["fuel", "food", "rest", "view"], 2)}}
                    for _ in range(rng.randint(1, 4))]
        return self.text.value(param)

    def call(self, tools: list[dict]) -> tuple[str, str]:
        fn = self.rng.choice(tools)["function"]
        props, required = fn["parameters"]["properties"], fn["parameters"]["required"]
        arguments = {p: self.value(p) for p in props if p in required or self.rng.random() < 0.5}
        return fn["name"], self.dumps({"name": fn["name"], "arguments": arguments})

    def result(self, name: str, n_chars: int) -> str:
        if self.rng.random() < 0.2:
            return self.text.prose(n_chars).capitalize() + "."  # plain-text results are allowed
        return self.text.tool_output(name, n_chars)

    def pre_call_text(self, n_chars: int) -> Optional[str]:
        kind = self.rng.random()
        think = f"<think>\n{self.text.prose(n_chars)}\n</think>\n"
        if kind < 0.40:
            return think
        if kind < 0.55:
            return think + self.text.prose(self.rng.randint(20, 120)).capitalize() + ":\n"
        if kind < 0.70:
            return self.text.prose(self.rng.randint(20, 160)).capitalize() + ".\n"
        return None

    def build(self) -> dict:
        rng = self.rng
        tools = rng.sample(_POOL, rng.randint(1, 6))
        budget = min(max(math.exp(rng.gauss(math.log(900), 0.8)), 150), 40_000)
        turns = rng.choices((1, 2, 3, 4), weights=(55, 25, 12, 8))[0]
        rounds = [0 if rng.random() < 0.15 else rng.choices((1, 2, 3), weights=(70, 22, 8))[0] for _ in range(turns)]
        # Elastic parts: per round its reasoning and its results, per turn its answer.
        pieces = sum(2 * r + 1 for r in rounds)
        size = lambda: max(20, int(budget / pieces * rng.uniform(0.4, 1.6)))  # noqa: E731

        messages: list[dict] = []
        if rng.random() < 0.4:
            system = rng.choice(_UNICODE_SYSTEMS) if self.text.unicode else "You are a helpful assistant with tools."
            messages.append({"role": "system", "content": system + " " + self.text.prose(rng.randint(0, 200))})
        images: list[str] = []
        for t, n_rounds in enumerate(rounds):
            question = self.text.prose(rng.randint(20, 300)).capitalize() + "?"
            if t == 0 and rng.random() < 0.04:
                images = [f"images/{rng.randint(0, 10**6):07d}.jpg" for _ in range(rng.randint(1, 2))]
                question = "<image>" + question
            messages.append({"role": "user", "content": question})
            for r in range(n_rounds):
                before = self.pre_call_text(size())
                if before is not None:
                    messages.append({"role": "assistant", "content": before})
                calls = [self.call(tools) for _ in range(rng.choices((1, 2, 3), weights=(60, 30, 10))[0])]
                messages += [{"role": "tool_call", "content": content} for _, content in calls]
                for k, (name, _) in enumerate(calls):
                    content = self.result(name, size())
                    if len(images) == 2 and t == 0 and r == 0 and k == 0:
                        content = self.dumps({"images": "<image>", "status": "success"})
                    messages.append({"role": self.result_role, "content": content})
            messages.append({"role": "assistant", "content": self.text.prose(size()).capitalize() + "."})
        row = {"tools": self.dumps(tools), "messages": messages}
        if images:
            row["images"] = images
        return row


def generate_row(index: int, seed: int = 0) -> dict:
    """Row ``index`` as a Python object (the JSONL line is ``json.dumps`` of it)."""
    return _SwiftRow(random.Random(f"ms_swift/{seed}/{index}")).build()


def write_jsonl(path: str, num_rows: int, seed: int = 0) -> dict:
    """Write ``num_rows`` rows to ``path`` (one JSON object per line); returns statistics."""
    started = time.perf_counter()
    lengths, calls, tmp = [], 0, f"{path}.partial"
    with open(tmp, "w", encoding="utf-8") as f:
        for i in range(num_rows):
            row = generate_row(i, seed)
            # Half the lines keep non-ASCII unescaped (as the zh doc rows do), half escape it (json.dumps' default).
            line = json.dumps(row, ensure_ascii=i % 2 == 0)
            lengths.append(len(line))
            calls += sum(m["role"] == "tool_call" for m in row["messages"])
            f.write(line + "\n")
    os.replace(tmp, path)
    lengths.sort()
    n = len(lengths)
    return {"rows": n, "calls": calls, "seconds": round(time.perf_counter() - started, 1),
            "bytes": os.path.getsize(path), "p50": lengths[n // 2] if n else 0,
            "p95": lengths[int(n * 0.95)] if n else 0, "max": lengths[-1] if n else 0}


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", help="output .jsonl path")
    p.add_argument("--rows", type=tm.positive_int, default=30_000)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    print(json.dumps(write_jsonl(args.out, args.rows, args.seed)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
