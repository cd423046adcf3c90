"""The effective context of an activation and its rendering into an LLM request."""

from salon.context.builder import (
    TRUNCATION_MARK,
    ChatMemo,
    is_visible,
    m_command,
    record_text,
    render_chat,
    select_context,
    weave,
)
from salon.context.prefill import render_prefill, stop_sequences
from salon.context.rolling import Rolled, RollState, roll

__all__ = [
    "TRUNCATION_MARK",
    "ChatMemo",
    "RollState",
    "Rolled",
    "is_visible",
    "m_command",
    "record_text",
    "render_chat",
    "render_prefill",
    "roll",
    "select_context",
    "stop_sequences",
    "weave",
]
