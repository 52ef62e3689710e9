"""NESTFUL's official metrics (spec sections 9-12), computed as upstream's ``src/scorer.py`` at the pinned
revision computes them, quirks included, without its code or its dependencies (sklearn, the executable
functions in-process).

Per sample, a parser turns the model's text into calls; upstream then works on two views of them:

* **grounded calls** for the match metrics: each label inside a reference is replaced by the name of the
  function that produced it (``"$var_1.result$"`` -> ``"$divide.result$"``), labels are dropped and
  ``var_result`` pseudo-calls skipped, so label spelling does not matter (and repeated calls of one
  function become indistinguishable). The ``json``/``calls`` parsers ground only when the text contains
  ``label``, as upstream's JSON parsers do; ``hermes`` always grounds.
* **the parsed calls as they are** (labels included) for the win rate: they are executed.

Metrics (``f1_intent``, ``f1_slot``: sklearn macro F1 over a MultiLabelBinarizer fitted on the gold lists,
where one label only makes a binary problem averaged over its two classes, as sklearn does;
``partial_sequence_accuracy``: per sample, calls rendered ``name(k1 = v1, k2 = v2)`` with sorted
arguments, greedy name alignment when lengths differ, fraction of equal positions, mean over samples;
``full_sequence_accuracy``: share of samples at 1; ``win_rate``: share whose predicted sequence executes to
the gold answer, checked in the sandbox). Where upstream has plain bugs, ``corrected=True`` fixes them
(listed in the README); the default matches published figures.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import statistics
from collections import Counter
from typing import Any, Iterable, Iterator, Mapping, Optional, Sequence, Union

from tooluse_datasets.codec import dumps, loads
from tooluse_datasets.errors import (InvalidJsonError, InvalidValueError, JsonValueError, MissingFieldError,
                                     ToolUseDataError, json_kind, one_line, shown)
from tooluse_datasets.shards.files import open_text_file
from tooluse_datasets.shards.json_text import first_line

from .execution import SandboxLimits, SequenceJob, SequenceResult, one_folder, run_sequences
from .execution import executable_functions as functions_folder
from .execution.sandbox import ISOLATION
from .gold import NULL_TEXT, decode_gold_answer, has_gold_answer, text_column_note
from .source import NestfulSource
from .specs import output_fields

PARSERS = ("json", "hermes", "calls")
DUMMY_CALL = '{"name": "dummy", "arguments": {}}'  # a placeholder call upstream's metrics skip
END_OF_TEXT = "<|endoftext|>"  # removed from every call's JSON before the metrics read it
_TOOL_CALL_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


class GroundingError(ValueError):
    """The calls cannot be grounded (a call that is not an object with a name, a non-object arguments...)."""


# -- parsing -------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class ParsedPrediction:
    """``calls``: what the match metrics read (grounded where upstream grounds); ``executed``: what the win
    check runs (the parsed value, ungrounded, even when grounding failed); ``parse_error``: upstream's flag;
    ``detail``: why it is a parse error, or what the parser left out of the text (Hermes blocks that are not
    JSON, as upstream skips them), so a sample's score says what became of the model's output."""

    calls: list
    executed: Any
    parse_error: bool = False
    detail: Optional[str] = None


def parse_prediction(prediction: Any, parser: str = "json") -> ParsedPrediction:
    """Parse one model output. Text goes through ``parser``; an already-parsed list of calls is scored as
    the ``json`` parser scores its JSON text."""
    if parser not in PARSERS:
        raise ValueError(f"parser must be one of {PARSERS}, got {parser!r}")
    if prediction is None:
        return ParsedPrediction([], [], True, "no output (null)")
    if not isinstance(prediction, str):
        # Python's json, as upstream: NaN survives, and 'label' is looked for in this text.
        try:
            prediction = json.dumps(prediction)
        except (TypeError, ValueError, RecursionError) as exc:
            return ParsedPrediction([], [], True, f"the calls cannot be written as JSON ({_reason(exc)})")
        return _parse_json(prediction)
    return _parse_hermes(prediction) if parser == "hermes" else _parse_json(prediction)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested deeper than Python's stack"
    # The parser's message and position, without Python's class name ("JSONDecodeError: "): the detail is about
    # the model's text.
    return one_line(str(exc) or type(exc).__name__)[:300]


def _not_json(text: str, exc: BaseException) -> str:
    """Why a model's text is no JSON, in the words a researcher looks for (empty, cut off, text around it)."""
    if not text.strip():
        return "the output is empty"
    message, position = str(exc), getattr(exc, "pos", None)
    if message.startswith("Unterminated") or (message.startswith("Expecting") and position is not None
                                               and position >= len(text.rstrip())):
        return f"not JSON: the text ends inside the JSON (cut off?) ({_reason(exc)})"
    if message.startswith("Extra data"):
        return f"not JSON: text after the JSON ({_reason(exc)})"
    if "<tool_call>" in text:
        return f"not JSON: <tool_call> blocks, which the hermes parser reads ({_reason(exc)})"
    if position is not None and position == len(text) - len(text.lstrip()) and ("[" in text or "{" in text):
        return f"not JSON: text before the JSON ({_reason(exc)})"
    return f"not JSON ({_reason(exc)})"


def _parse_json(text: str) -> ParsedPrediction:
    """Upstream's plain-JSON parser (DeepSeek's; Granite-3.1's after stripping its call token)."""
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError) as exc:  # nesting deeper than Python's stack: unparsable like any bad JSON
        return ParsedPrediction([], [], True, _not_json(text, exc))
    if "label" in text:
        try:
            return ParsedPrediction(ground(parsed), parsed)
        except GroundingError as exc:
            return ParsedPrediction([], parsed, True, f"the calls cannot be grounded ({exc})")
    # Ungrounded, upstream reads whatever the JSON iterates to: object keys, a string's characters (each
    # then fails as a call). A number or null makes upstream's scorer crash; here it is a parse error.
    if isinstance(parsed, (list, dict, str)):
        return ParsedPrediction(list(parsed), parsed)
    return ParsedPrediction([], parsed, True, f"a JSON {json_kind(parsed)}, not a list of calls")


