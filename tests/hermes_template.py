"""A small Hermes-style chat template with tool support, rendered with jinja2 the way transformers does
(``apply_chat_template`` uses a sandboxed jinja2 environment with a ``tojson`` filter).

It follows the Qwen2.5/Hermes layout: tools as JSON lines inside <tools></tools> in the system turn, calls as
<tool_call>{"name", "arguments"}</tool_call>, results as <tool_response> inside a user turn, and reasoning as
<think>...</think>. Tests render unified rows with it exactly as training code would.
"""
from __future__ import annotations

import json

from jinja2.sandbox import ImmutableSandboxedEnvironment

HERMES_TEMPLATE = """
{%- if tools %}
<|im_start|>system
{% if messages[0].role == 'system' %}{{ messages[0].content }}

{% endif %}# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{%- for tool in tools %}
{{ tool | tojson }}
{%- endfor %}
</tools>

For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:
<tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call><|im_end|>
{%- elif messages[0].role == 'system' %}
<|im_start|>system
{{ messages[0].content }}<|im_end|>
{%- endif %}
{%- for message in messages %}
{%- if message.role == 'user' %}
<|im_start|>user
{{ message.content }}<|im_end|>
{%- elif message.role == 'assistant' %}
<|im_start|>assistant
{%- if message.reasoning_content %}
<think>
{{ message.reasoning_content }}
</think>
{%- endif %}
{%- if message.content %}
{{ message.content }}
{%- endif %}
{%- for tool_call in message.tool_calls %}
<tool_call>
{"name": "{{ tool_call.function.name }}", "arguments": {{ tool_call.function.arguments | tojson }}}
</tool_call>
{%- endfor %}<|im_end|>
{%- elif message.role == 'tool' %}
{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}
<|im_start|>user
{%- endif %}
<tool_response>
{{ message.content }}
</tool_response>
{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}<|im_end|>{%- endif %}
{%- endif %}
{%- endfor %}
"""


def _tojson(value, indent=None):
    # transformers' tojson: json.dumps with ensure_ascii=False, no sort
    return json.dumps(value, ensure_ascii=False, indent=indent)


def render(messages: list[dict], tools: list[dict] | None = None) -> str:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = _tojson
    return env.from_string(HERMES_TEMPLATE).render(messages=messages, tools=tools or []).strip()
