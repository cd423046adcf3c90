"""The store's delivery part on both databases: marks (the answered time only moves on),
owed answers taken over only from processes whose lease is gone, and cursors."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from fakes.databases import Database
from salon.model import ChannelMark, ChannelRef, Message, Participant, Tag
from salon.store.sql import SQLStore

ROOM = ChannelRef("discord", "10", name="general", guild_id="1")
DM = ChannelRef("discord", "20", is_direct=True)


@pytest.fixture
async def store(database: Database) -> AsyncIterator[SQLStore]:
    store = await database.open_store()
    yield store
    await store.close()


def message(number: int, channel: ChannelRef = ROOM) -> Message:
    return Message(
        str(number),
        channel,
        Participant("200", "Alice", roles=("mods",)),
        f"question {number}",
        datetime(2026, 12, 5, 12, number, tzinfo=UTC),
        mentions=(Participant("100", "Salon", is_bot=True),),
        reply_to_id="7",
        tags=frozenset({Tag.MONITORED}),
    )


async def test_marks_keep_the_newest_answer_time_and_list_where_to_read_back(
    store: SQLStore,
) -> None:
    part = store.delivery
    await part.save_marks("salon", [ChannelMark(ROOM, "5", 100.0, answered_at=500.0)])
    await part.save_marks("salon", [ChannelMark(ROOM, "6", 200.0, answered_at=0.0)])
    await part.save_marks("salon", [ChannelMark(DM, "9", 300.0)])
    quiet = ChannelRef("discord", "30")
    await part.save_marks("salon", [ChannelMark(quiet, "1", 50.0, answered_at=10.0)])
    await part.save_marks("other", [ChannelMark(ROOM, "1", 1.0, answered_at=900.0)])
    found = await part.marks("salon", "discord", answered_since=400.0, limit=10)
    assert [(m.channel.key, m.last_id, m.answered_at) for m in found] == [
        ("discord:10", "6", 500.0),  # moved on, its answer time kept
        ("discord:20", "9", 0.0),  # direct: always read back
    ]
    assert found[1].channel.is_direct
    assert await part.marks("salon", "slack", answered_since=0.0, limit=10) == []


async def test_owed_answers_are_taken_over_only_from_processes_gone(
    store: SQLStore, database: Database
) -> None:
    await store.delivery.owe("salon", [message(1), message(2)])
    await store.delivery.owe_key("salon", [message(2)], "key-2")
    await store.schedules.renew_lease("salon", 60)  # this process lives
    assert await store.delivery.owed_ids("salon") == {"1", "2"}

    other = await database.open_store()
    try:
        assert await other.delivery.take_over("salon", ["discord"]) == []  # still alive
        await store.schedules.release_lease()  # a clean stop gives it up
        taken = await other.delivery.take_over("salon", ["discord"])
        assert [(t.message, t.answer_key) for t in taken] == [
            (message(1), None),
            (message(2), "key-2"),
        ]
        assert taken[0].message.author.roles == ("mods",)
        assert taken[0].message.channel.guild_id == "1"
        assert await other.delivery.take_over("salon", ["discord"]) == []  # once
        await other.delivery.settle("salon", [message(1), message(2)])
        assert await other.delivery.owed_ids("salon") == set()
    finally:
        await other.close()


async def test_cursors_are_kept_per_bot(store: SQLStore) -> None:
    assert await store.delivery.cursor("salon", "matrix:sync") is None
    await store.delivery.save_cursor("salon", "matrix:sync", "s1")
    await store.delivery.save_cursor("salon", "matrix:sync", "s2")
    await store.delivery.save_cursor("other", "matrix:sync", "x")
    assert await store.delivery.cursor("salon", "matrix:sync") == "s2"
