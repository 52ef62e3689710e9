"""Map-style decoding of unified rows: our exact decoding vs datasets' Json() auto-decode, in one run.

    python benchmarks/bench_decode.py [--rows 20000]

Prints rows/s for: no JSON decoding (JSON leaves left as text, rows still built by datasets' own decoding),
datasets' own Json() decoding
(importing tooluse_datasets replaces ``Json.decode_example`` with an exact one: the original is put back for
that run), plain Json() columns as the package leaves them, and td.exact() decoding; the ratios between them;
and how many float arguments each decoder returned differently from the values written. Numbers are only
comparable within one run (shared machines are noisy).
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import gc
import random
import time

from datasets import Dataset, Features, Json, List

import tooluse_datasets as td
from tooluse_datasets.arrow_rows import rows_to_table
from tooluse_datasets.schema import message, tool_call, unified_row


def make_rows(n: int, seed: int = 0) -> list[dict]:
    rnd = random.Random(seed)
    rows = []
    for i in range(n):
        msgs = [message("user", "please help " * 10)]
        for k in range(3):
            args = {"x": rnd.random(), "n": rnd.randint(-10**6, 10**6), "q": "text " * 4, "nested": {"v": [rnd.random()]}}
            msgs.append(message("assistant", "", reasoning_content="thinking " * 20,
                                tool_calls=[tool_call(f"call_{k}", f"tool_{k}", args)]))
            msgs.append(message("tool", "result " * 8, tool_call_id=f"call_{k}", name=f"tool_{k}"))
        msgs.append(message("assistant", "done"))
        tools = [{"type": "function", "function": {"name": f"tool_{j}", "description": "does a thing " * 5,
                  "parameters": {"type": "object", "properties": {"x": {"type": "number"}}}}} for j in range(4)]
        rows.append(unified_row(id=f"bench/{i}", source="bench", subset="bench", tools=tools, messages=msgs,
                                meta={"i": i}))
    return rows


def floats(rows) -> list[float]:
    return [c["function"]["arguments"]["x"] for r in rows for m in r["messages"] for c in m.get("tool_calls") or []]


def rate(ds) -> tuple[float, list]:
    gc.collect()
    start = time.perf_counter()
    out = [row for row in ds]
    return len(out) / (time.perf_counter() - start), out


def without_json_decoding(ds: Dataset) -> Dataset:
    """The same table with every Json leaf left as text (datasets still walks every row's features to build it)."""
    def text(feature):
        if isinstance(feature, Json):
            return Json(decode=False)
        if isinstance(feature, List):
            return List(text(feature.feature))
        if isinstance(feature, dict):
            return {k: text(v) for k, v in feature.items()}
        return feature
    info = copy.deepcopy(ds.info)
    info.features = Features({k: text(v) for k, v in ds.features.items()})
    return Dataset(ds.data, info=info)


@contextlib.contextmanager
def datasets_own_json_decoding():
    """datasets' own ``Json.decode_example`` for the duration (the package's import replaced it)."""
    from tooluse_datasets.exact_features import _DATASETS_WRITER

    patched = Json.decode_example
    Json.decode_example = _DATASETS_WRITER["decode_example"]
    try:
        yield
    finally:
        Json.decode_example = patched


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=20000)
    args = parser.parse_args()
    if args.rows < 1:  # 0 rows ended in a ZeroDivisionError once every decoder had run
        parser.error(f"argument --rows: must be at least 1, got {args.rows}")
    rows = make_rows(args.rows)
    written = floats(rows)
    plain = Dataset(rows_to_table(rows, td.UNIFIED_FEATURES))

    text_rate, _ = rate(without_json_decoding(plain))
    with datasets_own_json_decoding():
        json_rate, json_rows = rate(plain)
    patched_rate, patched_rows = rate(plain)
    exact_rate, exact_rows = rate(td.exact(plain))
    print(f"rows: {args.rows}, float arguments: {len(written)}")
    print(f"JSON leaves left as text    : {text_rate:10,.0f} rows/s (no JSON parsed; datasets' row decoding)")
    print(f"datasets Json() auto-decode : {json_rate:10,.0f} rows/s, floats changed: "
          f"{sum(a != b for a, b in zip(floats(json_rows), written))}")
    print(f"plain Json(), package loaded: {patched_rate:10,.0f} rows/s, floats changed: "
          f"{sum(a != b for a, b in zip(floats(patched_rows), written))}")
    print(f"tooluse_datasets exact      : {exact_rate:10,.0f} rows/s, floats changed: "
          f"{sum(a != b for a, b in zip(floats(exact_rows), written))}")
    print(f"ratio exact / Json()        : {exact_rate / json_rate:10.2f}x")
    print(f"ratio exact / text left     : {exact_rate / text_rate:10.2f}x")


if __name__ == "__main__":
    main()