def _parse_hermes(text: str) -> ParsedPrediction:
    """``<tool_call>{...}</tool_call>`` blocks (upstream's Hermes parser): blocks that are not JSON are
    skipped; no block at all is a parse error; the calls are always grounded. ``detail`` says what was
    skipped, and an unclosed ``<tool_call>`` after the last block (an output cut off), which no block reads."""
    text = text.strip()
    if text.startswith("tool_call\n{"):
        text = text.replace("tool_call\n{", "<tool_call>\n{")
    parsed, skipped = [], []
    blocks = _TOOL_CALL_BLOCK.findall(text)
    for number, block in enumerate(blocks, 1):
        try:
            parsed.append(json.loads(block.strip()))
        except (ValueError, RecursionError) as exc:
            skipped.append(f"block {number} of {len(blocks)} is not JSON ({_reason(exc)})")
            continue
    after_last_block = text[text.rfind("</tool_call>"):] if "</tool_call>" in text else text
    if "<tool_call>" in after_last_block:
        skipped.append("a <tool_call> without its </tool_call> (the output cut off?) is not read")
    detail = "; ".join(skipped) or None
    if not parsed:
        return ParsedPrediction([], parsed, True, "the output is empty" if not text else
                                detail or "no <tool_call>...</tool_call> block in the output")
    try:
        return ParsedPrediction(ground(parsed), parsed, detail=detail)
    except GroundingError as exc:
        return ParsedPrediction([], parsed, True, "; ".join(filter(None, [f"the calls cannot be grounded ({exc})",
                                                                            detail])))


def _refers_to(label: str, value: str) -> bool:
    return value.startswith("$var") and "." in value and value.split(".", 1)[0].replace("$", "") == label


def ground(calls: Any) -> list[dict]:
    """Upstream's grounding: ``{name, arguments}`` per call, ``var_result`` calls skipped, and every label in
    a whole-string reference (top level or directly in a list) replaced by its producer's name."""
    try:
        producers: dict[str, Any] = {}
        for call in calls:
            if call["name"] in ("varResult", "var_result"):
                continue
            if "label" in call:
                producers[call["label"].replace("$", "")] = call["name"]
        grounded = []
        for call in calls:
            if call["name"] == "var_result":  # (varResult calls are kept here, as upstream does)
                continue
            arguments = call["arguments"] if "arguments" in call else call.get("parameters", {})
            out = {}
            for key, value in arguments.items():
                for label, name in producers.items():
                    if type(value) is str and _refers_to(label, value):
                        value = value.replace(label, name)
                    elif type(value) is list:
                        value = [v.replace(label, name) if type(v) is str and _refers_to(label, v) else v
                                 for v in value]
                out[key] = value
            grounded.append({"name": call["name"], "arguments": out})
        return grounded
    except (KeyError, TypeError, AttributeError) as exc:
        raise GroundingError(f"a call without {exc}" if isinstance(exc, KeyError) else str(exc)) from None


# -- per-sample metrics -------------------------------------------------------------------------------------


def _as_read(call: Any) -> Any:
    """A call as upstream's metrics read it: its JSON text with END_OF_TEXT removed, parsed again."""
    return json.loads(json.dumps(call).replace(END_OF_TEXT, "").strip())


def _is_dummy(call: Any) -> bool:
    return json.dumps(call).strip() == DUMMY_CALL


def _fix_open_reference(value: Any) -> Any:
    # Upstream closes a predicted reference missing its final '$' ("$var_1.result").
    if type(value) is str and value.startswith("$") and not value.endswith("$"):
        return value + "$"
    return value


def intent_names(calls: list, *, prediction: bool) -> tuple[list[str], bool]:
    """Called function names (``str()`` of each name) and whether a call could not be read."""
    names, error = [], False
    for call in calls:
        if prediction and _is_dummy(call):
            continue
        call = _as_read(call)
        if isinstance(call, dict) and "name" in call:
            names.append(str(call["name"]))
        else:
            error = True
    return names, error


def slot_map(calls: list, *, prediction: bool) -> tuple[dict, bool]:
    """Function name -> ``["arg = value", ...]`` of its last call (a dict keyed by name, as upstream)."""
    slots: dict = {}
    error = False
    for call in calls:
        if prediction and _is_dummy(call):
            continue
        call = _as_read(call)
        try:
            if prediction and (type(call) is not dict or "name" not in call):
                raise TypeError("not a call")
            slots[call["name"]] = []
            for key, value in call["arguments"].items():
                slots[call["name"]].append(f"{key} = {_fix_open_reference(value) if prediction else value}")
        except (KeyError, TypeError, AttributeError):
            error = True
    return slots, error


def rendered_calls(calls: list, *, prediction: bool) -> list[str]:
    """``name(k1 = v1, k2 = v2)`` per call, arguments sorted; upstream skips predicted calls without a name
    and renders unreadable predicted arguments as ``name({})``."""
    out = []
    for call in calls:
        call = _as_read(call)
        if prediction:
            try:
                name = str(call["name"])
            except (KeyError, TypeError, IndexError):
                continue
            try:
                arguments = ", ".join(sorted(f"{k} = {_fix_open_reference(v)}" for k, v in call["arguments"].items()))
            except (KeyError, TypeError, AttributeError):
                arguments = "{}"
        else:
            name = str(call["name"])
            arguments = ", ".join(sorted(f"{k} = {v}" for k, v in call["arguments"].items()))
        out.append(f"{name}({arguments})")
    return out


def align(gold: list[str], pred: list[str]) -> tuple[list[str], list[str]]:
    """Upstream's greedy alignment on function names when the lengths differ: walk both lists; equal names
    pair up, otherwise the gold call is paired with a gap (and, once gold is used up, each remaining
    predicted call with a gap)."""
    if len(gold) == len(pred):
        return gold, pred
    gold_names = [c.split("(", 1)[0] for c in gold]
    pred_names = [c.split("(", 1)[0] for c in pred]
    aligned_gold, aligned_pred = [], []
    i = j = 0
    while i < len(gold_names) or j < len(pred_names):
        if i < len(gold_names) and j < len(pred_names) and gold_names[i] == pred_names[j]:
            aligned_gold.append(gold_names[i])
            aligned_pred.append(pred_names[j])
            i, j = i + 1, j + 1
        elif i < len(gold_names):
            aligned_gold.append(gold_names[i])
            aligned_pred.append("")
            i += 1
        else:
            aligned_gold.append("")
            aligned_pred.append(pred_names[j])
            j += 1
    # Put the full renderings back in order; an empty name counts as a gap, as upstream's rebuild does.
    gold_left, pred_left = list(gold), list(pred)
    out_gold = ["" if n == "" else gold_left.pop(0) for n in aligned_gold]
    out_pred = ["" if n == "" else pred_left.pop(0) for n in aligned_pred]
    return out_gold, out_pred


def sequence_accuracy(gold: list[str], pred: list[str]) -> float:
    """sklearn's ``accuracy_score`` after alignment; 0.0 where it raises (empty or unequal lists)."""
    gold, pred = align(gold, pred)
    if not gold or len(gold) != len(pred):
        return 0.0
    return sum(g == p for g, p in zip(gold, pred)) / len(gold)


