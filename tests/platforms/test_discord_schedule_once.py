"""A schedule's answer reaches Discord once, though the process that sent it stopped before
the occurrence was recorded as answered: its first message went out under a nonce, and the
next process, taking the claim over, sends a note under the same nonce; Discord
(``enforce_nonce``) returns the message made then instead of posting the note."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

from fakes.discord_server import DiscordServer
from salon.llm import FakeProvider, LLMRequest, ProviderTraits, StopEvent, TextDelta
from salon.llm.base import BaseProvider, StreamEvent
from salon.model import ChannelRef, Participant, Schedule
from tests.platforms.conftest import GENERAL, Start
from tests.platforms.test_discord_redelivery import make_app, said, serve_until


class FirstParagraphThenHang(BaseProvider):
    """Says one paragraph, then waits until the stop cancels it."""

    name = "hang"
    traits = ProviderTraits()

    def __init__(self) -> None:
        self.requests: list[LLMRequest] = []

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        yield TextDelta("Watering now.\n\nAnd then")
        await asyncio.Event().wait()
        yield StopEvent("end_turn")

    async def aclose(self) -> None:
        return None


async def test_an_answer_shown_before_a_stop_is_not_shown_again(
    fake_discord: DiscordServer, tmp_path: Path
) -> None:
    first = make_app(fake_discord, tmp_path, FirstParagraphThenHang())
    stop = asyncio.Event()
    async with first:
        serving = await serve_until(first, stop, grace=0.1)
        now = datetime.now(UTC)
        channel = ChannelRef("discord", GENERAL)
        alice = Participant("alice", "Alice")
        await first.store.schedules.create_schedule(
            Schedule(0, "salon", channel, "water", "UTC", at=now, created_by=alice, next_due=now)
        )
        first.scheduler.changed()
        await fake_discord.wait_bot_messages(GENERAL, 1)
        stop.set()  # cut in the middle of the answer: the claim stays open
        await asyncio.wait_for(serving, 15)

    provider = FakeProvider(["Watering again."])
    again = make_app(fake_discord, tmp_path, provider)
    stop = asyncio.Event()
    async with again:
        serving = await serve_until(again, stop)
        await asyncio.wait_for(again.scheduler.wait_rests(1), 15)  # taken over by then
        await again.agent.wait_idle()
        stop.set()
        await asyncio.wait_for(serving, 15)
        async with again.store.db.connect() as conn:
            (fire,) = await conn.fetch("SELECT status FROM schedule_fires")
    assert said(fake_discord, GENERAL) == ["Watering now."]
    assert provider.requests == []
    assert fire[0] == "done"


async def test_a_probe_posts_its_note_when_nothing_went_out_under_the_key(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    _, platform = await start_bot(FakeProvider([]))
    channel = ChannelRef("discord", GENERAL)
    assert not await platform.sent_before(channel, "k" * 20, note="(answering now)")
    assert said(fake_discord, GENERAL) == ["(answering now)"]
    await platform.send(channel, "The answer.", key="k2")
    assert await platform.sent_before(channel, "k2", note="(answering now)")
    assert said(fake_discord, GENERAL) == ["(answering now)", "The answer."]
