"""Google's Gemini API through the official ``google-genai`` SDK.

Salon's assistant turns are Gemini's ``model`` turns; a request that ends with one (prefill
mode) asks the model to continue it. Tool calls are native function calls; a tool's result
goes back as a ``function_response`` part named after the call it answers.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from typing import Any

import httpx2
from google import genai
from google.genai import errors, types

from salon.config import ProviderConfig
from salon.errors import ProviderError
from salon.llm._errors import MALFORMED_STREAM_ERRORS, connection_failure, status_error
from salon.llm._sdk import BACKSTOP, close_stream, request_extras
from salon.llm.base import (
    ChatMessage,
    ImagePart,
    LLMRequest,
    ProviderTraits,
    StopEvent,
    StreamEvent,
    TextDelta,
    TextPart,
    ToolCallEvent,
    ToolResultPart,
    ToolUsePart,
    UsageEvent,
)
from salon.model import ToolCall, Usage, clean_text

__all__ = ["GoogleProvider", "to_google_contents"]

_OPENING_TURN = "(the conversation so far)"
_BLOCKING_FINISH = {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII"}


class GoogleProvider:
    def __init__(
        self,
        name: str,
        config: ProviderConfig,
        *,
        api_key: str | None,
        base_url: str | None,
    ) -> None:
        self.name = name
        self.traits = ProviderTraits()
        self._config = config
        options = types.HttpOptions(
            base_url=base_url,
            timeout=int((config.timeout + BACKSTOP) * 1000),  # milliseconds, for every phase
            headers=dict(config.headers) or None,
            # A transport of its own makes the SDK use httpx2, as the other SDKs do, rather
            # than aiohttp (whose session it subclasses, which aiohttp deprecates).
            async_client_args={"transport": _ConnectTimeout(config.connect_timeout)},
        )
        self._client = genai.Client(api_key=api_key or "unset", http_options=options)
        self._ids = itertools.count(1)

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        try:
            stream = await self._client.aio.models.generate_content_stream(
                model=request.model,
                contents=to_google_contents(request.messages),
                config=self._generation_config(request),
            )
        except errors.APIError as exc:
            raise self._translate(exc) from exc
        except httpx2.TransportError as exc:
            raise connection_failure(exc, self.name, answering=False) from exc
        decoder = _Decoder(self.name, self._ids)
        answering = False  # the SDK sends the request only when the stream is first read
        try:
            async for chunk in stream:
                answering = True
                for event in decoder.decode(chunk):
                    yield event
        except errors.APIError as exc:
            raise self._translate(exc) from exc
        except httpx2.TransportError as exc:
            raise connection_failure(exc, self.name, answering=answering) from exc
        except MALFORMED_STREAM_ERRORS as exc:
            message = f"{self.name}: malformed response stream: {exc}"
            raise ProviderError(message, provider=self.name, retryable=False) from exc
        finally:
            await close_stream(stream)  # also when the caller stops early or a deadline cancels
        for event in decoder.finish():
            yield event

    def wire(self, request: LLMRequest) -> dict[str, Any]:
        """What this request goes out as: the contents and the generation config."""
        config = self._generation_config(request).model_dump(mode="json", exclude_none=True)
        config.pop("http_options", None)
        return {
            "model": request.model,
            "contents": to_google_contents(request.messages),
            "config": config,
        }

    def _generation_config(self, request: LLMRequest) -> types.GenerateContentConfig:
        settings: dict[str, Any] = {
            "max_output_tokens": request.max_tokens,
            "automatic_function_calling": types.AutomaticFunctionCallingConfig(disable=True),
        }
        if request.system:
            settings["system_instruction"] = request.system
        if request.temperature is not None:
            settings["temperature"] = request.temperature
        if request.stop:
            settings["stop_sequences"] = list(request.stop)[:5]  # the API takes at most 5
        if request.tools:
            declarations = [
                types.FunctionDeclaration(
                    name=t.name, description=t.description, parameters_json_schema=t.input_schema
                )
                for t in request.tools
            ]
            settings["tools"] = [types.Tool(function_declarations=declarations)]
        extra, headers = request_extras(self._config, request)
        if extra or headers:
            settings["http_options"] = types.HttpOptions(
                extra_body=extra or None, headers=headers or None
            )
        return types.GenerateContentConfig(**settings)

    def _translate(self, exc: errors.APIError) -> ProviderError:
        message = str(exc.message or exc.status or exc)
        if not exc.code:
            return ProviderError(clean_text(f"{self.name}: {message}"), provider=self.name)
        return status_error(self.name, int(exc.code), message)

    async def aclose(self) -> None:
        await self._client.aio.aclose()


class _ConnectTimeout(httpx2.AsyncHTTPTransport):
    """google-genai gives httpx one timeout for every phase: this puts ``connect_timeout``
    on the connect."""

    def __init__(self, connect_timeout: float) -> None:
        super().__init__()
        self._connect = connect_timeout

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        timeouts = dict(request.extensions.get("timeout") or {})
        request.extensions["timeout"] = {**timeouts, "connect": self._connect}
        return await super().handle_async_request(request)


class _Decoder:
    def __init__(self, provider: str, ids: itertools.count[int]) -> None:
        self.provider = provider
        self.ids = ids
        self.usage = Usage()
        self.produced = False
        self.finish_reason: str | None = None

    def decode(self, chunk: types.GenerateContentResponse) -> list[StreamEvent]:
        feedback = chunk.prompt_feedback
        if feedback is not None and feedback.block_reason:
            reason = _name(feedback.block_reason)
            detail = f" ({feedback.block_reason_message})" if feedback.block_reason_message else ""
            raise ProviderError(
                f"{self.provider}: the prompt was blocked: {reason}{detail}",
                provider=self.provider,
                retryable=False,
            )
        if chunk.usage_metadata is not None:  # cumulative: the last one counts
            self.usage = _usage(chunk.usage_metadata)
        events: list[StreamEvent] = []
        for candidate in (chunk.candidates or [])[:1]:
            if candidate.finish_reason:
                self.finish_reason = _name(candidate.finish_reason)
            parts = candidate.content.parts if candidate.content else None
            for part in parts or []:
                if part.thought:
                    continue
                if part.text:
                    self.produced = True
                    events.append(TextDelta(part.text))
                elif part.function_call is not None:
                    self.produced = True
                    call = part.function_call
                    call_id = call.id or f"g{next(self.ids)}"
                    events.append(
                        ToolCallEvent(ToolCall(call_id, call.name or "", dict(call.args or {})))
                    )
        return events

    def finish(self) -> list[StreamEvent]:
        reason = self.finish_reason or ""
        if not self.produced:
            if reason in _BLOCKING_FINISH:
                message = f"{self.provider}: the answer was blocked: {reason}"
            elif reason:
                message = f"{self.provider}: the model returned nothing (finish reason {reason})"
            else:
                message = f"{self.provider}: the model returned no candidates"
            raise ProviderError(message, provider=self.provider, retryable=False)
        # A StopEvent only when Gemini sent a finish reason: without one the stream was cut.
        events: list[StreamEvent] = [UsageEvent(self.usage)]
        if reason:
            events.append(StopEvent(reason.lower()))
        return events


def _name(value: Any) -> str:
    return str(getattr(value, "name", None) or value)


def _usage(meta: types.GenerateContentResponseUsageMetadata) -> Usage:
    prompt = meta.prompt_token_count or 0
    cached = meta.cached_content_token_count or 0
    output = (meta.candidates_token_count or 0) + (meta.thoughts_token_count or 0)
    return Usage(input_tokens=prompt - cached, output_tokens=output, cache_read_tokens=cached)


def to_google_contents(messages: tuple[ChatMessage, ...]) -> list[dict[str, Any]]:
    """Salon's turns as Gemini ``contents`` (plain dicts, which the SDK accepts)."""
    names: dict[str, str] = {}  # call id -> tool name, for the function responses
    contents: list[dict[str, Any]] = []
    for message in messages:
        parts: list[dict[str, Any]] = []
        for part in message.parts:
            if isinstance(part, TextPart):
                if part.text:
                    parts.append({"text": part.text})
            elif isinstance(part, ImagePart):
                parts.append({"inline_data": {"mime_type": part.media_type, "data": part.data}})
            elif isinstance(part, ToolUsePart):
                call = part.call
                names[call.id] = call.name
                function_call = {"id": call.id, "name": call.name, "args": call.arguments}
                parts.append({"function_call": function_call})
            elif isinstance(part, ToolResultPart):
                result = part.result
                key = "error" if result.is_error else "output"
                response = {
                    "id": result.call_id,
                    "name": names.get(result.call_id, "tool"),
                    "response": {key: result.content},
                }
                parts.append({"function_response": response})
        if parts:
            role = "model" if message.role == "assistant" else "user"
            contents.append({"role": role, "parts": parts})
    if contents and contents[0]["role"] == "model":  # a room may open with the bot talking
        contents.insert(0, {"role": "user", "parts": [{"text": _OPENING_TURN}]})
    return contents
