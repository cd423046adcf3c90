"""Limits and budgets, counted in the store: the real openai SDK against the loopback LLM
server, the memory platform, the SQLite store."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from fakes.llm_server import LLMServer, Scripted
from salon.config import ChannelConfigs
from salon.config.pipeline import RateLimit
from salon.model import Participant
from salon.platforms.memory import MemoryPlatform
from salon.store.sql import SQLStore, sqlite_url
from tests.agent.pipeline_kit import pipeline_agent

ALICE = Participant("alice", "Alice")
RATE: dict[str, Any] = {"user_rate": {"requests": 20, "per_seconds": 3600}}


async def test_the_21st_request_in_an_hour_is_refused_once_then_silence(
    store: SQLStore, tmp_path: Path, llm_server: LLMServer
) -> None:
    async with pipeline_agent(store, tmp_path, llm_server, limits=RATE) as (agent, platform):
        dm = platform.channel("dm", is_direct=True)
        for number in range(22):
            await platform.post(dm, ALICE, f"question {number}")
            await agent.wait_idle()
    assert len(llm_server.requests) == 20
    answers = [m for m in platform.sent if m.text == "default reply"]
    notes = [m for m in platform.sent if m.text != "default reply"]
    assert len(answers) == 20
    (note,) = notes
    assert note.text.startswith("Alice: you have reached 20 requests per hour;")
    assert "UTC" in note.text
    assert "note" in str(note.tags)


async def test_counters_survive_a_restart(tmp_path: Path, llm_server: LLMServer) -> None:
    limits = {"user_rate": {"requests": 2, "per_seconds": 3600}}
    for round_ in range(2):
        store = SQLStore(sqlite_url(tmp_path / "salon.db"))
        await store.open()
        try:
            async with pipeline_agent(store, tmp_path, llm_server, limits=limits) as (
                agent,
                platform,
            ):
                dm = platform.channel("dm", is_direct=True)
                await platform.post(dm, ALICE, f"round {round_}")
                await agent.wait_idle()
        finally:
            await store.close()
    second = platform.sent
    assert len(llm_server.requests) == 2
    store = SQLStore(sqlite_url(tmp_path / "salon.db"))
    await store.open()
    try:
        async with pipeline_agent(store, tmp_path, llm_server, limits=limits) as (agent, platform):
            await platform.post(platform.channel("dm", is_direct=True), ALICE, "third")
            await agent.wait_idle()
    finally:
        await store.close()
    assert len(llm_server.requests) == 2  # the third request of the hour, after two restarts
    assert second[0].text == "default reply"
    assert "you have reached 2 requests per hour" in platform.sent[0].text


async def test_a_budget_holds_exactly_under_20_concurrent_activations(
    store: SQLStore, tmp_path: Path, llm_server: LLMServer
) -> None:
    # Each answer reports 100 tokens; an answer holds its estimate (context / 4 plus
    # max_tokens = 100) while it runs, so no more start than the budget can pay for.
    llm_server.default = Scripted(text="ok", input_tokens=90, output_tokens=10)
    budget = {"user_budget": {"tokens": 1000}}
    platform = MemoryPlatform(bot_name="Salon")
    async with pipeline_agent(
        store,
        tmp_path,
        llm_server,
        platform=platform,
        limits=budget,
        max_tokens=100,
        max_concurrent_activations=20,
    ) as (agent, platform):
        channels = [platform.channel(f"c{i}") for i in range(20)]
        bot = platform.self_participant
        await asyncio.gather(
            *(platform.post(c, ALICE, "@Salon hi", mentions=[bot]) for c in channels)
        )
        await agent.wait_idle()
        answered = len(llm_server.requests)
        day = int(time.time() // 86400)
        limits = agent.pipeline.limits
        assert limits is not None
        spent, held = limits.book.spent("user:alice:tokens", day)
        stored = await store.limits.spent("salon", "user:alice:tokens", day)
    assert held == 0
    assert stored == spent
    assert spent == answered * 100  # every answer counted once, none lost
    assert spent <= 1000
    assert answered >= 1
    refused = [m for m in platform.sent if "daily budget" in m.text]
    assert len(refused) == 1  # said once, then silence
    assert answered + 1 + 0 == len(platform.sent)


async def test_authorized_roles_are_exempt(
    store: SQLStore, tmp_path: Path, llm_server: LLMServer
) -> None:
    limits = {"user_rate": {"requests": 1, "per_seconds": 3600}}
    admin = Participant("root", "Root", roles=("mods",))
    async with pipeline_agent(
        store, tmp_path, llm_server, limits=limits, authorized_roles=["mods"]
    ) as (agent, platform):
        dm = platform.channel("dm", is_direct=True)
        for number in range(3):
            await platform.post(dm, admin, f"q{number}")
            await agent.wait_idle()
    assert len(llm_server.requests) == 3


async def test_a_channel_cooldown_says_so_once(
    store: SQLStore, tmp_path: Path, llm_server: LLMServer
) -> None:
    limits = {"channel_cooldown": 3600}
    async with pipeline_agent(store, tmp_path, llm_server, limits=limits) as (agent, platform):
        dm = platform.channel("dm", is_direct=True)
        for number in range(3):
            await platform.post(dm, ALICE, f"q{number}")
            await agent.wait_idle()
    assert len(llm_server.requests) == 1
    assert platform.sent[0].text == "default reply"
    assert "taking a break in this channel" in platform.sent[1].text
    assert len(platform.sent) == 2


async def test_a_budget_survives_a_restart(tmp_path: Path, llm_server: LLMServer) -> None:
    llm_server.default = Scripted(text="ok", input_tokens=90, output_tokens=10)
    limits = {"channel_budget": {"tokens": 150}}
    sent: list[str] = []
    for round_ in range(3):
        store = SQLStore(sqlite_url(tmp_path / "salon.db"))
        await store.open()
        try:
            async with pipeline_agent(
                store, tmp_path, llm_server, limits=limits, max_tokens=20
            ) as (agent, platform):
                await platform.post(platform.channel("dm", is_direct=True), ALICE, f"r{round_}")
                await agent.wait_idle()
                sent += [m.text for m in platform.sent]
        finally:
            await store.close()
    assert len(llm_server.requests) == 2  # 100 spent, then 200: the third finds it used up
    assert sent[:2] == ["ok", "ok"]
    assert "this channel's daily budget for Salon is used up" in sent[2]


async def test_a_rate_holds_exactly_under_25_concurrent_activations(
    store: SQLStore, tmp_path: Path, llm_server: LLMServer
) -> None:
    async with pipeline_agent(
        store, tmp_path, llm_server, limits=RATE, max_concurrent_activations=25
    ) as (agent, platform):
        me = platform.self_participant
        channels = [platform.channel(f"c{i}") for i in range(25)]
        await asyncio.gather(
            *(platform.post(c, ALICE, "@Salon hi", mentions=[me]) for c in channels)
        )
        await agent.wait_idle()
    assert len(llm_server.requests) == 20
    assert sum("you have reached" in m.text for m in platform.sent) == 1


async def test_a_smaller_rate_after_a_reload_applies_at_once(
    store: SQLStore, tmp_path: Path, llm_server: LLMServer
) -> None:
    async with pipeline_agent(store, tmp_path, llm_server, limits=RATE) as (agent, platform):
        dm = platform.channel("dm", is_direct=True)
        for number in range(3):
            await platform.post(dm, ALICE, f"q{number}")
            await agent.wait_idle()
        rate = RateLimit(requests=2, per_seconds=3600)
        limits = agent.config.limits.model_copy(update={"user_rate": rate})
        two = agent.config.model_copy(update={"limits": limits})
        agent.reconfigure(two, ChannelConfigs(two))
        await platform.post(dm, ALICE, "q3")
        await agent.wait_idle()
    assert len(llm_server.requests) == 3
    assert "you have reached 2 requests per hour" in platform.sent[-1].text
