"""Anthropic's Messages API through the official ``anthropic`` SDK."""

from __future__ import annotations

import base64
import json
import logging
import math
from collections.abc import AsyncIterator, Callable
from functools import partial
from typing import Any

import anthropic

from salon.config import ProviderConfig
from salon.llm._convert import REQUESTS, Converted
from salon.llm._sdk import add_extras, sdk_timeout, sent_body, stream_sdk
from salon.llm.base import (
    BaseProvider,
    ChatMessage,
    ImagePart,
    LLMRequest,
    StopEvent,
    StreamEvent,
    TextDelta,
    TextPart,
    Thinking,
    ThinkingDelta,
    ThinkingPart,
    ThoughtEvent,
    ToolCallEvent,
    ToolResultPart,
    ToolUsePart,
    UsageEvent,
    anthropic_traits,
    parse_arguments,
    turn_bytes,
)
from salon.llm.cache_plan import CachePlan, anthropic_min_prefix, plan_ttls
from salon.model import Thought, ToolCall, Usage

__all__ = ["AnthropicProvider", "to_anthropic_messages"]

logger = logging.getLogger(__name__)

_OPENING_TURN = "(the conversation so far)"
# Manual thinking (a budget) lets the model think between tool calls only with this beta;
# adaptive thinking does so by itself. The Bedrock client moves betas into the body.
_INTERLEAVED = "interleaved-thinking-2025-05-14"


class AnthropicProvider(BaseProvider):
    def __init__(
        self,
        name: str,
        config: ProviderConfig,
        *,
        api_key: str | None,
        base_url: str | None,
        http_client: Any = None,
        aws: dict[str, str | None] | None = None,
    ) -> None:
        """``aws`` (region, keys, profile) selects the Bedrock client: the same Messages API
        and streaming events, reached through AWS with SigV4 signing or a Bedrock API key."""
        self.name = name
        self.traits = anthropic_traits(config.cache_ttl)
        self._config = config
        self._marker = _marker(config.cache_ttl)
        # A thinking block's signature is issued by the platform that served it: thoughts
        # from Anthropic's API and from Bedrock never go back to the other.
        self._vendor = "anthropic" if aws is None else "bedrock"
        # The body and why its markers have their lifetimes: stream and trace, built once.
        self._built = Converted(self._build_kwargs, REQUESTS)
        self._converted = Converted(
            partial(_message, marker=self._marker), weigh=turn_bytes, weak=True
        )
        self._told_temperature = False
        self._told_prefill = False
        common: dict[str, Any] = {
            "base_url": base_url,
            "max_retries": 0,  # RetryingProvider owns retries
            "timeout": sdk_timeout(config),
            "default_headers": config.headers or None,
            "http_client": http_client,
        }
        self._client: anthropic.AsyncAnthropic | anthropic.AsyncAnthropicBedrock
        if aws is None:
            self._client = anthropic.AsyncAnthropic(api_key=api_key, **common)
        else:
            self._client = anthropic.AsyncAnthropicBedrock(
                api_key=api_key,
                aws_region=aws.get("region"),
                aws_access_key=aws.get("access_key"),
                aws_secret_key=aws.get("secret_key"),
                aws_session_token=aws.get("session_token"),
                aws_profile=aws.get("profile"),
                **common,
            )

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        opening = self._client.messages.create(**self._kwargs(request))
        decoder = _EventDecoder(self._vendor, request.model)
        async for event in stream_sdk(self.name, anthropic, opening, decoder):
            yield event

    def wire(self, request: LLMRequest) -> dict[str, Any]:
        """The JSON body this request goes out as (extra fields merged in, as the SDK does)."""
        kwargs = self._kwargs(request)
        return sent_body(kwargs)[0]

    def cache_reason(self, request: LLMRequest) -> str | None:
        """Why the request's cache markers have the lifetimes they have; None without one."""
        return self._built(request)[1]

    def _kwargs(self, request: LLMRequest) -> dict[str, Any]:
        return self._built(request)[0]

    def _build_kwargs(self, request: LLMRequest) -> tuple[dict[str, Any], str | None]:
        messages = to_anthropic_messages(request, self._converted, vendor=self._vendor)
        kwargs: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            "messages": messages,
            "stream": True,
        }
        if request.system:
            kwargs["system"] = _system(request, self._marker)
        plan = _settle_markers(kwargs, request, self._config)
        reason = None
        if plan is not None:
            reason = f"stable {plan.stable}, tail {plan.tail}: {plan.reason}"
            logger.debug("%s: cache %s", self.name, reason)
        elif _marked_spots(kwargs):
            reason = f"cache_ttl: {self._config.cache_ttl or '5m'}"
        if request.temperature is not None and not self._told_temperature:
            # The API (2026-10-21, what the SDK sends) refuses sampling settings, and the
            # SDK no longer takes them: the bot answers without, and the log says so once.
            logger.warning("%s: temperature is not sent: Anthropic's API refuses it", self.name)
            self._told_temperature = True
        if request.stop:
            kwargs["stop_sequences"] = list(request.stop)
        if request.tools:
            kwargs["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.input_schema}
                for t in request.tools
            ]
        beta = self._add_thinking(kwargs, request)
        add_extras(kwargs, self._config, request)
        if beta:
            headers = kwargs.setdefault("extra_headers", {})
            listed = headers.get("anthropic-beta", "")
            headers["anthropic-beta"] = f"{listed},{beta}" if listed else beta
        return kwargs, reason

    def _add_thinking(self, kwargs: dict[str, Any], request: LLMRequest) -> str:
        """Put the request's thinking into ``kwargs``; the beta it needs, or ""."""
        if request.thinking is None:
            return ""
        if request.prefill:
            # The API refuses thinking with a final assistant turn (it must open with a
            # thinking block): a prefill bot continues its transcript without thinking.
            if not self._told_prefill:
                logger.warning(
                    "%s: thinking is not sent in prefill mode: Anthropic's API refuses "
                    "thinking with an assistant prefill",
                    self.name,
                )
                self._told_prefill = True
            return ""
        kwargs["thinking"] = _thinking_param(request.thinking)
        if request.thinking.effort is not None:
            kwargs["output_config"] = {"effort": request.thinking.effort}
        manual = kwargs["thinking"]["type"] == "enabled"
        return _INTERLEAVED if manual and request.tools else ""

    async def aclose(self) -> None:
        await self._client.close()


