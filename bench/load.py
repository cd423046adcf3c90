"""Load: many channels at a steady message rate, a model answering in 50 ms.

``load_dropped_events``: mentions posted minus mentions an ended activation answered (a
coalesced mention counts as answered: the activation read the room after it). Must be 0.
``load_rss_growth_mib``: the process's resident memory at the end of the run (the agent and its
channels alive) over after warm-up, each read after a collection and a ``malloc_trim``.
``load_latency_p50_ms``: from a mention to the first message of its answer.
"""

from __future__ import annotations

import asyncio
import random
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

from bench.figures import Figure, percentile, settled_rss_mib
from salon.agent import Agent
from salon.config import BotConfig
from salon.llm import LLMRequest, ProviderTraits, StopEvent, StreamEvent, TextDelta, UsageEvent
from salon.model import ChannelRef, Message, Participant, Usage
from salon.platforms.memory import MemoryPlatform
from salon.store.sql import SQLStore, sqlite_url

CHANNELS = 200
RATE = 100.0  # messages per second, over all channels
SECONDS = 60.0
MODEL_SECONDS = 0.05


class _SlowModel:
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
        agent = Agent(
            bot="load", config=_config(), provider=_SlowModel(), platforms={}, store=store
        )
        agent.platforms["memory"] = platform
        await platform.start(agent.submit)
        runner = asyncio.create_task(agent.run())
        people = [Participant(f"u{i}", f"User{i}") for i in range(20)]
        rooms = [platform.channel(f"c{i}") for i in range(channels)]
        me = platform.self_participant
        latencies: list[float] = []
        pending: dict[str, float] = {}  # channel -> when its oldest unanswered mention came
        posted = 0
        start = time.monotonic()
        warm_rss = 0.0
        try:
            total = int(rate * seconds)
            for n in range(total):
                if n == total // 10:
                    warm_rss = settled_rss_mib()
                room = rooms[rng.randrange(channels)]
                _settle(platform, pending, latencies)
                pending.setdefault(room.key, time.monotonic())
                await platform.post(room, people[n % 20], f"@Salon question {n}", mentions=[me])
                posted += 1
                await asyncio.sleep(max(0.0, start + (n + 1) / rate - time.monotonic()))
            await asyncio.wait_for(agent.wait_idle(), 600)
            _settle(platform, pending, latencies)
            rss_growth = settled_rss_mib() - warm_rss  # the agent and its channels still alive
        finally:
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
            await store.close()
    return {
        "dropped": posted - agent.stats.triggers,
        "rss_growth": rss_growth,
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
        Figure("load_rss_growth_mib", result["rss_growth"], "MiB"),
        Figure("load_latency_p50_ms", result["latency_p50"], "ms", target=150),
    ]
