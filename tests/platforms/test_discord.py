"""The Discord adapter driving the real discord.py against a loopback fake of Discord."""

from __future__ import annotations

import asyncio

import pytest

from fakes.discord_server import DiscordServer
from salon.llm import FakeProvider, FakeReply
from salon.model import ToolCall
from tests.platforms.conftest import Start

GENERAL, RANDOM = "10", "11"
HISTORY = "GET /channels/10/messages"


async def test_mention_gets_a_reply_with_readable_names(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    provider = FakeProvider(["Hello @Alice!"])
    await start_bot(provider)
    alice = fake_discord.user("Alice")
    await fake_discord.post(GENERAL, alice, "just talking")
    await fake_discord.post(
        GENERAL, alice, f"<@{fake_discord.bot.id}> hi there", mentions=[fake_discord.bot]
    )
    (reply,) = await fake_discord.wait_bot_messages(GENERAL, 1)
    assert reply["content"] == f"Hello <@{alice.id}>!"  # @name back to a real mention
    assert (
        provider.requests[0].messages[-1].plain_text
        == "Alice: just talking\nAlice: @Salon hi there"
    )
    assert len(provider.requests) == 1


async def test_reply_to_the_bot_and_direct_messages(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    provider = FakeProvider(["first", "second", "third"])
    await start_bot(provider)
    alice = fake_discord.user("Alice")
    await fake_discord.post(
        GENERAL, alice, f"<@{fake_discord.bot.id}> one", mentions=[fake_discord.bot]
    )
    (mine,) = await fake_discord.wait_bot_messages(GENERAL, 1)
    await fake_discord.post(GENERAL, alice, "about that", reply_to=mine)
    await fake_discord.wait_bot_messages(GENERAL, 2)
    dm = fake_discord.dm_channel(alice)
    await fake_discord.post(dm, alice, "in private")
    (private,) = await fake_discord.wait_bot_messages(dm, 1)
    assert private["content"] == "third"


async def test_monitored_channel_and_other_bots(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    provider = FakeProvider(["seen"])
    await start_bot(provider, discord={"monitored_channels": [RANDOM]})
    await fake_discord.post(RANDOM, fake_discord.user("Robo"), "beep from another bot")
    await fake_discord.post(RANDOM, fake_discord.user("Bob"), "anyone here?")
    (reply,) = await fake_discord.wait_bot_messages(RANDOM, 1)
    assert reply["content"] == "seen"
    assert len(provider.requests) == 1


async def test_dot_messages_and_hiding_reaction_are_invisible(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    provider = FakeProvider(["ok"])
    await start_bot(provider)
    alice = fake_discord.user("Alice")
    await fake_discord.post(GENERAL, alice, ".note to humans only")
    hidden = await fake_discord.post(GENERAL, alice, "please forget this")
    await fake_discord.react(hidden, alice, "\U0001fae5")
    await fake_discord.post(
        GENERAL, alice, f"<@{fake_discord.bot.id}> what do you see?", mentions=[fake_discord.bot]
    )
    await fake_discord.wait_bot_messages(GENERAL, 1)
    seen = provider.requests[0].messages[-1].plain_text
    assert seen == "Alice: @Salon what do you see?"


async def test_long_reply_is_split_and_code_fences_survive(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    code = "\n".join(f"print({i})  # a line of code" for i in range(120))
    prose = " ".join(["word"] * 500)
    provider = FakeProvider([f"{prose}\n\n```python\n{code}\n```"])
    await start_bot(provider)
    await fake_discord.post(
        GENERAL,
        fake_discord.user("Alice"),
        f"<@{fake_discord.bot.id}> go",
        mentions=[fake_discord.bot],
    )
    await asyncio.wait_for(_until_quiet(fake_discord, GENERAL, 4), 20)
    sent = [
        m["content"]
        for m in fake_discord.channels[GENERAL]
        if m["author"]["id"] == fake_discord.bot.id
    ]
    assert all(len(text) <= 1800 for text in sent)
    assert all(text.count("```") % 2 == 0 for text in sent)
    assert sum(text.count("# a line of code") for text in sent) == 120


async def _until_quiet(server: DiscordServer, channel: str, count: int) -> None:
    await server.wait_bot_messages(channel, count)


async def test_edits_and_deletions_reach_the_next_context_without_a_fetch(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    provider = FakeProvider(["one", "two"])
    await start_bot(provider)
    alice = fake_discord.user("Alice")
    typo = await fake_discord.post(GENERAL, alice, "the meeting is on Mnoday")
    doomed = await fake_discord.post(GENERAL, alice, "ignore me")
    await fake_discord.post(
        GENERAL, alice, f"<@{fake_discord.bot.id}> noted?", mentions=[fake_discord.bot]
    )
    await fake_discord.wait_bot_messages(GENERAL, 1)
    fetches = fake_discord.calls[HISTORY]
    assert fetches >= 1
    await fake_discord.edit(typo, "the meeting is on Monday")
    await fake_discord.delete(doomed)
    await fake_discord.post(
        GENERAL, alice, f"<@{fake_discord.bot.id}> and now?", mentions=[fake_discord.bot]
    )
    await fake_discord.wait_bot_messages(GENERAL, 2)
    assert fake_discord.calls[HISTORY] == fetches  # the cache answered
    seen = provider.requests[1].messages
    text = "\n".join(m.plain_text for m in seen)
    assert "Monday" in text
    assert "Mnoday" not in text
    assert "ignore me" not in text


async def test_a_reconnect_forces_a_fresh_fetch(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    provider = FakeProvider(["before", "after"])
    await start_bot(provider)
    alice = fake_discord.user("Alice")
    await fake_discord.post(
        GENERAL, alice, f"<@{fake_discord.bot.id}> hi", mentions=[fake_discord.bot]
    )
    await fake_discord.wait_bot_messages(GENERAL, 1)
    fetches = fake_discord.calls[HISTORY]
    identifies = fake_discord.identifies
    fake_discord.identified.clear()
    await fake_discord.drop_connections()
    await asyncio.wait_for(fake_discord.identified.wait(), 30)
    assert fake_discord.identifies == identifies + 1
    await fake_discord.post(
        GENERAL, alice, f"<@{fake_discord.bot.id}> still there?", mentions=[fake_discord.bot]
    )
    await fake_discord.wait_bot_messages(GENERAL, 2)
    assert fake_discord.calls[HISTORY] == fetches + 1
    # What a ready needs once per process is not asked again at a reconnect.
    assert fake_discord.calls["GET /oauth2/applications/@me"] == 1, fake_discord.log
    assert fake_discord.calls[f"PUT /applications/{fake_discord.bot.id}/commands"] == 1


async def test_approval_buttons_refuse_the_wrong_user(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    from tests.platforms.test_approvals import danger_server
    from tests.tools.conftest import in_process

    ran: list[str] = []
    provider = FakeProvider(
        [FakeReply(calls=(ToolCall("c1", "wipe", {"target": "cache"}),)), "Wiped."]
    )
    _, platform = await start_bot(
        provider,
        extra_servers=[in_process(danger_server(ran), "danger")],
        tool_output_visible=False,
    )
    alice, bob = fake_discord.user("Alice"), fake_discord.user("Bob")
    await fake_discord.post(
        GENERAL, alice, f"<@{fake_discord.bot.id}> wipe the cache", mentions=[fake_discord.bot]
    )
    (prompt,) = await fake_discord.wait_bot_messages(GENERAL, 1)
    assert "wants to run wipe (target: cache)" in prompt["content"]
    buttons = {
        c["label"]: c["custom_id"] for row in prompt["components"] for c in row["components"]
    }
    await asyncio.wait_for(platform.wait_prompts(1), 10)
    await fake_discord.click(prompt, bob, buttons["Approve"])
    (refusal,) = await fake_discord.wait_interaction_responses(1)
    assert refusal["data"]["content"] == "Only Alice can answer this."
    assert refusal["data"]["flags"] == 64  # ephemeral
    assert ran == []
    await fake_discord.click(prompt, alice, buttons["Approve"])
    await fake_discord.wait_bot_messages(GENERAL, 2)
    assert ran == ["cache"]


async def test_a_500_on_send_is_retried_and_posted_once(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    provider = FakeProvider(["exactly once"])
    await start_bot(provider)
    fake_discord.fail_next("POST", "/channels/10/messages", 500, after_effect=True)
    await fake_discord.post(
        GENERAL,
        fake_discord.user("Alice"),
        f"<@{fake_discord.bot.id}> hi",
        mentions=[fake_discord.bot],
    )
    (reply,) = await fake_discord.wait_bot_messages(GENERAL, 1)
    await asyncio.wait_for(_posts(fake_discord, 2), 15)
    assert reply["content"] == "exactly once"
    assert [m["content"] for m in fake_discord.channels[GENERAL] if m["author"].get("bot")] == [
        "exactly once"
    ]


async def _posts(server: DiscordServer, count: int) -> None:
    async with server.sent:
        await server.sent.wait_for(lambda: server.calls["POST /channels/10/messages"] >= count)


async def test_monitor_and_unmonitor_commands_persist(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    provider = FakeProvider(["now I listen", "still listening"])
    app, _ = await start_bot(provider)
    alice = fake_discord.user("Alice")
    await fake_discord.command(RANDOM, alice, "monitor")
    (answer,) = await fake_discord.wait_interaction_responses(1)
    assert answer["data"]["content"] == "Salon now reads every message here."
    assert answer["data"]["flags"] == 64
    assert await app.store.channels.monitored("salon") == {f"discord:{RANDOM}"}
    await fake_discord.post(RANDOM, alice, "no mention needed")
    (reply,) = await fake_discord.wait_bot_messages(RANDOM, 1)
    assert reply["content"] == "now I listen"
    await fake_discord.command(RANDOM, alice, "unmonitor")
    await fake_discord.wait_interaction_responses(2)
    assert await app.store.channels.monitored("salon") == set()


async def test_schedules_command_lists_and_cancels(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    from datetime import UTC, datetime

    from salon.model import ChannelRef, Participant, Schedule

    app, _ = await start_bot(FakeProvider())
    due = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)
    channel = ChannelRef("discord", GENERAL)
    await app.store.schedules.create_schedule(
        Schedule(
            0,
            "salon",
            channel,
            "new year",
            "UTC",
            at=due,
            created_by=Participant("200", "Alice"),
            next_due=due,
        )
    )
    alice = fake_discord.user("Alice")
    await fake_discord.command(GENERAL, alice, "schedules")
    (listing,) = await fake_discord.wait_interaction_responses(1)
    assert "#1 once at 2030-01-01 09:00 UTC" in listing["data"]["content"]
    await fake_discord.command(GENERAL, alice, "schedules", cancel=1)
    responses = await fake_discord.wait_interaction_responses(2)
    assert responses[1]["data"]["content"] == "cancelled schedule #1"
    assert await app.store.schedules.find("salon") == []


async def test_tool_use_is_shown_through_a_webhook(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    provider = FakeProvider(
        [FakeReply(calls=(ToolCall("c1", "get_current_time", {"timezone": "UTC"}),)), "It is late."]
    )
    await start_bot(provider, default_tool_policy="allow")
    await fake_discord.post(
        GENERAL,
        fake_discord.user("Alice"),
        f"<@{fake_discord.bot.id}> time?",
        mentions=[fake_discord.bot],
    )
    await fake_discord.wait_bot_messages(GENERAL, 1)
    (log,) = fake_discord.webhook_posts
    assert log["username"] == "Salon"
    assert log["content"].startswith(
        ".Salon>[get_current_time]: timezone: UTC\n.Salon<[get_current_time]:"
    )
    assert fake_discord.webhooks[0]["name"] == "Salon"


def test_history_cache_tops_up_instead_of_refetching() -> None:
    from datetime import UTC, datetime

    from salon.model import ChannelRef, Message, Participant
    from salon.platforms.discord.cache import HistoryCache

    room = ChannelRef("discord", "10")
    alice = Participant("200", "Alice")
    messages = [Message(str(i), room, alice, f"m{i}", datetime.now(UTC)) for i in range(10)]
    cache = HistoryCache(max_channels=2)
    cache.fill("10", messages[4:], depth=6)
    assert [m.text for m in cache.get("10", 5) or []] == ["m5", "m6", "m7", "m8", "m9"]
    cache.deleted("10", ["7", "8"])
    assert cache.get("10", 5) is None  # two fewer than vouched for
    assert cache.short("10") == ("4", 4)
    cache.extend_older("10", messages[2:4], depth=6)
    assert [m.text for m in cache.get("10", 5) or []] == ["m3", "m4", "m5", "m6", "m9"]
    cache.forget()
    assert cache.get("10", 1) is None


async def test_images_and_text_files_reach_the_model(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    from salon.llm import ImagePart

    provider = FakeProvider(["nice cat", "still nice"])
    await start_bot(provider, discord={"max_images": 1})
    alice = fake_discord.user("Alice")
    await fake_discord.post(
        GENERAL, alice, "old picture", files=[("old.png", "image/png", b"\x89PNG old")]
    )
    await fake_discord.post(
        GENERAL,
        alice,
        "my cat and notes",
        files=[("cat.png", "image/png", b"\x89PNG cat"), ("notes.txt", "text/plain", b"feed at 6")],
    )
    await fake_discord.post(
        GENERAL, alice, f"<@{fake_discord.bot.id}> look", mentions=[fake_discord.bot]
    )
    await fake_discord.wait_bot_messages(GENERAL, 1)
    parts = provider.requests[0].messages[-1].parts
    images = [p for p in parts if isinstance(p, ImagePart)]
    assert [(i.media_type, i.data) for i in images] == [
        ("image/png", b"\x89PNG cat")
    ]  # newest only
    text = provider.requests[0].messages[-1].plain_text
    assert "[file notes.txt]\nfeed at 6" in text
    downloads = fake_discord.calls["GET /attachments"]
    await fake_discord.post(
        GENERAL, alice, f"<@{fake_discord.bot.id}> again", mentions=[fake_discord.bot]
    )
    await fake_discord.wait_bot_messages(GENERAL, 2)
    assert fake_discord.calls["GET /attachments"] == downloads  # kept from the first load


async def test_reply_chain_beyond_the_window_is_included_and_marked(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    provider = FakeProvider(["I remember"])
    await start_bot(provider, recency_window_messages=3)
    alice, bob = fake_discord.user("Alice"), fake_discord.user("Bob")
    root = await fake_discord.post(GENERAL, alice, "the plan is to ship friday")
    middle = await fake_discord.post(GENERAL, bob, "agreed", reply_to=root)
    for i in range(5):
        await fake_discord.post(GENERAL, bob, f"noise {i}")
    await fake_discord.post(
        GENERAL,
        alice,
        f"<@{fake_discord.bot.id}> is that still the plan?",
        mentions=[fake_discord.bot],
        reply_to=middle,
    )
    await fake_discord.wait_bot_messages(GENERAL, 1)
    text = "\n".join(m.plain_text for m in provider.requests[0].messages)
    assert "(earlier message, replied to) Alice: the plan is to ship friday" in text
    assert "(earlier message, replied to) Bob: agreed" in text
    assert "noise 1" not in text  # outside the window of three


async def test_ask_command_answers_in_the_channel(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    provider = FakeProvider(["Forty-two."])
    await start_bot(provider)
    await fake_discord.command(
        GENERAL, fake_discord.user("Alice"), "ask", question="what is the answer?"
    )
    (reply,) = await fake_discord.wait_bot_messages(GENERAL, 1)
    assert reply["content"] == "Forty-two."
    (ack,) = fake_discord.interaction_responses
    assert ack["data"]["content"] == "Asking: what is the answer?"
    assert provider.requests[0].messages[-1].plain_text == "Alice: what is the answer?"


async def test_a_thread_sees_its_parent_up_to_where_it_branched(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    provider = FakeProvider(["in the thread"])
    await start_bot(provider)
    alice, bob = fake_discord.user("Alice"), fake_discord.user("Bob")
    await fake_discord.post(GENERAL, bob, "before the thread")
    starter = await fake_discord.post(GENERAL, alice, "let us discuss the launch")
    await fake_discord.post(GENERAL, bob, "unrelated, after the branch")
    thread = await fake_discord.start_thread(starter, "launch")
    await fake_discord.post(
        thread, alice, f"<@{fake_discord.bot.id}> ideas?", mentions=[fake_discord.bot]
    )
    (reply,) = await fake_discord.wait_bot_messages(thread, 1)
    assert reply["content"] == "in the thread"
    text = "\n".join(m.plain_text for m in provider.requests[0].messages)
    assert "Bob: before the thread" in text
    assert "Alice: let us discuss the launch" in text
    assert "unrelated, after the branch" not in text


async def test_cancel_button_and_timeout_end_the_answer(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    from tests.platforms.test_approvals import danger_server
    from tests.tools.conftest import in_process

    ran: list[str] = []
    wipe = FakeReply(calls=(ToolCall("c1", "wipe", {"target": "disk"}),))
    provider = FakeProvider([wipe, wipe])
    _, platform = await start_bot(
        provider,
        extra_servers=[in_process(danger_server(ran), "danger")],
        tool_output_visible=False,
        approval_timeout=0.5,
    )
    alice = fake_discord.user("Alice")
    await fake_discord.post(
        GENERAL, alice, f"<@{fake_discord.bot.id}> wipe it", mentions=[fake_discord.bot]
    )
    (prompt,) = await fake_discord.wait_bot_messages(GENERAL, 1)
    await asyncio.wait_for(platform.wait_prompts(1), 10)
    await fake_discord.click(prompt, alice, "salon:cancel")
    cancelled = await fake_discord.wait_bot_messages(GENERAL, 2)
    assert cancelled[-1]["content"] == "(cancelled: wipe was not run)"
    (closing,) = await fake_discord.wait_interaction_responses(1)
    assert closing["type"] == 7  # the prompt is edited: buttons gone, answer shown
    assert closing["data"]["content"].endswith("Cancelled by Alice.")
    await fake_discord.post(
        GENERAL, alice, f"<@{fake_discord.bot.id}> wipe it now", mentions=[fake_discord.bot]
    )
    timed_out = await fake_discord.wait_bot_messages(GENERAL, 4)  # a prompt, then the note
    assert timed_out[-1]["content"] == "(cancelled: wipe was not run)"
    assert ran == []


async def test_missing_permission_is_logged_once(
    fake_discord: DiscordServer, start_bot: Start, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    provider = FakeProvider(["a", "b"])
    app, _ = await start_bot(provider, error_replies=False)
    caplog.set_level(logging.ERROR, logger="salon.platforms.discord")
    fake_discord.fail_next("POST", "/channels/10/messages", 403, times=2)
    alice = fake_discord.user("Alice")
    for count, text in enumerate(("first", "second"), 1):
        await fake_discord.post(
            GENERAL, alice, f"<@{fake_discord.bot.id}> {text}", mentions=[fake_discord.bot]
        )
        await asyncio.wait_for(_posts(fake_discord, count), 10)
    await app.agent.wait_idle()
    told = [r for r in caplog.records if "missing permission" in r.getMessage()]
    assert len(told) == 1
    assert "send_messages" in told[0].getMessage()
