"""What the real LLM APIs refuse about reasoning, for the loopback LLM server.

``refusal(vendor, body)`` is asked of every request before it is answered: the status and
message the vendor's documented validation would answer with, or None to go on. Each
vendor's rules live in their own function so the server refuses what the real one does
(a tool loop whose thinking was dropped or altered, thinking with an assistant prefill, a
function call turn without its thought signature, ...).
"""

from __future__ import annotations

from typing import Any

__all__ = ["refusal"]


def refusal(vendor: str, body: dict[str, Any]) -> tuple[int, str] | None:
    """The refusal a vendor's API gives ``body``, or None when it would take it."""
    if vendor in ("anthropic", "bedrock"):
        return anthropic_refusal(body)
    if vendor == "gemini":
        return gemini_refusal(body)
    if vendor == "openai":
        return openai_refusal(body)
    return None


def anthropic_refusal(body: dict[str, Any]) -> tuple[int, str] | None:
    return None


def gemini_refusal(body: dict[str, Any]) -> tuple[int, str] | None:
    return None


def openai_refusal(body: dict[str, Any]) -> tuple[int, str] | None:
    """DeepSeek's thinking mode (api-docs.deepseek.com/guides/thinking_mode): between two
    user messages, an assistant turn that called tools must carry its ``reasoning_content``
    in every later request, or the request is a 400; on a turn without tool calls it is
    optional (ignored). Other OpenAI-compatible servers take either."""
    if not _deepseek_thinking(body):
        return None
    for index, message in enumerate(body.get("messages") or []):
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        if message.get("tool_calls") and "reasoning_content" not in message:
            return 400, (
                f"Missing `reasoning_content` field in the assistant message at message "
                f"index {index}. For more information, please refer to "
                "https://api-docs.deepseek.com/guides/thinking_mode#tool-calls"
            )
    return None


def _deepseek_thinking(body: dict[str, Any]) -> bool:
    """A DeepSeek model in thinking mode: ``deepseek-reasoner``, or a model asked with
    ``thinking: {"type": "enabled"}`` (the V4 models think unless it says disabled)."""
    model = str(body.get("model", ""))
    if not model.startswith("deepseek"):
        return False
    switch = (body.get("thinking") or {}).get("type")
    if model == "deepseek-reasoner" or switch == "enabled":
        return True
    return model.startswith("deepseek-v4") and switch != "disabled"
