"""Deterministic synthetic data in the ToolMind (cleaned & rectified) format, of any size.

    python benchmarks/generate_toolmind.py OUT.parquet --rows 279737 [--seed 0] [--workers 2]

What it models (upstream facts from the card and viewer; everything else is an assumption, marked):

* columns ``messages`` (JSON string of ``[{role, content}]``, Python ``json.dumps`` spacing) and ``split``;
  one zstd Parquet file, rows grouped by ``split`` in the card's order (the viewer's first rows are
  ``synthetic``), the seven values in the card's proportions;
* roles and wrappers of the card, every row valid under its FSM: ``system (user reasoning (tool_call
  tool_output reasoning)* answer)+`` - multi-turn loops and several calls per user turn;
* ``messages`` lengths from ~1.3K to ~131K characters: a log-normal budget (median 5.7K, p95 ~25K, as
  measured on a comparable file) split over long reasoning, tool outputs and answers;
* per-split flavour (assumed from the original datasets): xLAM / When2Call rows carry Python-typed parameter
  blocks, APIGen-MT / tau rows long policy instructions and many turns, When2Call often answers without a
  call; tool catalogs in several layouts (JSON array, one object per line, ``<tools>`` block, pretty
  printed) because the real layout is unpublished; unicode text and nested arguments in some rows.

Every text is written here (a small vocabulary, templates); nothing is copied from the dataset.
Rows depend only on ``(seed, row index, number of rows)``, not on the number of workers.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Iterator, Optional

import pyarrow as pa
import pyarrow.parquet as pq

from tooluse_datasets.builders.toolmind.system_prompt import PROTOCOL_TEXT

# (split value, rows in the card); the order is the card's and the file's.
CARD_SPLITS: tuple[tuple[str, int], ...] = (
    ("synthetic", 127_863),
    ("xlam-function-calling-60k", 64_897),
    ("APIGen-MT-5k", 23_546),
    ("glaive-function-calling-v2", 18_401),
    ("When2Call", 17_492),
    ("BUTTONInstruct", 14_659),
    ("tau-train", 12_879),
)
CARD_TOTAL = sum(n for _, n in CARD_SPLITS)

# The protocol text the reader expects (card-verbatim items 1-4; see builders/toolmind/system_prompt.py).
PROTOCOL = PROTOCOL_TEXT

# --------------------------------------------------------------------------------------------------
# Vocabulary (self-written)
# --------------------------------------------------------------------------------------------------

_WORDS = (
    "the a an of to and in for on with that this it is are was be can will should would could may "
    "user request tool call result value order flight hotel booking price date time city account "
    "check verify confirm update cancel search list create return need needs want wants using use "
    "first then next after before because since so therefore however also only each every all some "
    "data field parameter argument response output input error status total amount number count "
    "available required optional valid invalid current previous following specific correct exact "
    "customer agent policy payment method card refund exchange item items product products shipment "
    "address email phone name id identifier reservation passenger passengers seat cabin baggage "
    "weather forecast temperature location latitude longitude region country currency rate market "
    "stock share portfolio recipe ingredient movie song artist album news article page query filter "
    "look looks looking seems appears means mean show shows returned returns provided provide gives "
    "information details summary answer question step steps plan approach option options case cases "
    "here there now still already again maybe probably likely clearly simply directly carefully "
    "compute calculate convert compare match sort group count aggregate estimate round format parse "
    "Okay, Alright, Hmm, Wait, Actually, So, Next, Finally, First, Then, Also, But, Now, Let me "
    "think. check. see. verify. proceed. continue. done. right. clear. correct. fine. needed. enough. "
    "request, result, value, order, date, price, city, status, tool, call, data, user, step, case, "
    "(if not) (optional) (in USD) (per night) (local time) 2024-05-15 10:00 3.5 42 100 7 0.25 1,200"
).split()
_UNICODE_WORDS = (
    "café naïve résumé über straße Zürich São Paulo México Kraków Ångström façade jalapeño "
    "東京 北京 上海 数据 工具 调用 天気 予約 ありがとう 서울 예약 감사합니다 Москва данные Привет "
    "القاهرة بيانات שלום ΑΘΗΝΑ δεδομένα 🚀 ✈️ 🏨 📦 ✅ 🌦️ €12.50 ¥3,000 £40 ±0.5 °C — … «quoted» „Zitat“"
).split()

_VERBS = ("get", "search", "list", "create", "update", "cancel", "fetch", "calculate", "convert", "find",
          "book", "check", "send", "translate", "schedule", "estimate", "lookup", "validate", "summarize", "track")
_NOUNS = ("weather", "flights", "hotels", "order", "reservation", "stock_price", "exchange_rate", "recipe",
          "movie", "song", "news", "user_profile", "invoice", "shipment", "route", "restaurant", "book",
          "package", "ticket", "product", "payment", "timezone", "distance", "nutrition", "playlist")

_POLICY_TOPICS = ("Booking", "Modification", "Cancellation", "Refunds", "Baggage", "Payment", "Identity",
                  "Exchanges", "Returns", "Compensation", "Escalation", "Privacy")

# --------------------------------------------------------------------------------------------------
# Parameters and tools
# --------------------------------------------------------------------------------------------------

# name -> (JSON Schema, Python-ish type used by xLAM-style blocks)
_PARAMS: dict[str, tuple[dict, str]] = {
    "city": ({"type": "string", "description": "City name, e.g. Paris"}, "str"),
    "query": ({"type": "string", "description": "Free-text search query"}, "str"),
    "date": ({"type": "string", "description": "Date in YYYY-MM-DD format"}, "str"),
    "user_id": ({"type": "string", "description": "Identifier of the user"}, "str"),
    "order_id": ({"type": "string", "description": "Order identifier such as #W1234567"}, "str"),
    "limit": ({"type": "integer", "description": "Maximum number of results", "minimum": 1}, "int"),
    "max_price": ({"type": "number", "description": "Upper price bound"}, "float"),
    "include_details": ({"type": "boolean", "description": "Whether to include details"}, "bool"),
    "tags": ({"type": "array", "items": {"type": "string"}, "description": "Tags to match"}, "List[str]"),
    "ids": ({"type": "array", "items": {"type": "integer"}, "description": "Numeric ids"}, "List[int]"),
    "currency": ({"type": "string", "enum": ["USD", "EUR", "JPY", "GBP"], "description": "ISO currency"}, "str"),
    "language": ({"type": "string", "enum": ["en", "fr", "de", "zh", "ja"], "description": "Language code"},
                 "str, optional"),
    "coordinates": ({"type": "object", "description": "A point",
                     "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
                     "required": ["lat", "lon"]}, "Dict"),
    "filters": ({"type": "object", "description": "Nested filters",
                 "properties": {"price": {"type": "object", "properties": {"min": {"type": "number"},
                                                                          "max": {"type": "number"}}},
                                "categories": {"type": "array", "items": {"type": "string"}},
                                "in_stock": {"type": "boolean"}}}, "Dict"),
    "passengers": ({"type": "array", "description": "Travellers",
                    "items": {"type": "object", "properties": {"first_name": {"type": "string"},
                                                               "last_name": {"type": "string"},
                                                               "dob": {"type": "string"}}}}, "List[Dict]"),
    "amount": ({"type": "number", "description": "Amount of money"}, "float"),
}
_PARAM_NAMES = tuple(_PARAMS)


@dataclass(frozen=True)
class _Tool:
    name: str
    description: str
    params: tuple[str, ...]
    required: tuple[str, ...]


def _tool_pool(seed: int = 12345, size: int = 400) -> tuple[_Tool, ...]:
    rng = random.Random(seed)
    tools, seen = [], set()
    while len(tools) < size:
        name = f"{rng.choice(_VERBS)}_{rng.choice(_NOUNS)}"
        if name in seen:
            name = f"{name}_v{len(tools)}"
        seen.add(name)
        params = tuple(rng.sample(_PARAM_NAMES, rng.randint(1, 5)))
        required = tuple(p for p in params if rng.random() < 0.6) or params[:1]
        desc = f"{name.replace('_', ' ').capitalize()} " + " ".join(rng.choices(_WORDS, k=rng.randint(4, 14))) + "."
        tools.append(_Tool(name, desc, params, required))
    return tuple(tools)


_POOL = _tool_pool()


def _openai_tool(t: _Tool) -> dict:
    return {"type": "function", "function": {
        "name": t.name, "description": t.description,
        "parameters": {"type": "object", "properties": {p: _PARAMS[p][0] for p in t.params},
                       "required": list(t.required)}}}


def _xlam_tool(t: _Tool) -> dict:
    block = {}
    for p in t.params:
        spec = {"description": _PARAMS[p][0]["description"], "type": _PARAMS[p][1]}
        if p not in t.required:
            spec["default"] = ""
        block[p] = spec
    return {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": block}}


def _when2call_tool(t: _Tool) -> dict:
    props = {p: {"description": _PARAMS[p][0]["description"], "type": _PARAMS[p][1]} for p in t.params}
    return {"name": t.name, "description": t.description, "parameters": {"type": "dict", "properties": props},
            "required": list(t.required)}


_TOOL_STYLES = {"openai": _openai_tool, "xlam": _xlam_tool, "when2call": _when2call_tool}


def _catalog_text(tools: list[dict], layout: str, ensure_ascii: bool) -> str:
    if layout == "array":
        return "## Available Tools\n\n" + json.dumps(tools, ensure_ascii=ensure_ascii)
    if layout == "tools_block":
        return ("You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
                + "\n".join(json.dumps(t, ensure_ascii=ensure_ascii) for t in tools) + "\n</tools>")
    if layout == "pretty":
        return ("## Available Tools\n\n"
                + "\n\n".join(json.dumps(t, ensure_ascii=ensure_ascii, indent=4) for t in tools))
    return "## Available Tools\n\n" + "\n".join(json.dumps(t, ensure_ascii=ensure_ascii) for t in tools)


# --------------------------------------------------------------------------------------------------
# Split flavours
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Flavor:
    user_turns: tuple[int, int]
    calls_per_turn: tuple[int, int]
    direct_answer_p: float      # probability that a user turn gets no call
    tools: tuple[int, int]
    tool_style: str
    layout: str
    instructions: str           # none | short | policy
    length_scale: float         # multiplies the length budget


FLAVORS: dict[str, Flavor] = {
    "synthetic": Flavor((1, 2), (1, 3), 0.10, (1, 5), "openai", "lines", "none", 1.0),
    "xlam-function-calling-60k": Flavor((1, 1), (1, 4), 0.05, (1, 5), "xlam", "array", "none", 0.6),
    "APIGen-MT-5k": Flavor((2, 8), (0, 3), 0.35, (8, 14), "openai", "tools_block", "policy", 2.2),
    "glaive-function-calling-v2": Flavor((1, 3), (0, 1), 0.45, (1, 2), "openai", "pretty", "short", 0.7),
    "When2Call": Flavor((1, 1), (0, 1), 0.60, (1, 4), "when2call", "array", "none", 0.5),
    "BUTTONInstruct": Flavor((1, 1), (2, 4), 0.0, (2, 6), "openai", "lines", "short", 1.1),
    "tau-train": Flavor((2, 6), (1, 4), 0.25, (10, 15), "openai", "tools_block", "policy", 2.5),
}


@dataclass(frozen=True)
class GeneratorOptions:
    seed: int = 0
    ensure_ascii: bool = True         # Python's json.dumps default, assumed for the upstream converter
    median_chars: int = 4_000
    sigma: float = 0.9                # log-normal spread: p95 ~ 4.4 x median
    min_chars: int = 1_280
    max_chars: int = 131_000
    unicode_share: float = 0.15       # rows whose texts mix in non-ASCII words
    padded_share: float = 0.03        # rows written <tag>\n...\n</tag> (DR-Tulu style)


def split_counts(num_rows: int) -> list[tuple[str, int]]:
    """Rows per split in the card's proportions (largest remainder); every split gets one row when
    ``num_rows >= 7``."""
    exact = [(value, num_rows * n / CARD_TOTAL) for value, n in CARD_SPLITS]
    counts = {value: int(math.floor(x)) for value, x in exact}
    if num_rows >= len(CARD_SPLITS):
        for value in counts:
            counts[value] = max(counts[value], 1)
    remainder = num_rows - sum(counts.values())
    order = sorted(exact, key=lambda vx: vx[1] - math.floor(vx[1]), reverse=True)
    i = 0
    while remainder != 0:
        value = order[i % len(order)][0]
        if remainder > 0:
            counts[value] += 1
            remainder -= 1
        elif counts[value] > 1:
            counts[value] -= 1
            remainder += 1
        i += 1
    return [(value, counts[value]) for value, _ in CARD_SPLITS]


def split_of_rows(num_rows: int) -> list[str]:
    return [value for value, n in split_counts(num_rows) for _ in range(n)]


# --------------------------------------------------------------------------------------------------
# One row
# --------------------------------------------------------------------------------------------------


class _RowWriter:
    def __init__(self, rng: random.Random, opts: GeneratorOptions, split: str):
        self.rng = rng
        self.opts = opts
        self.flavor = FLAVORS[split]
        self.unicode = rng.random() < opts.unicode_share
        self.padding = "\n" if rng.random() < opts.padded_share else ""
        self.vocab = _WORDS + _UNICODE_WORDS if self.unicode else _WORDS

    def prose(self, n_chars: int) -> str:
        words = self.rng.choices(self.vocab, k=max(3, n_chars // 6))
        text = " ".join(words)
        return text[:n_chars].rstrip() if len(text) > n_chars else text

    def wrap(self, text: str, tag: str) -> str:
        return f"<{tag}>{self.padding}{text}{self.padding}</{tag}>"

    def value(self, param: str):
        rng = self.rng
        schema = _PARAMS[param][0]
        t = schema["type"]
        if "enum" in schema:
            return rng.choice(schema["enum"])
        if t == "string":
            if param == "date":
                return f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
            if param == "order_id":
                return f"#W{rng.randint(1_000_000, 9_999_999)}"
            return " ".join(rng.choices(self.vocab, k=rng.randint(1, 4)))
        if t == "integer":
            return rng.randint(1, 500)
        if t == "number":
            return round(rng.uniform(-500, 5000), rng.randint(0, 4))
        if t == "boolean":
            return rng.random() < 0.5
        if param == "coordinates":
            return {"lat": round(rng.uniform(-90, 90), 6), "lon": round(rng.uniform(-180, 180), 6)}
        if param == "filters":
            return {"price": {"min": rng.randint(0, 50), "max": round(rng.uniform(50, 900), 2)},
                    "categories": rng.sample(["books", "garden", "toys", "audio", "travel", "food"], 2),
                    "in_stock": rng.random() < 0.7}
        if param == "passengers":
            return [{"first_name": rng.choice(self.vocab), "last_name": rng.choice(self.vocab),
                     "dob": f"19{rng.randint(40, 99)}-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}"}
                    for _ in range(rng.randint(1, 3))]
        if param == "ids":
            return [rng.randint(1, 10**6) for _ in range(rng.randint(1, 6))]
        return rng.sample(["urgent", "weekend", "family", "budget", "premium", "eco"], rng.randint(1, 3))

    def tool_output(self, name: str, n_chars: int) -> str:
        rng = self.rng
        if n_chars > 3000 and rng.random() < 0.5:
            # A scraped page / long text result (HTML-ish, angle brackets inside the wrapper).
            return f"<html><body><h1>{self.prose(40)}</h1><p>{self.prose(n_chars - 60)}</p></body></html>"
        records, size = [], 40
        while size < n_chars:
            record = {"id": rng.randint(1, 10**7), "name": self.prose(rng.randint(8, 40)),
                      "score": round(rng.random(), 3), "tags": rng.sample(["a", "b", "c", "d", "e"], 2),
                      "note": self.prose(rng.randint(20, 160))}
            records.append(record)
            size += 120 + len(record["name"]) + len(record["note"])
        return json.dumps({"tool": name, "status": "success", "results": records},
                          ensure_ascii=self.opts.ensure_ascii)

    def instructions(self) -> str:
        kind = self.flavor.instructions
        if kind == "short":
            return "You are a helpful assistant. " + self.prose(self.rng.randint(60, 300))
        if kind == "policy":
            title = self.rng.choice(("Retail", "Airline"))
            sections = [f"# {title} Agent Policy\n\nThe current time is 2024-05-15 15:00:00 EST. " + self.prose(300)]
            for topic in self.rng.sample(_POLICY_TOPICS, self.rng.randint(3, 7)):
                bullets = "\n".join(f"- {self.prose(self.rng.randint(80, 400))}" for _ in range(self.rng.randint(2, 6)))
                sections.append(f"## {topic}\n\n{bullets}")
            return "\n\n".join(sections)
        return ""

    def row(self) -> str:
        rng, flavor, opts = self.rng, self.flavor, self.opts
        ea = opts.ensure_ascii
        tools = rng.sample(_POOL, rng.randint(*flavor.tools))
        schema = [_TOOL_STYLES[flavor.tool_style](t) for t in tools]
        system = PROTOCOL + "\n\n" + _catalog_text(schema, flavor.layout, ea)
        instructions = self.instructions()
        if instructions:
            system += "\n\n" + instructions

        # The skeleton: who speaks when, and which calls are made.
        turns = []
        for _ in range(rng.randint(*flavor.user_turns)):
            n_calls = 0 if rng.random() < flavor.direct_answer_p else rng.randint(*flavor.calls_per_turn)
            calls = []
            for _ in range(n_calls):
                t = rng.choice(tools)
                args = {p: self.value(p) for p in t.params if p in t.required or rng.random() < 0.5}
                calls.append((t.name, args))
            turns.append(calls)

        budget = math.exp(rng.gauss(math.log(opts.median_chars), opts.sigma)) * flavor.length_scale
        budget = min(max(budget, opts.min_chars), opts.max_chars)
        text = self.fill(system, turns, budget)
        if len(text) > opts.max_chars:  # escaping and fixed parts overshot: one smaller retry, then the shortest row
            text = self.fill(system, turns, budget * opts.max_chars / len(text) * 0.9)
        if len(text) > opts.max_chars:
            text = self.fill(system, turns[:1], opts.min_chars)
        return text

    def fill(self, system: str, turns: list[list[tuple[str, dict]]], budget: float) -> str:
        """The messages text with the elastic parts (reasoning weight ~3, tool outputs ~2, answers ~1)
        sized so that the whole is about ``budget`` characters."""
        rng, ea = self.rng, self.opts.ensure_ascii
        fixed = len(system) + 250 * len(turns) + sum(90 + len(json.dumps(a)) for calls in turns for _, a in calls)
        weights = []
        for calls in turns:
            for _ in calls:
                weights += [3.0 * rng.random() + 0.2, 2.0 * rng.expovariate(1.0) + 0.1]
            weights += [3.0 * rng.random() + 0.2, 1.0 * rng.random() + 0.1]
        room = max(budget - fixed, 0.0) * 0.92  # JSON escaping and wrappers take the rest
        total_w = sum(weights) or 1.0
        sizes = iter([max(40, int(room * w / total_w)) for w in weights])

        messages = [{"role": "system", "content": system}]
        for calls in turns:
            messages.append({"role": "user", "content": self.prose(rng.randint(40, 400)).capitalize() + "?"})
            for name, args in calls:
                messages.append({"role": "reasoning",
                                 "content": self.wrap(f"Okay, I need {name} for this. " + self.prose(next(sizes)), "think")})
                call = json.dumps({"name": name, "arguments": args}, ensure_ascii=ea)
                messages.append({"role": "tool_call", "content": self.wrap(call, "tool_call")})
                messages.append({"role": "tool_output",
                                 "content": self.wrap(self.tool_output(name, next(sizes)), "tool_response")})
            messages.append({"role": "reasoning",
                             "content": self.wrap("I can answer now. " + self.prose(next(sizes)), "think")})
            messages.append({"role": "answer", "content": self.wrap(self.prose(next(sizes)).capitalize() + ".", "answer")})
        return json.dumps(messages, ensure_ascii=ea)


def row_rng(seed: int, index: int) -> random.Random:
    return random.Random(seed * 1_000_003 + index)


def generate_row(index: int, split: str, opts: GeneratorOptions) -> str:
    """The ``messages`` text of row ``index``."""
    return _RowWriter(row_rng(opts.seed, index), opts, split).row()


def _generate_chunk(args: tuple[int, list[str], GeneratorOptions]) -> list[str]:
    start, splits, opts = args
    return [generate_row(start + i, split, opts) for i, split in enumerate(splits)]


def generate_rows(num_rows: int, opts: Optional[GeneratorOptions] = None) -> Iterator[dict]:
    """Rows ``{"messages": str, "split": str}`` in file order (in this process)."""
    opts = opts or GeneratorOptions()
    for index, split in enumerate(split_of_rows(num_rows)):
        yield {"messages": generate_row(index, split, opts), "split": split}


# The bundled sample (builders/toolmind/dummy_data/): every split, short rows, more unicode and padded
# wrappers than the default mix, small row groups so that split pruning has something to skip.
SAMPLE_ROWS = 21
SAMPLE_OPTIONS = GeneratorOptions(seed=2026, max_chars=6_000, unicode_share=0.3, padded_share=0.1)
SAMPLE_ROW_GROUP_SIZE = 4

SCHEMA = pa.schema([pa.field("messages", pa.string()), pa.field("split", pa.string())])


def write_parquet(path: str, num_rows: int, opts: Optional[GeneratorOptions] = None, *,
                  row_group_size: int = 2_000, workers: int = 1) -> dict:
    """Write ``num_rows`` rows to ``path`` (zstd, ``row_group_size`` rows per group); returns statistics."""
    opts = opts or GeneratorOptions()
    splits = split_of_rows(num_rows)
    chunks = [(s, splits[s: s + row_group_size], opts) for s in range(0, num_rows, row_group_size)]
    tmp = f"{path}.partial"
    lengths: list[int] = []
    started = time.perf_counter()
    with pq.ParquetWriter(tmp, SCHEMA, compression="zstd") as writer:
        results = (ProcessPoolExecutor(workers).map(_generate_chunk, chunks) if workers > 1
                   else map(_generate_chunk, chunks))
        for (start, chunk_splits, _), texts in zip(chunks, results):
            lengths.extend(len(t) for t in texts)
            writer.write_table(pa.table({"messages": texts, "split": chunk_splits}, schema=SCHEMA),
                               row_group_size=row_group_size)
    os.replace(tmp, path)
    lengths.sort()
    n = len(lengths)
    return {
        "rows": n, "seconds": round(time.perf_counter() - started, 1), "bytes": os.path.getsize(path),
        "text_chars": sum(lengths), "p50": lengths[n // 2] if n else 0, "p95": lengths[int(n * 0.95)] if n else 0,
        "min": lengths[0] if n else 0, "max": lengths[-1] if n else 0,
        "splits": dict(split_counts(num_rows)),
    }


def positive_int(text: str) -> int:
    """A size or count: 0 or less is refused (negative rows wrote an empty file with negative split counts)."""
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", help="output .parquet path")
    p.add_argument("--rows", type=positive_int, default=CARD_TOTAL)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=positive_int, default=os.cpu_count() or 1)
    p.add_argument("--row-group-size", type=positive_int, default=2_000)
    p.add_argument("--max-chars", type=positive_int, default=GeneratorOptions.max_chars)
    p.add_argument("--utf8", action="store_true", help="json.dumps(ensure_ascii=False) instead of the default")
    p.add_argument("--sample", action="store_true",
                   help="write the bundled sample (fixed size and options; ignores the other options)")
    args = p.parse_args(argv)
    if args.sample:
        stats = write_parquet(args.out, SAMPLE_ROWS, SAMPLE_OPTIONS, row_group_size=SAMPLE_ROW_GROUP_SIZE)
    else:
        opts = GeneratorOptions(seed=args.seed, ensure_ascii=not args.utf8, max_chars=args.max_chars)
        stats = write_parquet(args.out, args.rows, opts, row_group_size=args.row_group_size, workers=args.workers)
    print(json.dumps(stats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
