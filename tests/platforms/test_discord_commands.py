"""Who may change what the bot does for everyone in a channel: ``/monitor`` and
``/unmonitor`` are registered with ``default_member_permissions`` (Manage Channels, which
server admins can re-assign in Discord's Integrations settings), Salon also asks for one of
``authorized_roles`` when the bot has them, and only the one who set a schedule, or someone
who may manage the channel, cancels it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from fakes.discord_server import DiscordServer, NotOffered
from salon.llm import FakeProvider
from salon.model import ChannelRef, Participant, Schedule
from tests.platforms.conftest import GENERAL, RANDOM, Start

MANAGE_CHANNELS = str(1 << 4)


async def test_monitor_commands_are_offered_only_to_who_may_manage_channels(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    app, _ = await start_bot(FakeProvider())
    registered = {c["name"]: c.get("default_member_permissions") for c in fake_discord.commands}
    assert registered["monitor"] == registered["unmonitor"] == MANAGE_CHANNELS
    assert registered["ask"] is None  # open to everyone
    assert registered["schedules"] is None  # listing is; cancelling others' is checked
    bob = fake_discord.user("Bob")  # an ordinary member
    with pytest.raises(NotOffered):
        await fake_discord.command(RANDOM, bob, "monitor")
    assert await app.store.channels.monitored("salon") == set()


async def test_authorized_roles_are_asked_for_as_well(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    app, _ = await start_bot(FakeProvider(), authorized_roles=["mods"])
    alice = fake_discord.user("Alice")  # the owner: Discord lets her, Salon asks for a role
    await fake_discord.command(RANDOM, alice, "monitor")
    (refused,) = await fake_discord.wait_interaction_responses(1)
    assert refused["data"]["content"] == (
        "Only members of the authorized roles (mods) can change what Salon reads here."
    )
    assert refused["data"]["flags"] == 64  # ephemeral
    assert await app.store.channels.monitored("salon") == set()
    fake_discord.roles[alice.id] = ["500"]  # the "mods" role
    await fake_discord.command(RANDOM, alice, "monitor")
    (_, done) = await fake_discord.wait_interaction_responses(2)
    assert done["data"]["content"] == "Salon now reads every message here."
    assert await app.store.channels.monitored("salon") == {f"discord:{RANDOM}"}


def _schedule(by: Participant) -> Schedule:
    due = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)
    channel = ChannelRef("discord", GENERAL)
    return Schedule(0, "salon", channel, "new year", "UTC", at=due, created_by=by, next_due=due)


async def test_only_its_author_or_who_may_manage_the_channel_cancels_a_schedule(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    app, _ = await start_bot(FakeProvider())
    alice, bob = fake_discord.user("Alice"), fake_discord.user("Bob")
    await app.store.schedules.create_schedule(_schedule(Participant(alice.id, "Alice")))
    await app.store.schedules.create_schedule(_schedule(Participant(bob.id, "Bob")))
    await fake_discord.command(GENERAL, bob, "schedules", cancel=1)
    (refused,) = await fake_discord.wait_interaction_responses(1)
    assert refused["data"]["content"] == (
        "Schedule #1 was set by Alice: only they or members with Manage Channels can cancel it."
    )
    await fake_discord.command(GENERAL, bob, "schedules", cancel=2)  # his own
    (_, own) = await fake_discord.wait_interaction_responses(2)
    assert own["data"]["content"] == "cancelled schedule #2"
    await fake_discord.command(GENERAL, alice, "schedules", cancel=1)  # she may manage it
    (*_, managed) = await fake_discord.wait_interaction_responses(3)
    assert managed["data"]["content"] == "cancelled schedule #1"
    assert await app.store.schedules.find("salon") == []