def macro_prf(gold_lists: list[list], pred_lists: list[list]) -> Optional[tuple[float, float, float]]:
    """sklearn's macro precision/recall/F1 over a MultiLabelBinarizer fitted on ``gold_lists``: classes are
    the gold labels, predicted labels outside them are ignored, zero division counts 0. With a single
    class the indicator matrix is one column, which sklearn treats as a binary problem averaged over both
    values (so a sample predicting neither still counts). None where sklearn raises (no gold label)."""
    classes = sorted(set().union(*map(set, gold_lists))) if gold_lists else []
    if not classes:
        return None
    truth = [set(g) for g in gold_lists]
    guess = [set(p) for p in pred_lists]
    if len(classes) == 1:
        c = classes[0]
        y_true = [c in t for t in truth]
        y_pred = [c in p for p in guess]
        labels = sorted(set(y_true) | set(y_pred))
        columns = [([t == v for t in y_true], [p == v for p in y_pred]) for v in labels]
    else:
        columns = [([c in t for t in truth], [c in p for p in guess]) for c in classes]
    precisions, recalls, f1s = [], [], []
    for t_col, p_col in columns:
        tp = sum(t and p for t, p in zip(t_col, p_col))
        fp = sum(p and not t for t, p in zip(t_col, p_col))
        fn = sum(t and not p for t, p in zip(t_col, p_col))
        precisions.append(tp / (tp + fp) if tp + fp else 0.0)
        recalls.append(tp / (tp + fn) if tp + fn else 0.0)
        f1s.append(2 * tp / (2 * tp + fp + fn) if 2 * tp + fp + fn else 0.0)
    return tuple(math.fsum(v) / len(v) for v in (precisions, recalls, f1s))  # type: ignore[return-value]


# -- scoring ----------------------------------------------------------------------------------------------


class _NoPrediction:
    def __repr__(self) -> str:
        return "NO_PREDICTION"


# The prediction of a gold row the model's file does not answer: scored as a wrong answer (no calls, not run).
NO_PREDICTION: Any = _NoPrediction()


@dataclasses.dataclass
class ScoreItem:
    """One sample to score: the gold row's calls, tool specs and gold answer, and the model's prediction
    (text, an already-parsed list of calls, or :data:`NO_PREDICTION`). ``gold_answer``: JSON text (as in
    upstream's result files; a string answer is its JSON text, ``'"HELLO"'``), or the value itself (as
    ``load("nestful", "raw")`` gives it; written with ``codec.dumps``), or None when there is none (the row is
    then not checked for a win; a gold answer that is JSON null is the text ``"null"``, as upstream writes it).
    ``file`` and ``row``: where it was read (:func:`read_results` sets them), so an error in it names its line.
    ``gold_answer_column_text``: the gold answer's text where a text column (HF's) held it and it was read as a value
    other than a string, so that a string answer equal to that text, which loses, is noted (its reading's cause)."""

    sample_id: Optional[str]
    gold_calls: list
    tools: list
    gold_answer: Any
    prediction: Any
    file: Optional[str] = None
    row: Optional[int] = None
    gold_answer_column_text: Optional[str] = None


@dataclasses.dataclass
class SampleScore:
    sample_id: Optional[str]
    parse_error: bool
    partial_sequence_accuracy: float
    full_sequence_accuracy: bool
    win: Optional[bool]
    execution: Optional[SequenceResult] = None
    missing_prediction: bool = False
    # Why the prediction is a parse error, or what the parser left out of it (ParsedPrediction.detail)
    parse_detail: Optional[str] = None


@dataclasses.dataclass
class NestfulScores:
    n_rows: int
    parse_errors: int
    f1_intent: Optional[float]
    f1_slot: Optional[float]
    partial_sequence_accuracy: float
    full_sequence_accuracy: float
    win_rate: Optional[float]
    p_intent: Optional[float] = None
    r_intent: Optional[float] = None
    p_slot: Optional[float] = None
    r_slot: Optional[float] = None
    corrected: bool = False
    parser: str = "json"
    samples: list = dataclasses.field(default_factory=list)
    notes: list = dataclasses.field(default_factory=list)
    missing_predictions: int = 0  # gold rows without a prediction, scored as wrong answers
    missing_gold_answers: int = 0  # rows without a gold answer, left out of the win rate
    # Gold rows the gold load skipped (on_error="skip"), and predictions keyed to none of the rows read, which
    # may be theirs: neither is scored, so both are counted rather than silently missing
    unreadable_gold_rows: int = 0
    unscored_predictions: int = 0
    # The isolation the sandbox achieved for the predictions (network, filesystem, processes: "namespace"/
    # "read-only", "off", or why not), as verify reports it; None when nothing ran
    isolation: Optional[dict] = None

    METRICS = ("n_rows", "parse_errors", "f1_intent", "f1_slot", "partial_sequence_accuracy",
               "full_sequence_accuracy", "win_rate")

    def to_dict(self, *, samples: bool = False) -> dict:
        out = {k: getattr(self, k) for k in self.METRICS}
        out.update(p_intent=self.p_intent, r_intent=self.r_intent, p_slot=self.p_slot, r_slot=self.r_slot,
                   parser=self.parser, corrected=self.corrected, notes=self.notes,
                   missing_predictions=self.missing_predictions, missing_gold_answers=self.missing_gold_answers,
                   unreadable_gold_rows=self.unreadable_gold_rows, unscored_predictions=self.unscored_predictions)
        out["stopped_by_sandbox"] = self.stopped_by_sandbox()
        out["isolation"] = self.isolation
        if samples:
            out["samples"] = [_sample_dict(s) for s in self.samples]
        return out

    def stopped_by_sandbox(self) -> dict:
        """Predicted sequences the sandbox stopped (a limit, a refusal, a crash), by reason: not the model's
        wrong calls, so they are told apart from the win rate's other losses."""
        counts = Counter(s.execution.reason or s.execution.status for s in self.samples
                         if s.execution is not None and s.execution.status in ("limit", "refused", "crashed"))
        return dict(sorted(counts.items()))

    def table(self, *, samples: bool = False) -> str:
        rows = [("Samples", str(self.n_rows)), ("Parsing errors", str(self.parse_errors)),
                ("F1 intent (function names)", _fmt(self.f1_intent)), ("F1 slot (arguments)", _fmt(self.f1_slot)),
                ("Partial sequence accuracy", _fmt(self.partial_sequence_accuracy)),
                ("Full sequence accuracy", _fmt(self.full_sequence_accuracy)), ("Win rate", _fmt(self.win_rate))]
        if self.missing_predictions:
            rows.insert(1, ("Missing predictions", str(self.missing_predictions)))
        if self.unreadable_gold_rows:
            rows.insert(1, ("Unreadable gold rows", str(self.unreadable_gold_rows)))
            rows.insert(2, ("Unscored predictions", str(self.unscored_predictions)))
        if self.missing_gold_answers:
            rows.append(("Rows without gold answer", str(self.missing_gold_answers)))
        stopped = self.stopped_by_sandbox()
        if stopped:
            rows.append(("Stopped by the sandbox", ", ".join(f"{k} {v}" for k, v in stopped.items())))
        width = max(len(k) for k, _ in rows)
        mode = "corrected" if self.corrected else "official (upstream bugs matched)"
        lines = [f"NESTFUL scores, parser {self.parser}, win check {mode}"]
        lines += [f"  {k.ljust(width)}  {v}" for k, v in rows]
        lines += [f"  {kind} isolation: {value}" for kind, value in (self.isolation or {}).items()]
        # One line a note and a sample: ids and details quote the data and upstream's messages, line breaks included
        lines += [one_line(f"  note: {n}") for n in self.notes]
        if samples:
            for sample in self.samples:
                d = _sample_dict(sample)
                execution = d.get("execution")
                ran = (", not run: no calls" if sample.win is not None and not sample.missing_prediction else ""
                       ) if execution is None else (
                    f", {execution['status']}" + _at_call(execution["failed_call"])
                    + (f": {execution['reason']}: {execution['detail']}" if execution["reason"] else ""))
                lines.append(one_line(f"  {sample.sample_id}: partial {sample.partial_sequence_accuracy:.3f}, "
                                      f"{_parse_text(sample)}"
                                      f"{'no prediction, ' if sample.missing_prediction else ''}"
                                      f"win {'n/a' if sample.win is None else sample.win}{ran}"))
        return "\n".join(lines)


