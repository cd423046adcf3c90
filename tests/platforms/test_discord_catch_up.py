"""Nothing addressed to the bot is lost on Discord: a mention made while the bot was
stopped, or during a session Discord invalidated, is answered once after the gap; one
older than ``catch_up.max_age`` is not; an answer a stop cut off is finished or closed,
never repeated whole."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

from fakes.discord_server import DiscordServer
from salon.app import BotApp
from salon.llm import FakeProvider
from salon.llm.base import LLMRequest, StreamEvent, TextDelta
from salon.platforms.discord import DiscordPlatform
from tests.platforms.conftest import GENERAL, RANDOM, Start, ask
from tests.platforms.test_discord_redelivery import make_app

WAIT = 20.0


def said(server: DiscordServer, channel: str) -> list[str]:
    return [m["content"] for m in server.channels[channel] if m["author"]["id"] == server.bot.id]


class Running:
    """A bot app serving the fake Discord until ``stop``."""

    def __init__(self, app: BotApp) -> None:
        self.app = app
        self.until = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> DiscordPlatform:
        await self.app.__aenter__()
        (platform,) = self.app.unattended_platforms()
        assert isinstance(platform, DiscordPlatform)
        platform.guild_ready_timeout = 0.5
        self.task = asyncio.create_task(self.app.serve(self.until, [platform]))
        await asyncio.wait_for(platform.ready.wait(), WAIT)
        return platform

    async def stop(self) -> None:
        self.until.set()
        assert self.task is not None
        await asyncio.wait_for(self.task, WAIT)
        await self.app.__aexit__(None, None, None)


async def caught_up(app: BotApp, count: int) -> None:
    """Wait until the bot's read-back handed ``count`` messages on, and they were handled."""
    delivery = app.agent.delivery
    assert delivery is not None
    await asyncio.wait_for(delivery.wait_caught_up(count), WAIT)
    await app.agent.wait_idle()


async def test_a_mention_made_while_the_bot_was_stopped_is_answered_once_at_its_start(
    fake_discord: DiscordServer, tmp_path: Path
) -> None:
    alice = fake_discord.user("Alice")
    first = Running(make_app(fake_discord, tmp_path, FakeProvider(["Hello Alice."])))
    await first.start()
    await ask(fake_discord, GENERAL, alice, "hi")
    await fake_discord.wait_bot_messages(GENERAL, 1)
    await first.app.agent.wait_idle()
    await first.stop()

    missed = await ask(fake_discord, GENERAL, alice, "are you there?")  # nobody listens
    await fake_discord.post(GENERAL, fake_discord.user("Bob"), "just chatting")

    provider = FakeProvider(["Yes, back now."])
    again = Running(make_app(fake_discord, tmp_path, provider))
    await again.start()
    await fake_discord.wait_bot_messages(GENERAL, 2)
    await caught_up(again.app, 2)
    await again.app.traces.flush()
    trace_id = await again.app.store.traces.trace_for_message(missed["id"])
    assert trace_id is not None
    found = await again.app.store.traces.get_trace(trace_id)
    assert found is not None
    assert found[1]["triggers"][0]["delivery"].startswith("caught up after a gap of ")
    await again.stop()
    assert said(fake_discord, GENERAL) == ["Hello Alice.", "Yes, back now."]
    (request,) = provider.requests
    assert "are you there?" in request.messages[-1].plain_text


