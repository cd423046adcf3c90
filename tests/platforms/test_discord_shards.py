"""A process that runs some of a bot's shards: it hears only its own guilds, and what it
reads of another shard's guild (a schedule may fire there) is never served from a cache
that no event of that guild keeps exact; a mention made while one of its shards was away
on an invalidated session is answered once that shard is back."""

from __future__ import annotations

import asyncio

from fakes.discord_server import DiscordServer
from salon.llm import FakeProvider, FakeReply
from salon.model import ChannelRef
from tests.platforms.conftest import GENERAL, Start, ask

OTHER_GUILD = str(1 << 22)  # shard 1 of 2; the fake's own guild "1" is shard 0's
LOBBY = "20"
ATTIC = "21"


async def test_a_shard_hears_its_guilds_and_reads_others_afresh(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    fake_discord.add_guild(OTHER_GUILD, "Other", {LOBBY: "lobby"})
    provider = FakeProvider([FakeReply("hello")])
    _, platform = await start_bot(provider, discord={"shard_count": 2, "shard_ids": [0]})
    assert fake_discord.shards_seen == [(0, 2)]
    assert [g.id for g in platform.client.guilds] == [1]

    alice = fake_discord.people[0]
    await ask(fake_discord, LOBBY, alice, "anyone?")
    await ask(fake_discord, GENERAL, alice, "hi")
    await fake_discord.wait_bot_messages(GENERAL, 1)
    assert len(provider.requests) == 1  # the lobby's question went to shard 1's process

    lobby = ChannelRef("discord", LOBBY)
    assert [m.text for m in await platform.history(lobby, limit=10)][-1] == "@Salon anyone?"
    await fake_discord.post(LOBBY, alice, "a line only shard 1 hears")
    seen = [m.text for m in await platform.history(lobby, limit=10)]
    assert seen[-1] == "a line only shard 1 hears"


async def test_a_shard_fires_schedules_of_its_own_guilds_and_dms_only(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    fake_discord.add_guild(OTHER_GUILD, "Other", {LOBBY: "lobby"})
    dm = fake_discord.dm_channel(fake_discord.people[0])
    _, first = await start_bot(FakeProvider([]), discord={"shard_count": 2, "shard_ids": [0]})
    assert await first.serves(ChannelRef("discord", GENERAL))
    assert not await first.serves(ChannelRef("discord", LOBBY))
    assert await first.serves(ChannelRef("discord", dm))  # DMs come to shard 0
    assert await first.serves(ChannelRef("discord", "999"))  # gone: shard 0 tells why
    _, second = await start_bot(
        FakeProvider([]), key="second", discord={"shard_count": 2, "shard_ids": [1]}
    )
    assert await second.serves(ChannelRef("discord", LOBBY))
    assert not await second.serves(ChannelRef("discord", GENERAL))
    assert not await second.serves(ChannelRef("discord", dm))


async def test_a_history_link_into_another_shards_guild_is_read_afresh(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    fake_discord.add_guild(OTHER_GUILD, "Other", {LOBBY: "lobby"})
    alice = fake_discord.people[0]
    _, platform = await start_bot(FakeProvider([]), discord={"shard_count": 2, "shard_ids": [0]})
    there = await fake_discord.post(LOBBY, alice, "said over there")
    link = fake_discord.link(there)
    assert [m.text for m in await platform.history_until(link, limit=5) or []] == [
        "said over there"
    ]
    await fake_discord.edit(there, "said over there, then edited")  # only shard 1 hears it
    again = await platform.history_until(link, limit=5) or []
    assert [m.text for m in again] == ["said over there, then edited"]


async def test_a_mention_while_one_shard_was_on_an_invalidated_session_is_answered(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    """Both shards in one process; shard 1's session ends. discord.py then says only that
    shard 1 is ready (not the whole client): the read-back must start from that."""
    fake_discord.add_guild(OTHER_GUILD, "Other", {LOBBY: "lobby"})
    provider = FakeProvider(["First.", "Missed one answered."])
    app, _ = await start_bot(provider, discord={"shard_count": 2, "shard_ids": [0, 1]})
    alice = fake_discord.people[0]
    await ask(fake_discord, LOBBY, alice, "hi")
    await fake_discord.wait_bot_messages(LOBBY, 1)
    await app.agent.wait_idle()

    fake_discord.pause_gateway()
    fake_discord.invalidate_sessions(shard=1)
    fake_discord.identified.clear()
    await fake_discord.drop_connections(4000, shard=1)
    await ask(fake_discord, LOBBY, alice, "did you see this?")  # in shard 1's gap
    fake_discord.open_gateway()
    await asyncio.wait_for(fake_discord.identified.wait(), 20)

    await fake_discord.wait_bot_messages(LOBBY, 2)
    await app.agent.wait_idle()
    bot = fake_discord.bot.id
    said = [m["content"] for m in fake_discord.channels[LOBBY] if m["author"]["id"] == bot]
    assert said == ["First.", "Missed one answered."]
    assert fake_discord.resumes_refused >= 1
    assert len(provider.requests) == 2


async def test_a_mention_in_an_unread_channel_while_one_shard_was_away_is_found(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    """Shard 1's session ends; while it is away someone mentions the bot in a channel it
    never read (no mark: only the guild search finds it), and shard 0 drops and resumes.
    When shard 1 is back, its own gap is searched from when *it* dropped."""
    fake_discord.add_guild(OTHER_GUILD, "Other", {LOBBY: "lobby", ATTIC: "attic"})
    provider = FakeProvider(["Found you."])
    await start_bot(provider, discord={"shard_count": 2, "shard_ids": [0, 1]})
    alice = fake_discord.people[0]

    fake_discord.hold_identify(1)
    fake_discord.invalidate_sessions(shard=1)
    await fake_discord.drop_connections(4000, shard=1)
    await asyncio.wait_for(fake_discord.identify_held.wait(), 20)  # shard 1 at the door
    await ask(fake_discord, ATTIC, alice, "anyone up there?")
    fake_discord.resumed.clear()
    await fake_discord.drop_connections(1006, shard=0)  # no close frame: it resumes
    await asyncio.wait_for(fake_discord.resumed.wait(), 20)
    fake_discord.release_identify(1)

    await fake_discord.wait_bot_messages(ATTIC, 1)
    bot = fake_discord.bot.id
    said = [m["content"] for m in fake_discord.channels[ATTIC] if m["author"]["id"] == bot]
    assert said == ["Found you."]
