"""activation_overhead: what Salon itself adds to one activation.

``overhead_growth``: how that grows with the window (4 000 messages over 400) and with the
number of channels in use (1 000 over 10, each channel answered before), and
``rss_per_cached_channel_kib``: the memory one more channel in use costs (its 100 messages
on the memory platform, its view, render memo and rolling state), over 1 000 channels.

Event in -> request handed to the provider, plus response out -> messages handed to the
platform, with 400 messages of history on the memory platform and a provider that answers
instantly. The LLM's own time is excluded by construction; store writes after the answer
(usage) are outside both spans.
"""

from __future__ import annotations

import asyncio
import gc
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from bench.figures import Figure, percentile
from salon.agent import Agent
from salon.agent.traces import TraceWriter
from salon.config import BotConfig, ProviderConfig
from salon.llm import LLMRequest, ProviderTraits, StopEvent, StreamEvent, TextDelta, UsageEvent
from salon.llm.openai_compat import OpenAIProvider
from salon.model import ChannelRef, Message, Participant, Usage
from salon.platforms.memory import MemoryPlatform
from salon.store.sqlite import SQLStore, sqlite_url

HISTORY = 400
WARMUP = 200
RUNS = 2000
REPLY = "A short answer of one paragraph, as most chat replies are."


class _TimedProvider:
    """Answers at once. Between being handed the request and answering it builds the JSON
    body an OpenAI-type provider sends (the real provider's code, no network), as every
    real provider does: its ``wire`` is what traces store, so a trace reuses that work."""

    name = "timed"
    traits = ProviderTraits()

    def __init__(self) -> None:
        self.handed: int = 0
        self.answered: int = 0
        config = ProviderConfig(type="openai", model="m", base_url="http://127.0.0.1:9/v1")
        self._body = OpenAIProvider("timed", config, api_key="k", base_url=config.base_url)
        self.wire = self._body.wire

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        self.handed = time.perf_counter_ns()
        self.wire(request)  # the provider's own work: outside both measured spans
        self.answered = time.perf_counter_ns()
        yield TextDelta(REPLY)
        yield UsageEvent(Usage(input_tokens=1, output_tokens=1))
        yield StopEvent("end_turn")

    async def aclose(self) -> None:
        await self._body.aclose()


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


def _config(mode: str = "chat", window: int | None = None) -> BotConfig:
    sizes = {} if window is None else {"recency_window_messages": window}
    return BotConfig.model_validate(
        {
            **sizes,
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
    history: int = HISTORY,
    channels: int = 1,
    warmup: int = WARMUP,
    at_end: Callable[[], None] | None = None,
    database: tuple[str, str | None] | None = None,
    pause: float = 0.0,
) -> list[float]:
    """Overhead samples in microseconds; ``traces``: every activation is traced, as in a
    bot (the writer works between activations, outside the measured spans). Activations
    go round ``channels`` channels of ``history`` messages each; ``at_end`` runs after the
    last one, with everything still in memory; ``database``: (URL, password) of the store,
    else a SQLite file; ``pause``: seconds the process idles between activations."""
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
        rooms = [platform.channel(f"room{c}", is_direct=True) for c in range(channels)]
        people = [Participant(f"u{i}", f"User{i}") for i in range(8)]
        for room in rooms:
            for i in range(history):
                platform.add(room, people[i % 8], f"message number {i} with a few words in it")
        samples: list[float] = []
        try:
            for i in range(warmup + runs):
                platform.sent_event.clear()
                start = time.perf_counter_ns()
                await platform.post(rooms[i % channels], people[i % 8], f"question {i}?")
                await platform.sent_event.wait()
                await agent.wait_idle()
                await writer.flush()
                if pause:
                    await asyncio.sleep(pause)
                inbound = provider.handed - start
                outbound = platform.sent_at - provider.answered
                if i >= warmup:
                    samples.append((inbound + outbound) / 1000)
            if at_end is not None:
                at_end()
        finally:
            for task in (runner, writing):
                task.cancel()
            await asyncio.gather(runner, writing, return_exceptions=True)
            await store.close()
    return samples


# Between two activations a bot idles; so do both arms of trace_overhead, for as long.
PAUSE = 0.005


async def trace_overhead() -> list[Figure]:
    """Activation overhead with traces on over traces off, alternating rounds of each.

    Both arms idle ``PAUSE`` seconds between activations (outside the spans). On these
    machines an activation that follows an idle moment takes about twice as long as one
    run straight after another (even a 2 ms sleep with no work does it), and back to back
    only the traced arm idled (waiting for its writer's database thread), so that ratio
    compared cold activations with hot ones; it is reported too, without a target."""
    off: list[float] = []
    on: list[float] = []
    hot_off: list[float] = []
    hot_on: list[float] = []
    for _ in range(4):
        off += await measure(_config(), RUNS // 4, pause=PAUSE)
        on += await measure(_config(), RUNS // 4, traces=True, pause=PAUSE)
        hot_off += await measure(_config(), RUNS // 8)
        hot_on += await measure(_config(), RUNS // 8, traces=True)
    return [
        Figure("trace_overhead_ratio", percentile(on, 50) / percentile(off, 50), "x", target=1.10),
        Figure("activation_overhead_traced_p50_us", percentile(on, 50), "us"),
        Figure("activation_overhead_paused_p50_us", percentile(off, 50), "us"),
        Figure(
            "trace_overhead_back_to_back_ratio",
            percentile(hot_on, 50) / percentile(hot_off, 50),
            "x",
        ),
    ]


async def growth() -> list[Figure]:
    """How the overhead grows with the window and with the number of active channels."""
    small = await measure(_config(window=400), RUNS // 2, history=400)
    large = await measure(_config(window=4000), RUNS // 2, history=4000)
    # Every channel is warm (answered once before) in both: the steady state is compared.
    few = await measure(_config(window=100), 2000, history=100, channels=10, warmup=200)
    many = await measure(_config(window=100), 2000, history=100, channels=1000, warmup=1000)
    rss: list[float] = []
    gc.collect()
    before = _rss_kib()
    await measure(
        _config(window=100),
        1000,
        history=100,
        channels=1000,
        warmup=0,
        at_end=lambda: rss.append(_rss_kib()),
    )
    by_window = percentile(large, 50) / percentile(small, 50)
    by_channels = percentile(many, 50) / percentile(few, 50)
    return [
        Figure("overhead_growth_4000_vs_400", by_window, "x", target=2.0),
        Figure("overhead_growth_1000_vs_10_channels", by_channels, "x", target=1.5),
        Figure("activation_overhead_4000_p50_us", percentile(large, 50), "us"),
        Figure("activation_overhead_1000_channels_p50_us", percentile(many, 50), "us"),
        Figure("rss_per_cached_channel_kib", (rss[0] - before) / 1000, "KiB"),
    ]


def _rss_kib() -> float:
    """This process's resident memory."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 1024


async def run() -> list[Figure]:
    samples = await measure(_config())
    prefill = await measure(_config("prefill"))
    return [
        Figure("activation_overhead_p50_us", percentile(samples, 50), "us", target=1000),
        Figure("activation_overhead_p99_us", percentile(samples, 99), "us"),
        Figure("prefill_overhead_p50_us", percentile(prefill, 50), "us", target=1000),
        Figure("prefill_overhead_p99_us", percentile(prefill, 99), "us"),
    ]
