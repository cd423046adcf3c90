"""What the context holds, Bob Bot's way: other bots left out, no history at all, and each
message marked with where it came from."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from salon.llm import FakeProvider
from salon.model import ChannelRef, Message, Participant
from salon.store.sql import SQLStore
from tests.agent.conftest import StartAgent

ALICE = Participant("alice", "Alice")
BOB_BOT = Participant("bob", "Bob", is_bot=True)


async def test_other_bots_can_be_left_out_of_the_context(start_agent: StartAgent) -> None:
    provider = FakeProvider(["Hi."])
    agent, platform = await start_agent(provider, other_bots_in_context=False)
    room = platform.channel()
    platform.add(room, ALICE, "who is here?")
    platform.add(room, BOB_BOT, "I am Bob, a bot.")
    platform.add(room, platform.self_participant, "And I am Salon.")
    await platform.post(room, ALICE, "hello @Salon", mentions=[platform.self_participant])
    await agent.wait_idle()
    seen = [m.plain_text for m in provider.requests[0].messages]
    assert seen == ["Alice: who is here?", "And I am Salon.", "Alice: hello @Salon"]


async def test_a_bots_message_it_answers_stays_in_view(start_agent: StartAgent) -> None:
    provider = FakeProvider(["Hi Bob."])
    agent, platform = await start_agent(
        provider, other_bots_in_context=False, allow_bot_interactions=True
    )
    dm = platform.channel("dm", is_direct=True)
    platform.add(dm, BOB_BOT, "an older word of Bob's")
    await platform.post(dm, BOB_BOT, "hello Salon")
    await agent.wait_idle()
    assert [m.plain_text for m in provider.requests[0].messages] == ["Bob: hello Salon"]


async def test_the_history_can_be_turned_off(start_agent: StartAgent) -> None:
    """REPLY_CHAIN_ENABLED=false: no channel context, no reply chain, no DM history."""
    provider = FakeProvider(["Hi.", "Hi again."])
    agent, platform = await start_agent(provider, context_history=False)
    room = platform.channel()
    old = platform.add(room, ALICE, "something said long ago")
    platform.add(room, ALICE, "something said before")
    mention = [platform.self_participant]
    await platform.post(room, ALICE, "hello @Salon", mentions=mention, reply_to=old)
    dm = platform.channel("dm", is_direct=True)
    platform.add(dm, ALICE, "an earlier DM")
    await platform.post(dm, ALICE, "and now")
    await agent.wait_idle()
    in_room, in_dm = ([m.plain_text for m in r.messages] for r in provider.requests)
    assert in_room == ["Alice: hello @Salon"]
    assert in_dm == ["Alice: and now"]


async def test_each_message_can_say_where_it_came_from(start_agent: StartAgent) -> None:
    provider = FakeProvider(["Hi.", "Hi.", "Hi."])
    agent, platform = await start_agent(provider, context_sources=True, recency_window_messages=2)
    room = platform.channel()
    old = platform.add(room, ALICE, "the first word")
    platform.add(room, ALICE, "filler")
    platform.add(room, ALICE, "more filler")
    platform.add(room, platform.self_participant, "Noted.")
    mention = [platform.self_participant]
    await platform.post(room, ALICE, "about that @Salon", mentions=mention, reply_to=old)
    await agent.wait_idle()
    seen = provider.requests[-1].messages
    assert [m.plain_text for m in seen] == [
        "[reply] Alice: the first word",
        "Noted.",  # the bot's own words carry no mark it could learn to write
        "[channel] Alice: about that @Salon",
    ]
    thread = ChannelRef(platform.name, "t1", name="t1", parent_id=room.id)
    await platform.post(thread, ALICE, "in a thread @Salon", mentions=mention)
    await platform.post(platform.channel("dm", is_direct=True), ALICE, "in private")
    await agent.wait_idle()
    in_thread, in_dm = ([m.plain_text for m in r.messages] for r in provider.requests[-2:])
    assert in_thread == ["[thread] Alice: in a thread @Salon"]
    assert in_dm == ["[dm] Alice: in private"]


async def test_joins_parts_and_quits_reach_the_model_as_an_irc_logs_block(
    start_agent: StartAgent, store: SQLStore
) -> None:
    """Terrarium's <irc_logs>: the channel's log with its comings and goings, stamped, in
    the system prompt; the conversation itself stays as it was."""
    provider = FakeProvider(["Hi."])
    agent, platform = await start_agent(provider, system_prompt="You are Salon.", irc_logs=10)
    room = platform.channel()
    at = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)
    bob, carol = Participant("bob", "Bob"), Participant("carol", "Carol")
    for n, (who, kind, text) in enumerate(
        [
            (bob, "join", ""),
            (ALICE, "message", "morning"),
            (carol, "part", "bye"),
            (bob, "quit", "Ping timeout"),
            (ALICE, "note", "(Salon's own note)"),
            (carol, "nick", "Caroline"),
        ]
    ):
        line = Message(f"l{n}", room, who, text, at + timedelta(seconds=n))
        await store.log_message("salon", line, kind)
    await platform.post(room, ALICE, "hello @Salon", mentions=[platform.self_participant])
    await agent.wait_idle()
    assert provider.requests[0].system == (
        "You are Salon.\n\n<irc_logs>\n"
        "[2026-01-01 10:00:00] * Bob joined\n"
        "[2026-01-01 10:00:01] <Alice> morning\n"
        "[2026-01-01 10:00:02] * Carol left (bye)\n"
        "[2026-01-01 10:00:03] * Bob quit (Ping timeout)\n"
        "[2026-01-01 10:00:05] * Carol is now known as Caroline\n"
        "</irc_logs>"
    )


async def test_the_system_prompt_can_name_the_channel_its_topic_and_who_is_there(
    start_agent: StartAgent,
) -> None:
    """Terrarium's system prompt with channel info, as template variables any bot may use."""
    prompt = "In {{channel}} on {{ server }} ({{topic}}), {{time}}; here: {{users}}. {json}"
    provider = FakeProvider(["Hi."])
    agent, platform = await start_agent(provider, system_prompt=prompt, timezone="Asia/Tokyo")
    room = platform.channel("terrarium")
    platform.topics[room.key] = "plants and bots"
    platform.add(room, Participant("bob", "Bob"), "hey")
    await platform.post(room, ALICE, "hello @Salon", mentions=[platform.self_participant])
    await agent.wait_idle()
    system = provider.requests[0].system
    head, _, rest = system.partition(", ")
    assert head == "In terrarium on memory (plants and bots)"
    stamp, _, tail = rest.partition("; ")
    assert stamp.endswith(" JST")
    when = datetime.strptime(stamp.removesuffix(" JST"), "%Y-%m-%d %H:%M")
    assert abs(when.replace(tzinfo=UTC) - datetime.now(UTC) - timedelta(hours=9)) < timedelta(
        minutes=2
    )
    assert tail == "here: Bob, Alice. {json}"  # other braces are left alone
