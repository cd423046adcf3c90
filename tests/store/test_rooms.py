"""Turns in a shared room on both databases: a slot is taken once, however many ask at
once; a claim left unfinished past its time is taken over; standings count turns."""

from __future__ import annotations

import asyncio
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
