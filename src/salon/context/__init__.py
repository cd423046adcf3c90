"""The effective context of an activation and its rendering into an LLM request."""

from salon.context.builder import (
    TRUNCATION_MARK,
    is_visible,
    record_text,
    render_chat,
    select_context,
    weave,
)

__all__ = [
    "TRUNCATION_MARK",
    "is_visible",
    "record_text",
    "render_chat",
    "select_context",
    "weave",
]