def _thinking_param(thinking: Thinking) -> dict[str, Any]:
    """The Messages API's ``thinking`` for what the bot asked: a budget is manual extended
    thinking (``budget_tokens`` of at least 1024, below ``max_tokens``); without one the
    model decides how much to think (``adaptive``), steered by ``output_config.effort`` when
    an effort is set. Models that take only manual thinking need a budget."""
    if thinking.budget_tokens is not None:
        return {"type": "enabled", "budget_tokens": thinking.budget_tokens}
    return {"type": "adaptive"}


class _EventDecoder:
    """Turns the Messages API's raw stream events into Salon stream events."""

    def __init__(self, vendor: str = "anthropic", model: str = "") -> None:
        self.vendor, self.model = vendor, model
        self.input_usage = Usage()
        self.usage_reported = False
        self.tool: dict[str, str] | None = None  # the tool_use block being streamed
        self.thinking: dict[str, str] | None = None  # the thinking block being streamed

    def decode(self, event: Any) -> list[StreamEvent]:
        kind = event.type
        if kind == "message_start":
            self.input_usage = _input_usage(event.message.usage)
        elif kind == "content_block_start":
            return self._start(event.content_block)
        elif kind == "content_block_delta":
            return self._delta(event.delta)
        elif kind == "content_block_stop":
            return self._stop()
        elif kind == "message_delta":
            self.usage_reported = True
            out: list[StreamEvent] = [UsageEvent(self.input_usage + _output_usage(event.usage))]
            if event.delta.stop_reason:
                out.append(StopEvent(str(event.delta.stop_reason)))
            return out
        return []

    def finish(self) -> list[StreamEvent]:
        if self.usage_reported:
            return []
        # Cut before message_delta: the prompt was still read (and billed).
        return [UsageEvent(self.input_usage)]

    def _start(self, block: Any) -> list[StreamEvent]:
        if block.type == "tool_use":
            self.tool = {"id": block.id, "name": block.name, "json": ""}
        elif block.type == "thinking":
            self.thinking = {"text": block.thinking or "", "signature": block.signature or ""}
        elif block.type == "redacted_thinking":  # arrives whole: nothing streams for it
            return [ThoughtEvent(Thought(self.vendor, self.model, redacted=block.data))]
        return []

    def _stop(self) -> list[StreamEvent]:
        if self.tool is not None:
            tool, self.tool = self.tool, None
            call = ToolCall(tool["id"], tool["name"], parse_arguments(tool["json"]))
            return [ToolCallEvent(call)]
        if self.thinking is not None:
            done, self.thinking = self.thinking, None
            signed = Thought(self.vendor, self.model, done["text"], signature=done["signature"])
            return [ThoughtEvent(signed)]
        return []

    def _delta(self, delta: Any) -> list[StreamEvent]:
        if delta.type == "text_delta":
            return [TextDelta(delta.text)]
        if delta.type == "input_json_delta" and self.tool is not None:
            self.tool["json"] += delta.partial_json
        elif delta.type == "thinking_delta" and self.thinking is not None:
            self.thinking["text"] += delta.thinking
            return [ThinkingDelta(delta.thinking)]
        elif delta.type == "signature_delta" and self.thinking is not None:
            self.thinking["signature"] += delta.signature
        return []


