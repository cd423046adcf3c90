"""Delivery on the memory platform: what was said in a gap is answered once after it, at
the next start too; a post the platform could not take is tried again, in order."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

from fakes.databases import Database
from fakes.tcp_proxy import TcpProxy
from salon.agent import Agent
from salon.errors import PlatformError
from salon.llm import FakeProvider
from salon.llm.base import LLMRequest, StreamEvent, TextDelta
from salon.model import Participant
from salon.platforms.memory import MemoryPlatform
from salon.store._dialects import parse_url
from salon.store.sql import SQLStore, sqlite_url
from tests.conftest import bot_config

ALICE = Participant("u1", "Alice")
BOB = Participant("u2", "Bob")
WAIT = 10.0


class Bot:
    """An agent with its delivery on a store that outlives it (a process of the bot)."""

    def __init__(
        self, store: SQLStore, platform: MemoryPlatform, provider: FakeProvider, **config: object
    ) -> None:
        self.platform = platform
        config.setdefault("process_lease", 0.05)  # the start's second look comes at once
        self.agent = Agent(
            bot="salon",
            config=bot_config(**config),
            provider=provider,
            platforms={platform.name: platform},
            store=store,
            delivery=store.delivery,
            answers=store.traces,
            limits=store.limits,
            notes=store.notes,
            chatlog=store.chatlog,
        )
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        delivery = self.agent.delivery
        assert delivery is not None
        self.platform.on_gap(delivery.after_gap)
        await delivery.begin()
        await self.platform.start(self.agent.submit)
        self.task = asyncio.create_task(self.agent.run())
        await delivery.at_start(self.agent.platforms)
        await self.agent.wait_idle()

    async def stop(self) -> None:
        await self.agent.wait_idle()
        assert self.task is not None
        assert self.agent.delivery is not None
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        await self.agent.delivery.close()


async def open_store(tmp_path: Path) -> SQLStore:
    store = SQLStore(sqlite_url(tmp_path / "salon.db"))
    await store.open()
    return store


def texts(platform: MemoryPlatform) -> list[str]:
    return [m.text for m in platform.sent]


async def test_a_mention_in_a_gap_is_answered_once_when_the_platform_is_back(
    tmp_path: Path,
) -> None:
    store = await open_store(tmp_path)
    platform = MemoryPlatform(bot_name="Salon")
    provider = FakeProvider(["Hi.", "Caught it."])
    bot = Bot(store, platform, provider)
    await bot.start()
    general = platform.channel("general")
    await platform.post(general, ALICE, "@Salon hi", mentions=[platform.self_participant])
    await platform.wait_sent(1)
    await bot.agent.wait_idle()

    began = time.time()
    platform.add(general, BOB, "chatter while away")  # nobody told the bot
    platform.add(general, ALICE, "@Salon still there?", mentions=[platform.self_participant])
    await platform.gap_closed(began)
    await platform.wait_sent(2)
    await bot.stop()
    assert texts(platform) == ["Hi.", "Caught it."]
    assert "still there?" in provider.requests[1].messages[-1].plain_text

    # The next process reads back from the same place: nothing is answered twice.
    again = Bot(store, platform, FakeProvider(["must not come"]))
    await again.start()
    await again.stop()
    assert texts(platform) == ["Hi.", "Caught it."]
    await store.close()


async def test_a_mention_made_while_stopped_is_answered_by_the_next_process(
    tmp_path: Path,
) -> None:
    store = await open_store(tmp_path)
    platform = MemoryPlatform(bot_name="Salon")
    bot = Bot(store, platform, FakeProvider(["Hi."]))
    await bot.start()
    general = platform.channel("general")
    await platform.post(general, ALICE, "@Salon hi", mentions=[platform.self_participant])
    await platform.wait_sent(1)
    await bot.stop()

    platform.add(general, ALICE, "@Salon are you back?", mentions=[platform.self_participant])
    again = Bot(store, platform, FakeProvider(["Back."]))
    await again.start()
    await platform.wait_sent(2)
    await again.stop()
    assert texts(platform) == ["Hi.", "Back."]
    await store.close()


async def test_catch_up_off_reads_nothing_back(tmp_path: Path) -> None:
    store = await open_store(tmp_path)
    platform = MemoryPlatform(bot_name="Salon")
    bot = Bot(store, platform, FakeProvider(["Hi."]), catch_up={"max_age": 0})
    await bot.start()
    general = platform.channel("general")
    await platform.post(general, ALICE, "@Salon hi", mentions=[platform.self_participant])
    await platform.wait_sent(1)
    platform.add(general, ALICE, "@Salon in the gap", mentions=[platform.self_participant])
    await platform.gap_closed(time.time())
    await bot.stop()
    assert texts(platform) == ["Hi."]
    await store.close()


async def test_a_post_the_platform_could_not_take_is_tried_again_once(tmp_path: Path) -> None:
    store = await open_store(tmp_path)
    platform = MemoryPlatform(bot_name="Salon")
    bot = Bot(store, platform, FakeProvider(["Delivered at last."]))
    await bot.start()
    platform.fail_sends = [
        PlatformError("server error 503", transient=True, retry_after=0.1),
        PlatformError("unreachable", transient=True, retry_after=0.1),
    ]
    general = platform.channel("general")
    await platform.post(general, ALICE, "@Salon hi", mentions=[platform.self_participant])
    await platform.wait_sent(1, within=WAIT)
    await bot.stop()
    assert texts(platform) == ["Delivered at last."]
    await store.close()


async def test_a_post_still_refused_when_the_window_closes_ends_with_one_line(
    tmp_path: Path,
) -> None:
    store = await open_store(tmp_path)
    platform = MemoryPlatform(bot_name="Salon")
    bot = Bot(store, platform, FakeProvider(["never shown"]), catch_up={"max_age": 0.5})
    await bot.start()
    platform.fail_sends = [PlatformError("rate limited for 30s", transient=True, retry_after=30)]
    general = platform.channel("general")
    await platform.post(general, ALICE, "@Salon hi", mentions=[platform.self_participant])
    (told,) = await platform.wait_sent(1, within=WAIT)
    await bot.stop()
    assert told.text == "⚠️ Salon could not answer: rate limited for 30s"
    await store.close()


async def test_a_question_asked_while_the_database_is_away_is_answered_once_it_is_back(
    pg_database: Database,
) -> None:
    url = parse_url(pg_database.url, pg_database.password)
    assert url.host is not None
    assert url.port is not None
    async with TcpProxy(url.host, url.port) as proxy:
        through = f"postgresql://{url.username}@127.0.0.1:{proxy.port}/{url.database}"
        store = SQLStore(through, password=url.password)
        await store.open()
        platform = MemoryPlatform(bot_name="Salon")
        bot = Bot(store, platform, FakeProvider(["Answered when it came back."]))
        await bot.start()
        assert bot.agent.delivery is not None
        bot.agent.delivery.retry_every = 0.05
        await proxy.down()
        general = platform.channel("general")
        await platform.post(general, ALICE, "@Salon hi", mentions=[platform.self_participant])
        (told,) = await platform.wait_sent(1, within=WAIT)
        assert told.text == (
            "⚠️ Salon could not answer: its database cannot be reached now; "
            "it will answer once it is back"
        )
        await proxy.up()
        _, answer = await platform.wait_sent(2, within=WAIT)
        await bot.stop()
        await store.close()
    assert answer.text == "Answered when it came back."


class Hanging(FakeProvider):
    """Never finishes an answer: the stop cuts it."""

    def __init__(self) -> None:
        super().__init__()
        self.writing = asyncio.Event()

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        self.writing.set()
        await asyncio.Event().wait()
        yield TextDelta("never")


async def test_an_owed_question_and_one_asked_after_it_are_answered_together(
    tmp_path: Path,
) -> None:
    """A stop cut the answer to the first question; a second came meanwhile: the next
    process answers both in one answer, not the second twice."""
    store = await open_store(tmp_path)
    platform = MemoryPlatform(bot_name="Salon")
    hanging = Hanging()
    bot = Bot(store, platform, hanging)
    await bot.start()
    general = platform.channel("general")
    me = platform.self_participant
    await platform.post(general, ALICE, "@Salon first question", mentions=[me])
    await asyncio.wait_for(hanging.writing.wait(), WAIT)
    assert bot.task is not None
    bot.task.cancel()  # the stop: the answer is cut, and owed
    await asyncio.gather(bot.task, return_exceptions=True)
    assert bot.agent.delivery is not None
    await bot.agent.delivery.close()
    await store.close()

    platform.add(general, BOB, "@Salon second question", mentions=[me])
    again_store = await open_store(tmp_path)  # another process: another owner
    provider = FakeProvider(["Both answered."])
    again = Bot(again_store, platform, provider)
    await again.start()
    await platform.wait_sent(1, within=WAIT)
    await again.stop()
    await again_store.close()
    assert texts(platform) == ["Both answered."]
    (request,) = provider.requests
    assert "second question" in request.messages[-1].plain_text
