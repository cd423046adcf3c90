"""Tool calls shown to people: JSON flattened to ``key: value`` text and trimmed."""

from __future__ import annotations

import json
from typing import Any

from salon.model import ToolCall, ToolResult

__all__ = ["flatten", "tool_log_text"]

_PART_LIMIT = 400


def flatten(value: Any, prefix: str = "") -> str:
    """``{"a": {"b": 1}, "c": [2, 3]}`` -> ``a.b: 1, c: 2, 3``; JSON text is parsed first."""
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except (json.JSONDecodeError, RecursionError):
            return value
        if not isinstance(parsed, dict | list):
            return value
        value = parsed
    if isinstance(value, dict):
        items = [_item(k, v, prefix) for k, v in value.items()]
        return ", ".join(i for i in items if i)
    if isinstance(value, list):
        return ", ".join(flatten(v) for v in value)
    return "" if value is None else str(value)


def _item(key: str, value: Any, prefix: str) -> str:
    name = f"{prefix}{key}"
    if isinstance(value, dict):
        return flatten(value, f"{name}.")
    return f"{name}: {flatten(value)}"


def _trim(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def tool_log_text(bot_name: str, call: ToolCall, result: ToolResult, limit: int) -> str:
    """One dot message with the call and its result, at most ``limit`` characters."""
    part = max(min(_PART_LIMIT, (limit - 2 * len(bot_name) - 2 * len(call.name) - 16) // 2), 20)
    marker = "!" if result.is_error else ""
    sent = f".{bot_name}>[{call.name}]: {_trim(flatten(call.arguments), part)}"
    got = f".{bot_name}<[{call.name}]{marker}: {_trim(flatten(result.content), part)}"
    return f"{sent}\n{got}"[:limit]
