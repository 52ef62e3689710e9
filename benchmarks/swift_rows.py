"""ms-swift's own load + preprocessing of agent JSONL files, every row printed; run with ms-swift's Python.

    benchmarks/.venv-swift/bin/python benchmarks/swift_rows.py ROWS.jsonl [--streaming]

Prints one JSON line per row as ``swift sft`` sees it before tokenizing (``swift.dataset.load_dataset``:
datasets' json builder, ms-swift's automatic preprocessor, unused columns dropped), with the tool schemas'
Arrow padding removed as ms-swift's ``Template.encode`` removes it. ``tests/test_ms_swift_real.py`` compares
them with what this package reads from the same files. Kept free of this package's imports: ms-swift 4.6
needs ``datasets<4.8.5``.

With ``--template-inputs`` each row also says whether ``TemplateInputs.from_dict`` takes it (the first step of
``Template.encode``, where a DPO row's ``rejected_response`` is compared with its response): its
``template_inputs_error`` is the error's type (a row ``swift rlhf`` drops) or null.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import tempfile


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("path")
    p.add_argument("--streaming", action="store_true")
    p.add_argument("--template-inputs", action="store_true")
    args = p.parse_args()
    if importlib.util.find_spec("swift") is None:  # this package's venv cannot hold it (datasets<4.8.5)
        p.error(f"ms-swift is not installed for {sys.executable}: run this with benchmarks/.venv-swift/bin/python "
                "(bash benchmarks/swift_env.sh makes it)")
    cache = tempfile.mkdtemp(prefix="swift-rows-cache-")
    os.environ.update({"MODELSCOPE_CACHE": cache, "HF_DATASETS_CACHE": os.path.join(cache, "hf"),
                       "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "USE_HF": "1"})
    try:
        from swift.dataset import load_dataset
        from swift.template.template_inputs import TemplateInputs
        from swift.utils import remove_arrow_padding

        train, _ = load_dataset(args.path, streaming=args.streaming, load_from_cache_file=False)
        for row in train:
            if args.template_inputs:
                try:
                    TemplateInputs.from_dict(row)
                    row["template_inputs_error"] = None
                except Exception as exc:  # noqa: BLE001 - every error drops the row in swift's encoding
                    row["template_inputs_error"] = type(exc).__name__
            if row.get("tools"):
                row["tools"] = [remove_arrow_padding(t) if isinstance(t, dict) else t for t in row["tools"]]
            for column in ("images", "audios", "videos"):
                row[column] = [m.get("path") if isinstance(m, dict) else m for m in row.get(column) or []]
            sys.stdout.write(json.dumps(row, ensure_ascii=False, default=repr) + "\n")
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
