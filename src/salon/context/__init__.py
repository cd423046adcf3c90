"""The effective context of an activation and its rendering into an LLM request."""

from salon.context.builder import TRUNCATION_MARK, is_visible, render_chat, select_context

__all__ = ["TRUNCATION_MARK", "is_visible", "render_chat", "select_context"]
