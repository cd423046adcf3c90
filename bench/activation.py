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
import contextlib
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from bench.figures import Figure, percentile, settled_rss_mib
from salon.agent import Agent
from salon.agent.recording.export import TraceSink
from salon.agent.recording.traces import TraceWriter
from salon.config import BotConfig, ProviderConfig
from salon.llm import LLMRequest, ProviderTraits, StopEvent, StreamEvent, TextDelta, UsageEvent
from salon.llm.base import BaseProvider, ThinkingDelta, ThoughtEvent
from salon.llm.openai_compat import OpenAIProvider
from salon.model import ChannelRef, Message, Participant, Thought, Usage
from salon.platforms.memory import MemoryPlatform
from salon.store.sql import SQLStore, sqlite_url

HISTORY = 400
WARMUP = 200
RUNS = 2000
REPLY = "A short answer of one paragraph, as most chat replies are."
# What a reasoning model streams before that answer: about 1 500 characters in 30 pieces
# (a short chain of thought), then the signed block its vendor wants back in a tool loop.
THINKING = [f"Step {i}: weigh what the room said and what the person asked. " for i in range(30)]


class _TimedProvider(BaseProvider):
    """Answers at once. Between being handed the request and answering it builds the JSON
    body an OpenAI-type provider sends (the real provider's code, no network), as every
    real provider does: its ``wire`` is what traces store, so a trace reuses that work."""

    name = "timed"
    traits = ProviderTraits()

    def __init__(self, *, thinks: bool = False) -> None:
        self.thinks = thinks
        self.handed: int = 0
        self.answered: int = 0
        config = ProviderConfig(type="openai", model="m", base_url="http://127.0.0.1:9/v1")
        self._body = OpenAIProvider("timed", config, api_key="k", base_url=config.base_url)

    def wire(self, request: LLMRequest) -> dict[str, Any]:
        return self._body.wire(request)

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        self.handed = time.perf_counter_ns()
        self.wire(request)  # the provider's own work: outside both measured spans
        self.answered = time.perf_counter_ns()
        if self.thinks:
            for piece in THINKING:
                yield ThinkingDelta(piece)
            thought = Thought("anthropic", request.model, "".join(THINKING), signature="s" * 400)
            yield ThoughtEvent(thought)
        yield TextDelta(REPLY)
        reasoning = 375 if self.thinks else 0
        yield UsageEvent(
            Usage(input_tokens=1, output_tokens=1 + reasoning, reasoning_tokens=reasoning)
        )
        yield StopEvent("end_turn")

    async def aclose(self) -> None:
        await self._body.aclose()


class _TimedPlatform(MemoryPlatform):
    def __init__(self) -> None:
        super().__init__(bot_name="Salon")
        self.sent_at = 0
        self.sent_event = asyncio.Event()

    async def send(self, channel: ChannelRef, text: str, **kwargs: Any) -> Message:
        self.sent_at = time.perf_counter_ns()
        message = await super().send(channel, text, **kwargs)
        self.sent.clear()  # keep memory flat over thousands of runs
        self.sent_event.set()
        return message


def _config(mode: str = "chat", window: int | None = None, *, thinks: bool = False) -> BotConfig:
    sizes: dict[str, Any] = {} if window is None else {"recency_window_messages": window}
    if thinks:
        sizes["thinking"] = {"enabled": True, "budget_tokens": 2048}
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


class Rig:
    """One bot on the memory platform, with the timed provider and a store of its own,
    ready for activations: ``traces``, every activation is traced, as in a bot (the
    writer works between activations, outside the measured spans). Activations go round
    ``channels`` channels of ``history`` messages each; ``database``: (URL, password) of
    the store, else a SQLite file."""

    def __init__(
        self,
        config: BotConfig,
        *,
        traces: bool = False,
        history: int = HISTORY,
        channels: int = 1,
        database: tuple[str, str | None] | None = None,
        sink: TraceSink | None = None,
    ) -> None:
        """``sink``: where traces are exported as well (OpenTelemetry)."""
        self._config, self._traces, self._sink = config, traces, sink
        self._history, self._channels, self._database = history, channels, database
        self._stack = contextlib.AsyncExitStack()
        self._count = 0

    async def __aenter__(self) -> Rig:
        stack = self._stack
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        url, password = self._database or (sqlite_url(Path(tmp) / "bench.db"), None)
        self.store = store = SQLStore(url, password=password)
        await store.open()
        stack.push_async_callback(store.close)
        self.provider = _TimedProvider(thinks=self._config.thinking.enabled)
        self.platform = platform = _TimedPlatform()
        config = self._config
        self.writer = TraceWriter(
            store=store, settings=config.traces, prices=config.prices, sink=self._sink
        )
        self.agent = Agent(
            bot="bench",
            config=config,
            provider=self.provider,
            platforms={"memory": platform},
            store=store,
            traces=self.writer if self._traces else None,
            answers=store.traces,
            limits=store.limits,
            notes=store.notes,
            chatlog=store.chatlog,
        )
        await platform.start(self.agent.submit)
        tasks = [asyncio.create_task(self.agent.run()), asyncio.create_task(self.writer.run())]

        async def stop() -> None:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        stack.push_async_callback(stop)
        self.rooms = [platform.channel(f"room{c}", is_direct=True) for c in range(self._channels)]
        self.people = [Participant(f"u{i}", f"User{i}") for i in range(8)]
        for room in self.rooms:
            for i in range(self._history):
                platform.add(room, self.people[i % 8], f"message number {i} with a few words in it")
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()

    async def activation(self, pause: float = 0.0) -> float:
        """One activation's overhead in microseconds; then ``pause`` seconds idle."""
        i, self._count = self._count, self._count + 1
        platform, provider = self.platform, self.provider
        platform.sent_event.clear()
        start = time.perf_counter_ns()
        await platform.post(self.rooms[i % self._channels], self.people[i % 8], f"question {i}?")
        async with asyncio.timeout(30):  # a failed activation sends nothing: say so, not hang
            await platform.sent_event.wait()
        await self.agent.wait_idle()
        await self.writer.flush()
        if pause:
            await asyncio.sleep(pause)
        inbound = provider.handed - start
        outbound = platform.sent_at - provider.answered
        return (inbound + outbound) / 1000


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
    """Overhead samples in microseconds (see ``Rig``); ``at_end`` runs after the last
    activation, with everything still in memory; ``pause``: seconds the process idles
    between activations."""
    samples: list[float] = []
    rig = Rig(config, traces=traces, history=history, channels=channels, database=database)
    async with rig:
        for i in range(warmup + runs):
            sample = await rig.activation(pause)
            if i >= warmup:
                samples.append(sample)
        if at_end is not None:
            at_end()
    return samples


