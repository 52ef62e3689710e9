"""ms-swift's agent format is a file format, not one dataset: there is no default upstream to pin.

``UPSTREAM = None``, so loading needs ``data_files=`` (or ``data_dir=``); without them the shared builder
raises ``DataNotFoundError`` saying so. The format is specified by ms-swift 4.6.0 (PyPI ``ms-swift``;
docs ``docs/source_en/Instruction/Agent-support.md`` and ``Customization/Custom-dataset.md`` in GitHub
``modelscope/ms-swift``).

The reader reads files as ``swift sft --dataset path.jsonl`` reads them. ms-swift's registered agent datasets
(``swift sft --dataset <id>``; spec §14, ``REGISTERED_DATASETS``) are not all files in this format: for most
of them ms-swift runs a preprocessor of its own on the Hub files (``swift/dataset/dataset/llm.py`` and
``mllm.py``), and this reader does not:

* ``LLM-Research/xlam-function-calling-60k`` (``Salesforce/xlam-function-calling-60k``): ``query``/``answers``/
  ``tools`` columns, no messages. ms-swift's registered preprocessor makes each answer a ``tool_call``; read
  here, every row is a ``MissingFieldError`` saying so (ms-swift itself, given a copy of the file as a path,
  trains on the ``answers`` JSON as the assistant's plain text).
* ``AI-ModelScope/function-calling-chatml`` (``Locutusque/function-calling-chatml``): ``conversations`` in this
  format, but the tools are in a ``function_description`` column (tool JSON objects separated by blank lines)
  that only the registered preprocessor turns into ``tools`` (dropping the first, system message, which lists
  them as text). Read here, as from a path by ms-swift, ``tools`` is empty; the column is kept in ``meta``.
* ``swift/Multimodal-Mind2Web`` (``osunlp/Multimodal-Mind2Web``): web-action records (HTML, screenshots,
  action strings) that the registered preprocessor turns into conversations; no messages column here.
* ``swift/ToolBench`` (ModelScope only): registered without a preprocessor of its own, so its files are in this
  format and read here from local copies.
"""
from typing import Optional

from tooluse_datasets.source import Upstream

UPSTREAM: Optional[Upstream] = None

# (ms-swift --dataset id, Hugging Face repo or None, what the Hub files hold and how this reader reads them).
# Informational, never fetched.
REGISTERED_DATASETS: tuple[tuple[str, Optional[str], str], ...] = (
    ("AI-ModelScope/function-calling-chatml", "Locutusque/function-calling-chatml",
     "112,958 rows; conversations with roles system/human/function-call/function-response/gpt, call arguments "
     "as a quoted JSON string (read through the Python-literal fallback); tools only in the function_description "
     "column, which ms-swift's registered preprocessor reads and this reader keeps in meta (tools empty)"),
    ("LLM-Research/xlam-function-calling-60k", "Salesforce/xlam-function-calling-60k",
     "query/answers/tools columns, converted by ms-swift's registered preprocessor (subset default: user + "
     "tool calls, no results; subset grpo: ReAct text + solution); not readable here (no messages column)"),
    ("swift/ToolBench", None, "124,345 rows; id, tools (text), conversations with from/value; in this format "
     "(ModelScope only: read local copies)"),
    ("swift/Multimodal-Mind2Web", "osunlp/Multimodal-Mind2Web",
     "1,009 conversations built by ms-swift's registered preprocessor from web-action records, with fixed "
     "CLICK/TYPE/SELECT tools; the Hub files are not readable here (no messages column)"),
)

DESCRIPTION = (
    "The agent dataset format of ms-swift (ModelScope's fine-tuning framework): rows with `messages` "
    "(roles system/user/assistant/tool_call/tool_response), `tools` as JSON text of OpenAI function tools, "
    "and optional `images`/`audios`/`videos`. The reader accepts everything ms-swift 4.6 accepts in a data file "
    "(ShareGPT from/value rows and role aliases, OpenAI tool_calls, Anthropic tool_use/tool_result blocks, "
    "Qwen-Agent tool specs, Python-literal arguments) and raises a typed error for rows ms-swift would silently "
    "drop. Most agent datasets registered in ms-swift (xlam-function-calling-60k, function-calling-chatml, "
    "Multimodal-Mind2Web) are converted by ms-swift's own preprocessors and are not files in this format; "
    "swift/ToolBench is."
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
