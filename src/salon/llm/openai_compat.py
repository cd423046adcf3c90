"""Any OpenAI-compatible chat-completions server through the official ``openai`` SDK."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import openai

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

__all__ = ["OpenAIProvider", "to_openai_messages"]


_STREAM_ERRORS: tuple[type[Exception], ...] = (openai.OpenAIError, *MALFORMED_STREAM_ERRORS)


class OpenAIProvider:
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
        # Local servers (Ollama, vLLM) need no key, but the SDK insists on one.
        self._client = openai.AsyncOpenAI(
            api_key=api_key or "unused",
            base_url=base_url,
            max_retries=0,  # RetryingProvider owns retries so the policy is ours
            timeout=config.timeout,
            default_headers=config.headers or None,
            http_client=http_client,
        )

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        kwargs = self._kwargs(request)
        try:
            stream = await self._client.chat.completions.create(**kwargs)
        except openai.OpenAIError as exc:
            raise translate_sdk_error(exc, self.name, openai) from exc
        try:
            async for chunk in stream:
                for event in _chunk_events(chunk):
                    yield event
        except _STREAM_ERRORS as exc:
            raise translate_sdk_error(exc, self.name, openai) from exc

    def _kwargs(self, request: LLMRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": request.model,
            "messages": to_openai_messages(request),
            "max_tokens": request.max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        if request.stop:
            kwargs["stop"] = list(request.stop)
        extra_body = {**self._config.extra_body, **request.extra}
        if extra_body:
            kwargs["extra_body"] = extra_body
        return kwargs

    async def aclose(self) -> None:
        await self._client.close()


def to_openai_messages(request: LLMRequest) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    messages.extend(_message(m) for m in request.messages)
    return messages


def _message(message: ChatMessage) -> dict[str, Any]:
    if all(isinstance(p, TextPart) for p in message.parts):
        return {"role": message.role, "content": message.plain_text}
    content: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            content.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            data = base64.b64encode(part.data).decode("ascii")
            url = f"data:{part.media_type};base64,{data}"
            content.append({"type": "image_url", "image_url": {"url": url}})
    return {"role": message.role, "content": content}


def _chunk_events(chunk: Any) -> list[StreamEvent]:
    events: list[StreamEvent] = []
    for choice in chunk.choices or ():
        text = choice.delta.content if choice.delta is not None else None
        if text:
            events.append(TextDelta(text))
        if choice.finish_reason:
            events.append(StopEvent(str(choice.finish_reason)))
    if chunk.usage is not None:
        events.append(UsageEvent(_usage(chunk.usage)))
    return events


def _usage(usage: Any) -> Usage:
    details = getattr(usage, "prompt_tokens_details", None)
    cached = (getattr(details, "cached_tokens", None) or 0) if details is not None else 0
    prompt = usage.prompt_tokens or 0
    # OpenAI counts cached tokens inside prompt_tokens; Salon's input_tokens are uncached.
    return Usage(
        input_tokens=max(prompt - cached, 0),
        output_tokens=usage.completion_tokens or 0,
        cache_read_tokens=cached,
    )