def _at_call(failed_call: Optional[int]) -> str:
    """Where a predicted sequence failed, as an executed row's error names the call (``output[1]``)."""
    return "" if failed_call is None else f" at output[{failed_call}]"


def _parse_text(sample: SampleScore) -> str:
    if sample.parse_error:
        return f"parse error ({sample.parse_detail}), " if sample.parse_detail else "parse error, "
    return f"parsed, but {sample.parse_detail}, " if sample.parse_detail else ""


def _fmt(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _sample_dict(s: SampleScore) -> dict:
    out = {"sample_id": s.sample_id, "parse_error": s.parse_error,
           "partial_sequence_accuracy": s.partial_sequence_accuracy, "full_sequence_accuracy": s.full_sequence_accuracy,
           "win": s.win, "missing_prediction": s.missing_prediction, "parse_detail": s.parse_detail}
    if s.execution is not None:
        # The call it failed at (as verify names a gold sequence's), the answer as JSON, and what it is in Python
        # where JSON cannot say (a tuple, NaN, int keys)
        out["execution"] = {"status": s.execution.status, "reason": s.execution.reason, "detail": s.execution.detail,
                            "failed_call": s.execution.failed_call, "answer": (s.execution.answer or {}).get("value"),
                            "answer_type": s.execution.answer_type, "answer_repr": s.execution.answer_repr}
    return out


def score(items: Iterable[ScoreItem], *, parser: str = "json", corrected: bool = False, win_rate: bool = True,
          executable_functions: Union[str, os.PathLike, None] = None,
          executable_functions_dir: Union[str, os.PathLike, None] = None, limits: SandboxLimits = SandboxLimits(),
          cache_dir: Optional[str] = None) -> NestfulScores:
    """Score predictions with NESTFUL's metrics. ``corrected=True`` fixes upstream's plain bugs in the win
    check; ``win_rate=False`` skips execution. Predicted sequences run in the sandbox (one process for
    all), with the functions of ``executable_functions`` (or ``executable_functions_dir``) or the pinned upstream
    ones.

    An item whose prediction is :data:`NO_PREDICTION` is a wrong answer in every metric (no calls, not won);
    an item without a gold answer is left out of the win rate (its denominator), and both are counted and
    noted. No item at all is an error, not a score of 0."""
    if parser not in PARSERS:
        raise ValueError(f"parser must be one of {PARSERS}, got {parser!r}")
    unused = [name for name, given in (("corrected", corrected), ("executable_functions", executable_functions),
                                       ("executable_functions_dir", executable_functions_dir),
                                       ("limits", limits != SandboxLimits())) if given]
    if unused and not win_rate:  # nothing runs: each would be silently unused (the command line refuses its flags)
        raise ValueError(unused_win_rate_options_message(unused, "win_rate=False"))
    folder_given = one_folder(executable_functions, executable_functions_dir, "executable_functions_dir")
    items = list(items)
    if not items:
        raise InvalidValueError("no predictions to score", source="nestful")
    # Every gold row is checked before anything runs: a bad one is an error naming its item, not a crash
    # or a sample the sandbox cannot check.
    for position, item in enumerate(items):
        check_gold_shapes(item.gold_calls, item.tools, sample_id=item.sample_id, file=item.file,
                          row=position if item.row is None else item.row)
        check_prediction(item.prediction, "prediction", file=item.file, row=position if item.row is None else item.row)
    # (read only by the win check: without it, a gold answer that is not JSON does not stop the match metrics)
    answers = [_gold_answer_text(item.gold_answer, is_text=isinstance(item.gold_answer, str),
                                 sample_id=item.sample_id, file=item.file,
                                 row=position if item.row is None else item.row) if win_rate else item.gold_answer
               for position, item in enumerate(items)]
    gold_intents, pred_intents, gold_slots, pred_slots = [], [], [], []
    samples: list[SampleScore] = []
    notes: list[str] = []
    jobs: list[tuple[SampleScore, ScoreItem, SequenceJob]] = []
    isolation: Optional[dict] = None
    for position, (item, answer) in enumerate(zip(items, answers)):
        missing = item.prediction is NO_PREDICTION
        parsed = ParsedPrediction([], []) if missing else parse_prediction(item.prediction, parser)
        try:
            gold = ground(item.gold_calls)
        except GroundingError as exc:
            # The row is the line of the result file, or the item's position when built in Python.
            raise InvalidValueError(f"the gold calls of sample {item.sample_id!r} cannot be grounded ({exc})",
                                    file=item.file, row=position if item.row is None else item.row,
                                    field="output", source="nestful") from None
        error = parsed.parse_error
        names, bad = intent_names(parsed.calls, prediction=True)
        error |= bad
        gold_intents.append(intent_names(gold, prediction=False)[0])
        pred_intents.append(names)
        pred_map, bad = slot_map(parsed.calls, prediction=True)
        error |= bad
        gold_map, _ = slot_map(gold, prediction=False)
        for key in set(pred_map) | set(gold_map):
            pred_slots.append(pred_map.get(key, []))
            gold_slots.append(gold_map.get(key, []))
        partial = sequence_accuracy(rendered_calls(gold, prediction=False), rendered_calls(parsed.calls, prediction=True))
        detail = parsed.detail
        if error and not parsed.parse_error:
            # parsed, but an element of it is no call the metrics can read: that is the parse error, named before
            # what the parser left out (a skipped Hermes block, which alone makes none)
            detail = "; ".join(filter(None, ["an element of the calls is not an object with a name and arguments",
                                             detail]))
        sample = SampleScore(item.sample_id, error, partial, partial == 1, None, missing_prediction=missing,
                             parse_detail=detail)
        samples.append(sample)
        if win_rate and answer is not None:
            if missing or not parsed.executed:
                # Nothing to run (no prediction, unparsable text, an empty list): upstream's win check returns
                # False before executing it, so the sandbox is not asked for a "no calls" it cannot help
                sample.win = False
            else:
                jobs.append((sample, item, SequenceJob(parsed.executed, output_fields(item.tools), answer)))
    if jobs:
        folder = functions_folder(folder_given, cache_dir=cache_dir)
        for (sample, item, _), result in zip(jobs, run_sequences([job for *_, job in jobs], folder, limits)):
            # Predictions run code of the model's choosing (upstream's eval-based functions): say how isolated
            isolation = isolation or {kind: getattr(result, kind) for kind in ISOLATION}
            sample.execution = result
            sample.win = bool(result.win_corrected if corrected else result.win_upstream)
            # (a string answer lost to its own gold text, read from HF's column as the value it spells: said, as
            # verify says it)
            lost_to_text = [] if sample.win else text_column_note({"gold_answer_text": item.gold_answer_column_text},
                                                                  (result.answer or {}).get("value"))
            notes += [f"{sample.sample_id}: {n}" for n in [*result.notes, *lost_to_text]]
    partly = sum(1 for s in samples if s.parse_detail and not s.parse_error)
    if partly:  # scored as upstream scores them, on what was read: said, not dropped without a word
        notes.append(f"{partly} prediction(s) parsed with parts left out (a <tool_call> block that is not JSON, "
                     "or one cut off): the per-sample results (--samples) say which")
    intent, slot = macro_prf(gold_intents, pred_intents), macro_prf(gold_slots, pred_slots)
    if slot is None:
        notes.append("no gold call has an argument: upstream's scorer raises on the slot F1 (reported as null)")
    n = len(items)
    missing_predictions = sum(s.missing_prediction for s in samples)
    checked = [s for s, answer in zip(samples, answers) if answer is not None]
    notes += _input_notes(items, n, missing_predictions, n - len(checked))
    return NestfulScores(
        n_rows=n, parse_errors=sum(s.parse_error for s in samples),
        f1_intent=intent[2] if intent else None, f1_slot=slot[2] if slot else None,
        partial_sequence_accuracy=statistics.mean(s.partial_sequence_accuracy for s in samples),
        full_sequence_accuracy=sum(s.full_sequence_accuracy for s in samples) / n,
        win_rate=sum(bool(s.win) for s in checked) / len(checked) if win_rate and checked else None,
        p_intent=intent[0] if intent else None, r_intent=intent[1] if intent else None,
        p_slot=slot[0] if slot else None, r_slot=slot[1] if slot else None,
        corrected=corrected, parser=parser, samples=samples, notes=notes,
        missing_predictions=missing_predictions, missing_gold_answers=n - len(checked), isolation=isolation)


def _gold_answer_text(answer: Any, *, is_text: bool, sample_id: Any, file: Optional[str], row: Optional[int]
                      ) -> Optional[str]:
    """The gold answer as the JSON text the win check parses (``json.loads`` in the sandbox, as upstream), or
    None when there is none. ``is_text``: ``answer`` is JSON text (upstream's files), not the value itself."""
    if answer is None:
        return None
    where = dict(file=file, row=row, field="gold_answer", source="nestful")
    if is_text:
        # The package's JSON, not the stdlib's: the text NaN or Infinity is not JSON, and a gold answer no
        # prediction can equal (NaN) would only make a sample that can never win.
        try:
            loads(answer)
        except JsonValueError as exc:
            raise JsonValueError(f"the gold answer of sample {sample_id!r} is not a JSON value ({exc.message})",
                                 **where) from None
        except (ValueError, RecursionError) as exc:  # RecursionError: nested deeper than Python's stack
            raise InvalidJsonError(f"the gold answer of sample {sample_id!r} is text but not JSON ({exc}; text is "
                                   f"read as JSON: {_not_json_hint(answer)})", **where) from None
        return answer
    try:
        return dumps(answer)  # exact for every JSON value; NaN, infinities and non-JSON objects are refused
    except JsonValueError as exc:
        raise JsonValueError(f"the gold answer of sample {sample_id!r} is not a JSON value ({exc.message})",
                             **where) from None


def _not_json_hint(text: str) -> str:
    """What to give instead of ``text``: Python's ``str()`` of a value (HF's text column: ``True``, ``{'a': 1}``)
    is that value, which codec.dumps(text) would make a string answer no right prediction equals."""
    try:
        value = decode_gold_answer(text)
    except RecursionError:
        value = text
    if isinstance(value, str):
        return "a string answer goes in as its JSON text, codec.dumps(answer)"
    return (f"it is Python's str() of {shown(value)}, as HF's text column holds it: give that value, "
            "codec.dumps(decode_gold_answer(text)) (from tooluse_datasets.builders.nestful.gold), as load reads "
            "the column")


def check_prediction(prediction: Any, field: str, *, file: Optional[str], row: Optional[int]) -> None:
    """A prediction is the model's text or its calls already parsed (a list); null, or :data:`NO_PREDICTION`, is
    none. Another value (a column written from the wrong field, a call outside its list) was scored as the JSON text
    it writes: a parse error, or an object's keys taken for calls, charged to the model without a word."""
    if prediction is not None and prediction is not NO_PREDICTION and not isinstance(prediction, (str, list, tuple)):
        kind = json_kind(prediction) if isinstance(prediction, (dict, int, float)) else type(prediction).__name__
        raise InvalidValueError(f"a prediction is the model's text or a list of calls, got {kind}",
                                file=file, row=row, field=field, source="nestful")


def check_gold_shapes(gold_calls: Any, tools: Any, *, sample_id: Any, file: Optional[str], row: Optional[int]
                      ) -> None:
    """The gold calls are a list and the tool specs a list of objects with a name (NESTFUL specs or OpenAI
    tools), as scoring reads them; else an :class:`InvalidValueError` naming the item's line and field (a
    ``tools`` of another shape would crash, or leave every output field unknown so a right answer loses)."""
    where = dict(file=file, row=row, source="nestful")
    if not isinstance(gold_calls, list):
        raise InvalidValueError(f"the gold calls of sample {sample_id!r} must be a JSON array, got "
                                f"{json_kind(gold_calls)}", field="output", **where)
    if not isinstance(tools, list):
        raise InvalidValueError(f"the tools of sample {sample_id!r} must be a JSON array of tool specs, got "
                                f"{json_kind(tools)}", field="tools", **where)
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise InvalidValueError(f"a tool spec of sample {sample_id!r} must be a JSON object, got "
                                    f"{json_kind(tool)}", field=f"tools[{i}]", **where)
        unified = isinstance(tool.get("function"), dict)
        spec = tool["function"] if unified else tool
        if not isinstance(spec.get("name"), str):
            raise InvalidValueError(f"a tool spec of sample {sample_id!r} needs its name as a string",
                                    field=f"tools[{i}].name", **where)
        # Output parameters that are no object name no output: the loader refuses such a row; scored, a call of
        # the tool failed and the loss was the model's.
        outputs = spec.get("output_parameters", None if unified else spec.get("output_parameter"))
        if outputs is not None and not isinstance(outputs, dict):
            raise InvalidValueError(f"the output_parameters of tool {spec['name']!r:.80} of sample {sample_id!r} must "
                                    f"be a JSON object of output names, got {json_kind(outputs)}",
                                    field=f"tools[{i}].{'function.' if unified else ''}output_parameters", **where)


def _input_notes(items: list[ScoreItem], n: int, missing_predictions: int, missing_gold: int) -> list[str]:
    """What the figures rest on when it is not simply one prediction per gold row."""
    notes = []
    if missing_predictions:
        notes.append(f"gold rows without a prediction: {missing_predictions} of {n}; each is scored as a wrong "
                     "answer (no calls: its gold calls count as missed, sequence accuracy 0, not won)")
    if missing_gold:
        without = [item.sample_id for item in items if item.gold_answer is None]
        shown = ", ".join(repr(s) for s in without[:3]) + (", ..." if len(without) > 3 else "")
        rest = f"win_rate is over the other {n - missing_gold} rows" if missing_gold < n else "win_rate is null"
        notes.append(f"rows without a gold answer: {missing_gold} of {n} ({shown}); not checked for a win, so {rest}")
    counts = Counter(item.sample_id for item in items if isinstance(item.sample_id, (str, int)))
    repeated = [sample_id for sample_id, count in counts.items() if count > 1]
    if repeated:
        notes.append(f"sample_ids given more than once: {len(repeated)} (e.g. {repeated[0]!r}); each is scored as "
                     "a sample of its own, as upstream's scorer scores every line")
    return notes


# -- reading result files -------------------------------------------------------------------------------

PREDICTION_FIELDS = ("generated_text", "calls", "prediction")


def _json_value(value: Any, field: str, sample_id: Any, row: Optional[int], path: Optional[str]) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return loads(value)  # the package's JSON: NaN and Infinity are not JSON here either
    except (ValueError, RecursionError) as exc:  # also JSON nested deeper than Python's stack
        # (said of the gold row: for a keyed prediction, file and row are those of the line that asked for it)
        raise InvalidJsonError(f"{field} of the gold row of sample {sample_id!r} is a string but not JSON ({exc})",
                               file=path, row=row, field=field, source="nestful") from None


# Said where a result file reads as one JSON document (an array of the predictions, or an object over several lines)
JSON_LINES_HINT = ": result files are JSON Lines, one whole JSON object a line (a JSON array of them is not read)"


def _result_lines(path: str) -> Iterator[tuple[int, dict]]:
    """The JSON objects of a result file with their line numbers (from 0, blank lines counted but not
    yielded). A UTF-8 BOM is ignored; text that is not UTF-8 JSON is a typed error naming the line."""
    with open_text_file(path) as f:
        for row_number, data in enumerate(iter(f.readline, b"")):
            if row_number == 0:
                data = first_line(data, path)
            try:
                line = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InvalidJsonError(f"line is not UTF-8 text (byte 0x{data[exc.start]:02x} at byte {exc.start} "
                                       "of the line; result files are UTF-8)", file=path, row=row_number,
                                       field="<line>") from None
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except (ValueError, RecursionError) as exc:
                reason = "nested deeper than Python's stack" if isinstance(exc, RecursionError) else exc
                # (a JSON array written over several lines starts with its bracket, alone or before its first
                # object; an object, with its brace alone)
                hint = JSON_LINES_HINT if line.lstrip().startswith("[") or line.strip() == "{" else ""
                raise InvalidJsonError(f"line is not valid JSON ({reason}){hint}", file=path, row=row_number,
                                       field="<line>") from None
            if not isinstance(record, dict):
                raise InvalidValueError(f"line is a JSON {json_kind(record)}, not an object"
                                        + (JSON_LINES_HINT if isinstance(record, list) else ""),
                                        file=path, row=row_number, field="<line>")
            yield row_number, record


# Reads a unified gold row back as its raw row (the source's own reverse conversion; v2, no options involved)
_UNIFIED_READER = NestfulSource()


def as_gold_row(row: Any) -> Any:
    """A gold row as scoring reads it: a raw or upstream NESTFUL row as it is, and a unified NESTFUL row (what
    ``load("nestful")`` gives by default) as the raw row it was made from. A unified row of another source, or one
    that cannot be read back, is an :class:`InvalidValueError` naming the field."""
    if not isinstance(row, Mapping) or "output" in row or "messages" not in row:
        return row
    if row.get("source") != "nestful" or not isinstance(row.get("meta"), Mapping):
        raise InvalidValueError(f"a unified row of source {row.get('source')!r} is not a NESTFUL gold row",
                                field="source")
    try:
        return _UNIFIED_READER.from_unified(dict(row))
    except (KeyError, TypeError, AttributeError, StopIteration) as exc:
        reason = ("no user message" if isinstance(exc, StopIteration) else f"no {exc}" if isinstance(exc, KeyError)
                  else f"{type(exc).__name__}: {exc}")
        raise InvalidValueError(f"a unified NESTFUL row that cannot be read back as its raw row ({reason})",
                                field="messages" if isinstance(exc, StopIteration) else "meta") from None


def _item(gold: dict, sample_id: Any, prediction: Any, *, answer_is_text: bool, path: Optional[str],
          row: Optional[int]) -> ScoreItem:
    """A gold row (a line of upstream's shape, or a raw or unified NESTFUL row) and a prediction as a ScoreItem."""
    try:
        gold = gold if answer_is_text else as_gold_row(gold)  # (a result line is upstream's shape, never unified)
    except InvalidValueError as exc:
        raise exc.at(file=path, row=row) from None
    for key in ("output", "tools", "gold_answer"):
        if key not in gold:
            raise MissingFieldError(f"the gold row of sample {sample_id!r} lacks {key!r}", file=path, row=row,
                                    field=key)
    answer = gold["gold_answer"]
    # In upstream's result files (string fields) gold_answer is json.dumps of the value; a line in the GitHub
    # form (output a list: native fields, spec §2) and package rows hold the value, which may be a string.
    text_form = isinstance(answer, str) and isinstance(gold["output"], str)
    is_text = answer_is_text and text_form
    if text_form and not answer_is_text:
        # A gold row as HF's parquet holds it (a keyed prediction's): its text read as the loader reads it
        answer = decode_gold_answer(answer)
    if answer is None and (text_form or has_gold_answer(gold)):  # a null answer: upstream writes "null", counts it
        answer, is_text = NULL_TEXT, True
    # JSON text is checked by score(), and only for the win check, which alone reads it
    gold_text = answer if is_text else _gold_answer_text(answer, is_text=False, sample_id=sample_id, file=path, row=row)
    calls = _json_value(gold["output"], "output", sample_id, row, path)
    tools = _json_value(gold["tools"], "tools", sample_id, row, path)
    check_gold_shapes(calls, tools, sample_id=sample_id, file=path, row=row)
    # The text HF's column held (a raw row keeps it in gold_answer_text); a result line's is JSON, never ambiguous
    column_text = gold.get("gold_answer_text", gold["gold_answer"] if text_form and not answer_is_text else None)
    return ScoreItem(sample_id=sample_id, gold_calls=calls, tools=tools, gold_answer=gold_text,
                     prediction=prediction, file=path, row=row,
                     gold_answer_column_text=None if isinstance(answer, str) else column_text)


def read_results(path: Union[str, os.PathLike], gold_rows: Optional[Mapping[str, dict]] = None, *,
                 check_gold_answers: bool = True, gold_skips=None, unscored: Optional[list] = None
                 ) -> list[ScoreItem]:
    """Items of a result file, one JSON object per line (blank lines skipped, a UTF-8 BOM ignored), in either
    shape:

    * upstream's ``output.jsonl``: a NESTFUL row (``output``, ``tools``, ``gold_answer``, as JSON text or
      values: ``gold_answer`` is JSON text where ``output`` is text, the value where it is a list) plus the
      model's ``generated_text``. Each line carries its own gold and is one sample, as in
      upstream's scorer (a sample_id on several such lines is scored on each);
    * predictions keyed by ``sample_id`` (``generated_text`` text, or ``calls``/``prediction``: text or an
      already-parsed list), joined to ``gold_rows`` (sample_id -> raw NESTFUL row, e.g. from
      ``tooluse_datasets.load("nestful", "raw")``, a unified one, read back as its raw row, or an upstream row in
      the GitHub or HF form, whose ``gold_answer`` text is decoded as the loader decodes it). The gold rows are
      the benchmark: a sample_id predicted on two lines is an error naming both, and each gold row no line
      predicts is an item with :data:`NO_PREDICTION` (scored as a wrong answer), after the file's items.

    A file without any prediction is an error, and so are ``gold_rows`` given for a file with no keyed line
    (every line carries its own gold, so they would not be read: a ``ValueError`` rather than a score the
    caller believes rests on their gold rows). A gold answer that is not JSON is a typed error naming its line,
    unless ``check_gold_answers=False`` (only the win check reads it, which ``score(win_rate=False)`` skips).
    ``gold_skips``: the :class:`SkipReport` of a gold load with ``on_error="skip"``; when it counts skipped rows,
    a keyed line whose sample_id is not among the gold rows read is left out and its row appended to
    ``unscored`` instead of being an error (its gold row may be one that could not be read).
    """
    path = os.fspath(path)
    items, any_keyed = read_result_items(path, gold_rows, gold_skips, unscored)
    if gold_rows is not None and not any_keyed:
        raise ValueError(unused_gold_message("gold_rows", path))
    for item in items if check_gold_answers else ():
        _gold_answer_text(item.gold_answer, is_text=isinstance(item.gold_answer, str), sample_id=item.sample_id,
                          file=item.file, row=item.row)
    return items


def unused_win_rate_options_message(options: list[str], skipped_by: str) -> str:
    """Why ``options`` of the win rate are refused where ``skipped_by`` (``win_rate=False``, ``--no-win-rate``)
    skips it: each would be silently unused."""
    return (f"{', '.join(options)} appl{'ies' if len(options) == 1 else 'y'} to the win rate and the executions it "
            f"makes, which {skipped_by} skips: give one or the other")


def unused_gold_message(option: str, path: str) -> str:
    """Why gold rows given (``option``: ``gold_rows``, ``--gold-data-files``...) are refused for a result file
    in upstream's shape."""
    return (f"{option} was given, but {path!r} holds upstream's result rows (every line has its own gold: output, "
            f"tools, gold_answer) and no keyed prediction, so the gold rows would not be read; leave {option} out "
            f"to score the file against the gold its lines hold, or give keyed predictions (sample_id and "
            f"generated_text or calls, no output) to score them against these gold rows")


def read_result_items(path: str, gold_rows: Optional[Mapping[str, dict]], gold_skips=None,
                      unscored: Optional[list] = None) -> tuple[list[ScoreItem], bool]:
    """:func:`read_results`' items, and whether any line is a keyed prediction (read against ``gold_rows``)."""
    if gold_rows is not None and not isinstance(gold_rows, Mapping):
        # (rows as loaded, a Dataset or a list: each keyed line was "not among the gold rows", which it is)
        raise TypeError(f"gold_rows must map sample_id -> gold row, got {type(gold_rows).__name__}; make it with "
                        "gold_rows_by_id(rows)")
    try:
        return _read_lines(path, gold_rows, gold_skips, [] if unscored is None else unscored)
    except ToolUseDataError as exc:  # named as the package's readers name theirs: source, file, row, field
        raise exc.at(source="nestful")


def _read_lines(path: str, gold_rows: Optional[Mapping[str, dict]], gold_skips, unscored: list
                ) -> tuple[list[ScoreItem], bool]:
    items = []
    first_row: dict[Any, tuple[int, bool]] = {}  # sample_id -> (its first line, whether that line is keyed)
    any_keyed = False
    first_shape: Optional[tuple[int, bool]] = None  # (the first line, whether it is keyed)
    for row_number, record in _result_lines(path):
        given = [k for k in PREDICTION_FIELDS if k in record]
        if not given:
            raise MissingFieldError(f"no prediction: one of {', '.join(PREDICTION_FIELDS)} is needed",
                                    file=path, row=row_number, field="generated_text")
        # One prediction a line: two (a null one aside, as a table written with both columns has) would leave
        # it to a guess which one is scored.
        filled = [k for k in given if record[k] is not None]
        if len(filled) > 1:
            raise InvalidValueError(f"the line holds {len(filled)} predictions ({', '.join(filled)}): give one of "
                                    "them (generated_text: the model's text; calls: already-parsed calls)",
                                    file=path, row=row_number, field=", ".join(filled))
        field = filled[0] if filled else given[0]
        check_prediction(record[field], field, file=path, row=row_number)
        sample_id = record.get("sample_id")
        keyed = "output" not in record
        first_shape = first_shape or (row_number, keyed)
        if keyed != first_shape[1]:
            # A line of the other shape would be scored against other gold (its own, or the gold rows'), and a
            # keyed line's gold row would count as predicted or missing by a rule the file does not follow.
            shapes = ("a keyed prediction (no output)", "an upstream result row (with output)")
            error = MissingFieldError if keyed else InvalidValueError  # (a line of upstream's file lacking output)
            raise error(f"the line is {shapes[not keyed]}, but row {first_shape[0]} is "
                                    f"{shapes[not first_shape[1]]}: a result file holds one of the two shapes",
                                    file=path, row=row_number, field="output")
        if keyed:
            if gold_rows is None:
                raise MissingFieldError("a keyed prediction needs the gold rows (no 'output' on the line)",
                                        file=path, row=row_number, field="output")
            if sample_id is None:
                raise MissingFieldError("a keyed prediction needs its sample_id", file=path, row=row_number,
                                        field="sample_id")
            if not isinstance(sample_id, str):
                raise InvalidValueError(f"a keyed prediction needs its sample_id as a string, got {shown(sample_id)}",
                                        file=path, row=row_number, field="sample_id")
            if sample_id not in gold_rows and gold_skips is not None and gold_skips.skipped:
                unscored.append(row_number)
                any_keyed = True
                continue
            if sample_id not in gold_rows:
                raise InvalidValueError(f"sample_id {sample_id!r} is not among the gold rows", file=path,
                                        row=row_number, field="sample_id")
            any_keyed = True
        if isinstance(sample_id, (str, int)) and not isinstance(sample_id, bool):
            first, first_keyed = first_row.setdefault(sample_id, (row_number, keyed))
            if first != row_number and (keyed or first_keyed):
                raise InvalidValueError(f"sample_id {sample_id!r} is predicted on rows {first} and {row_number}: "
                                        "each gold row takes one prediction", file=path, row=row_number,
                                        field="sample_id")
        items.append(_item(gold_rows[sample_id] if keyed else record, sample_id, record[field],
                           answer_is_text=not keyed, path=path, row=row_number))
    if not items and not unscored:
        raise InvalidValueError("no predictions: the file is empty or holds blank lines only", file=path,
                                field="<file>")
    if any_keyed:
        for sample_id, gold in gold_rows.items():
            if sample_id not in first_row:
                items.append(_item(gold, sample_id, NO_PREDICTION, answer_is_text=False, path=None, row=None))
    return items, any_keyed


def score_file(path: Union[str, os.PathLike], *, gold_rows: Optional[Mapping[str, dict]] = None, gold_skips=None,
               **options: Any) -> NestfulScores:
    """:func:`score` of :func:`read_results` (options as for :func:`score`); ``gold_skips``: the
    :class:`SkipReport` the gold rows were loaded with, whose skipped rows the result counts and notes."""
    unscored: list = []
    items = read_results(path, gold_rows, check_gold_answers=options.get("win_rate", True), gold_skips=gold_skips,
                         unscored=unscored)
    return with_unreadable_gold(score(items, **options), gold_skips, unscored, os.fspath(path))


def with_unreadable_gold(scores: NestfulScores, gold_skips, unscored: list, path: str) -> NestfulScores:
    """``scores`` with the gold rows ``gold_skips`` counts as skipped, and the predictions left unscored
    (``unscored``: their rows in ``path``), counted and noted."""
    if gold_skips is None or not gold_skips.skipped:
        return scores
    scores.unreadable_gold_rows, scores.unscored_predictions = gold_skips.skipped, len(unscored)
    where = "; ".join(e.where for e in gold_skips.examples[:3]) + ("; ..." if gold_skips.skipped > 3 else "")
    rows = ", ".join(map(str, unscored[:5])) + (", ..." if len(unscored) > 5 else "")
    scores.notes.append(f"gold rows that could not be read: {gold_skips.skipped} ({where}); not scored, so n_rows "
                        "counts the rows read" + (f"; predictions keyed to none of the gold rows read (theirs may be "
                        f"one of those), left unscored: {len(unscored)} ({path} row {rows})" if unscored else ""))
    return scores


def gold_rows_by_id(rows: Sequence[dict], locations: Optional[Sequence[tuple[str, int]]] = None
                    ) -> dict[str, dict]:
    """NESTFUL rows by sample_id: raw (``tooluse_datasets.load("nestful", "raw")``), unified (read back as their raw
    rows, :func:`as_gold_row`) or upstream's. Copies of a row (a file read twice) are one gold row; two different
    rows with one sample_id are an error naming both, since a keyed prediction could not say which it answers: by
    ``locations`` (``(file, row)`` of each row, in the order of ``rows``) where given, else by their places in
    ``rows``."""
    by_id: dict[str, dict] = {}
    first_index: dict[str, int] = {}
    for index, row in enumerate(rows):
        at = dict(zip(("file", "row"), locations[index])) if locations is not None else dict(row=index)
        try:
            row = as_gold_row(row)
        except InvalidValueError as exc:
            raise exc.at(source="nestful", **at) from None
        sample_id = row.get("sample_id") if isinstance(row, Mapping) else None
        if sample_id is None:
            raise InvalidValueError("a gold row needs its sample_id (gold rows are NESTFUL rows: raw, unified or "
                                    "upstream's)", field="sample_id", source="nestful", **at)
        first = by_id.setdefault(sample_id, row)
        if first is row:
            first_index.setdefault(sample_id, index)
        elif first != row:
            earlier = first_index[sample_id]
            if locations is not None:
                (file_a, row_a), (file_b, row_b) = locations[earlier], locations[index]
                both = (f"row {row_a} and row {row_b} of {file_b}" if file_a == file_b
                        else f"{file_a} row {row_a} and {file_b} row {row_b}")
                where = dict(file=file_b, row=row_b)
            else:
                both, where = f"rows[{earlier}] and rows[{index}] of the rows given", dict(row=index)
            raise InvalidValueError(f"two different gold rows have sample_id {sample_id!r}: {both}; a keyed "
                                    "prediction could not say which it answers", field="sample_id",
                                    source="nestful", **where)
    return by_id
