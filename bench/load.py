"""Load: many channels at a steady message rate, a model answering in 50 ms, traces on.

Every channel starts with a full window of history (as a bot joining busy channels finds
them), so the caches reach their steady state within the first pass over the channels and
the run levels off in minutes; the memory platform keeps a channel's newest messages only
(the window and a margin, as the Discord adapter's cache does), not everything ever said.

``load_dropped_events``: mentions posted minus mentions an ended activation answered (a
coalesced mention counts as answered: the activation read the room after it). Must be 0.
``load_rss_growth_mib``: the process's resident memory at the end of the run (the agent and its
channels alive) over after warm-up (the first quarter of the run), each read after a
collection and a ``malloc_trim``. ``load_rss_mib``: at the end, for scale.
``load_latency_p50_ms``: from a mention to the first message of its answer.
``SALON_BENCH_LOAD_SECONDS`` sets the run's length (default 180 s).
"""

from __future__ import annotations

import asyncio
import os
import random
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

from bench.figures import Figure, percentile, settled_rss_mib
from salon.agent import Agent
from salon.agent.recording.traces import TraceWriter
from salon.config import BotConfig
from salon.llm import (
    BaseProvider,
    LLMRequest,
    ProviderTraits,
    StopEvent,
    StreamEvent,
    TextDelta,
    UsageEvent,
)
from salon.model import ChannelRef, Message, Participant, Usage
from salon.platforms.memory import MemoryPlatform
from salon.store.sql import SQLStore, sqlite_url

CHANNELS = 200
RATE = 100.0  # messages per second, over all channels
SECONDS = float(os.environ.get("SALON_BENCH_LOAD_SECONDS", "180"))
MODEL_SECONDS = 0.05
HISTORY = 450  # messages each channel starts with: the window (400) and a roll's worth
KEEP = HISTORY + 50  # messages the platform keeps per channel
_CHATTER = (  # what the history says, a line of 20 to 200 characters
    "ok",
    "Has anyone tried the new build on the staging box yet?",
    "I think the problem is in the retry loop: it never backs off when the server says 429,"
    " so the whole thing hammers it until the limit resets.",
    "lol",
    "Meeting moved to 3pm, same room. Bring the numbers from last week if you have them.",
)


class _SlowModel(BaseProvider):
    name = "slow"
    traits = ProviderTraits()

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        await asyncio.sleep(MODEL_SECONDS)
        yield TextDelta("An answer.")
        yield UsageEvent(Usage(input_tokens=1, output_tokens=1))
        yield StopEvent("end_turn")

    async def aclose(self) -> None:
        return None


class _Platform(MemoryPlatform):
    """Remembers when each channel last got an answer, and forgets old messages."""

    def __init__(self) -> None:
        super().__init__(bot_name="Salon")
        self.answered_at: dict[str, float] = {}

    def add(self, channel: ChannelRef, author: Participant, text: str, **kwargs: object) -> Message:
        message = super().add(channel, author, text, **kwargs)  # type: ignore[arg-type]
        messages = self._channels[channel.key]
        if len(messages) > KEEP:
            del messages[0]
        return message

    async def send(self, channel: ChannelRef, text: str, **kwargs: object) -> Message:
        self.answered_at[channel.key] = time.monotonic()
        message = await super().send(channel, text, **kwargs)  # type: ignore[arg-type]
        self.sent.clear()
        return message


def _config() -> BotConfig:
    return BotConfig.model_validate(
        {
            "name": "Salon",
            "provider": "slow",
            "providers": {"slow": {"type": "openai", "model": "m"}},
            "builtin_tools": False,
        }
    )


async def measure(
    channels: int = CHANNELS, rate: float = RATE, seconds: float = SECONDS
) -> dict[str, float]:
    """Run the load; return dropped events, RSS growth and latency samples' p50."""
    rng = random.Random(12)
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLStore(sqlite_url(Path(tmp) / "load.db"))
        await store.open()
        platform = _Platform()
        config = _config()
        traces = TraceWriter(store=store, settings=config.traces, prices=config.prices)
        agent = Agent(
            bot="load",
            config=config,
            provider=_SlowModel(),
            platforms={},
            store=store,
            traces=traces,
            answers=store.traces,
            limits=store.limits,
            notes=store.notes,
            chatlog=store.chatlog,
        )
        agent.platforms["memory"] = platform
        await platform.start(agent.submit)
        runner = asyncio.create_task(agent.run())
        writer = asyncio.create_task(traces.run())
        people = [Participant(f"u{i}", f"User{i}") for i in range(20)]
        rooms = [platform.channel(f"c{i}") for i in range(channels)]
        me = platform.self_participant
        for room in rooms:  # as the load leaves it: a line of talk or a question, an answer
            for n in range(HISTORY):
                if n % 2:
                    platform.add(room, me, "An answer.")
                else:
                    platform.add(room, people[n % 20], f"{_CHATTER[n % len(_CHATTER)]} ({n})")
        latencies: list[float] = []
        pending: dict[str, float] = {}  # channel -> when its oldest unanswered mention came
        posted = 0
        start = time.monotonic()
        warm_rss = 0.0
        try:
            total = int(rate * seconds)
            for n in range(total):
                if n == total // 4:
                    warm_rss = settled_rss_mib()
                room = rooms[rng.randrange(channels)]
                _settle(platform, pending, latencies)
                pending.setdefault(room.key, time.monotonic())
                await platform.post(room, people[n % 20], f"@Salon question {n}", mentions=[me])
                posted += 1
                await asyncio.sleep(max(0.0, start + (n + 1) / rate - time.monotonic()))
            await asyncio.wait_for(agent.wait_idle(), 600)
            await asyncio.wait_for(traces.flush(), 600)
            _settle(platform, pending, latencies)
            rss = settled_rss_mib()  # the agent and its channels still alive
        finally:
            for task in (runner, writer):
                task.cancel()
            await asyncio.gather(runner, writer, return_exceptions=True)
            await store.close()
    return {
        "dropped": posted - agent.stats.triggers,
        "rss_growth": rss - warm_rss,
        "rss": rss,
        "latency_p50": percentile(latencies, 50) * 1000 if latencies else 0.0,
    }


def _settle(platform: _Platform, pending: dict[str, float], latencies: list[float]) -> None:
    """Take the latency of every channel answered since its oldest waiting mention."""
    for key, asked in list(pending.items()):
        answered = platform.answered_at.get(key)
        if answered is not None and answered >= asked:
            latencies.append(answered - asked)
            del pending[key]


async def run() -> list[Figure]:
    result = await measure()
    return [
        Figure("load_dropped_events", result["dropped"], "events", target=0),
        Figure("load_rss_growth_mib", result["rss_growth"], "MiB", target=32),
        Figure("load_rss_mib", result["rss"], "MiB"),
        Figure("load_latency_p50_ms", result["latency_p50"], "ms", target=150),
    ]
