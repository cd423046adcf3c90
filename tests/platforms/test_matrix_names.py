"""Names on Matrix, against a real Synapse: each message under the display name it was sent
under, people of one server told apart by their own id, and people named by MXID at the
end of a sentence notified."""

from __future__ import annotations

from salon.llm import FakeProvider
from salon.platforms.matrix.api import q
from salon.platforms.matrix.convert import Names
from tests.platforms.test_matrix import Person, Room, from_bot, room, seen, synapse

__all__ = ["room", "synapse"]  # the fixtures, shared with test_matrix


async def rename(room: Room, person: Person, name: str) -> None:
    """``person`` takes the display name ``name``; seen once the room has its member event."""
    path = f"/_matrix/client/v3/profile/{q(person.id)}/displayname"
    await person.call("PUT", path, {"displayname": name})
    await room.alice.wait(
        room.id,
        lambda e: (
            e.get("type") == "m.room.member"
            and e.get("state_key") == person.id
            and e["content"].get("displayname") == name
        ),
    )


async def test_each_message_reads_under_the_name_it_was_sent_under(room: Room) -> None:
    provider = FakeProvider(["Hello."])
    await room.start(provider, bot={"mode": "prefill"})
    await rename(room, room.alice, "Alice")
    await room.alice.say(room.id, "one")
    await rename(room, room.bob, "Alice")  # a second Alice, on the same server
    await room.bob.say(room.id, "I am Alice")
    await rename(room, room.alice, "Queen")
    await room.ask(room.alice, "two")
    transcript = seen(provider)
    assert "\nAlice: one\n" in transcript
    assert f"\nAlice [{room.bob.id}]: I am Alice\n" in transcript
    assert "\nQueen: @" in transcript


async def test_a_person_named_at_the_end_of_a_sentence_is_notified(room: Room) -> None:
    provider = FakeProvider([f"Ask {room.bob.id}."])
    await room.start(provider)
    answer = await room.ask(room.alice, "who knows?")
    assert answer["content"]["body"] == f"Ask {room.bob.id}."
    assert answer["content"]["m.mentions"] == {"user_ids": [room.bob.id]}
    assert from_bot(room.bot)(answer)


def test_a_message_before_the_first_change_seen_reads_under_the_name_it_replaced() -> None:
    """Pages are read newest first: a rename seen before the older message it follows."""
    names = Names()
    renamed = {
        "type": "m.room.member",
        "state_key": "@bob:x.org",
        "origin_server_ts": 2000,
        "content": {"membership": "join", "displayname": "Robert"},
        "unsigned": {"prev_content": {"membership": "join", "displayname": "Bob"}},
    }
    names.learn("!r:x.org", [renamed, renamed])
    assert names.name("!r:x.org", "@bob:x.org", at=1000) == "Bob"
    assert names.name("!r:x.org", "@bob:x.org", at=2000) == "Robert"
    assert names.name("!r:x.org", "@bob:x.org") == "Robert"
    assert names.name("!r:x.org", "@carol:x.org") == "carol"
