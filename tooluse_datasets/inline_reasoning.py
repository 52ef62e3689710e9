"""Reasoning written into an assistant turn's text, for chat templates that have no place for it.

Templates of models without a reasoning field (Qwen2.5, Llama 3.x, Hermes 3, Mistral, Granite 3.x, DeepSeek-V3,
ToolACE) never render ``reasoning_content``, so a model trained under them never sees the reasoning of the
rows. :func:`reasoning_in_content` moves it into ``content`` as a leading ``<think>`` block, per row, for
``ds.map``, where a user wants the model to write its reasoning out.
"""
from __future__ import annotations

from .errors import InvalidValueError, MissingFieldError
from .row_rewrite import row_rewrite


@row_rewrite
def reasoning_in_content(row: dict) -> dict:
    """``row`` with each assistant turn's ``reasoning_content`` moved to the front of its ``content`` as
    ``"<think>\\n{reasoning}\\n</think>\\n\\n"`` (Qwen3's spelling). Other turns are unchanged (a user or tool
    message's reasoning stays out of the prompt's text); the row is not changed in place; any message shape works
    (decoded: the key is left out; complete: it becomes null). A malformed message, or a turn with reasoning but
    no text (not even ``""``), is a typed error naming the field."""
    messages = []
    for i, m in enumerate(row["messages"]):
        reasoning = m.get("reasoning_content")
        if reasoning and m.get("role") == "assistant":  # the model's own text: a prompt turn's is not trained
            # The text the reasoning goes in front of; a null one would be written as the word "None".
            if "content" not in m:
                raise MissingFieldError("message lacks 'content'", field=f"messages[{i}].content")
            if m["content"] is None:
                raise InvalidValueError("content is null (the unified form of no text is an empty string)",
                                        field=f"messages[{i}].content")
            m = {**m, "content": f"<think>\n{reasoning}\n</think>\n\n{m['content']}"}
            if "tool_call_id" in m:  # the complete shape keeps every key
                m["reasoning_content"] = None
            else:
                del m["reasoning_content"]
        messages.append(m)
    return {**row, "messages": messages}
