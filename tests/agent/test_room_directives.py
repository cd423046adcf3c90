"""Pinned ``.config`` messages and ``.history`` ranges, on the memory platform."""

from __future__ import annotations

import logging

import pytest

from salon.llm import FakeProvider
from salon.model import Participant
from tests.agent.conftest import StartAgent

ALICE = Participant("alice", "Alice", roles=("mods",))
BOB = Participant("bob", "Bob")
WARNING = "\u26a0\ufe0f"


def texts(provider: FakeProvider, index: int = -1) -> list[str]:
    return [m.plain_text for m in provider.requests[index].messages]


def seen(provider: FakeProvider) -> str:
    """The lines the model was shown, joined by " | "."""
    return " | ".join(line for text in texts(provider) for line in text.split("\n"))


async def test_pinned_config_changes_the_channel_and_a_bad_one_is_flagged_once(
    start_agent: StartAgent, caplog: pytest.LogCaptureFixture
) -> None:
    provider = FakeProvider()
    agent, platform = await start_agent(provider, system_prompt="base")
    room, other = platform.channel("room"), platform.channel("other")
    me = platform.self_participant
    good = platform.add(room, ALICE, ".config Salon\n---\nsystem_prompt: pirate\nmax_tokens: 77")
    bad = platform.add(room, ALICE, ".config\n---\nsystem_prompt: [oops")
    unpinned = platform.add(room, ALICE, ".config\n---\nsystem_prompt: ignored")
    for message in (good, bad):
        platform.pin(message)
    assert unpinned.id not in platform.pins[room.key]
    caplog.set_level(logging.WARNING, logger="salon.agent.loop")
    for _ in range(2):
        await platform.post(room, BOB, "@Salon hi", mentions=[me])
        await agent.wait_idle()
    await platform.post(other, BOB, "@Salon hi", mentions=[me])
    await agent.wait_idle()
    first, second, elsewhere = provider.requests
    assert (first.system, first.max_tokens) == ("pirate", 77)
    assert second.system == "pirate"
    assert (elsewhere.system, elsewhere.max_tokens) == ("base", 1024)
    assert platform.reactions == [(bad.id, WARNING)]  # flagged once, not per activation
    skipped = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert len(skipped) == 1
    assert "invalid YAML" in skipped[0]
    assert all(".config" not in t for t in texts(provider, 0))  # dot messages stay hidden


async def test_unreadable_pins_leave_the_base_config(start_agent: StartAgent) -> None:
    from salon.errors import PlatformError

    provider = FakeProvider()
    agent, platform = await start_agent(provider, system_prompt="base")
    room = platform.channel("room")
    platform.pin(platform.add(room, ALICE, ".config\n---\nsystem_prompt: pinned"))
    platform.fail_pins = [PlatformError("missing access"), PlatformError("missing access")]
    await platform.post(room, BOB, "@Salon hi", mentions=[platform.self_participant])
    await agent.wait_idle()
    assert [r.system for r in provider.requests] == ["base"]  # answered all the same
    await platform.post(room, BOB, "@Salon again", mentions=[platform.self_participant])
    await agent.wait_idle()
    assert provider.requests[-1].system == "pinned"  # and the pins count once readable


async def test_pinned_config_for_another_bot_is_ignored(start_agent: StartAgent) -> None:
    provider = FakeProvider()
    agent, platform = await start_agent(provider, system_prompt="base")
    room = platform.channel("room")
    platform.pin(platform.add(room, ALICE, ".config Echo\n---\nsystem_prompt: echo's"))
    await platform.post(room, BOB, "@Salon hi", mentions=[platform.self_participant])
    await agent.wait_idle()
    assert provider.requests[0].system == "base"
    assert platform.reactions == []


async def test_pinned_config_can_turn_on_answering_by_name(start_agent: StartAgent) -> None:
    provider = FakeProvider()
    agent, platform = await start_agent(provider)
    room = platform.channel("room")
    await platform.post(room, BOB, "Salon, are you there?")
    await agent.wait_idle()
    assert provider.requests == []
    platform.pin(platform.add(room, ALICE, ".config\n---\nreply_on_name: true"))
    await platform.post(room, BOB, "Salon, are you there?")
    await agent.wait_idle()
    assert len(provider.requests) == 1


async def test_history_splices_a_range_from_another_channel(start_agent: StartAgent) -> None:
    provider = FakeProvider()
    agent, platform = await start_agent(provider, authorized_roles=["mods"])
    old, room = platform.channel("old"), platform.channel("room")
    platform.add(old, BOB, "before the range")
    first = platform.add(old, BOB, "first of the range")
    platform.add(old, ALICE, "middle of the range")
    last = platform.add(old, BOB, "last of the range")
    platform.add(old, BOB, "after the range")
    platform.add(room, BOB, "hidden by the splice")
    platform.add(
        room,
        ALICE,
        f".history\n---\nfirst: {platform.link(first)}\nlast: {platform.link(last)}",
    )
    platform.add(room, BOB, "after the directive")
    await platform.post(room, BOB, "@Salon go", mentions=[platform.self_participant])
    await agent.wait_idle()
    assert seen(provider) == (
        "Bob: first of the range | Alice: middle of the range | Bob: last of the range | "
        "Bob: after the directive | Bob: @Salon go"
    )


