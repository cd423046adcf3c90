"""Consolidation: a channel's history becomes a digest note (the channel's, trusted) by a
side call of its own, traced and charged to the bot's usage; never in an excluded channel,
never with hidden messages in it, and only once enough arrived since the last digest."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from salon.agent.digest import DIGEST_PROMPT, Digester
from salon.agent.recording.traces import TraceWriter
from salon.config import BotConfig
from salon.llm import FakeProvider, Provider
from salon.model import Participant
from salon.notes import NoteScope, Scope
from salon.platforms.base import Platform
from salon.store.sql import SQLStore
from tests.agent.conftest import StartAgent

BOB = Participant("bob", "Bob")
HIDE = "\U0001fae5"
CONSOLIDATE = {"enabled": True, "every_messages": 5, "messages": 50, "exclude": ["secret"]}


@dataclass
class _Bot:
    """The running bot as the job sees it (salon.agent.digest.Host)."""

    key: str
    config: BotConfig
    traces: TraceWriter
    store: SQLStore
    platforms: dict[str, Platform]
    model: FakeProvider = field(default_factory=lambda: FakeProvider(default="DIGEST-TEXT"))

    def provider_for(self, config: BotConfig) -> Provider:
        return self.model


async def test_a_digest_note_is_made_from_visible_history_outside_excluded_channels(
    start_agent: StartAgent, store: SQLStore
) -> None:
    memory: dict[str, Any] = {"enabled": True, "consolidate": CONSOLIDATE}
    agent, platform = await start_agent(FakeProvider(), memory=memory)
    build, secret = platform.channel("build"), platform.channel("secret")
    for channel in (build, secret):
        for n in range(6):
            platform.add(channel, BOB, f"talk {n} in {channel.id}")
        platform.add(channel, BOB, ".DOT-HIDDEN a command")
        platform.add(channel, BOB, f"REACTION-HIDDEN {HIDE}")
        await platform.post(channel, BOB, "@Salon hi", mentions=[platform.self_participant])
        await agent.wait_idle()
    writer = TraceWriter(store=store, settings=agent.config.traces, prices={})
    bot = _Bot("salon", agent.config, writer, store, dict(agent.platforms))
    job = Digester(bot, store.notes, agent.room)
    before = await store.channels.usage_totals("salon")
    assert await job.digest_once() == 1
    charged = await store.channels.usage_totals("salon")
    assert charged.input_tokens > before.input_tokens  # the bot's usage: its limits count it
    (note,) = await store.notes.list_notes("salon")
    assert note.scope == NoteScope(Scope.CHANNEL, build.key)
    assert note.trusted
    assert note.provenance.author_id == platform.self_participant.id
    assert "DIGEST-TEXT" in note.text
    (request,) = bot.model.requests
    assert request.system == DIGEST_PROMPT
    sent = request.messages[0].plain_text
    assert "talk 0 in build" in sent
    assert "HIDDEN" not in sent
    assert "secret" not in sent
    assert await job.digest_once() == 0  # nothing new since: no second digest
    for n in range(5):
        platform.add(build, BOB, f"later talk {n}")
    assert await job.digest_once() == 1
    assert "talk 0 in build" not in bot.model.requests[-1].messages[0].plain_text
    runner = asyncio.create_task(writer.run())
    await writer.flush()
    runner.cancel()
    traces = await store.traces.list_traces()
    assert len(traces) == 2
    assert {t.channel for t in traces} == {build.key}


async def test_a_spent_channel_budget_leaves_the_channel_without_a_digest(
    start_agent: StartAgent, store: SQLStore
) -> None:
    memory: dict[str, Any] = {"enabled": True, "consolidate": CONSOLIDATE}
    limits = {"channel_budget": {"tokens": 20}}  # a call of the fake spends 15
    agent, platform = await start_agent(FakeProvider(), memory=memory, limits=limits)
    build = platform.channel("build")
    for n in range(6):
        platform.add(build, BOB, f"talk {n}")
    await platform.post(build, BOB, "@Salon hi", mentions=[platform.self_participant])
    await agent.wait_idle()
    writer = TraceWriter(store=store, settings=agent.config.traces, prices={})
    bot = _Bot("salon", agent.config, writer, store, dict(agent.platforms))
    job = Digester.of(bot, agent)
    assert job.limits is not None
    assert await job.digest_once() == 1  # the budget had room: the digest's spend counted
    for n in range(5):
        platform.add(build, BOB, f"later talk {n}")
    assert await job.digest_once() == 0  # spent now
    assert len(bot.model.requests) == 1
