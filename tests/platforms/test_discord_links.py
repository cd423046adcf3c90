"""Linked contexts on the fake Discord: the requester's own rights in the linked channel
(roles and permission overwrites, as Discord computes them), the same rights for what a
``.history`` splices from another channel, and pinned configs that try to link another
guild's channel. Request bodies as the loopback LLM server got them."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from fakes.discord_server import DiscordServer, FakeUser
from fakes.discord_wire import GUILD_ID
from fakes.llm_server import LLMServer
from tests.platforms import leak_probes
from tests.platforms.conftest import Start, real_provider

GENERAL, RANDOM, STAFF = "10", "11", "12"
OTHER_GUILD, LOBBY = str(1 << 23), "30"
MODS = "500"
WARNING = "\u26a0\ufe0f"


def body(llm: LLMServer, index: int = -1) -> str:
    return json.dumps(llm.requests[index].body, ensure_ascii=False)


async def answered(server: DiscordServer, channel: str, who: FakeUser, text: str) -> None:
    """``who`` asks the bot in ``channel``; returns once it answered there."""
    before = len([m for m in server.channels[channel] if m["author"]["id"] == server.bot.id])
    await server.post(channel, who, f"<@{server.bot.id}> {text}", mentions=[server.bot])
    await server.wait_bot_messages(channel, before + 1)


async def staff_room(server: DiscordServer) -> None:
    """#staff: hidden from @everyone, shown to the mods role (Carol has it, Bob not)."""
    server.add_guild(GUILD_ID, "Salon test", {STAFF: "staff"})
    server.roles[server.user("Carol").id] = [MODS]
    await server.overwrite(STAFF, GUILD_ID, deny=("VIEW_CHANNEL",))
    await server.overwrite(STAFF, MODS, allow=("VIEW_CHANNEL",))


async def test_only_a_requester_who_can_read_the_linked_channel_gets_its_messages(
    fake_discord: DiscordServer, start_bot: Start, llm_server: LLMServer
) -> None:
    await staff_room(fake_discord)
    carol, bob = fake_discord.user("Carol"), fake_discord.user("Bob")
    await fake_discord.post(STAFF, carol, "MODS-ONLY the launch slips a week")
    provider, providers = real_provider(llm_server, "anthropic")
    links = [{"channel": f"discord:{STAFF}", "where": [GENERAL]}]
    await start_bot(provider, providers=providers, links=links)
    await answered(fake_discord, GENERAL, bob, "any news?")
    assert "MODS-ONLY" not in body(llm_server)
    await answered(fake_discord, GENERAL, carol, "any news?")
    assert "MODS-ONLY the launch slips a week" in body(llm_server)
    assert "#staff" in body(llm_server)
    # A member overwrite for Bob lets him read it; one for Carol shuts her out (the
    # CHANNEL_UPDATEs reach the bot before the next question, on the same gateway).
    await fake_discord.overwrite(STAFF, bob.id, allow=("VIEW_CHANNEL",), member=True)
    await fake_discord.overwrite(STAFF, carol.id, deny=("VIEW_CHANNEL",), member=True)
    await answered(fake_discord, GENERAL, bob, "and now?")
    assert "MODS-ONLY" in body(llm_server)
    await answered(fake_discord, GENERAL, carol, "and now?")
    assert "MODS-ONLY" not in body(llm_server)


async def test_without_read_message_history_nothing_is_linked(
    fake_discord: DiscordServer, start_bot: Start, llm_server: LLMServer
) -> None:
    bob = fake_discord.user("Bob")
    await fake_discord.post(RANDOM, bob, "RANDOM-TALK about lunch")
    await fake_discord.overwrite(RANDOM, GUILD_ID, deny=("READ_MESSAGE_HISTORY",))
    provider, providers = real_provider(llm_server, "anthropic")
    await start_bot(provider, providers=providers, links=[{"channel": RANDOM}])
    await answered(fake_discord, GENERAL, bob, "lunch?")
    assert "RANDOM-TALK" not in body(llm_server)