async def test_history_splices_only_what_the_person_answered_can_read(
    start_agent: StartAgent,
) -> None:
    """Another channel's stretch needs the requester's own right to read it there (as a
    linked channel does); a stretch of the room itself is never asked about."""
    provider = FakeProvider()
    agent, platform = await start_agent(provider, authorized_roles=["mods"])
    secret, room = platform.channel("secret"), platform.channel("room")
    hidden = platform.add(secret, ALICE, "the secret plan")
    platform.unreadable |= {(BOB.id, secret.key), (BOB.id, room.key)}
    platform.add(room, BOB, "older room talk")
    platform.add(room, ALICE, f".history\n---\nlast: {platform.link(hidden)}")
    await platform.post(room, BOB, "@Salon a", mentions=[platform.self_participant])
    await agent.wait_idle()
    assert seen(provider) == "Bob: @Salon a"  # the stretch left out; what asked stays
    own = platform.add(room, BOB, "a room line worth keeping")
    platform.add(room, BOB, "noise")
    platform.add(room, ALICE, f".history\n---\nlast: {platform.link(own)}")
    await platform.post(room, BOB, "@Salon b", mentions=[platform.self_participant])
    await agent.wait_idle()
    # The room's own stretch is spliced (its earlier .history applied inside it again).
    assert seen(provider) == "Bob: @Salon a | ok | Bob: a room line worth keeping | Bob: @Salon b"


async def test_history_first_out_of_reach_is_ignored_and_empty_body_clears(
    start_agent: StartAgent,
) -> None:
    provider = FakeProvider()
    agent, platform = await start_agent(provider, authorized_roles=["mods"])
    old, room = platform.channel("old"), platform.channel("room")
    elsewhere = platform.add(platform.channel("x"), BOB, "not in old")
    platform.add(old, BOB, "one")
    last = platform.add(old, BOB, "two")
    platform.add(
        room,
        ALICE,
        f".history\n---\nfirst: {platform.link(elsewhere)}\nlast: {platform.link(last)}",
    )
    await platform.post(room, BOB, "@Salon a", mentions=[platform.self_participant])
    await agent.wait_idle()
    assert seen(provider) == "Bob: one | Bob: two | Bob: @Salon a"
    platform.add(room, ALICE, ".history")
    await platform.post(room, BOB, "@Salon b", mentions=[platform.self_participant])
    await agent.wait_idle()
    assert seen(provider) == "Bob: @Salon b"


async def test_history_from_an_unauthorized_author_or_for_another_bot_is_ignored(
    start_agent: StartAgent,
) -> None:
    provider = FakeProvider()
    agent, platform = await start_agent(provider, authorized_roles=["mods"])
    room = platform.channel("room")
    platform.add(room, BOB, "kept")
    platform.add(room, BOB, ".history")  # Bob is not a mod
    platform.add(room, ALICE, ".history Echo")  # for another bot
    await platform.post(room, BOB, "@Salon a", mentions=[platform.self_participant])
    await agent.wait_idle()
    assert seen(provider) == "Bob: kept | Bob: @Salon a"
    platform.add(room, ALICE, ".history Salon")
    await platform.post(room, BOB, "@Salon b", mentions=[platform.self_participant])
    await agent.wait_idle()
    assert seen(provider) == "Bob: @Salon b"


async def test_without_authorized_roles_nobody_may_splice_history(
    start_agent: StartAgent,
) -> None:
    """ChapterX: a .history must come from an authorized role; with none, from nobody."""
    provider = FakeProvider()
    agent, platform = await start_agent(provider)
    room = platform.channel("room")
    platform.add(room, BOB, "kept")
    platform.add(room, ALICE, ".history")
    await platform.post(room, BOB, "@Salon a", mentions=[platform.self_participant])
    await agent.wait_idle()
    assert seen(provider) == "Bob: kept | Bob: @Salon a"


async def test_nested_history_is_followed_and_cycles_stop(start_agent: StartAgent) -> None:
    provider = FakeProvider()
    agent, platform = await start_agent(provider, authorized_roles=["mods"])
    a, b, room = platform.channel("a"), platform.channel("b"), platform.channel("room")
    platform.add(a, BOB, "from a")
    a_last = platform.add(a, BOB, "end of a")
    platform.add(b, ALICE, f".history\n---\nlast: {platform.link(a_last)}")
    b_last = platform.add(b, BOB, "end of b")
    platform.add(room, ALICE, f".history\n---\nlast: {platform.link(b_last)}")
    await platform.post(room, BOB, "@Salon a", mentions=[platform.self_participant])
    await agent.wait_idle()
    assert seen(provider) == "Bob: from a | Bob: end of a | Bob: end of b | Bob: @Salon a"

    # c's directive points at d's, and d's back at c's: a cycle, which stops the walk.
    c, d, hall = platform.channel("c"), platform.channel("d"), platform.channel("hall")
    platform.add(c, BOB, "c speaks")
    d_head = platform.add(d, BOB, "d speaks")
    c_dir = platform.add(c, ALICE, f".history\n---\nlast: memory://d/{int(d_head.id) + 2}")
    d_dir = platform.add(d, ALICE, f".history\n---\nlast: {platform.link(c_dir)}")
    assert platform.link(d_dir).endswith(f"/{int(d_head.id) + 2}")
    d_end = platform.add(d, BOB, "d ends")
    platform.add(hall, ALICE, f".history\n---\nlast: {platform.link(d_end)}")
    await platform.post(hall, BOB, "@Salon b", mentions=[platform.self_participant])
    await agent.wait_idle()
    assert seen(provider) == "Bob: d ends | Bob: @Salon b"
