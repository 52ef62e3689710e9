"""ms-swift's agent format is a file format, not one dataset: there is no default upstream to pin.

``UPSTREAM = None``, so loading needs ``data_files=`` (or ``data_dir=``); without them the shared builder
raises ``DataNotFoundError`` saying so. The format is specified by ms-swift 4.6.0 (PyPI ``ms-swift``;
docs ``docs/source_en/Instruction/Agent-support.md`` and ``Customization/Custom-dataset.md`` in GitHub
``modelscope/ms-swift``).

Hub datasets that ms-swift registers in this format (``swift sft --dataset <id>``; spec §14) are listed in
``REGISTERED_DATASETS``; those on the Hugging Face Hub load with
``data_files="hf://datasets/<repo>@<revision>/<file>"``.
"""
from typing import Optional

from tooluse_datasets.source import Upstream

UPSTREAM: Optional[Upstream] = None

# (ms-swift --dataset id, Hugging Face repo or None, what the rows look like). Informational: used in
# docs and cards, never fetched.
REGISTERED_DATASETS: tuple[tuple[str, Optional[str], str], ...] = (
    ("AI-ModelScope/function-calling-chatml", "Locutusque/function-calling-chatml",
     "112,958 rows; roles system/human/function-call/function-response/gpt; call arguments as a quoted JSON "
     "string (read through the Python-literal fallback)"),
    ("LLM-Research/xlam-function-calling-60k", "Salesforce/xlam-function-calling-60k",
     "subset default: user + tool calls, no results (call-only); subset grpo: ReAct text + solution"),
    ("swift/ToolBench", None, "124,345 rows; id, tools (text), conversations with from/value"),
    ("swift/Multimodal-Mind2Web", "osunlp/Multimodal-Mind2Web", "1,009 rows; fixed CLICK/TYPE/SELECT tools"),
)

DESCRIPTION = (
    "The agent dataset format of ms-swift (ModelScope's fine-tuning framework): rows with `messages` "
    "(roles system/user/assistant/tool_call/tool_response), `tools` as JSON text of OpenAI function tools, "
    "and optional `images`/`audios`/`videos`. The reader accepts everything ms-swift 4.6 accepts (ShareGPT "
    "from/value rows and role aliases, OpenAI tool_calls, Anthropic tool_use/tool_result blocks, Qwen-Agent "
    "tool specs, Python-literal arguments) and raises a typed error for rows ms-swift would silently drop. "
    "Registered Hub datasets in this format include Locutusque/function-calling-chatml and "
    "Salesforce/xlam-function-calling-60k (ms-swift ids AI-ModelScope/function-calling-chatml, "
    "LLM-Research/xlam-function-calling-60k) and swift/ToolBench."
)

CITATION = """@misc{zhao2024swiftascalablelightweightinfrastructure,
      title={SWIFT:A Scalable lightWeight Infrastructure for Fine-Tuning},
      author={Yuze Zhao and Jintao Huang and Jinghan Hu and Xingjun Wang and Yunlin Mao and Daoze Zhang and Zeyinzi Jiang and Zhikai Wu and Baole Ai and Ang Wang and Wenmeng Zhou and Yingda Chen},
      year={2024},
      eprint={2408.05517},
      archivePrefix={arXiv},
      primaryClass={cs.CL},
      url={https://arxiv.org/abs/2408.05517},
}"""
