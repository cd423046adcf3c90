"""The chat log read by kinds of lines (what ``get_recent_messages``' ``types`` asks for)."""

from __future__ import annotations

from datetime import UTC, datetime

from fakes.databases import Database
from salon.model import ChannelRef, Message, Participant

ROOM = ChannelRef("irc", "#salon", name="#salon")


async def test_recent_lines_of_the_kinds_asked_for(database: Database) -> None:
    store = await database.open_store()
    try:
        bob = Participant("irc:bob", "bob")
        lines = [("join", ""), ("message", "hello"), ("action", "waves"), ("part", "lunch")]
        for n, (kind, text) in enumerate(lines):
            when = datetime(2026, 11, 26, 12, n, tzinfo=UTC)
            await store.chatlog.log_message("bot", Message(f"m{n}", ROOM, bob, text, when), kind)
        talk = await store.chatlog.recent_chat("bot", ROOM.key)
        moves = await store.chatlog.recent_chat("bot", ROOM.key, kinds=("join", "part"))
        none = await store.chatlog.recent_chat("bot", ROOM.key, kinds=())
    finally:
        await store.close()
    assert [(line.kind, line.text) for line in talk] == [("message", "hello"), ("action", "waves")]
    assert [(line.kind, line.text) for line in moves] == [("join", ""), ("part", "lunch")]
    assert none == []
