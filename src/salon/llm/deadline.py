"""Deadlines around any Provider: time to the first streamed event, and to the end.

A server that accepts a request and then says nothing (a stuck GPU, a proxy that lost its
upstream) would otherwise hold an activation for as long as the SDK's read timeout, which
is per read and so never ends a stream that trickles. Here:

- no event within ``first_token_timeout``: a retryable ProviderError (``RetryingProvider``
  asks again, as after a 5xx);
- the answer not finished within ``timeout`` (counted from the request): a ProviderError
  saying the answer was cut off, or, with nothing received yet, one like the above.

Every vendor provider the factory builds sits right inside this wrapper, so it is also
where what a model returns is made safe (``clean_event``: no lone surrogate gets past).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from salon.errors import ProviderError
from salon.llm.base import (
    LLMRequest,
    Provider,
    StreamEvent,
    clean_event,
    close_stream,
)

__all__ = ["DeadlineProvider"]


class DeadlineProvider:
    def __init__(self, inner: Provider, *, first_token_timeout: float, timeout: float) -> None:
        self.inner = inner
        self.name = inner.name
        self.traits = inner.traits
        self._first = first_token_timeout
        self._total = timeout

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        loop = asyncio.get_running_loop()
        end = loop.time() + self._total
        first_by = min(loop.time() + self._first, end)
        events = aiter(self.inner.stream(request))
        produced = False
        try:
            while True:
                deadline = asyncio.timeout_at(end if produced else first_by)
                try:
                    async with deadline:
                        event = await anext(events)
                except StopAsyncIteration:
                    return
                except TimeoutError:
                    if not deadline.expired():
                        raise  # the provider's own, not ours
                    raise self._late(produced, first_by < end) from None
                produced = True
                yield clean_event(event)
        finally:
            await close_stream(events)

    def _late(self, produced: bool, first_token: bool) -> ProviderError:
        if produced:
            text = f"the answer was cut off: not finished within {self._total:g} s (timeout)"
            return ProviderError(f"{self.name}: {text}", provider=self.name, retryable=False)
        if first_token:
            text = f"no answer within {self._first:g} s (first_token_timeout)"
        else:
            text = f"no answer within {self._total:g} s (timeout)"
        return ProviderError(f"{self.name}: {text}", provider=self.name)

    def wire(self, request: LLMRequest) -> dict[str, Any]:
        return self.inner.wire(request)

    def cache_reason(self, request: LLMRequest) -> str | None:
        return self.inner.cache_reason(request)

    async def warm(self) -> None:
        await self.inner.warm()

    async def aclose(self) -> None:
        await self.inner.aclose()
