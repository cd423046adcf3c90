"""The pipeline in front of the model.

pipeline_overhead_ratio: activation overhead (as ``activation_overhead`` measures it) with
keywords, a per-user rate limit, per-user, channel and guild budgets and a channel cooldown
configured (evaluator and gate off, every request admitted), over none: two bots in one
process taking turns two activations at a time, each idling 5 ms between activations.

evaluator_tokens_saved_share: a 400-message room whose topic changed 50 messages ago; a
scripted evaluator keeps exactly the messages of the new topic. The share of prompt
characters (a stand-in for tokens) the evaluator saves, its own call counted against it.
"""

from __future__ import annotations

import asyncio
import json
import re
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

from bench.activation import PAUSE, Rig, _config, interleaved
from bench.figures import Figure, percentile
from salon.agent import Agent
from salon.config import BotConfig
from salon.llm import LLMRequest, ProviderTraits, StopEvent, StreamEvent, TextDelta, UsageEvent
from salon.llm.base import BaseProvider, TextPart
from salon.model import Participant, Usage
from salon.platforms.memory import MemoryPlatform
from salon.store.sql import SQLStore, sqlite_url

ROOM = 400
NEW_TOPIC = 50


def _pipeline_config() -> BotConfig:
    data = _config().model_dump()
    data.update(
        keywords={"weather": {"tool": "get_weather"}, "help": {"internal": True}},
        limits={
            "user_rate": {"requests": 1_000_000, "per_seconds": 3600},
            "user_budget": {"tokens": 10**12},
            "channel_budget": {"tokens": 10**12},
            "guild_budget": {"cost": 10**6},
            "channel_cooldown": 0.0001,  # shorter than an activation: never refuses here
        },
    )
    return BotConfig.model_validate(data)


async def pipeline_overhead() -> list[Figure]:
    """Two bots in one process taking turns (``bench.activation.interleaved``), so the
    machine's drift falls on both alike; both idle ``PAUSE`` between activations, as
    ``trace_overhead``'s arms do and a bot does."""
    off, on = await interleaved(Rig(_config()), Rig(_pipeline_config()), pause=PAUSE)
    return [
        Figure("pipeline_overhead_ratio", percentile(on, 50) / percentile(off, 50), "x", 1.10),
        Figure("activation_overhead_pipeline_p50_us", percentile(on, 50), "us"),
        Figure("activation_overhead_plain_p50_us", percentile(off, 50), "us"),
    ]


class _Scripted(BaseProvider):
    """Answers the evaluator with the numbers of the new topic's messages; records the
    characters of every request."""

    name = "scripted"
    traits = ProviderTraits()

    def __init__(self) -> None:
        self.chars: list[tuple[str, int]] = []

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        text = "".join(p.text for m in request.messages for p in m.parts if isinstance(p, TextPart))
        evaluating = request.system.startswith("You pick the context")
        self.chars.append(("evaluate" if evaluating else "answer", len(request.system + text)))
        if evaluating:
            lines = re.findall(r"^(\d+)\. \w+: (\w+)", text, re.MULTILINE)
            kept = [int(number) for number, topic in lines if topic == "gardening"]
            yield TextDelta(json.dumps({"keep": kept}))
        else:
            yield TextDelta("An answer.")
        yield UsageEvent(Usage(input_tokens=1, output_tokens=1))
        yield StopEvent("end_turn")

    async def aclose(self) -> None:
        return None


async def _prompt_chars(evaluator: bool) -> list[tuple[str, int]]:
    data = _config().model_dump()
    data.update(
        prompt_caching=False,
        recency_window_characters=1_000_000,
        context_evaluator={"enabled": evaluator, "max_depth": 100},
    )
    config = BotConfig.model_validate(data)
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLStore(sqlite_url(Path(tmp) / "bench.db"))
        await store.open()
        provider = _Scripted()
        platform = MemoryPlatform(bot_name="Salon")
        agent = Agent(
            bot="bench",
            config=config,
            provider=provider,
            platforms={"memory": platform},
            store=store,
            answers=store.traces,
            limits=store.limits,
            notes=store.notes,
            chatlog=store.chatlog,
        )
        await platform.start(agent.submit)
        runner = asyncio.create_task(agent.run())
        room = platform.channel("room", is_direct=True)
        people = [Participant(f"u{i}", f"User{i}") for i in range(8)]
        for i in range(ROOM - 1):
            topic = "gardening" if i >= ROOM - NEW_TOPIC else "football"
            platform.add(room, people[i % 8], f"{topic} talk, message {i}, with a few more words")
        try:
            await platform.post(room, people[0], "gardening: what do I plant in spring?")
            await agent.wait_idle()
        finally:
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
            await store.close()
    return provider.chars


async def evaluator_savings() -> list[Figure]:
    without = sum(chars for _, chars in await _prompt_chars(False))
    calls = await _prompt_chars(True)
    with_evaluator = sum(chars for _, chars in calls)
    return [
        Figure("evaluator_tokens_saved_share", 1 - with_evaluator / without, "share"),
        Figure("evaluator_call_share", calls[0][1] / without, "share"),
    ]
