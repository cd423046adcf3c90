"""The effective context of an activation and its rendering into an LLM request."""

from salon.context.builder import ChatMemo, record_text, render_chat, weave
from salon.context.prefill import render_prefill, stop_sequences
from salon.context.rolling import Rolled, RollState, roll
from salon.context.selection import TRUNCATION_MARK, is_visible, m_command, select_context

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
