"""What the openai and anthropic providers share: extra request fields, and one loop that
opens a vendor stream and decodes it, with every failure leaving as a ProviderError."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Awaitable
from typing import TYPE_CHECKING, Any, Protocol

from salon.config import ProviderConfig
from salon.llm._errors import MALFORMED_STREAM_ERRORS, translate_sdk_error
from salon.llm.base import LLMRequest, StreamEvent, close_stream

if TYPE_CHECKING:  # the SDKs' HTTP stack: imported by those that use it, not by openai_compat
    import httpx2

__all__ = [
    "BACKSTOP",
    "Decoder",
    "add_extras",
    "close_stream",
    "request_extras",
    "sdk_timeout",
    "sent_body",
    "stream_sdk",
]

# DeadlineProvider ends a slow answer; the SDK's own read timeout, a little longer, only
# bounds a read that would somehow outlive it.
BACKSTOP = 5.0


def sdk_timeout(config: ProviderConfig) -> httpx2.Timeout:
    """The SDK client's timeouts: ``connect_timeout`` to connect, the backstop for the rest."""
    import httpx2  # as stream_sdk

    return httpx2.Timeout(config.timeout + BACKSTOP, connect=config.connect_timeout)


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


def sent_body(kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """SDK ``kwargs`` as what goes out: the JSON body, extra fields merged in as the SDK
    merges them, and the extra headers."""
    plain = dict(kwargs)
    headers: dict[str, str] = plain.pop("extra_headers", None) or {}
    extra: dict[str, Any] = plain.pop("extra_body", None) or {}
    return {**plain, **extra}, headers


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
    import httpx2  # the SDK calling this has loaded it; openai_compat's own path never does

    root: type[Exception] = getattr(sdk, "OpenAIError", None) or sdk.AnthropicError
    failures: tuple[type[Exception], ...] = (root, httpx2.TransportError)
    try:
        stream = await opening
    except failures as exc:
        raise translate_sdk_error(exc, provider, sdk) from exc
    try:
        async for chunk in stream:
            for event in decoder.decode(chunk):
                yield event
    except failures + MALFORMED_STREAM_ERRORS as exc:
        raise translate_sdk_error(exc, provider, sdk, answering=True) from exc
    finally:
        await close_stream(stream)  # also when the caller stops early or a deadline cancels
    for event in decoder.finish():
        yield event
