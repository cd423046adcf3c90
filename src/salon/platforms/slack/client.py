"""slack_sdk's Web API client as Salon uses it: a 429 waited out (up to a bound), every
refusal a ``PlatformError`` naming Slack's error code and no token or address."""

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
        after = {k.lower(): v for k, v in response.headers.items()}.get("retry-after", ["1"])
        try:
            wait = float(after[0])
        except (ValueError, IndexError):
            wait = 1.0
        if wait > self.wait_max:
            return False
        logger.info("Slack: rate limited; waiting %.0f s as Retry-After asks", wait)
        return True


def build_web_client(token: str, *, base_url: str | None, wait_max: float) -> AsyncWebClient:
    handlers: list[AsyncRetryHandler] = [
        AsyncConnectionErrorRetryHandler(),
        _BoundedRateLimit(wait_max),
    ]
    return AsyncWebClient(
        token=token,
        base_url=base_url or AsyncWebClient.BASE_URL,
        timeout=_TIMEOUT,
        retry_handlers=handlers,
    )


async def call(what: str, request: Awaitable[AsyncSlackResponse]) -> dict[str, Any]:
    """Await one Web API ``request``; a refusal or a network failure is a ``PlatformError``
    saying what could not be done and Slack's error code."""
    response = await answer(what, request)
    return dict(response.data) if isinstance(response.data, dict) else {}


async def answer(what: str, request: Awaitable[AsyncSlackResponse]) -> AsyncSlackResponse:
    """``call``, keeping the whole response (its headers too)."""
    try:
        return await request
    except SlackApiError as exc:
        code = exc.response.get("error", "refused") if exc.response is not None else "refused"
        raise PlatformError(f"Slack refused to {what}: {code}") from exc
    except (SlackClientError, *NETWORK_ERRORS) as exc:
        raise PlatformError(f"could not reach Slack to {what}: {type(exc).__name__}") from exc
