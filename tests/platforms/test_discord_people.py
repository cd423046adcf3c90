"""People as their guild shows them, whichever way their messages were read.

Discord's REST messages carry no member: names and roles of authors read through a
history fetch come from the adapter's member cache (and one member lookup on a miss).
"""

from __future__ import annotations

import asyncio

import pytest

from fakes.discord_server import DiscordServer
from salon.llm import FakeProvider, FakeReply
from salon.model import Approval, ApprovalRequest, ChannelRef, Participant, ToolCall
from tests.platforms.conftest import GENERAL, RANDOM, Start, ask, shown

MEMBER_LOOKUP = "GET /guilds/1/members/{}"


@pytest.mark.parametrize("role", ["mods", "500"])  # a config may name a role or give its id
async def test_history_by_an_authorized_member_is_honoured_when_read_by_a_fetch(
    fake_discord: DiscordServer, start_bot: Start, role: str
) -> None:
    alice, bob = fake_discord.user("Alice"), fake_discord.user("Bob")
    fake_discord.roles[alice.id] = ["500"]  # the "mods" role
    first = await fake_discord.post(RANDOM, bob, "the plan begins")
    last = await fake_discord.post(RANDOM, alice, "the plan ends")
    await fake_discord.post(GENERAL, bob, "noise before")
    links = f"first: {fake_discord.link(first)}\nlast: {fake_discord.link(last)}"
    await fake_discord.post(GENERAL, alice, f".history\n---\n{links}")
    provider = FakeProvider()
    await start_bot(provider, authorized_roles=[role])  # so all of it comes by a fetch
    await ask(fake_discord, GENERAL, bob, "go")
    await fake_discord.wait_bot_messages(GENERAL, 1)
    assert shown(provider) == "Bob: the plan begins\nAlice: the plan ends\nBob: @Salon go"


