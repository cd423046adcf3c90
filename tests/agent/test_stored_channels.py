"""Events whose channel was rebuilt from a stored key (a schedule, an event from outside)
are completed from the platform before the config is resolved, once per channel and
batch; a message, which comes with its channel whole, is not looked up; a lookup that
fails leaves the bare channel, as before, with one log line."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from salon.agent import Agent
from salon.config import ChannelConfigs
from salon.errors import PlatformError
from salon.llm import FakeProvider
from salon.model import ChannelRef, Participant, Schedule, ScheduledEvent
from salon.platforms.memory import MemoryPlatform
from salon.store.sql import SQLStore
from tests.conftest import bot_config

ALICE = Participant("alice", "Alice")
GUILD_PROMPT = "GUILD-LAYER the guild's own prompt"


class LookedUp(MemoryPlatform):
    """The memory platform, counting the channels it is asked for; ``down``: each lookup
    fails as a platform's request would."""

    def __init__(self) -> None:
        super().__init__(bot_name="Salon")
        self.lookups: list[str] = []
        self.down = False

    async def find_channel(self, channel_id: str) -> ChannelRef | None:
        self.lookups.append(channel_id)
        if self.down:
            raise PlatformError("the platform did not answer")
        return await super().find_channel(channel_id)


@pytest.fixture
async def guild_agent(store: SQLStore) -> AsyncIterator[tuple[Agent, LookedUp, FakeProvider]]:
    """An agent whose config layer for guild ``g1`` sets its own system prompt."""
    config = bot_config()
    configs = ChannelConfigs(
        config,
        shared={},
        bot=config.model_dump(exclude_unset=True),
        guilds={"g1": {"system_prompt": GUILD_PROMPT}},
    )
    platform = LookedUp()
    provider = FakeProvider(["one", "two", "three"])
    agent = Agent(
        bot="salon",
        config=config,
        provider=provider,
        platforms={platform.name: platform},
        store=store,
        configs=configs,
    )
    await platform.start(agent.submit)
    task = asyncio.create_task(agent.run())
    yield agent, platform, provider
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def fired(key: str, prompt: str) -> ScheduledEvent:
    """A schedule's occurrence as the store hands it over: the channel from its key."""
    now = datetime.now(UTC)
    schedule = Schedule(1, "salon", ChannelRef.from_key(key), prompt, "UTC", at=now)
    return ScheduledEvent(schedule, now)


async def test_a_schedule_in_a_guild_channel_is_answered_with_the_guilds_config(
    guild_agent: tuple[Agent, LookedUp, FakeProvider],
) -> None:
    agent, platform, provider = guild_agent
    platform.channel("general", guild_id="g1")
    await agent.submit(fired("memory:general", "water the plants"))
    (answer,) = await platform.wait_sent(1)
    assert provider.requests[0].system == GUILD_PROMPT
    assert answer.channel.guild_id == "g1"
    assert platform.lookups == ["general"]


async def test_a_message_is_not_looked_up(
    guild_agent: tuple[Agent, LookedUp, FakeProvider],
) -> None:
    _, platform, provider = guild_agent
    general = platform.channel("general", guild_id="g1")
    lobby = platform.channel("lobby")  # no guild, not direct: as an IRC channel
    await platform.post(general, ALICE, "@Salon hello", mentions=[platform.self_participant])
    await platform.post(lobby, ALICE, "@Salon hi", mentions=[platform.self_participant])
    await platform.wait_sent(2)
    assert platform.lookups == []
    assert sorted(r.system for r in provider.requests) == ["", GUILD_PROMPT]


@pytest.mark.parametrize("down", [False, True], ids=["unknown", "failing"])
async def test_a_channel_the_platform_cannot_tell_is_answered_as_before(
    guild_agent: tuple[Agent, LookedUp, FakeProvider],
    caplog: pytest.LogCaptureFixture,
    down: bool,
) -> None:
    agent, platform, provider = guild_agent
    platform.down = down
    caplog.set_level(logging.INFO, logger="salon.agent.dispatch")
    await agent.submit(fired("memory:gone", "water the plants"))
    (answer,) = await platform.wait_sent(1)
    assert answer.channel.key == "memory:gone"
    assert provider.requests[0].system == bot_config().system_prompt  # no guild's layer
    lines = [r.getMessage() for r in caplog.records if "memory:gone" in r.getMessage()]
    assert len([line for line in lines if "guild is not known" in line]) == 1
