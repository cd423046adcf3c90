"""An activation's memory events on the activity page: its ``recall`` calls (reads) and
``remember`` and ``forget`` calls (writes), as the trace's tool calls recorded them."""

from __future__ import annotations

from html import escape
from typing import Any

__all__ = ["MEMORY_TOOLS", "memory_events"]

MEMORY_TOOLS = {"recall": "read", "remember": "write", "forget": "write"}
_SHOWN = 160  # characters of a note's text or a result an event shows


def _short(value: object) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


def _event(tool: dict[str, Any]) -> str:
    name, arguments = tool["name"], tool.get("arguments") or {}
    kind = MEMORY_TOOLS[name]
    if name == "recall":
        what = f"recall {_short(arguments.get('query', ''))!r}"
    elif name == "remember":
        scope = arguments.get("scope") or "default scope"
        what = f"remember ({_short(scope)}): {_short(arguments.get('text', ''))!r}"
    else:
        what = f"forget note {_short(arguments.get('note_id', '?'))}"
    result = _short(tool.get("result", ""))
    if tool.get("verdict") not in (None, "run"):
        outcome = f"not run ({tool['verdict']})"
    elif tool.get("is_error"):
        outcome = f"refused: {result}"
    else:
        outcome = result
    css = ' class="tool-error"' if tool.get("is_error") else ""
    return f"<li{css}>{escape(kind)} · {escape(what)} → {escape(outcome)}</li>"


def memory_events(tools: list[dict[str, Any]]) -> str:
    """The memory calls of one activation, in order; empty when it made none."""
    used = [t for t in tools if t.get("name") in MEMORY_TOOLS]
    if not used:
        return ""
    reads = sum(MEMORY_TOOLS[t["name"]] == "read" for t in used)
    writes = len(used) - reads
    counted = f"{reads} read{'' if reads == 1 else 's'}, {writes} write{'' if writes == 1 else 's'}"
    events = "".join(_event(t) for t in used)
    return f'<h4>Memory: {counted}</h4><div class="memory"><ul>{events}</ul></div>'
