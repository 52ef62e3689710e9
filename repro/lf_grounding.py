"""ms-swift grounding rows (objects column) exported to LLaMA-Factory lose their objects: the <ref-object>/<bbox>
tags would be trained as text. The swift writer refuses them; the llamafactory writer wrote them."""
import json, sys, tempfile, os, tooluse_datasets as td
d = tempfile.mkdtemp(); p = os.path.join(d, "ground.jsonl")
open(p, "w").write(json.dumps({"messages": [{"role": "user", "content": "<image>Find the <ref-object>"},
    {"role": "assistant", "content": "<bbox>"}], "images": ["cat.png"],
    "objects": {"ref": ["cat"], "bbox": [[90.9, 160.8, 135, 212.8]]}}) + "\n")
try:
    ds = td.load("ms_swift", "llamafactory", data_files=p, split="train", cache_dir=d)
    print("WRITTEN (defect):", ds[0]["conversations"]); sys.exit(1)
except td.ConversionError as e:
    print("refused:", e)