async def interleaved(
    a: Rig,
    b: Rig,
    runs: int = RUNS,
    *,
    pause: float = 0.0,
    warmup: tuple[int, int] = (WARMUP, WARMUP),
    turn: int = 2,
    settle: int = 1,
) -> tuple[list[float], list[float]]:
    """``runs`` samples of each of two rigs in one process, taking turns ``turn``
    activations at a time: the machine's speed drifts by more than the figures compared
    within seconds, and short turns put both arms in the same moments. The first
    ``settle`` activations of a turn are not kept: what is kept follows an activation of its
    own arm (a traced one follows the writer's work for the trace before it), as in a bot
    that is one or the other. Where locality is what is compared (one channel against
    many), a turn must be long enough for each arm to touch its own data again first."""
    if not 0 <= settle < turn:
        raise ValueError("a turn must keep at least one activation")
    a_samples: list[float] = []
    b_samples: list[float] = []
    async with a, b:
        for _ in range(warmup[0]):
            await a.activation(pause)
        for _ in range(warmup[1]):
            await b.activation(pause)
        while len(a_samples) < runs:
            for rig, samples in ((a, a_samples), (b, b_samples)):
                for n in range(turn):
                    sample = await rig.activation(pause)
                    if n >= settle and len(samples) < runs:
                        samples.append(sample)
    return a_samples, b_samples


# Between two activations a bot idles; so do both arms of trace_overhead, for as long.
PAUSE = 0.005


async def trace_overhead() -> list[Figure]:
    """Activation overhead with traces on over traces off, interleaved (``interleaved``).

    Both arms idle ``PAUSE`` seconds between activations (outside the spans). On these
    machines an activation that follows an idle moment takes about twice as long as one
    run straight after another (even a 2 ms sleep with no work does it), and back to back
    only the traced arm idled (waiting for its writer's database thread), so that ratio
    compared cold activations with hot ones; it is reported too, without a target."""
    off, on = await interleaved(Rig(_config()), Rig(_config(), traces=True), pause=PAUSE)
    hot_off, hot_on = await interleaved(Rig(_config()), Rig(_config(), traces=True), RUNS // 2)
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


async def thinking_overhead() -> list[Figure]:
    """Activation overhead of a bot whose model reasons (thinking on, the stream carrying
    about 1 500 characters of reasoning and a signed block before the answer) over the same
    bot without, traced as a bot is, interleaved with the same idle pause as
    ``trace_overhead``. The model's time is outside the spans in both: what is compared is
    what Salon does with the reasoning (reading it off the stream, keeping it off the
    channel, tracing it)."""
    plain, thinking = await interleaved(
        Rig(_config(), traces=True), Rig(_config(thinks=True), traces=True), pause=PAUSE
    )
    return [
        Figure(
            "thinking_overhead_ratio",
            percentile(thinking, 50) / percentile(plain, 50),
            "x",
            target=1.10,
        ),
        Figure("activation_overhead_thinking_p50_us", percentile(thinking, 50), "us"),
    ]


async def growth() -> list[Figure]:
    """How the overhead grows with the window and with the number of active channels, each
    pair of arms taking turns (``interleaved``) long enough to keep each arm's locality."""
    small, large = await interleaved(
        Rig(_config(window=400), history=400),
        Rig(_config(window=4000), history=4000),
        RUNS // 2,
        turn=25,
        settle=5,
    )
    # Every channel is warm (answered once before) in both: the steady state is compared.
    # A turn visits each of the ten channels once before its samples are kept.
    few, many = await interleaved(
        Rig(_config(window=100), history=100, channels=10),
        Rig(_config(window=100), history=100, channels=1000),
        2000,
        warmup=(200, 1000),
        turn=60,
        settle=10,
    )
    rss: list[float] = []
    before = settled_rss_mib()
    await measure(
        _config(window=100),
        1000,
        history=100,
        channels=1000,
        warmup=0,
        at_end=lambda: rss.append(settled_rss_mib()),
    )
    by_window = percentile(large, 50) / percentile(small, 50)
    by_channels = percentile(many, 50) / percentile(few, 50)
    return [
        Figure("overhead_growth_4000_vs_400", by_window, "x", target=2.0),
        Figure("overhead_growth_1000_vs_10_channels", by_channels, "x", target=1.5),
        Figure("activation_overhead_4000_p50_us", percentile(large, 50), "us"),
        Figure("activation_overhead_1000_channels_p50_us", percentile(many, 50), "us"),
        Figure("rss_per_cached_channel_kib", (rss[0] - before) * 1024 / 1000, "KiB"),
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
