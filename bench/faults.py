"""LLM faults: every activation ends in an answer or a clear error, and nothing twice.

The real openai SDK against the loopback LLM server, which answers 30 % of requests
(seeded) with a fault: a 500, a 429 with Retry-After, a hang before the head or mid-stream,
a truncated or malformed stream, a connection reset. Several channels are asked at once,
round after round.

``faults_silent_activations``: activations after which the channel got nothing, neither
an answer nor a note. ``faults_duplicate_answers``: messages an activation sent twice.
Both must be 0.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections import Counter
from pathlib import Path

from bench.figures import Figure
from fakes.llm_server import FAULTS, LLMServer, Scripted
from salon.agent import Agent
from salon.config import BotConfig, Secrets
from salon.llm.factory import build_provider
from salon.model import Participant, Tag
from salon.platforms.memory import MemoryPlatform
from salon.store.sql import SQLStore, sqlite_url

ROUNDS = 40
CHANNELS = 8
ANSWER = ["Part one.\n\n", "Part two."]


def _config(base_url: str) -> BotConfig:
    provider = {
        "type": "openai",
        "model": "m",
        "base_url": base_url,
        "retries": 2,
        "backoff_initial": 0,
        "first_token_timeout": 0.5,
        "timeout": 2,
    }
    return BotConfig.model_validate(
        {"name": "Salon", "provider": "f", "providers": {"f": provider}, "builtin_tools": False}
    )


async def measure(
    rounds: int = ROUNDS, channels: int = CHANNELS, rate: float = 0.3, seed: int = 30
) -> dict[str, float]:
    async with LLMServer(fault_rate=rate, seed=seed, faults=FAULTS) as server:
        server.retry_after = "0"
        server.default = Scripted(chunks=ANSWER)
        config = _config(server.base_url + "/v1")
        with tempfile.TemporaryDirectory() as tmp:
            store = SQLStore(sqlite_url(Path(tmp) / "faults.db"))
            await store.open()
            provider = build_provider(config, Secrets({}))
            platform = MemoryPlatform(bot_name="Salon")
            agent = Agent(
                bot="faults",
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
            try:
                result = await _rounds(agent, platform, rounds, channels)
            finally:
                runner.cancel()
                await asyncio.gather(runner, return_exceptions=True)
                await provider.aclose()
                await store.close()
        result["faulted_requests"] = sum(1 for f in server.faults_applied if f is not None)
        result["requests"] = len(server.faults_applied)
    return result


async def _rounds(
    agent: Agent, platform: MemoryPlatform, rounds: int, channels: int
) -> dict[str, float]:
    rooms = [platform.channel(f"room{i}", is_direct=True) for i in range(channels)]
    asker = Participant("alice", "Alice")
    silent = duplicates = answered = told = 0
    for n in range(rounds):
        before = len(platform.sent)
        for room in rooms:
            await platform.post(room, asker, f"question {n}")
        await asyncio.wait_for(agent.wait_idle(), 60)
        new = platform.sent[before:]
        for room in rooms:
            said = [m for m in new if m.channel.key == room.key]
            if not said:
                silent += 1
            duplicates += sum(c - 1 for c in Counter(m.text for m in said).values() if c > 1)
            if any(Tag.NOTE not in m.tags for m in said):
                answered += 1
            if any(Tag.NOTE in m.tags for m in said):
                told += 1
    return {
        "activations": rounds * channels,
        "silent": silent,
        "duplicates": duplicates,
        "answered": answered,
        "told": told,
    }


async def run() -> list[Figure]:
    result = await measure()
    return [
        Figure("faults_silent_activations", result["silent"], "activations", target=0),
        Figure("faults_duplicate_answers", result["duplicates"], "messages", target=0),
        Figure("faults_activations", result["activations"], "activations"),
        Figure("faults_faulted_requests", result["faulted_requests"], "requests"),
        Figure("faults_answered_activations", result["answered"], "activations"),
    ]
