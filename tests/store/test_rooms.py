"""Turns in a shared room on both databases: a slot is taken once, however many ask at
once; a claim left unfinished past its time is taken over; standings count turns."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from fakes.databases import Database
from salon.store.sql import SQLStore


@pytest.fixture
async def stores(database: Database) -> AsyncIterator[list[SQLStore]]:
    opened = [await database.open_store() for _ in range(3)]  # three bots, one database
    yield opened
    for store in opened:
        await store.close()


async def test_one_slot_goes_to_one_of_three_asking_at_once(stores: list[SQLStore]) -> None:
    claims = await asyncio.gather(
        *(
            store.rooms.claim("discord:10", "m1", bot, slots=1, ttl=60)
            for store, bot in zip(stores, ["salon", "muse", "sage"], strict=True)
        )
    )
    assert sorted(claims, key=str) == [0, None, None]
    (holder,) = await stores[0].rooms.holders("discord:10", "m1")
    assert not holder.done
    assert not holder.expired


async def test_two_slots_and_a_finished_turn(stores: list[SQLStore]) -> None:
    rooms = stores[0].rooms
    assert await rooms.claim("discord:10", "m2", "salon", slots=2, ttl=60) == 0
    assert await rooms.claim("discord:10", "m2", "muse", slots=2, ttl=60) == 1
    assert await rooms.claim("discord:10", "m2", "sage", slots=2, ttl=60) is None
    await rooms.finish("discord:10", "m2", 0)
    holders = await rooms.holders("discord:10", "m2")
    assert [(h.bot, h.done) for h in holders] == [("salon", True), ("muse", False)]
    standings = {s.bot: s.turns for s in await rooms.standings("discord:10")}
    assert standings == {"salon": 1, "muse": 1}


async def test_an_expired_claim_is_taken_over(stores: list[SQLStore]) -> None:
    rooms = stores[0].rooms
    assert await rooms.claim("discord:10", "m3", "salon", slots=1, ttl=0.05) == 0
    async with asyncio.timeout(10):
        while not any(h.expired for h in await rooms.holders("discord:10", "m3")):  # noqa: ASYNC110 - the database's clock decides
            await asyncio.sleep(0.02)
    assert await stores[1].rooms.claim("discord:10", "m3", "muse", slots=1, ttl=60) == 0
    (holder,) = await rooms.holders("discord:10", "m3")
    assert holder.bot == "muse"


async def test_a_line_known_by_its_content_has_one_key_for_every_bot(
    stores: list[SQLStore],
) -> None:
    """IRC: each bot makes up its own id for a line; its content and time key its turn."""
    first = await stores[0].rooms.line_key("irc:#salon", "d1", since=0)
    assert first == "d1:1"
    assert await stores[0].rooms.claim("irc:#salon", first, "salon", slots=1, ttl=60) == 0
    seen_later = await stores[1].rooms.line_key("irc:#salon", "d1", since=time.time() - 5)
    assert seen_later == first  # the same line, seen by another bot
    said_again = await stores[1].rooms.line_key("irc:#salon", "d1", since=time.time() + 1)
    assert said_again == "d1:2"  # a line alike, said after that turn was taken


async def test_the_rooms_bots_say_who_they_are_on_a_platform(stores: list[SQLStore]) -> None:
    await stores[0].rooms.save_self("salon", "irc", "irc:salon", "Salon")
    await stores[1].rooms.save_self("muse", "irc", "irc:muse_", "Muse_")
    await stores[1].rooms.save_self("muse", "irc", "irc:muse", "Muse")  # its nick came back
    assert await stores[2].rooms.selves("irc") == {"irc:salon": "Salon", "irc:muse": "Muse"}
    assert await stores[2].rooms.selves("matrix") == {}
