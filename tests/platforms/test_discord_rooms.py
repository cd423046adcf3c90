"""Pinned configs, ``.history`` and two bots in one channel, through the fake Discord."""

from __future__ import annotations

import asyncio

from fakes.discord_server import DiscordServer, FakeUser
from salon.llm import FakeProvider
from tests.platforms.conftest import Start

GENERAL, RANDOM = "10", "11"
LOOP = "\U0001f501"
WARNING = "\u26a0\ufe0f"


def shown(provider: FakeProvider, index: int = -1) -> str:
    return "\n".join(m.plain_text for m in provider.requests[index].messages)


async def wait_until(server: DiscordServer, check: object, within: float = 10) -> None:
    async with asyncio.timeout(within), server.sent:
        await server.sent.wait_for(check)  # type: ignore[arg-type]


async def test_pinned_config_applies_to_the_channel_and_its_threads(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    provider = FakeProvider()
    await start_bot(provider, system_prompt="base")
    alice, bot = fake_discord.user("Alice"), fake_discord.bot
    config = await fake_discord.post(GENERAL, alice, ".config Salon\n---\nsystem_prompt: pinned")
    broken = await fake_discord.post(GENERAL, alice, ".config\n---\nmax_tokens: many")
    await fake_discord.pin(config)
    await fake_discord.pin(broken)
    mention = f"<@{bot.id}> hello"
    await fake_discord.post(GENERAL, alice, mention, mentions=[bot])
    await fake_discord.wait_bot_messages(GENERAL, 1)
    assert provider.requests[0].system == "pinned"
    await wait_until(fake_discord, lambda: broken.get("reactions"))
    assert broken["reactions"][0]["emoji"]["name"] == WARNING
    assert "reactions" not in config

    starter = await fake_discord.post(GENERAL, alice, "a thread about it")
    thread = await fake_discord.start_thread(starter, "topic")
    await fake_discord.post(thread, alice, mention, mentions=[bot])
    await fake_discord.wait_bot_messages(thread, 1)
    assert provider.requests[1].system == "pinned"  # the thread inherits its parent's pins

    await fake_discord.post(RANDOM, alice, mention, mentions=[bot])
    await fake_discord.wait_bot_messages(RANDOM, 1)
    assert provider.requests[2].system == "base"
    pin_reads = [k for k in fake_discord.calls if k.endswith("/messages/pins")]
    assert sorted(fake_discord.calls[k] for k in pin_reads) == [1, 1, 1]  # cached per channel


async def test_a_pin_or_an_edit_of_a_pinned_config_is_seen_next_time(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    provider = FakeProvider()
    await start_bot(provider, system_prompt="base")
    alice, bot = fake_discord.user("Alice"), fake_discord.bot
    mention = f"<@{bot.id}> hello"
    await fake_discord.post(GENERAL, alice, mention, mentions=[bot])
    await fake_discord.wait_bot_messages(GENERAL, 1)
    config = await fake_discord.post(GENERAL, alice, ".config\n---\nsystem_prompt: one")
    await fake_discord.pin(config)
    await fake_discord.post(GENERAL, alice, mention, mentions=[bot])
    await fake_discord.wait_bot_messages(GENERAL, 2)
    await fake_discord.edit(config, ".config\n---\nsystem_prompt: two")
    await fake_discord.post(GENERAL, alice, mention, mentions=[bot])
    await fake_discord.wait_bot_messages(GENERAL, 3)
    assert [r.system for r in provider.requests] == ["base", "one", "two"]


async def test_history_link_splices_another_channel(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    provider = FakeProvider()
    await start_bot(provider, authorized_roles=["mods"])
    alice, bob, bot = fake_discord.user("Alice"), fake_discord.user("Bob"), fake_discord.bot
    fake_discord.roles[alice.id] = ["500"]  # the "mods" role
    await fake_discord.post(RANDOM, bob, "too early")
    first = await fake_discord.post(RANDOM, bob, "the plan begins")
    last = await fake_discord.post(RANDOM, alice, "the plan ends")
    await fake_discord.post(GENERAL, bob, "noise before")
    body = f"first: {fake_discord.link(first)}\nlast: {fake_discord.link(last)}"
    await fake_discord.post(GENERAL, bob, f".history\n---\n{body}")  # Bob is not a mod
    await fake_discord.post(GENERAL, bob, f"<@{bot.id}> one", mentions=[bot])
    await fake_discord.wait_bot_messages(GENERAL, 1)
    assert "noise before" in shown(provider)
    await fake_discord.post(GENERAL, alice, f".history\n---\n{body}")
    await fake_discord.post(GENERAL, bob, f"<@{bot.id}> two", mentions=[bot])
    await fake_discord.wait_bot_messages(GENERAL, 2)
    text = shown(provider)
    assert "noise before" not in text
    assert "too early" not in text
    assert text.startswith("Bob: the plan begins\nAlice: the plan ends")


async def test_two_bots_stop_pinging_each_other(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    echo = FakeUser("400", "Echo", bot=True)
    fake_discord.tokens["token-echo"] = echo
    fake_discord.people.append(echo)
    salon_model = FakeProvider(default="@Echo what do you think?")
    echo_model = FakeProvider(default="@Salon I agree.")
    await start_bot(salon_model, allow_bot_interactions=True)
    await start_bot(
        echo_model, key="echo", token="token-echo", name="Echo", allow_bot_interactions=True
    )
    alice, salon = fake_discord.user("Alice"), fake_discord.bot
    await fake_discord.post(GENERAL, echo, "Echo here.")  # so Salon knows whom @Echo means
    await fake_discord.post(GENERAL, alice, f"<@{salon.id}> start us off", mentions=[salon])

    def looped() -> bool:
        return any(
            r["emoji"]["name"] == LOOP
            for m in fake_discord.channels[GENERAL]
            for r in m.get("reactions", [])
        )

    await wait_until(fake_discord, looped)
    authors = [
        m["author"]["global_name"] or m["author"]["username"]
        for m in fake_discord.channels[GENERAL]
    ]
    # After Alice, three bot messages in a row; the fourth is a 🔁 instead of an answer.
    assert authors == ["Echo", "Alice", "Salon", "Echo", "Salon"]
    last = fake_discord.channels[GENERAL][-1]
    assert [r["emoji"]["name"] for r in last["reactions"]] == [LOOP]
    assert (len(salon_model.requests), len(echo_model.requests)) == (2, 1)
    assert "<@400>" in fake_discord.channels[GENERAL][2]["content"]  # a real mention


async def test_a_thread_opening_with_history_does_not_continue_into_its_parent(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    provider = FakeProvider()
    await start_bot(provider, authorized_roles=["mods"])
    alice, bot = fake_discord.user("Alice"), fake_discord.bot
    fake_discord.roles[alice.id] = ["500"]  # the "mods" role: who may splice history
    await fake_discord.post(GENERAL, alice, "parent chatter")
    starter = await fake_discord.post(GENERAL, alice, "branch here")
    source = await fake_discord.post(RANDOM, alice, "the chosen past")
    thread = await fake_discord.start_thread(starter, "fresh")
    await fake_discord.post(thread, alice, f".history\n---\nlast: {fake_discord.link(source)}")
    await fake_discord.post(thread, alice, f"<@{bot.id}> go", mentions=[bot])
    await fake_discord.wait_bot_messages(thread, 1)
    text = shown(provider)
    assert text.startswith("Alice: the chosen past")
    assert "parent chatter" not in text
    assert "branch here" not in text

    # Opened by a .history for another bot: still no parent, and no splice for this one.
    other = await fake_discord.post(GENERAL, alice, "second branch")
    thread2 = await fake_discord.start_thread(other, "for echo")
    await fake_discord.post(
        thread2, alice, f".history Echo\n---\nlast: {fake_discord.link(source)}"
    )
    await fake_discord.post(thread2, alice, f"<@{bot.id}> again", mentions=[bot])
    await fake_discord.wait_bot_messages(thread2, 1)
    assert shown(provider) == "Alice: @Salon again"
