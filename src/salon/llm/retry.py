"""Retries with capped exponential backoff, around any Provider.

A stream is retried only while it has produced nothing: once text reached the caller,
a retry would repeat it, so a mid-stream failure is raised as it is.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from salon.errors import ProviderError, RateLimited
from salon.llm.base import LLMRequest, Provider, StreamEvent

__all__ = ["RetryingProvider", "backoff_delay"]

logger = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]


def backoff_delay(attempt: int, initial: float, cap: float, error: ProviderError) -> float:
    """Seconds to wait before retry number ``attempt`` (0-based)."""
    delay = initial * 2.0**attempt
    if isinstance(error, RateLimited) and error.retry_after is not None:
        delay = max(delay, error.retry_after)
    return min(delay, cap)


class RetryingProvider:
    def __init__(
        self,
        inner: Provider,
        *,
        retries: int,
        backoff_initial: float,
        backoff_max: float,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.inner = inner
        self.name = inner.name
        self.traits = inner.traits
        self._retries = retries
        self._initial = backoff_initial
        self._cap = backoff_max
        self._sleep = sleep

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        attempt = 0
        while True:
            produced = False
            try:
                async for event in self.inner.stream(request):
                    produced = True
                    yield event
                return
            except ProviderError as exc:
                if produced or not exc.retryable or attempt >= self._retries:
                    raise
                delay = backoff_delay(attempt, self._initial, self._cap, exc)
                logger.warning(
                    "provider %s failed (%s); retry %d/%d in %.1fs",
                    self.name,
                    exc,
                    attempt + 1,
                    self._retries,
                    delay,
                )
                attempt += 1
                await self._sleep(delay)

    def wire(self, request: LLMRequest) -> dict[str, Any]:
        return self.inner.wire(request)

    def cache_reason(self, request: LLMRequest) -> str | None:
        return self.inner.cache_reason(request)

    async def warm(self) -> None:
        await self.inner.warm()

    async def aclose(self) -> None:
        await self.inner.aclose()
