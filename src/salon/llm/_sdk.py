"""Shared translation of the openai/anthropic SDK errors into Salon's tree.

Both SDKs are generated from one template, so their error classes share a shape:
``APIStatusError`` has ``status_code``, ``response`` and ``message``; ``APIConnectionError``
covers connection failures and timeouts.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Awaitable
from typing import Any, Protocol

from salon.config import ProviderConfig
from salon.errors import ProviderError, RateLimited
from salon.llm.base import LLMRequest, StreamEvent

__all__ = [
    "MALFORMED_STREAM_ERRORS",
    "Decoder",
    "add_extras",
    "request_extras",
    "stream_sdk",
    "translate_sdk_error",
]

# What a garbled stream surfaces as while the SDK decodes it.
MALFORMED_STREAM_ERRORS: tuple[type[Exception], ...] = (
    ValueError,  # json.JSONDecodeError is one
    KeyError,
    TypeError,
    AttributeError,
)


def request_extras(
    config: ProviderConfig, request: LLMRequest
) -> tuple[dict[str, Any], dict[str, str]]:
    """Extra JSON fields and HTTP headers of one request: the provider's, then the model's
    (``models.<name>``), then the request's own, later ones winning."""
    model = config.models.get(request.model)
    body = {**config.extra_body, **(model.extra_body if model else {}), **request.extra}
    headers = {
        **config.extra_headers,
        **(model.extra_headers if model else {}),
        **request.headers,
    }
    return body, headers


def add_extras(
    kwargs: dict[str, Any],
    config: ProviderConfig,
    request: LLMRequest,
    *,
    defaults: dict[str, Any] | None = None,
) -> None:
    """Put a request's extra fields (over ``defaults``) and headers into SDK ``kwargs``."""
    body, headers = request_extras(config, request)
    body = {**(defaults or {}), **body}
    if body:
        kwargs["extra_body"] = body
    if headers:
        kwargs["extra_headers"] = headers


def _retry_after(exc: Any) -> float | None:
    response = getattr(exc, "response", None)
    if response is None:
        return None
    value = response.headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _vendor_message(exc: Any) -> str:
    """The vendor's own explanation from the error body, else the SDK's message."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(error, str):
            return error
    return str(getattr(exc, "message", None) or exc)


def translate_sdk_error(exc: Exception, provider: str, sdk: Any) -> ProviderError:
    """Map one SDK exception (from module ``sdk``) to ProviderError or RateLimited."""
    if isinstance(exc, sdk.APIStatusError):
        status = int(exc.status_code)
        message = f"{provider}: HTTP {status}: {_vendor_message(exc)}"
        if status in (429, 529):
            return RateLimited(
                message, provider=provider, status=status, retry_after=_retry_after(exc)
            )
        return ProviderError(message, provider=provider, status=status)
    if isinstance(exc, sdk.APIConnectionError):
        return ProviderError(f"{provider}: cannot reach the server: {exc}", provider=provider)
    if isinstance(exc, sdk.APIError):
        # An error event inside an otherwise good stream (e.g. overloaded mid-answer).
        return ProviderError(f"{provider}: {_vendor_message(exc)}", provider=provider)
    if isinstance(exc, MALFORMED_STREAM_ERRORS):
        return ProviderError(
            f"{provider}: malformed response stream: {exc}", provider=provider, retryable=False
        )
    return ProviderError(f"{provider}: {type(exc).__name__}: {exc}", provider=provider)


class Decoder(Protocol):
    """Turns one vendor stream chunk into Salon events; ``finish`` flushes what is left."""

    def decode(self, chunk: Any) -> list[StreamEvent]: ...

    def finish(self) -> list[StreamEvent]: ...


async def stream_sdk(
    provider: str,
    sdk: Any,
    opening: Awaitable[AsyncIterable[Any]],
    decoder: Decoder,
) -> AsyncIterator[StreamEvent]:
    """Open a vendor stream and decode it; every SDK failure leaves as a ProviderError."""
    root: type[Exception] = getattr(sdk, "OpenAIError", None) or sdk.AnthropicError
    try:
        stream = await opening
    except root as exc:
        raise translate_sdk_error(exc, provider, sdk) from exc
    try:
        async for chunk in stream:
            for event in decoder.decode(chunk):
                yield event
    except (root, *MALFORMED_STREAM_ERRORS) as exc:
        raise translate_sdk_error(exc, provider, sdk) from exc
    for event in decoder.finish():
        yield event
