"""Vendor failures as Salon's errors: one clear line each, and whether to try again.

The openai and anthropic SDKs are generated from one template, so their error classes
share a shape: ``APIStatusError`` has ``status_code``, ``response`` and ``body``;
``APIConnectionError`` wraps a transport failure (its ``__cause__``). Mid-stream, the
anthropic and google-genai SDKs let httpx2's own ``TransportError`` through instead.

What a user reads:

- ``cannot reach the server at URL``: the connection could not be opened.
- ``the connection to URL broke before the answer began`` / ``... during the answer``.
- ``HTTP 500: <the vendor's message>``: a status error.

URLs are shown without userinfo or credential-like query parameters.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from salon.errors import ProviderError, RateLimited
from salon.model import clean_text

__all__ = [
    "MALFORMED_STREAM_ERRORS",
    "connection_failure",
    "redact_url",
    "status_error",
    "translate_sdk_error",
]

# What a garbled stream surfaces as while the SDK decodes it.
MALFORMED_STREAM_ERRORS: tuple[type[Exception], ...] = (
    ValueError,  # json.JSONDecodeError is one
    KeyError,
    TypeError,
    AttributeError,
)

_SECRET_PARAMETER = re.compile(r"key|token|secret|sig|password|auth", re.IGNORECASE)

# A 500 that says the request itself is wrong: asking again gets the same answer.
_VALIDATION = re.compile(
    r"context[ _](length|size|window)|maximum context|too many tokens|prompt is too long"
    r"|validation error|field required|invalid[ _]request|invalid '|invalid schema"
    r"|failed to parse|is not of type",
    re.IGNORECASE,
)


def redact_url(url: str) -> str:
    """``url`` fit to show: userinfo and credential-like query parameters (``key=`` and
    the like) become ``***``."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rsplit("@", 1)[1]
    pairs = (pair.partition("=") for pair in parts.query.split("&") if pair)
    query = "&".join(
        f"{name}=***" if sep and _SECRET_PARAMETER.search(name) else f"{name}{sep}{value}"
        for name, sep, value in pairs
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def status_error(
    provider: str, status: int, message: str, *, retry_after: float | None = None
) -> ProviderError:
    """An HTTP status error; 429 and 529 (overloaded) are RateLimited. The server's words
    are shown in the channel and logged: a lone surrogate in them becomes U+FFFD."""
    text = clean_text(f"{provider}: HTTP {status}: {message}")
    if status in (429, 529):
        return RateLimited(text, provider=provider, status=status, retry_after=retry_after)
    deterministic = status == 500 and _VALIDATION.search(message) is not None
    return ProviderError(
        text, provider=provider, status=status, retryable=False if deterministic else None
    )


def connection_failure(exc: BaseException, provider: str, *, answering: bool) -> ProviderError:
    """A transport failure as one line naming the URL; ``answering``: the stream was open."""
    import httpx2  # the SDKs that raise these load it; the aiohttp path never needs it

    cause = exc if isinstance(exc, httpx2.TransportError) else exc.__cause__
    url = _request_url(exc) or _request_url(cause)
    target = redact_url(url) if url else "the server"
    reason = _reason(exc)
    if answering:
        text = f"the connection to {target} broke during the answer: {reason}"
    elif isinstance(cause, httpx2.ConnectError | httpx2.ConnectTimeout):
        text = f"cannot reach the server at {target}: {reason}"
    elif isinstance(cause, httpx2.TimeoutException):
        text = f"no answer from {target}: {reason}"
    else:
        text = f"the connection to {target} broke before the answer began: {reason}"
    return ProviderError(f"{provider}: {text}", provider=provider)


def _request_url(exc: BaseException | None) -> str:
    try:
        request = getattr(exc, "request", None)  # httpx2 raises when it has none
    except RuntimeError:
        return ""
    return str(request.url) if request is not None else ""


def _reason(exc: BaseException) -> str:
    """The first message down the chain of causes: transport errors often wrap a bare one."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            break
        text = str(seen).strip()
        if text and text != "Connection error.":  # the SDKs' placeholder says nothing
            return text
        seen = seen.__cause__ or seen.__context__
    return type(exc).__name__


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
    """The vendor's own explanation from the error body, else the SDK's message; a lone
    surrogate in it becomes U+FFFD (it is shown in the channel and logged)."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return clean_text(str(error["message"]))
        if isinstance(error, str):
            return clean_text(error)
    return clean_text(str(getattr(exc, "message", None) or exc))


def translate_sdk_error(
    exc: Exception, provider: str, sdk: Any, *, answering: bool = False
) -> ProviderError:
    """Map one exception raised by SDK module ``sdk`` to ProviderError or RateLimited;
    ``answering``: it was raised while the stream was being read."""
    import httpx2  # as in connection_failure

    if isinstance(exc, sdk.APIStatusError):
        status = int(exc.status_code)
        return status_error(provider, status, _vendor_message(exc), retry_after=_retry_after(exc))
    if isinstance(exc, sdk.APIConnectionError | httpx2.TransportError):
        return connection_failure(exc, provider, answering=answering)
    if isinstance(exc, sdk.APIError):
        # An error event inside an otherwise good stream (e.g. overloaded mid-answer).
        return ProviderError(f"{provider}: {_vendor_message(exc)}", provider=provider)
    if isinstance(exc, MALFORMED_STREAM_ERRORS):
        return ProviderError(
            f"{provider}: malformed response stream: {exc}", provider=provider, retryable=False
        )
    return ProviderError(f"{provider}: {type(exc).__name__}: {exc}", provider=provider)
