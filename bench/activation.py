"""activation_overhead: what Salon itself adds to one activation.

Event in -> request handed to the provider, plus response out -> messages handed to the
platform, with 400 messages of history on the memory platform and a provider that answers
instantly. The LLM's own time is excluded by construction; store writes after the answer
(usage) are outside both spans.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

from bench.figures import Figure, percentile
from salon.agent import Agent
from salon.agent.traces import TraceWriter
from salon.config import BotConfig
from salon.llm import LLMRequest, ProviderTraits, StopEvent, StreamEvent, TextDelta, UsageEvent
from salon.model import ChannelRef, Message, Participant, Usage
from salon.platforms.memory import MemoryPlatform
from salon.store.sqlite import SQLStore, sqlite_url

HISTORY = 400
WARMUP = 200
RUNS = 2000
REPLY = "A short answer of one paragraph, as most chat replies are."


class _TimedProvider:
    name = "timed"
    traits = ProviderTraits()

    def __init__(self) -> None:
        self.handed: int = 0
        self.answered: int = 0

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        self.handed = time.perf_counter_ns()
        self.answered = time.perf_counter_ns()
        yield TextDelta(REPLY)
        yield UsageEvent(Usage(input_tokens=1, output_tokens=1))
        yield StopEvent("end_turn")

    async def aclose(self) -> None:
        return None


class _TimedPlatform(MemoryPlatform):
    def __init__(self) -> None:
        super().__init__(bot_name="Salon")
        self.sent_at = 0
        self.sent_event = asyncio.Event()

    async def send(self, channel: ChannelRef, text: str) -> Message:
        self.sent_at = time.perf_counter_ns()
        message = await super().send(channel, text)
        self.sent.clear()  # keep memory flat over thousands of runs
        self.sent_event.set()
        return message


def _config(mode: str = "chat") -> BotConfig:
    return BotConfig.model_validate(
        {
            "name": "Salon",
            "mode": mode,
            "provider": "timed",
            "providers": {"timed": {"type": "openai", "model": "m"}},
            "builtin_tools": False,
        }
    )


async def measure(
    config: BotConfig,
    runs: int = RUNS,
    *,
    traces: bool = False,
    database: tuple[str, str | None] | None = None,
) -> list[float]:
    """Overhead samples in microseconds; ``traces``: every activation is traced, as in a
    bot (the writer works between activations, outside the measured spans); ``database``:
    (URL, password) of the store, else a SQLite file."""
    with tempfile.TemporaryDirectory() as tmp:
        url, password = database or (sqlite_url(Path(tmp) / "bench.db"), None)
        store = SQLStore(url, password=password)
        await store.open()
        provider = _TimedProvider()
        platform = _TimedPlatform()
        writer = TraceWriter(store=store, settings=config.traces, prices=config.prices)
        agent = Agent(
            bot="bench",
            config=config,
            provider=provider,
            platforms={"memory": platform},
            store=store,
            traces=writer if traces else None,
        )
        await platform.start(agent.submit)
        runner = asyncio.create_task(agent.run())
        writing = asyncio.create_task(writer.run())
        room = platform.channel("room", is_direct=True)
        people = [Participant(f"u{i}", f"User{i}") for i in range(8)]
        for i in range(HISTORY):
            platform.add(room, people[i % 8], f"message number {i} with a few words in it")
        samples: list[float] = []
        try:
            for i in range(WARMUP + runs):
                platform.sent_event.clear()
                start = time.perf_counter_ns()
                await platform.post(room, people[i % 8], f"question {i}?")
                await platform.sent_event.wait()
                await agent.wait_idle()
                await writer.flush()
                inbound = provider.handed - start
                outbound = platform.sent_at - provider.answered
                if i >= WARMUP:
                    samples.append((inbound + outbound) / 1000)
        finally:
            for task in (runner, writing):
                task.cancel()
            await asyncio.gather(runner, writing, return_exceptions=True)
            await store.close()
    return samples


async def trace_overhead() -> list[Figure]:
    """Activation overhead with traces on over traces off, alternating rounds of each."""
    off: list[float] = []
    on: list[float] = []
    for _ in range(4):
        off += await measure(_config(), RUNS // 4)
        on += await measure(_config(), RUNS // 4, traces=True)
    ratio = percentile(on, 50) / percentile(off, 50)
    return [
        Figure("trace_overhead_ratio", ratio, "x", target=1.10),
        Figure("activation_overhead_traced_p50_us", percentile(on, 50), "us"),
    ]


async def run() -> list[Figure]:
    samples = await measure(_config())
    prefill = await measure(_config("prefill"))
    return [
        Figure("activation_overhead_p50_us", percentile(samples, 50), "us", target=1000),
        Figure("activation_overhead_p99_us", percentile(samples, 99), "us"),
        Figure("prefill_overhead_p50_us", percentile(prefill, 50), "us", target=1000),
        Figure("prefill_overhead_p99_us", percentile(prefill, 99), "us"),
    ]
