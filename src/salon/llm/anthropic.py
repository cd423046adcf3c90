"""Anthropic's Messages API through the official ``anthropic`` SDK."""

from __future__ import annotations

import base64
import logging
from collections.abc import AsyncIterator, Callable
from functools import partial
from typing import Any

import anthropic

from salon.config import ProviderConfig
from salon.llm._convert import REQUESTS, Converted
from salon.llm._sdk import add_extras, sdk_timeout, sent_body, stream_sdk
from salon.llm.base import (
    ChatMessage,
    ImagePart,
    LLMRequest,
    StopEvent,
    StreamEvent,
    TextDelta,
    TextPart,
    ToolCallEvent,
    ToolResultPart,
    ToolUsePart,
    UsageEvent,
    anthropic_traits,
    parse_arguments,
    turn_bytes,
)
from salon.model import ToolCall, Usage

__all__ = ["AnthropicProvider", "to_anthropic_messages"]

logger = logging.getLogger(__name__)

_OPENING_TURN = "(the conversation so far)"


class AnthropicProvider:
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
        self._kwargs = Converted(self._build_kwargs, REQUESTS)  # stream and trace: built once
        self._converted = Converted(
            partial(_message, marker=self._marker), weigh=turn_bytes, weak=True
        )
        self._told_temperature = False
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
        async for event in stream_sdk(self.name, anthropic, opening, _EventDecoder()):
            yield event

    def wire(self, request: LLMRequest) -> dict[str, Any]:
        """The JSON body this request goes out as (extra fields merged in, as the SDK does)."""
        kwargs = self._kwargs(request)
        return sent_body(kwargs)[0]

    def _build_kwargs(self, request: LLMRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            "messages": to_anthropic_messages(request, self._converted),
            "stream": True,
        }
        if request.system:
            kwargs["system"] = _system(request, self._marker)
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
        add_extras(kwargs, self._config, request)
        return kwargs

    async def aclose(self) -> None:
        await self._client.close()


class _EventDecoder:
    """Turns the Messages API's raw stream events into Salon stream events."""

    def __init__(self) -> None:
        self.input_usage = Usage()
        self.usage_reported = False
        self.tool: dict[str, str] | None = None  # the tool_use block being streamed

    def decode(self, event: Any) -> list[StreamEvent]:
        kind = event.type
        if kind == "message_start":
            self.input_usage = _input_usage(event.message.usage)
        elif kind == "content_block_start" and event.content_block.type == "tool_use":
            block = event.content_block
            self.tool = {"id": block.id, "name": block.name, "json": ""}
        elif kind == "content_block_delta":
            return self._delta(event.delta)
        elif kind == "content_block_stop" and self.tool is not None:
            tool, self.tool = self.tool, None
            return [
                ToolCallEvent(ToolCall(tool["id"], tool["name"], parse_arguments(tool["json"])))
            ]
        elif kind == "message_delta":
            self.usage_reported = True
            out: list[StreamEvent] = [
                UsageEvent(self.input_usage + Usage(output_tokens=event.usage.output_tokens or 0))
            ]
            if event.delta.stop_reason:
                out.append(StopEvent(str(event.delta.stop_reason)))
            return out
        return []

    def finish(self) -> list[StreamEvent]:
        if self.usage_reported:
            return []
        # Cut before message_delta: the prompt was still read (and billed).
        return [UsageEvent(self.input_usage)]

    def _delta(self, delta: Any) -> list[StreamEvent]:
        if delta.type == "text_delta":
            return [TextDelta(delta.text)]
        if delta.type == "input_json_delta" and self.tool is not None:
            self.tool["json"] += delta.partial_json
        return []


def _marker(ttl: str | None) -> dict[str, str]:
    """A ``cache_control`` value; every marker of a request has the same lifetime (the API
    wants 1-hour entries before 5-minute ones, which one lifetime cannot break)."""
    return {"type": "ephemeral", "ttl": ttl} if ttl else {"type": "ephemeral"}


def _system(request: LLMRequest, marker: dict[str, str]) -> str | list[dict[str, Any]]:
    if not request.cache_system:
        return request.system
    return [{"type": "text", "text": request.system, "cache_control": marker}]


def to_anthropic_messages(
    request: LLMRequest, convert: Callable[[ChatMessage], dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """The request's messages in Anthropic's form; ``convert`` may remember turns' forms
    (shared between requests, so the last one is copied before it is changed)."""
    one = convert or _message
    messages = [one(m) for m in request.messages]
    # The API wants a user turn first; a room may well open with the bot talking.
    if not messages or messages[0]["role"] != "user":
        messages.insert(0, {"role": "user", "content": _OPENING_TURN})
    last = messages[-1]
    if last["role"] == "assistant":
        # The API rejects a final assistant turn ending in white space.
        messages[-1] = _without_trailing_space(last)
    return messages


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


def _without_trailing_space(message: dict[str, Any]) -> dict[str, Any]:
    blocks = message["content"]
    if not blocks or blocks[-1]["type"] != "text":
        return message
    last = {**blocks[-1], "text": blocks[-1]["text"].rstrip()}
    return {**message, "content": [*blocks[:-1], last]}


def _input_usage(usage: Any) -> Usage:
    return Usage(
        input_tokens=usage.input_tokens or 0,
        cache_read_tokens=usage.cache_read_input_tokens or 0,
        cache_write_tokens=usage.cache_creation_input_tokens or 0,
    )
