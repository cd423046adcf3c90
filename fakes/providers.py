"""Providers for agent tests: each call blocks until the test releases it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from salon.llm import BaseProvider, LLMRequest, ProviderTraits, StopEvent, StreamEvent, TextDelta


class GatedProvider(BaseProvider):
    """Every stream waits on its own gate; ``started`` tells which calls are running."""

    def __init__(self) -> None:
        self.name = "gated"
        self.traits = ProviderTraits()
        self.requests: list[LLMRequest] = []
        self.gates: list[asyncio.Event] = []
        self.running = 0
        self.max_running = 0
        self._started = asyncio.Condition()

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        gate = asyncio.Event()
        async with self._started:
            self.requests.append(request)
            self.gates.append(gate)
            self.running += 1
            self.max_running = max(self.max_running, self.running)
            self._started.notify_all()
        try:
            await gate.wait()
            yield TextDelta(f"answer {len(self.requests)}")
            yield StopEvent("end_turn")
        finally:
            self.running -= 1

    async def wait_started(self, count: int, within: float = 5.0) -> None:
        async with asyncio.timeout(within), self._started:
            await self._started.wait_for(lambda: len(self.requests) >= count)

    async def aclose(self) -> None:
        return None
