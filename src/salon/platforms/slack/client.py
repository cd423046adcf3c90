"""slack_sdk's Web API client as Salon uses it: a 429 waited out (up to a bound), every
refusal a ``PlatformError`` naming Slack's error code and no token or address.

A failure another try may mend is ``transient`` (the answer's post is then tried again):
a rate limit, a 5xx, a network failure. Slack does not de-duplicate ``chat.postMessage``
(it takes no idempotency key), so a post is tried again only where Slack surely did not
take it: a 429, a 503, or a connection never made. A 500, 502 or 504, a timeout or a
connection lost mid-request may have posted: not repeated (nor by slack_sdk's own retry).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from salon.errors import PlatformError

__all__ = ["NETWORK_ERRORS", "answer", "build_web_client", "call"]

logger = logging.getLogger(__name__)

NETWORK_ERRORS = (aiohttp.ClientError, TimeoutError, OSError)
_TIMEOUT = 30  # seconds per Web API call
_RATE_LIMIT_RETRIES = 5
_POSTS = ("chat.postMessage",)  # methods Slack does not de-duplicate: one try where unsure


def _unsent(exc: BaseException) -> bool:
    """Whether the request surely never reached Slack (no connection was made)."""
    return isinstance(exc, aiohttp.ClientConnectorError)


class _ConnectionRetry(AsyncConnectionErrorRetryHandler):
    """slack_sdk's one retry after a connection failure, except where a post may have
    gone through before the connection broke."""

    async def _can_retry_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        if request.url.rstrip("/").endswith(_POSTS) and not (error and _unsent(error)):
            return False
        return await super()._can_retry_async(
            state=state, request=request, response=response, error=error
        )


class _BoundedRateLimit(AsyncRateLimitErrorRetryHandler):
    """Slack's tiers answer 429 with ``Retry-After``: waited out, unless it asks for
    longer than ``wait_max`` (then the call fails with ``ratelimited``)."""

    def __init__(self, wait_max: float) -> None:
        super().__init__(max_retry_count=_RATE_LIMIT_RETRIES)
        self.wait_max = wait_max

    async def _can_retry_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        if response is None or response.status_code != 429:
            return False
        wait = _retry_after(response.headers) or 1.0
        if wait > self.wait_max:
            return False
        logger.info("Slack: rate limited; waiting %.0f s as Retry-After asks", wait)
        return True


def build_web_client(token: str, *, base_url: str | None, wait_max: float) -> AsyncWebClient:
    handlers: list[AsyncRetryHandler] = [
        _ConnectionRetry(),
        _BoundedRateLimit(wait_max),
    ]
    return AsyncWebClient(
        token=token,
        base_url=base_url or AsyncWebClient.BASE_URL,
        timeout=_TIMEOUT,
        retry_handlers=handlers,
    )


async def call(
    what: str, request: Awaitable[AsyncSlackResponse], *, repeatable: bool = True
) -> dict[str, Any]:
    """Await one Web API ``request``; a refusal or a network failure is a ``PlatformError``
    saying what could not be done and Slack's error code. ``repeatable``: doing it twice
    does no harm (a read); a post is not, and is transient only where Slack surely did
    not take it."""
    response = await answer(what, request, repeatable=repeatable)
    return dict(response.data) if isinstance(response.data, dict) else {}


async def answer(
    what: str, request: Awaitable[AsyncSlackResponse], *, repeatable: bool = True
) -> AsyncSlackResponse:
    """``call``, keeping the whole response (its headers too)."""
    try:
        return await request
    except SlackApiError as exc:
        raise _refusal(what, exc, repeatable=repeatable) from exc
    except (SlackClientError, *NETWORK_ERRORS) as exc:
        text = f"could not reach Slack to {what}: {type(exc).__name__}"
        raise PlatformError(text, transient=repeatable or _unsent(exc)) from exc


def _refusal(what: str, exc: SlackApiError, *, repeatable: bool) -> PlatformError:
    response = exc.response
    status = response.status_code if response is not None else 200
    data = response.data if response is not None else None
    code = str(data.get("error") or "refused") if isinstance(data, dict) else "refused"
    wait = _retry_after(response.headers) if response is not None else None
    if status == 429 or code == "ratelimited":  # refused before anything was done
        text = f"Slack is rate limiting {what}" + (f" for {wait:.0f} s" if wait else "")
        return PlatformError(text, transient=True, retry_after=wait)
    if status >= 500:  # 503: Slack did not take it; any other may have done part of it
        text = f"Slack could not {what}: server error {status} ({code})"
        return PlatformError(text, transient=repeatable or status == 503, retry_after=wait)
    return PlatformError(f"Slack refused to {what}: {code}")


def _retry_after(headers: Any) -> float | None:
    """The ``Retry-After`` seconds of a response's headers, if it has a number there."""
    found = {str(k).lower(): v for k, v in dict(headers or {}).items()}.get("retry-after")
    value = found[0] if isinstance(found, list) and found else found  # the SDK's are lists
    try:
        return float(str(value)) if value is not None else None
    except ValueError:
        return None
