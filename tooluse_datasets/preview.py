"""A unified row rendered for a person (``show``, ``demo``): one panel per message with its role, reasoning,
calls with pretty-printed arguments, results with the call they answer, and the references between calls
(NESTFUL's ``call_graph``). Long text is cut in the middle with a visible marker that keeps its length. Colours
on a terminal, plain text in a pipe (rich decides from the output stream)."""
from __future__ import annotations

import json
from typing import Any

from rich.cells import cell_len
from rich.console import Console, Group
from rich.measure import Measurement
from rich.panel import Panel
from rich.text import Text

from .errors import escape_controls

ROLE_STYLES = {"system": "magenta", "user": "cyan", "assistant": "green", "tool": "yellow"}
PIPE_WIDTH = 100

# Control characters in the data (an ESC starting a terminal sequence that clears the screen or sets the window
# title, a C1 CSI, bidirectional overrides) would act on the terminal, and reach a pipe as raw bytes; the ones rich
# drops itself (a carriage return, a bell) would vanish from the row shown. All are shown as their JSON escape
# (\u001b), as every other line of the package writes them (errors.escape_controls); line breaks and tabs stay.
printable = escape_controls


class _Console(Console):
    def on_broken_pipe(self) -> None:
        """A closed output pipe (`| head`) goes to the command line, which stops quietly as for every command
        (rich's own handling exits 1, the status of a failed validation)."""
        raise BrokenPipeError


def console_for(file=None) -> Console:
    """A console writing to ``file`` (stdout by default): colours on a terminal, plain text and a fixed width
    in a pipe."""
    console = _Console(file=file, highlight=False, soft_wrap=False)
    if not console.is_terminal:
        console = _Console(file=file, highlight=False, soft_wrap=False, width=PIPE_WIDTH, no_color=True)
    return console


def elide(text: str, max_chars: int) -> str:
    """``text`` cut in the middle when longer than ``max_chars``, the marker saying how much is left out."""
    if max_chars <= 0 or len(text) <= max_chars:
        return text
    head = max_chars * 2 // 3
    tail = max_chars - head
    return f"{text[:head]} [… {len(text) - head - tail:,} of {len(text):,} chars elided …] {text[-tail:]}"


def render_row(row: dict, max_chars: int = 600) -> Group:
    """The renderable of one unified row (decoded: empty keys may be absent)."""
    parts: list[Any] = [_header(row, max_chars)]
    edges = _edges_by_consumer(row.get("call_graph") or [])
    calls_by_id = {c["id"]: c for m in row["messages"] for c in m.get("tool_calls") or []}
    for i, m in enumerate(row["messages"]):
        parts.append(_message_panel(i, m, edges, calls_by_id, max_chars))
    media = {c: row[c] for c in ("images", "audios", "videos") if row.get(c)}
    if media:
        # each path elided as any long text: an inline data: URL (base64 of a whole image) filled screens
        parts.append(Text(printable("media: " + "; ".join(
            f"{c}: {', '.join(elide(str(p), max_chars) for p in v)}" for c, v in media.items())), style="dim"))
    return Group(*parts)


def render_json(value: Any, max_chars: int = 600) -> Text:
    """Any row (other formats) as indented JSON, long strings elided."""
    # json escapes C0 controls itself; DEL and C1 controls become the same \\u escape, so the JSON still parses
    return Text(printable(json.dumps(_elide_strings(value, max_chars), ensure_ascii=False, indent=2)))


# --------------------------------------------------------------------------------------------------


def _header(row: dict, max_chars: int) -> Text:
    header = Text()
    header.append(printable(str(row.get("id", ""))), style="bold")
    header.append(printable(f"  ·  {row.get('source', '')} / {row.get('subset', '')}"), style="dim")
    names = [str(t.get("function", t).get("name", "?")) for t in row.get("tools") or []]
    # elided as any long text: a catalog of thousands of tools filled screens before the first message
    header.append(printable(f"\ntools ({len(names)}): " + (elide(", ".join(names), max_chars) if names else "none")),
                  style="dim")
    return header


def _message_panel(i: int, m: dict, edges: dict, calls_by_id: dict, max_chars: int) -> "_MessagePanel":
    role = m["role"]
    style = ROLE_STYLES.get(role, "white")
    body: list[Any] = []
    title = f"[{i}] {role}"
    if role == "tool":
        call = calls_by_id.get(m.get("tool_call_id"))
        title += f" · result of {m.get('tool_call_id', '?')}"
        if m.get("name") or call:
            title += f" ({m.get('name') or call['function']['name']})"
    calls = m.get("tool_calls") or []
    if calls:
        title += f" · {len(calls)} call{'s' if len(calls) > 1 else ''}"
    if m.get("reasoning_content") is not None:
        body.append(Text("thinking: ", style="italic dim") + Text(printable(elide(m["reasoning_content"], max_chars)),
                                                                  style="italic dim"))
    if m.get("content"):
        body.append(Text(printable(elide(m["content"], max_chars))))
    for call in calls:
        body.append(_call_text(call, edges.get(call["id"], []), max_chars))
    if not body:
        body.append(Text("(empty)", style="dim"))
    short_title = printable(f"[{i}] {role}").replace("\n", " ")
    return _MessagePanel(printable(title).replace("\n", " "), short_title, body, style)


class _MessagePanel:
    """A message's panel. Its title names the call and tool a result answers; rich cuts a title wider than the
    panel can be without a mark (a long tool name lost its end), so the title then keeps its start (``[2] tool``)
    and the rest goes whole on the panel's first line, wrapped like any text."""

    def __init__(self, title: str, short_title: str, body: list, style: str):
        self.title, self.short_title, self.body, self.style = title, short_title, body, style

    def _panel(self, max_width: int) -> Panel:
        fits = cell_len(self.title) + 5 <= max_width  # rich draws "╭─ " before it and at least "─╮" after it
        detail = self.title[len(self.short_title):].removeprefix(" · ")
        body = self.body if fits else [Text(detail, style="dim"), *self.body]
        # A Text title: a str one is read as rich markup, so a name or call id holding "[/x]" raised MarkupError
        return Panel(Group(*body), title=Text(self.title if fits else self.short_title), title_align="left",
                     border_style=self.style, expand=False)

    def __rich_console__(self, console, options):
        yield self._panel(options.max_width)

    def __rich_measure__(self, console, options) -> Measurement:
        return Measurement.get(console, options, self._panel(options.max_width))


def _call_text(call: dict, edges: list[dict], max_chars: int) -> Text:
    fn = call["function"]
    text = Text()
    text.append("→ ", style="bold")
    text.append(printable(fn["name"]), style="bold")
    text.append(printable(f"  id {call['id']}") + "\n", style="dim")
    arguments = printable(json.dumps(_elide_strings(fn["arguments"], max_chars), ensure_ascii=False, indent=2))
    text.append("\n".join("  " + line for line in arguments.splitlines()))
    for edge in edges:
        text.append(printable(f"\n  ↳ {edge['argument']} ← output {edge['output_field'] or '(whole)'} of "
                              f"{edge['producer']}"), style="blue")
    return text


def _edges_by_consumer(graph: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for edge in graph:
        out.setdefault(edge["consumer"], []).append(edge)
    return out


def _elide_strings(value: Any, max_chars: int) -> Any:
    if isinstance(value, str):
        return elide(value, max_chars)
    if isinstance(value, dict):
        return {k: _elide_strings(v, max_chars) for k, v in value.items()}
    if isinstance(value, list):
        return [_elide_strings(v, max_chars) for v in value]
    return value
