"""The text tool protocol, for prefill mode and models without native tool calling.

The model is shown the tools in an ephemeral message and writes calls as XML::

    <function_calls>
    <invoke name="get_current_time">
    <parameter name="timezone">Europe/Paris</parameter>
    </invoke>
    </function_calls>

Generation stops at ``</function_calls>``; Salon runs the calls and appends a
``<function_results>`` block, and the model continues in the same turn. The parser never
raises: anything malformed becomes a call whose error the model gets back as its result.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from salon.model import UNPARSED_ARGUMENTS, ToolCall, ToolResult, ToolSpec

__all__ = [
    "CALLS_CLOSE",
    "CALLS_OPEN",
    "CallTextFilter",
    "ParsedCalls",
    "format_calls",
    "format_results",
    "parse_calls",
    "render_tool_list",
]

CALLS_OPEN = "<function_calls>"
CALLS_CLOSE = "</function_calls>"
MALFORMED = "__malformed_call__"

_INVOKE = re.compile(r"<invoke\s+name=\"([^\"]*)\"\s*>(.*?)(?:</invoke>|\Z)", re.DOTALL)
_PARAM = re.compile(
    r"<parameter\s+name=\"([^\"]*)\"\s*>(.*?)(?:</parameter>|(?=<parameter\s)|\Z)", re.DOTALL
)


def render_tool_list(specs: Sequence[ToolSpec]) -> str:
    """The ephemeral message that teaches the model the protocol and lists the tools."""
    tools = "\n".join(
        f'<tool name="{html.escape(s.name)}">\n<description>{s.description}</description>\n'
        f"<parameters>{json.dumps(s.input_schema, ensure_ascii=False)}</parameters>\n</tool>"
        for s in specs
    )
    return (
        "You can use tools. To call one or more, write exactly:\n"
        f'{CALLS_OPEN}\n<invoke name="TOOL_NAME">\n<parameter name="ARGUMENT">VALUE</parameter>\n'
        f"</invoke>\n{CALLS_CLOSE}\n"
        "Write JSON for arguments that are not strings. The results will follow in "
        "<function_results>; then continue your message.\n"
        f"<tools>\n{tools}\n</tools>"
    )


@dataclass
class ParsedCalls:
    """A completion split into what the channel sees and the calls it asked for."""

    text: str
    calls: list[ToolCall] = field(default_factory=list)


def parse_calls(
    completion: str, schemas: Mapping[str, Mapping[str, Any]] | None = None, *, id_prefix: str = "t"
) -> ParsedCalls:
    """Split off the ``<function_calls>`` block, if any, and parse its invokes."""
    start = completion.find(CALLS_OPEN)
    if start < 0:
        return ParsedCalls(completion)
    visible = completion[:start]
    block = completion[start + len(CALLS_OPEN) :]
    end = block.find(CALLS_CLOSE)
    if end >= 0:
        block = block[:end]
    calls: list[ToolCall] = []
    for index, match in enumerate(_INVOKE.finditer(block)):
        name = html.unescape(match.group(1)).strip()
        arguments = _arguments(match.group(2), (schemas or {}).get(name, {}))
        calls.append(ToolCall(f"{id_prefix}{index}", name or MALFORMED, arguments))
    if not calls and block.strip():
        snippet = block.strip()[:300]
        calls.append(ToolCall(f"{id_prefix}0", MALFORMED, {UNPARSED_ARGUMENTS: snippet}))
    return ParsedCalls(visible, calls)


def _arguments(body: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    properties = schema.get("properties") or {}
    arguments: dict[str, Any] = {}
    for match in _PARAM.finditer(body):
        name = html.unescape(match.group(1)).strip()
        raw = match.group(2).strip()
        declared = properties.get(name, {}) if isinstance(properties, Mapping) else {}
        arguments[name] = _coerce(
            raw, declared.get("type") if isinstance(declared, Mapping) else None
        )
    return arguments


def _coerce(raw: str, declared: object) -> Any:
    """Strings stay strings; other declared (or unknown) types are read as JSON if they parse."""
    if declared == "string":
        return html.unescape(raw)
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, RecursionError):
        return html.unescape(raw)


def format_calls(calls: Sequence[ToolCall]) -> str:
    """Calls in the protocol's own form, as the model would have written them."""
    lines = [CALLS_OPEN]
    for call in calls:
        lines.append(f'<invoke name="{html.escape(call.name)}">')
        for key, value in call.arguments.items():
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            lines.append(f'<parameter name="{html.escape(key)}">{text}</parameter>')
        lines.append("</invoke>")
    lines.append(CALLS_CLOSE)
    return "\n".join(lines)


def format_results(calls: Sequence[ToolCall], results: Sequence[ToolResult]) -> str:
    by_id = {r.call_id: r for r in results}
    parts = ["<function_results>"]
    for call in calls:
        result = by_id.get(call.id)
        content = result.content if result else "no result"
        tag = "error" if result is None or result.is_error else "stdout"
        parts.append(
            f"<result>\n<tool_name>{call.name}</tool_name>\n<{tag}>{content}</{tag}>\n</result>"
        )
    parts.append("</function_results>")
    return "\n".join(parts)


class CallTextFilter:
    """Streams the visible text of a completion, holding back a possible ``<function_calls>``.

    ``feed`` returns text safe to show now; once the opening tag appears, everything after
    it is kept for parsing and never shown.
    """

    def __init__(self) -> None:
        self.full = ""
        self._shown = 0
        self.in_calls = False

    def feed(self, delta: str) -> str:
        self.full += delta
        if self.in_calls:
            return ""
        start = self.full.find(CALLS_OPEN, max(self._shown - len(CALLS_OPEN), 0))
        if start >= 0:
            self.in_calls = True
            out = self.full[self._shown : start]
            self._shown = start
            return out
        safe = len(self.full) - _partial_tag_length(self.full)
        out = self.full[self._shown : safe]
        self._shown = max(self._shown, safe)
        return out

    def flush(self) -> str:
        if self.in_calls:
            return ""
        out = self.full[self._shown :]
        self._shown = len(self.full)
        return out


def _partial_tag_length(text: str) -> int:
    """Length of the longest suffix of ``text`` that begins ``<function_calls>``."""
    for size in range(min(len(CALLS_OPEN) - 1, len(text)), 0, -1):
        if CALLS_OPEN.startswith(text[-size:]):
            return size
    return 0