async def test_a_dm_sees_a_digest_of_the_server_channel(
    fake_discord: DiscordServer, start_bot: Start, llm_server: LLMServer
) -> None:
    bob = fake_discord.user("Bob")
    await fake_discord.post(GENERAL, bob, "GENERAL-TALK we meet at noon")
    provider, providers = real_provider(llm_server, "anthropic")
    links = [{"channel": GENERAL, "mode": "digest", "where": ["direct"]}]
    await start_bot(provider, providers=providers, links=links)
    dm = fake_discord.dm_channel(bob)
    await fake_discord.post(dm, bob, "when do we meet?")
    await fake_discord.wait_bot_messages(dm, 1)
    assert "GENERAL-TALK we meet at noon" in body(llm_server)
    assert "#general" in body(llm_server)


async def test_a_history_splices_only_a_channel_the_requester_can_read(
    fake_discord: DiscordServer,
    start_bot: Start,
    llm_server: LLMServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Carol may splice history (an authorized role) but a member overwrite shuts her out
    of #staff: its stretch is left out of her answer's context; #random's is not. (Not
    Alice: the fake guild's owner, who reads every channel, as on Discord.)"""
    fake_discord.add_guild(GUILD_ID, "Salon test", {STAFF: "staff"})
    carol, bob = fake_discord.user("Carol"), fake_discord.user("Bob")
    fake_discord.roles[carol.id] = [MODS]
    await fake_discord.overwrite(STAFF, carol.id, deny=("VIEW_CHANNEL",), member=True)
    hidden = await fake_discord.post(STAFF, bob, "STAFF-ONLY the launch slips a week")
    shared = await fake_discord.post(RANDOM, bob, "RANDOM-PLAN we meet at noon")
    provider, providers = real_provider(llm_server, "anthropic")
    await start_bot(provider, providers=providers, authorized_roles=["mods"])
    caplog.set_level(logging.INFO, logger="salon")
    await fake_discord.post(GENERAL, carol, f".history\n---\nlast: {fake_discord.link(hidden)}")
    await answered(fake_discord, GENERAL, carol, "what is new?")
    assert "STAFF-ONLY" not in body(llm_server)
    assert "what is new?" in body(llm_server)  # the rest of the context stays
    assert "STAFF-ONLY" not in fake_discord.channels[GENERAL][-1]["content"]
    left_out = [r for r in caplog.records if "cannot read" in r.getMessage()]
    assert len(left_out) == 1
    await fake_discord.post(GENERAL, carol, f".history\n---\nlast: {fake_discord.link(shared)}")
    await answered(fake_discord, GENERAL, carol, "and now?")
    assert "RANDOM-PLAN we meet at noon" in body(llm_server)


async def test_a_pinned_config_linking_another_guilds_channel_is_refused(
    fake_discord: DiscordServer, start_bot: Start, llm_server: LLMServer
) -> None:
    fake_discord.add_guild(OTHER_GUILD, "Other", {LOBBY: "lobby"})
    alice = fake_discord.user("Alice")
    await fake_discord.post(LOBBY, alice, "OTHER-GUILD private plans")
    await fake_discord.post(RANDOM, alice, "SAME-GUILD random talk")
    provider, providers = real_provider(llm_server, "anthropic")
    await start_bot(provider, providers=providers)
    same = await fake_discord.post(GENERAL, alice, f".config\n---\nlinks:\n  - channel: {RANDOM}")
    other = await fake_discord.post(
        GENERAL, alice, f".config\n---\nlinks:\n  - channel: discord:{LOBBY}"
    )
    await fake_discord.pin(same)
    await fake_discord.pin(other)
    await answered(fake_discord, GENERAL, alice, "plans?")
    assert "OTHER-GUILD" not in body(llm_server)
    assert "SAME-GUILD random talk" in body(llm_server)
    async with asyncio.timeout(10), fake_discord.sent:
        await fake_discord.sent.wait_for(lambda: other.get("reactions"))
    assert other["reactions"][0]["emoji"]["name"] == WARNING
    assert "reactions" not in same


async def test_generated_probes_find_no_linked_content_out_of_scope(
    fake_discord: DiscordServer, start_bot: Start, llm_server: LLMServer
) -> None:
    world = await leak_probes.build_world(fake_discord)
    provider, providers = real_provider(llm_server, "anthropic")
    await start_bot(
        provider, providers=providers, links=leak_probes.LINKS, authorized_roles=[leak_probes.MODS]
    )
    batch = leak_probes.probes(world, 24)
    assert len({(p.asker, p.place) for p in batch}) == 18  # every asker in every place
    assert await leak_probes.run_probes(world, llm_server, batch) == []
