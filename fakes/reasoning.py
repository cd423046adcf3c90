"""What the real LLM APIs refuse about reasoning, for the loopback LLM server.

``refusal(vendor, body)`` is asked of every request before it is answered: the status and
message the vendor's documented validation would answer with, or None to go on. Each
vendor's rules live in their own function so the server refuses what the real one does
(a tool loop whose thinking was dropped or altered, thinking with an assistant prefill, a
function call turn without its thought signature, ...).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
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
    if prefill_refused(str(body.get("model", ""))) and _ends_with_assistant(body):
        return 400, NO_PREFILL
    return anthropic_thinking_refusal(body)


# Claude 4.6 and later refuse a request whose last message is the assistant's (Anthropic's
# migration guide, "Prefill removal"); the message is the API's own.
NO_PREFILL = (
    "This model does not support assistant message prefill. "
    "The conversation must end with a user message."
)
_CLAUDE_VERSION = re.compile(r"claude-(?:opus|sonnet|haiku)-(\d+)(?:-(\d{1,2}))?(?!\d)")


def prefill_refused(model: str) -> bool:
    """Whether the Claude model (any vendor prefix or date suffix) refuses a prefill."""
    found = _CLAUDE_VERSION.search(model)
    if found is None:
        return False
    major, minor = int(found[1]), int(found[2] or 0)
    return (major, minor) >= (4, 6)


def _ends_with_assistant(body: dict[str, Any]) -> bool:
    messages = body.get("messages") or []
    return bool(messages) and messages[-1].get("role") == "assistant"


# --- Gemini: thought signatures (ai.google.dev/gemini-api/docs/thought-signatures) -------------
#
# Gemini 3 returns a signature on the first function call part of every step (parallel calls:
# the first only) and may return one on the last part of an answer without calls. The API
# validates the *current turn* strictly: it looks back for the most recent user content
# with standard content (text, not a functionResponse); in every model step after it, the
# first functionCall part must carry its signature, or the request fails with a 400. Earlier
# turns are not checked. A signature the API did not issue (or cannot verify) is refused as
# "Corrupted thought signature." The messages are the API's own, as users report them.

_GEMINI_MISSING = (
    "Function call is missing a thought_signature in functionCall parts. This is required "
    "for tools to work correctly, and missing thought_signature may lead to degraded model "
    "performance. Additional data, function call `default_api:{name}` , position {position}. "
    "Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
)
_GEMINI_CORRUPTED = "Corrupted thought signature."
_GEMINI_KEY = os.urandom(16)  # signatures are opaque bytes only this process can verify


def gemini_signature() -> str:
    """A fresh thought signature (base64, as the API writes bytes) the fake will accept."""
    nonce = os.urandom(12)
    return base64.b64encode(nonce + _gemini_mac(nonce)).decode()


def gemini_refusal(body: dict[str, Any]) -> tuple[int, str] | None:
    contents: list[dict[str, Any]] = body.get("contents") or []
    for content in contents:
        for part in content.get("parts") or []:
            signature = _either(part, "thoughtSignature", "thought_signature")
            if signature is not None and not _gemini_issued(signature):
                return 400, _GEMINI_CORRUPTED
    start = _gemini_turn_start(contents)
    for position, content in enumerate(contents[start:], start=start + 1):
        if content.get("role") != "model":
            continue
        calls = [
            p for p in content.get("parts") or [] if _either(p, "functionCall", "function_call")
        ]
        if calls and _either(calls[0], "thoughtSignature", "thought_signature") is None:
            name = _either(calls[0], "functionCall", "function_call").get("name", "")
            return 400, _GEMINI_MISSING.format(name=name, position=position)
    return None


def _gemini_turn_start(contents: list[dict[str, Any]]) -> int:
    """Where the current turn begins: the last user content that is not only function
    responses (the API's "standard content", e.g. text)."""
    for index in range(len(contents) - 1, -1, -1):
        content = contents[index]
        if content.get("role", "user") != "user":
            continue
        parts = content.get("parts") or []
        if any(_either(p, "functionResponse", "function_response") is None for p in parts):
            return index
    return 0


def _gemini_mac(nonce: bytes) -> bytes:
    return hmac.new(_GEMINI_KEY, b"gemini-thought:" + nonce, hashlib.sha256).digest()[:20]


def _gemini_issued(signature: str) -> bool:
    # The SDK writes bytes back in the URL-safe alphabet: read either.
    try:
        raw = base64.urlsafe_b64decode(signature.replace("+", "-").replace("/", "_"))
    except ValueError:
        return False
    nonce, mac = raw[:12], raw[12:]
    return len(nonce) == 12 and hmac.compare_digest(mac, _gemini_mac(nonce))


def _either(part: dict[str, Any], camel: str, snake: str) -> Any:
    return part.get(camel, part.get(snake))


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
