"""Anthropic's Messages API through the official ``anthropic`` SDK."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import anthropic

from salon.config import ProviderConfig
from salon.llm._sdk import MALFORMED_STREAM_ERRORS, translate_sdk_error
from salon.llm.base import (
    ChatMessage,
    ImagePart,
    LLMRequest,
    StopEvent,
    StreamEvent,
    TextDelta,
    TextPart,
    UsageEvent,
)
from salon.model import Usage

__all__ = ["AnthropicProvider", "to_anthropic_messages"]

_OPENING_TURN = "(the conversation so far)"


_STREAM_ERRORS: tuple[type[Exception], ...] = (anthropic.AnthropicError, *MALFORMED_STREAM_ERRORS)


class AnthropicProvider:
    def __init__(
        self,
        name: str,
        config: ProviderConfig,
        *,
        api_key: str | None,
        base_url: str | None,
        http_client: Any = None,
    ) -> None:
        self.name = name
        self._config = config
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=base_url,
            max_retries=0,  # RetryingProvider owns retries
            timeout=config.timeout,
            default_headers=config.headers or None,
            http_client=http_client,
        )

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        kwargs = self._kwargs(request)
        input_usage = Usage()
        try:
            stream = await self._client.messages.create(**kwargs)
        except anthropic.AnthropicError as exc:
            raise translate_sdk_error(exc, self.name, anthropic) from exc
        try:
            async for event in stream:
                if event.type == "message_start":
                    input_usage = _input_usage(event.message.usage)
                elif event.type == "content_block_delta" and event.delta.type == "text_delta":
                    yield TextDelta(event.delta.text)
                elif event.type == "message_delta":
                    out = Usage(output_tokens=event.usage.output_tokens or 0)
                    yield UsageEvent(input_usage + out)
                    if event.delta.stop_reason:
                        yield StopEvent(str(event.delta.stop_reason))
        except _STREAM_ERRORS as exc:
            raise translate_sdk_error(exc, self.name, anthropic) from exc

    def _kwargs(self, request: LLMRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            "messages": to_anthropic_messages(request),
            "stream": True,
        }
        if request.system:
            kwargs["system"] = request.system
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        if request.stop:
            kwargs["stop_sequences"] = list(request.stop)
        extra_body = {**self._config.extra_body, **request.extra}
        if extra_body:
            kwargs["extra_body"] = extra_body
        return kwargs

    async def aclose(self) -> None:
        await self._client.close()


def to_anthropic_messages(request: LLMRequest) -> list[dict[str, Any]]:
    messages = [_message(m) for m in request.messages]
    # The API wants a user turn first; a room may well open with the bot talking.
    if not messages or messages[0]["role"] != "user":
        messages.insert(0, {"role": "user", "content": _OPENING_TURN})
    last = messages[-1]
    if last["role"] == "assistant":
        _strip_trailing_space(last)  # the API rejects a final assistant turn ending in space
    return messages


def _message(message: ChatMessage) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            block: dict[str, Any] = {"type": "text", "text": part.text}
            if part.cache_breakpoint:
                block["cache_control"] = {"type": "ephemeral"}
            blocks.append(block)
        elif isinstance(part, ImagePart):
            data = base64.b64encode(part.data).decode("ascii")
            source = {"type": "base64", "media_type": part.media_type, "data": data}
            blocks.append({"type": "image", "source": source})
    return {"role": message.role, "content": blocks}


def _strip_trailing_space(message: dict[str, Any]) -> None:
    blocks = message["content"]
    if blocks and blocks[-1]["type"] == "text":
        blocks[-1]["text"] = blocks[-1]["text"].rstrip()


def _input_usage(usage: Any) -> Usage:
    return Usage(
        input_tokens=usage.input_tokens or 0,
        cache_read_tokens=usage.cache_read_input_tokens or 0,
        cache_write_tokens=usage.cache_creation_input_tokens or 0,
    )
