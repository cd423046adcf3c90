"""The Messages API's documented checks on reasoning, for the loopback LLM server (the same
on Bedrock, which takes the Messages API's body): the thinking setting and what may go with
it, thinking blocks' signatures, and the thinking a continued assistant turn must open with.

Signatures are the fake's own: an HMAC of the block's text (``anthropic_signature``), so a
changed text, a changed signature or one made up elsewhere is refused as the real API
refuses them.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any

__all__ = ["anthropic_signature", "refusal"]


def refusal(body: dict[str, Any]) -> tuple[int, str] | None:
    """The Messages API's documented checks on reasoning (the same on Bedrock), in the
    order a request meets them: the thinking setting, what goes with it, then the turns."""
    thinking = body.get("thinking") or {}
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    thinks = kind in ("enabled", "adaptive")
    for refused in (
        _budget_refusal(thinking, body.get("max_tokens")) if kind == "enabled" else None,
        _alongside_thinking(body, manual=kind == "enabled") if thinks else None,
        _thinking_blocks_refusal(body.get("messages") or [], kind),
    ):
        if refused is not None:
            return 400, refused
    return None


# The Messages API's own words (as its 400s carry them); {n}/{type} filled in per request.
_DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
_CONSIDERATIONS = f"{_DOCS}#important-considerations-when-using-extended-thinking"
_MIN_BUDGET = 1024
_BUDGET_MIN = "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
_BUDGET_MAX = (
    "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our "
    f"documentation at {_DOCS}#max-tokens-and-context-window-size"
)
_TEMPERATURE = (
    "`temperature` may only be set to 1 when thinking is enabled. Please consult our "
    f"documentation at {_CONSIDERATIONS}"
)
_TOP_K = (
    "`top_k` must be unset when thinking is enabled. Please consult our documentation at "
    f"{_CONSIDERATIONS}"
)
_FORCED_TOOL = "Thinking may not be enabled when tool_choice forces tool use."
_MUST_START = (
    "messages.{n}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
    "`{type}`. When `thinking` is enabled, a final `assistant` message must start with a "
    "thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). "
    "We recommend you include thinking blocks from previous turns. To avoid this "
    f"requirement, disable `thinking`. Please consult our documentation at {_DOCS}"
)
_BAD_SIGNATURE = "messages.{n}.content.{m}: Invalid `signature` in `thinking` block"
_NOT_CACHEABLE = "messages.{n}.content.{m}.{type}.cache_control: Extra inputs are not permitted"
_FINAL_WITHOUT = (
    "messages.{n}.content.{m}: When thinking is disabled, an `assistant` message in the "
    "final position cannot contain `thinking`. To use thinking blocks, enable `thinking` "
    "in your request."
)
_THINKING_BLOCKS = ("thinking", "redacted_thinking")
_SIGNING_KEY = b"salon-fake-anthropic-thinking"


def anthropic_signature(text: str) -> str:
    """The signature the fake issues for a thinking block with ``text``."""
    mac = hmac.new(_SIGNING_KEY, text.encode(), hashlib.sha256).digest()
    return base64.b64encode(mac).decode()


def _budget_refusal(thinking: dict[str, Any], max_tokens: Any) -> str | None:
    budget = thinking.get("budget_tokens")
    if not isinstance(budget, int) or budget < _MIN_BUDGET:
        return _BUDGET_MIN
    # Stricter than the API in one case: with interleaved thinking and tools the budget may
    # exceed max_tokens; Salon never relies on that, so the fake keeps the general rule.
    if not isinstance(max_tokens, int) or max_tokens <= budget:
        return _BUDGET_MAX
    return None


def _alongside_thinking(body: dict[str, Any], *, manual: bool) -> str | None:
    """Settings thinking does not take: sampling changes, and (in manual mode) a tool
    choice that forces a tool; adaptive thinking takes a forced tool."""
    temperature = body.get("temperature")
    if temperature is not None and temperature != 1:
        return _TEMPERATURE
    if body.get("top_k") is not None:
        return _TOP_K
    choice = body.get("tool_choice") or {}
    if manual and isinstance(choice, dict) and choice.get("type") in ("any", "tool"):
        return _FORCED_TOOL
    return None


def _thinking_blocks_refusal(messages: list[dict[str, Any]], kind: Any) -> str | None:
    thinks = kind in ("enabled", "adaptive")
    for n, message in enumerate(messages):
        for m, block in enumerate(_blocks(message)):
            block_type = block.get("type")
            if block_type not in _THINKING_BLOCKS:
                continue
            if "cache_control" in block:
                return _NOT_CACHEABLE.format(n=n, m=m, type=block_type)
            last = n == len(messages) - 1
            if not thinks and last and message.get("role") == "assistant":
                return _FINAL_WITHOUT.format(n=n, m=m)
            signed = block_type != "thinking" or hmac.compare_digest(
                str(block.get("signature", "")), anthropic_signature(str(block.get("thinking")))
            )
            if thinks and not signed:
                return _BAD_SIGNATURE.format(n=n, m=m)
    return _turn_start_refusal(messages, manual=kind == "enabled") if thinks else None


def _turn_start_refusal(messages: list[dict[str, Any]], *, manual: bool) -> str | None:
    """With thinking on, the assistant's turn being continued must open with its thinking:
    a final assistant message (a prefill), or, in manual mode, the first assistant message
    after the last user turn that is more than tool results (a tool loop, however many
    rounds long). Adaptive thinking may skip thinking, so its tool loops may open without."""
    if not messages:
        return None
    if messages[-1].get("role") == "assistant":
        at = len(messages) - 1
    elif manual and _only_tool_results(messages[-1]):
        opened = max(
            (
                i
                for i, m in enumerate(messages)
                if m.get("role") == "user" and not _only_tool_results(m)
            ),
            default=-1,
        )
        at = next(
            (i for i in range(opened + 1, len(messages)) if messages[i].get("role") == "assistant"),
            -1,
        )
        if at < 0:
            return None
    else:
        return None
    blocks = _blocks(messages[at])
    first = blocks[0].get("type") if blocks else "text"
    if first in _THINKING_BLOCKS:
        return None
    return _MUST_START.format(n=at, type=first)


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def _only_tool_results(message: dict[str, Any]) -> bool:
    blocks = _blocks(message)
    return bool(blocks) and all(b.get("type") == "tool_result" for b in blocks)
