"""Discord's own notices are no part of the conversation; Salon's notes come back as notes."""

from __future__ import annotations

from fakes.discord_server import DiscordServer, FakeUser
from salon.llm import FakeProvider
from salon.model import ChannelRef, Tag
from tests.platforms.conftest import GENERAL, RANDOM, Start, ask, shown

SILENT = 1 << 12  # SUPPRESS_NOTIFICATIONS


async def test_discord_notices_never_activate_the_bot(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    provider = FakeProvider(["seen"])
    app, _ = await start_bot(provider, discord={"monitored_channels": [GENERAL]})
    alice, dave = fake_discord.user("Alice"), FakeUser("203", "Dave")
    words = await fake_discord.post(GENERAL, alice, "words worth keeping")
    await fake_discord.wait_bot_messages(GENERAL, 1)  # monitored: every message is answered
    await fake_discord.pin(words)  # "Alice pinned a message" (type 6)
    await fake_discord.join(dave)  # "Dave joined" in the system channel, #general (type 7)
    await fake_discord.boost(alice)  # type 8
    await fake_discord.start_thread(words, "more")  # "Alice started a thread" (type 18)
    await ask(fake_discord, RANDOM, alice, "still there?")  # after every notice, in order
    await fake_discord.wait_bot_messages(RANDOM, 1)
    await app.agent.wait_idle()
    assert len(provider.requests) == 2
    assert len(await fake_discord.wait_bot_messages(GENERAL, 1)) == 1


async def test_discord_notices_are_never_in_the_history(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    alice, bob = fake_discord.user("Alice"), fake_discord.user("Bob")
    words = await fake_discord.post(GENERAL, alice, "words worth keeping")
    await fake_discord.pin(words, by=bob)
    await fake_discord.join(FakeUser("203", "Dave"))
    await fake_discord.post(GENERAL, bob, "and more")
    thread = await fake_discord.start_thread(words, "more")
    provider = FakeProvider()
    await start_bot(provider)  # everything is read by a fetch
    await ask(fake_discord, GENERAL, alice, "what happened?")
    await fake_discord.wait_bot_messages(GENERAL, 1)
    expected = "Alice: words worth keeping\nBob: and more\nAlice: @Salon what happened?"
    assert shown(provider) == expected
    await ask(fake_discord, thread, bob, "and here?")  # the thread opens with a notice
    await fake_discord.wait_bot_messages(thread, 1)
    assert shown(provider) == "Alice: words worth keeping\nBob: @Salon and here?"


async def test_another_bots_silent_notes_are_no_part_of_the_conversation(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    """Another Salon bot's notes (its failures, its reasoning in a spoiler) are sent silent
    as this bot's are: no bot reads them as conversation, fetched or from the gateway."""
    muse = FakeUser("300", "Muse", bot=True)
    await fake_discord.post(GENERAL, muse, "-# ||I weighed the two plans first.||", flags=SILENT)
    await fake_discord.post(GENERAL, muse, "Plan B it is.")
    provider = FakeProvider(["noted"])
    await start_bot(provider)
    await fake_discord.post(GENERAL, muse, "-# ||then I checked the dates||", flags=SILENT)
    await ask(fake_discord, GENERAL, fake_discord.user("Alice"), "which plan?")
    await fake_discord.wait_bot_messages(GENERAL, 1)
    assert shown(provider) == "Muse: Plan B it is.\nAlice: @Salon which plan?"


async def test_notes_are_sent_silent_and_read_back_as_notes(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    app, platform = await start_bot(FakeProvider(["an answer"]))
    here = ChannelRef("discord", GENERAL, name="general", guild_id="1")
    assert await platform.history(here, limit=5) == []  # the cache follows the channel now
    note = await platform.send(here, "(cancelled: wipe was not run)", note=True)
    await ask(fake_discord, GENERAL, fake_discord.user("Alice"), "and?")
    await fake_discord.wait_bot_messages(GENERAL, 2)
    await app.agent.wait_idle()
    assert Tag.NOTE in note.tags
    assert [m["flags"] for m in fake_discord.channels[GENERAL]] == [SILENT, 0, 0]

    def notes(messages: object) -> list[tuple[str, bool]]:
        return [(m.text, Tag.NOTE in m.tags) for m in messages]  # type: ignore[attr-defined]

    expected = [
        ("(cancelled: wipe was not run)", True),
        ("@Salon and?", False),
        ("an answer", False),
    ]
    assert notes(await platform.history(here, limit=5)) == expected  # kept by the gateway
    platform.cache.forget()
    assert notes(await platform.history(here, limit=5)) == expected  # fetched