def _marker(ttl: str | None) -> dict[str, str]:
    """A ``cache_control`` value of one lifetime; ``auto`` and ``off`` start bare (the
    API's 5 minutes) and ``_settle_markers`` sets or drops each one."""
    return {"type": "ephemeral", "ttl": ttl} if ttl in ("5m", "1h") else {"type": "ephemeral"}


MAX_MARKERS = 4  # the API refuses a fifth
Spot = tuple[int, int, int]  # (tokens up to the block, message index or -1: system, block)


def _settle_markers(
    kwargs: dict[str, Any], request: LLMRequest, config: ProviderConfig
) -> CachePlan | None:
    """Make the request's cache markers ones the API takes and bills usefully: none with
    ``off``; none on a prefix shorter than the model's minimum (nothing would be cached;
    ``cache_min_tokens`` overrides the table);
    never more than four (the first and the newest three are kept); and with ``auto`` the
    lifetime ``plan_ttls`` finds cheapest for the channel's tempo, the stable breakpoints
    (the system prompt, and the first of two or more in the messages) before the tail
    ones. Marked blocks are copied, never changed in place (turns are shared)."""
    spots = _marked_spots(kwargs)
    if not spots:
        return None
    setting, minimum = config.cache_ttl, config.cache_min_tokens
    if minimum is None:
        minimum = anthropic_min_prefix(request.model)
    kept = [spot for spot in spots if spot[0] >= minimum and setting != "off"]
    if len(kept) > MAX_MARKERS:
        kept = [kept[0], *kept[1 - MAX_MARKERS :]]
    plan = _plan(kept, request) if setting == "auto" and kept else None
    for spot in spots:
        if spot not in kept:
            _set_control(kwargs, spot, None)
        elif plan is not None:
            ttl = plan.stable if _is_stable(spot, kept) else plan.tail
            # 5 minutes is the API's default: such markers go bare, as they always did.
            _set_control(kwargs, spot, None if ttl == "off" else _marker(ttl.replace("5m", "")))
    return plan


def _is_stable(spot: Spot, kept: list[Spot]) -> bool:
    """The system prompt's marker, and the first of two or more in the messages, stay put
    between activations; the others move with the tail."""
    in_messages = [s for s in kept if s[1] >= 0]
    return spot[1] < 0 or (len(in_messages) > 1 and spot == in_messages[0])


def _plan(kept: list[Spot], request: LLMRequest) -> CachePlan:
    stable = [spot[0] for spot in kept if _is_stable(spot, kept)]
    tail = [spot[0] for spot in kept if not _is_stable(spot, kept)]
    s = stable[-1] if stable else 0
    p = tail[-2] if len(tail) > 1 else s
    n = tail[-1] if tail else s
    return plan_ttls(request.activation_gaps, s, p - s, n - p)


def _marked_spots(kwargs: dict[str, Any]) -> list[Spot]:
    """(estimated tokens up to and including the block, message index or -1 for the
    system prompt, block index) of each block with a cache marker, in prompt order."""
    tokens = sum(_estimate(tool) for tool in kwargs.get("tools") or [])
    spots: list[Spot] = []
    system = kwargs.get("system")
    turns: list[tuple[int, Any]] = [(-1, system)] if isinstance(system, list) else []
    turns += list(enumerate(m["content"] for m in kwargs["messages"]))
    for turn, content in turns:
        if isinstance(content, str):
            tokens += math.ceil(len(content) / 4)
            continue
        for index, block in enumerate(content):
            tokens += _estimate(block)
            if "cache_control" in block:
                spots.append((tokens, turn, index))
    return spots


def _estimate(block: dict[str, Any]) -> int:
    """Tokens, roughly (4 characters each; an image about a thousand)."""
    if block.get("type") == "text":
        return math.ceil(len(block["text"]) / 4)
    if block.get("type") == "image":
        return 1000
    return math.ceil(len(json.dumps(block, default=str)) / 4)


def _set_control(kwargs: dict[str, Any], spot: Spot, control: dict[str, str] | None) -> None:
    """Give the block at ``spot`` the cache marker ``control``, or none."""
    _, turn, index = spot
    if turn < 0:
        blocks = kwargs["system"]
    else:
        message = kwargs["messages"][turn]
        blocks = list(message["content"])
        kwargs["messages"][turn] = {**message, "content": blocks}
    block = {k: v for k, v in blocks[index].items() if k != "cache_control"}
    if control is not None:
        block["cache_control"] = control
    blocks[index] = block


