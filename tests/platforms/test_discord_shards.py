"""A process that runs some of a bot's shards: it hears only its own guilds, and what it
reads of another shard's guild (a schedule may fire there) is never served from a cache
that no event of that guild keeps exact."""

from __future__ import annotations

from fakes.discord_server import DiscordServer
from salon.llm import FakeProvider, FakeReply
from salon.model import ChannelRef
from tests.platforms.conftest import GENERAL, Start, ask

OTHER_GUILD = str(1 << 22)  # shard 1 of 2; the fake's own guild "1" is shard 0's
LOBBY = "20"


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