async def test_a_mention_during_an_invalidated_session_is_answered_once(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    alice = fake_discord.user("Alice")
    provider = FakeProvider(["First.", "Missed one answered."])
    app, _ = await start_bot(provider)
    await ask(fake_discord, GENERAL, alice, "hi")
    await fake_discord.wait_bot_messages(GENERAL, 1)
    await app.agent.wait_idle()

    fake_discord.pause_gateway()
    fake_discord.invalidate_sessions()
    fake_discord.identified.clear()
    await fake_discord.drop_connections(4000)
    await ask(fake_discord, GENERAL, alice, "did you see this?")  # in the gap
    fake_discord.open_gateway()
    await asyncio.wait_for(fake_discord.identified.wait(), WAIT)

    await fake_discord.wait_bot_messages(GENERAL, 2)
    await caught_up(app, 1)
    assert fake_discord.resumes_refused >= 1
    assert said(fake_discord, GENERAL) == ["First.", "Missed one answered."]
    assert len(provider.requests) == 2


async def test_a_resumed_session_replays_the_gap_and_it_is_answered_once(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    alice = fake_discord.user("Alice")
    provider = FakeProvider(["First.", "Replayed one answered."])
    app, _ = await start_bot(provider)
    await ask(fake_discord, GENERAL, alice, "hi")
    await fake_discord.wait_bot_messages(GENERAL, 1)
    await app.agent.wait_idle()

    fake_discord.pause_gateway()
    await fake_discord.drop_connections(1006)  # no close frame: the session lives on
    await ask(fake_discord, GENERAL, alice, "still with me?")
    fake_discord.open_gateway()
    await fake_discord.wait_bot_messages(GENERAL, 2)
    await app.agent.wait_idle()
    assert fake_discord.resumes == 1
    assert said(fake_discord, GENERAL) == ["First.", "Replayed one answered."]


async def test_a_mention_older_than_the_window_is_not_answered_after_a_restart(
    fake_discord: DiscordServer, tmp_path: Path
) -> None:
    alice = fake_discord.user("Alice")
    fake_discord.clock_offset = -3 * 3600.0  # the bot ran three hours ago
    first = Running(make_app(fake_discord, tmp_path, FakeProvider(["Hello."])))
    await first.start()
    await ask(fake_discord, GENERAL, alice, "hi")
    await fake_discord.wait_bot_messages(GENERAL, 1)
    await first.app.agent.wait_idle()
    await first.stop()

    fake_discord.clock_offset = -2 * 3600.0
    await ask(fake_discord, GENERAL, alice, "two hours ago: anyone?")
    fake_discord.clock_offset = 0.0

    provider = FakeProvider(["should not be said"])
    again = Running(make_app(fake_discord, tmp_path, provider))
    await again.start()
    await ask(fake_discord, RANDOM, alice, "now?")  # answered: the bot is up
    await fake_discord.wait_bot_messages(RANDOM, 1)
    await again.app.agent.wait_idle()
    await again.stop()
    assert said(fake_discord, GENERAL) == ["Hello."]
    assert len(provider.requests) == 1


class Hanging(FakeProvider):
    """Streams its first paragraph, then writes on until the stop cancels it."""

    def __init__(self, first: str) -> None:
        super().__init__()
        self.first = first
        self.writing = asyncio.Event()

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        if self.first:
            yield TextDelta(self.first)
        self.writing.set()
        await asyncio.Event().wait()  # never ends on its own
        yield TextDelta("never")


async def test_an_answer_a_stop_cut_off_before_it_showed_is_answered_at_the_next_start(
    fake_discord: DiscordServer, tmp_path: Path
) -> None:
    alice = fake_discord.user("Alice")
    hanging = Hanging("")
    first = Running(make_app(fake_discord, tmp_path, hanging, shutdown_grace=0.2))
    await first.start()
    await ask(fake_discord, GENERAL, alice, "a long question")
    await asyncio.wait_for(hanging.writing.wait(), WAIT)
    await first.stop()  # the grace runs out: the answer is cut
    assert said(fake_discord, GENERAL) == []

    provider = FakeProvider(["The whole answer."])
    again = Running(make_app(fake_discord, tmp_path, provider))
    await again.start()
    await fake_discord.wait_bot_messages(GENERAL, 1)
    await caught_up(again.app, 0)
    await again.stop()
    assert said(fake_discord, GENERAL) == ["The whole answer."]
    assert len(provider.requests) == 1


async def test_an_answer_a_stop_cut_off_after_it_showed_is_closed_not_repeated(
    fake_discord: DiscordServer, tmp_path: Path
) -> None:
    alice = fake_discord.user("Alice")
    hanging = Hanging("The first paragraph.\n\n")
    first = Running(make_app(fake_discord, tmp_path, hanging, shutdown_grace=0.2))
    await first.start()
    await ask(fake_discord, GENERAL, alice, "a long question")
    await fake_discord.wait_bot_messages(GENERAL, 1)
    await first.stop()

    provider = FakeProvider(["must not come"])
    again = Running(make_app(fake_discord, tmp_path, provider))
    await again.start()
    await fake_discord.wait_bot_messages(GENERAL, 2)
    await again.app.agent.wait_idle()
    await again.stop()
    first_line, closing = said(fake_discord, GENERAL)
    assert first_line == "The first paragraph."
    assert "cut off" in closing
    assert provider.requests == []


async def test_a_mention_in_a_channel_never_read_back_is_found_by_the_guild_search(
    fake_discord: DiscordServer, tmp_path: Path
) -> None:
    alice = fake_discord.user("Alice")
    first = Running(make_app(fake_discord, tmp_path, FakeProvider(["Hello."])))
    await first.start()
    await ask(fake_discord, GENERAL, alice, "hi")
    await fake_discord.wait_bot_messages(GENERAL, 1)
    await first.app.agent.wait_idle()
    await first.stop()

    await ask(fake_discord, RANDOM, alice, "over here, while you were away")

    provider = FakeProvider(["Found you."])
    again = Running(make_app(fake_discord, tmp_path, provider))
    await again.start()
    await fake_discord.wait_bot_messages(RANDOM, 1)
    await caught_up(again.app, 1)
    await again.stop()
    assert said(fake_discord, RANDOM) == ["Found you."]
    (search,) = fake_discord.searches
    assert search["mentions"] == fake_discord.bot.id


async def test_a_guild_not_indexed_yet_is_skipped_and_the_rest_is_caught_up(
    fake_discord: DiscordServer, tmp_path: Path
) -> None:
    alice = fake_discord.user("Alice")
    first = Running(make_app(fake_discord, tmp_path, FakeProvider(["Hello."])))
    await first.start()
    await ask(fake_discord, GENERAL, alice, "hi")
    await fake_discord.wait_bot_messages(GENERAL, 1)
    await first.app.agent.wait_idle()
    await first.stop()

    fake_discord.search_indexed = False
    await ask(fake_discord, RANDOM, alice, "not findable yet")
    await ask(fake_discord, GENERAL, alice, "but this is")

    provider = FakeProvider(["Read back."])
    again = Running(make_app(fake_discord, tmp_path, provider))
    await again.start()
    await fake_discord.wait_bot_messages(GENERAL, 2)
    await caught_up(again.app, 1)
    await again.stop()
    assert said(fake_discord, GENERAL) == ["Hello.", "Read back."]
    assert said(fake_discord, RANDOM) == []
    assert fake_discord.searches == []