async def test_a_nicknamed_person_has_one_name_in_a_request(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    alice, carol = fake_discord.user("Alice"), fake_discord.user("Carol")  # Carol is "Caz" here
    await fake_discord.post(GENERAL, carol, "an older word")
    provider = FakeProvider()
    await start_bot(provider)
    await ask(fake_discord, GENERAL, alice, "hello")  # fills the history cache by a fetch
    await fake_discord.wait_bot_messages(GENERAL, 1)
    await ask(fake_discord, GENERAL, carol, "hi")  # comes by the gateway
    await fake_discord.wait_bot_messages(GENERAL, 2)
    assert shown(provider) == "Caz: an older word\nAlice: @Salon hello\nok\nCaz: @Salon hi"


async def test_mentions_read_as_the_names_people_are_labelled_with(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    alice, carol, bot = fake_discord.user("Alice"), fake_discord.user("Carol"), fake_discord.bot
    fake_discord.nicks[bot.id] = "Sally"  # the bot's nickname here; the model knows it as Salon
    await fake_discord.post(GENERAL, alice, f"<@{carol.id}> what do you think?", mentions=[carol])
    provider = FakeProvider()
    await start_bot(provider)
    await fake_discord.post(GENERAL, carol, f"<@!{alice.id}> ask the bot", mentions=[alice])
    await ask(fake_discord, GENERAL, alice, "and you?")
    await fake_discord.wait_bot_messages(GENERAL, 1)
    assert shown(provider) == (
        "Alice: @Caz what do you think?\nCaz: @Alice ask the bot\nAlice: @Salon and you?"
    )


async def test_someone_who_left_keeps_their_name_and_is_looked_up_once(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    alice, carol = fake_discord.user("Alice"), fake_discord.user("Carol")
    await fake_discord.post(GENERAL, carol, "my last words here")
    await fake_discord.post(RANDOM, carol, "and there")
    fake_discord.leave(carol)
    provider = FakeProvider()
    await start_bot(provider)
    for count, channel in enumerate((GENERAL, RANDOM), 1):
        await ask(fake_discord, channel, alice, "who was that?")
        await fake_discord.wait_bot_messages(channel, 1)
        assert shown(provider).startswith("Carol: ")  # no nickname any more: the global name
        assert len(provider.requests) == count
    assert fake_discord.calls[MEMBER_LOOKUP.format(carol.id)] == 1  # "not a member" is kept


@pytest.mark.parametrize("role", ["mods", "500"])
async def test_an_authorized_role_may_answer_and_is_named_in_the_decision(
    fake_discord: DiscordServer, start_bot: Start, role: str
) -> None:
    _, platform = await start_bot(FakeProvider(), authorized_roles=[role])
    alice, bob, carol = (fake_discord.user(n) for n in ("Alice", "Bob", "Carol"))
    fake_discord.roles[carol.id] = ["500"]
    general = ChannelRef("discord", GENERAL, name="general", guild_id="1")
    request = ApprovalRequest("wipe", "wipe (target: cache)", Participant(alice.id, "Alice"))
    asking = asyncio.create_task(platform.request_approval(general, request))
    (prompt,) = await fake_discord.wait_bot_messages(GENERAL, 1)
    await asyncio.wait_for(platform.wait_prompts(1), 10)
    await fake_discord.click(prompt, bob, "salon:approve")
    (refusal,) = await fake_discord.wait_interaction_responses(1)
    assert refusal["data"]["content"] == "Only Alice can answer this."
    await fake_discord.click(prompt, carol, "salon:approve")
    decision = await asyncio.wait_for(asking, 10)
    assert (decision.answer, decision.by) == (Approval.APPROVED, "Caz")
    await fake_discord.wait_interaction_responses(2)  # the prompt's edit
    assert prompt["content"].endswith("Approved by Caz.")
    assert prompt["components"] == []  # the buttons are gone


async def test_the_approval_prompt_is_a_note_and_stays_one_when_answered(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    from salon.model import Tag
    from tests.platforms.test_approvals import danger_server
    from tests.tools.conftest import in_process

    ran: list[str] = []
    wipe = FakeReply(calls=(ToolCall("c1", "wipe", {"target": "cache"}),))
    _, platform = await start_bot(
        FakeProvider([wipe, "Wiped."]),
        extra_servers=[in_process(danger_server(ran), "danger")],
        tool_output_visible=False,
    )
    alice = fake_discord.user("Alice")
    await ask(fake_discord, GENERAL, alice, "wipe the cache")
    (prompt,) = await fake_discord.wait_bot_messages(GENERAL, 1)
    assert prompt["flags"] == 1 << 12  # SUPPRESS_NOTIFICATIONS: Salon's own words
    await asyncio.wait_for(platform.wait_prompts(1), 10)
    await fake_discord.click(prompt, alice, "salon:approve")
    await fake_discord.wait_bot_messages(GENERAL, 2)
    assert ran == ["cache"]
    assert prompt["flags"] == 1 << 12
    platform.cache.forget()
    read = await platform.history(ChannelRef("discord", GENERAL, name="general"), limit=5)
    notes = [m.text for m in read if Tag.NOTE in m.tags]
    assert notes == [prompt["content"]]


async def test_every_read_path_names_people_as_the_guild_does(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    carol = fake_discord.user("Carol")
    fake_discord.roles[carol.id] = ["500"]
    root = await fake_discord.post(GENERAL, carol, "the root")
    reply = await fake_discord.post(GENERAL, carol, "a reply", reply_to=root)
    await fake_discord.pin(root)
    _, platform = await start_bot(FakeProvider())
    general = ChannelRef("discord", GENERAL, name="general", guild_id="1")
    (pinned,) = await platform.pinned(general)
    stretch = await platform.history_until(fake_discord.link(reply), limit=5)
    assert stretch is not None
    trigger = stretch[-1]
    (chained,) = await platform.reply_chain(trigger)
    for message in (pinned, *stretch, chained):
        assert (message.author.name, message.author.roles) == ("Caz", ("mods", "500"))
    assert fake_discord.calls[MEMBER_LOOKUP.format(carol.id)] == 1


async def test_an_unanswered_prompt_loses_its_buttons(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    _, platform = await start_bot(FakeProvider())
    general = ChannelRef("discord", GENERAL, name="general", guild_id="1")
    alice = Participant(fake_discord.user("Alice").id, "Alice")
    request = ApprovalRequest("wipe", "wipe (target: cache)", alice, timeout=0.2)
    decision = await asyncio.wait_for(platform.request_approval(general, request), 10)
    assert decision.answer is Approval.TIMEOUT
    (prompt,) = fake_discord.channels[GENERAL]
    assert prompt["components"] == []
    assert prompt["content"].endswith("Allow?\nNo answer in time.")
    assert prompt["flags"] == 1 << 12  # still a note
