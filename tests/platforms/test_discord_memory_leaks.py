"""The memory faculty's leak suite on the fake Discord: notes in every scope across two
guilds, a thread, DMs and linked channels; generated probes ask in every place, some
through ``recall`` with crafted queries, again after pinned ``.config`` changes and after
a person had their note forgotten. No note reaches a request body outside its scope
(``leak_probes.seed_notes``), and every note in scope is there. The figure is
``memory_leaks`` in bench/memory.py."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from fakes.discord_server import DiscordServer
from fakes.llm_server import LLMServer, Scripted
from salon.agent import Agent
from salon.agent.activation import Activation
from salon.app import BotApp
from salon.config import Secrets
from salon.platforms.discord import DiscordPlatform
from tests.conftest import bot_config
from tests.platforms import leak_probes
from tests.platforms.conftest import Start, real_provider

MEMORY = {"enabled": True}
# Budgets wide enough that the probes' own messages never push a marker out of a link.
LINKS = [{**entry, "messages": 200, "characters": 50_000} for entry in leak_probes.LINKS]


def with_recalls(batch: list[leak_probes.Probe]) -> list[leak_probes.Probe]:
    """Every other probe recalls first, with one of the crafted queries."""
    queries = leak_probes.RECALLS
    return [
        p
        if n % 2
        else leak_probes.Probe(p.asker, p.place, p.question, queries[n // 2 % len(queries)])
        for n, p in enumerate(batch)
    ]


async def memory_world(
    server: DiscordServer, start_bot: Start, llm: LLMServer
) -> tuple[leak_probes.World, BotApp]:
    world = await leak_probes.build_world(server)
    provider, providers = real_provider(llm, "anthropic")
    app, _ = await start_bot(
        provider,
        providers=providers,
        links=LINKS,
        memory=MEMORY,
        default_tool_policy="allow",
        authorized_roles=[leak_probes.MODS],  # carol's .history clears #random's past
    )
    await leak_probes.seed_notes(world, app.store.notes, app.key)
    return world, app


async def test_generated_probes_find_no_note_out_of_scope(
    fake_discord: DiscordServer, start_bot: Start, llm_server: LLMServer
) -> None:
    world, app = await memory_world(fake_discord, start_bot, llm_server)
    batch = with_recalls(leak_probes.probes(world, 54, seed=9))
    assert len({(p.asker, p.place) for p in batch}) == 18  # every asker in every place
    assert sum(1 for p in batch if p.recall) == 27
    assert await leak_probes.run_probes(world, llm_server, batch, app.agent.wait_idle) == []
    recalled = [r for r in llm_server.requests if "tool_result" in str(r.body)]
    assert len(recalled) >= 27  # the recalls ran, and their results were read
    header = "Notes (what people told the bot"
    assert sum(1 for r in recalled if header in str(r.body)) >= 5  # read in their answer

    # Pinned .config changes: one that tries to show people's notes outside DMs (memory
    # is the operator's: refused), one that changes the channel's window.
    carol = fake_discord.user("Carol")
    tried = await fake_discord.post(
        leak_probes.GENERAL, carol, ".config\n---\nmemory:\n  person_notes_outside_dm: true"
    )
    other = await fake_discord.post(
        leak_probes.RANDOM, carol, ".config\n---\nrecency_window_messages: 50"
    )
    await fake_discord.pin(tried)
    await fake_discord.pin(other)
    again = with_recalls(leak_probes.probes(world, 18, seed=10))
    assert await leak_probes.run_probes(world, llm_server, again, app.agent.wait_idle) == []

    # Carol has her birthday forgotten in her DM: it is gone from the store and from
    # every request after, hers included.
    (note,) = [n for n in await app.store.notes.list_notes(app.key) if "NOTE-CAROL" in n.text]
    llm_server.queue(Scripted(tool_calls=[("f1", "forget", {"note_id": note.id})]))
    dm = fake_discord.dm_channel(carol)
    mine = [m for m in fake_discord.channels[dm] if m["author"]["id"] == fake_discord.bot.id]
    await fake_discord.post(dm, carol, "forget my birthday")
    await fake_discord.wait_bot_messages(dm, len(mine) + 1)
    await app.agent.wait_idle()
    assert "Forgot note" in str(llm_server.requests[-1].body)
    assert not [n for n in await app.store.notes.list_notes(app.key) if "NOTE-CAROL" in n.text]
    for n, marker in enumerate(world.markers):
        if marker.text == "NOTE-CAROL-n9":
            world.markers[n] = leak_probes.Marker(marker.text, lambda _a, _p: False)
    after = with_recalls(leak_probes.probes(world, 18, seed=11))
    assert await leak_probes.run_probes(world, llm_server, after, app.agent.wait_idle) == []
    async with asyncio.timeout(10), fake_discord.sent:
        await fake_discord.sent.wait_for(lambda: tried.get("reactions"))


class Running:
    """The bot of the reach cases, started and stopped by hand (a restart reads the tool
    log and the store back)."""

    def __init__(self, server: DiscordServer, llm: LLMServer, root: Path, caching: bool) -> None:
        provider, providers = real_provider(llm, "anthropic")
        config = bot_config(
            data_dir=str(root / "data"),
            platforms={
                "discord": {
                    "token_env": "DISCORD_TOKEN",
                    "api_base_url": server.api,
                    "gateway_url": server.gateway,
                }
            },
            providers=providers,
            links=LINKS,
            memory=MEMORY,
            default_tool_policy="allow",
            authorized_roles=[leak_probes.MODS],
            prompt_caching=caching,
        )
        secrets = Secrets({"DISCORD_TOKEN": "token-123", "TEST_KEY": "k-test"})
        self.app = BotApp(key="salon", config=config, root=root, secrets=secrets, provider=provider)
        self.until = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> BotApp:
        await self.app.__aenter__()
        (platform,) = self.app.unattended_platforms()
        assert isinstance(platform, DiscordPlatform)
        platform.guild_ready_timeout = 0.5
        self.task = asyncio.create_task(self.app.serve(self.until, [platform]))
        await asyncio.wait_for(platform.ready.wait(), 20)
        return self.app

    async def __aexit__(self, *exc: object) -> None:
        self.until.set()
        assert self.task is not None
        await asyncio.wait_for(self.task, 20)
        await self.app.__aexit__(None, None, None)


def joined_in(agent: Agent, channel: str, count: int) -> Any:
    """A wait until ``count`` triggers wait as one activation in ``channel``."""
    joined = asyncio.Event()
    schedule = agent._schedule

    def watched(tasks: asyncio.TaskGroup, activation: Activation) -> None:
        schedule(tasks, activation)
        lane = agent._lanes.get(f"discord:{channel}")
        if lane is not None and lane.pending is not None and len(lane.pending.triggers) >= count:
            joined.set()

    agent._schedule = watched  # type: ignore[method-assign]

    async def wait() -> None:
        await asyncio.wait_for(joined.wait(), 10)

    return wait


@pytest.mark.parametrize("caching", [True, False], ids=["caching", "no-caching"])
async def test_what_the_bot_did_for_one_person_reaches_no_one_else(
    fake_discord: DiscordServer, llm_server: LLMServer, tmp_path: Path, caching: bool
) -> None:
    """Issue #46: past tool results, a batch of several askers and shown tool output
    carry nothing a reader may not read (``leak_probes.reach_cases``), again after a
    restart. The figure is ``reach_leaks`` in bench/memory.py."""
    leak_probes.add_mallory(fake_discord)
    world = await leak_probes.build_world(fake_discord)
    reach = leak_probes.Reach(world, llm_server, [])
    async with Running(fake_discord, llm_server, tmp_path, caching) as app:
        await leak_probes.seed_reach(world, app.store.notes, app.key)
        joined = joined_in(app.agent, leak_probes.GENERAL, 2)
        await leak_probes.reach_cases(reach, app.agent.wait_idle, joined)
        await app.agent.wait_idle()
    async with Running(fake_discord, llm_server, tmp_path, caching) as app:
        await leak_probes.reach_after_restart(reach, app.agent.wait_idle)
    assert not reach.problems, "\n".join(["leaks:", *reach.problems])
