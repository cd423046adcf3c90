"""What the real LLM APIs refuse about reasoning, for the loopback LLM server.

``refusal(vendor, body)`` is asked of every request before it is answered: the status and
message the vendor's documented validation would answer with, or None to go on. Each
vendor's rules live in their own function so the server refuses what the real one does
(a tool loop whose thinking was dropped or altered, thinking with an assistant prefill, a
function call turn without its thought signature, ...).
"""

from __future__ import annotations

from typing import Any

from fakes.anthropic_reasoning import refusal as anthropic_thinking_refusal

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
    return anthropic_thinking_refusal(body)


def gemini_refusal(body: dict[str, Any]) -> tuple[int, str] | None:
    return None


def openai_refusal(body: dict[str, Any]) -> tuple[int, str] | None:
    return None