def _system(request: LLMRequest, marker: dict[str, str]) -> str | list[dict[str, Any]]:
    if not request.cache_system:
        return request.system
    return [{"type": "text", "text": request.system, "cache_control": marker}]


def to_anthropic_messages(
    request: LLMRequest,
    convert: Callable[[ChatMessage], dict[str, Any]] | None = None,
    *,
    vendor: str = "anthropic",
) -> list[dict[str, Any]]:
    """The request's messages in Anthropic's form; ``convert`` may remember turns' forms
    (shared between requests, so the last one is copied before it is changed). Thinking
    goes back only where ``vendor`` (``anthropic`` or ``bedrock``) and the request's model
    wrote it."""
    one = convert or _message
    messages = [one(_replayable(m, vendor, request.model)) for m in request.messages]
    # The API wants a user turn first; a room may well open with the bot talking.
    if not messages or messages[0]["role"] != "user":
        messages.insert(0, {"role": "user", "content": _OPENING_TURN})
    last = messages[-1]
    if last["role"] == "assistant":
        # The API rejects a final assistant turn ending in white space.
        messages[-1] = _without_trailing_space(last)
    return messages


def _replayable(message: ChatMessage, vendor: str, model: str) -> ChatMessage:
    """``message`` without the thinking this platform cannot take back: another vendor's or
    model's (its signature holds only where it was issued) or one never signed (a stream
    cut before its signature). Dropped thinking is never sent as text either."""
    kept = tuple(
        p for p in message.parts if not isinstance(p, ThinkingPart) or _ours(p, vendor, model)
    )
    return message if len(kept) == len(message.parts) else ChatMessage(message.role, kept)


def _ours(part: ThinkingPart, vendor: str, model: str) -> bool:
    thought = part.thought
    signed = bool(thought.signature or thought.redacted)
    return signed and thought.vendor == vendor and thought.model == model


def _message(message: ChatMessage, marker: dict[str, str] | None = None) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            block: dict[str, Any] = {"type": "text", "text": part.text}
            if part.cache_breakpoint:
                block["cache_control"] = marker or _marker(None)
            blocks.append(block)
        elif isinstance(part, ImagePart):
            data = base64.b64encode(part.data).decode("ascii")
            source = {"type": "base64", "media_type": part.media_type, "data": data}
            blocks.append({"type": "image", "source": source})
        elif isinstance(part, ToolUsePart):
            call = part.call
            blocks.append(
                {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
            )
        elif isinstance(part, ThinkingPart):
            # Exactly as received, and never with a cache marker (the API refuses one there).
            blocks.append(_thinking_block(part.thought))
        elif isinstance(part, ToolResultPart):
            result = part.result
            blocks.append(
                {
                    "type": "tool_result",
                    "tool_use_id": result.call_id,
                    "content": result.content,
                    "is_error": result.is_error,
                }
            )
    return {"role": message.role, "content": blocks}


def _thinking_block(thought: Thought) -> dict[str, Any]:
    if thought.redacted:
        return {"type": "redacted_thinking", "data": thought.redacted}
    return {"type": "thinking", "thinking": thought.text, "signature": thought.signature}


def _without_trailing_space(message: dict[str, Any]) -> dict[str, Any]:
    blocks = message["content"]
    if not blocks or blocks[-1]["type"] != "text":
        return message
    last = {**blocks[-1], "text": blocks[-1]["text"].rstrip()}
    return {**message, "content": [*blocks[:-1], last]}


def _output_usage(usage: Any) -> Usage:
    """The answer's tokens; the reasoning's part of them where the API breaks it out."""
    details = getattr(usage, "output_tokens_details", None)
    thinking = getattr(details, "thinking_tokens", 0) if details is not None else 0
    return Usage(output_tokens=usage.output_tokens or 0, reasoning_tokens=thinking or 0)


def _input_usage(usage: Any) -> Usage:
    """The prompt's tokens; of the cache writes, the 1-hour ones where the API breaks
    them out (``cache_creation``), since they cost 2x input against 1.25x."""
    created = getattr(usage, "cache_creation", None)
    hour = getattr(created, "ephemeral_1h_input_tokens", 0) if created is not None else 0
    return Usage(
        input_tokens=usage.input_tokens or 0,
        cache_read_tokens=usage.cache_read_input_tokens or 0,
        cache_write_tokens=usage.cache_creation_input_tokens or 0,
        cache_write_1h_tokens=hour or 0,
    )
