"""How an answer reaches a Discord channel, through the fake Discord and the real discord.py:
typing, paragraphs while the model writes, ``m continue``, pinned configs, prefill on the
wire, the tool log, rate limits and very long answers and files."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest

from fakes.discord_server import DiscordServer
from fakes.llm_server import LLMServer, Scripted
from salon.llm import FakeProvider, FakeReply
from salon.model import ToolCall
from tests.platforms.conftest import GENERAL, Start, ask, real_provider, shown

TYPING, SENDING = "POST /channels/10/typing", "POST /channels/10/messages"


def said(server: DiscordServer, channel: str = GENERAL) -> list[str]:
    return [m["content"] for m in server.channels[channel] if m["author"]["id"] == server.bot.id]


async def test_typing_and_paragraphs_while_the_model_writes(
    fake_discord: DiscordServer, start_bot: Start, llm_server: LLMServer
) -> None:
    resume = asyncio.Event()
    chunks = ["Para one ", "is here.\n\n", "Para two."]
    llm_server.queue(Scripted(chunks=chunks, pause_before_chunk=2, resume=resume))
    provider, providers = real_provider(llm_server, "openai")
    app, platform = await start_bot(provider, providers=providers)
    platform.typing_interval = 0.01  # said again and again while the model writes
    await ask(fake_discord, GENERAL, fake_discord.user("Alice"), "go")
    (first,) = await fake_discord.wait_bot_messages(GENERAL, 1)
    assert first["content"] == "Para one is here."  # while the stream is still open
    typed = fake_discord.calls[TYPING]
    await fake_discord.wait_calls(TYPING, typed + 2)  # still typing: the model still writes
    assert fake_discord.log.index(TYPING) < fake_discord.log.index(SENDING)
    resume.set()
    await fake_discord.wait_bot_messages(GENERAL, 2)
    await app.agent.wait_idle()
    assert said(fake_discord) == ["Para one is here.", "Para two."]
    assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("typing ")]


async def test_m_continue_is_removed_and_continues_the_answer(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    provider = FakeProvider(["and they lived happily."])
    await start_bot(provider)
    alice = fake_discord.user("Alice")
    await fake_discord.post(GENERAL, alice, "tell me a story")
    await fake_discord.post(GENERAL, fake_discord.bot, "Once upon a time")
    command = await ask(fake_discord, GENERAL, alice, "m continue")
    await fake_discord.wait_bot_messages(GENERAL, 2)
    assert command not in fake_discord.channels[GENERAL]
    seen = [(m.role, m.plain_text) for m in provider.requests[0].messages]
    assert seen == [("user", "Alice: tell me a story"), ("assistant", "Once upon a time")]


async def test_m_continue_answers_when_its_removal_is_refused_and_says_so_once(
    fake_discord: DiscordServer, start_bot: Start, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    await start_bot(FakeProvider(["more", "and more"]))
    alice = fake_discord.user("Alice")
    dm = fake_discord.dm_channel(alice)  # nobody may delete someone else's DM
    await fake_discord.post(dm, alice, "tell me a story")
    for count in (1, 2):
        await fake_discord.post(dm, alice, "m continue")
        await fake_discord.wait_bot_messages(dm, count)
    assert said(fake_discord, dm) == ["more", "and more"]
    refusal = "Discord refused to delete a message in direct messages: not possible in DMs"
    told = [r for r in caplog.records if "refused to delete a message" in r.getMessage()]
    assert len(told) == 1
    assert refusal.removesuffix("DMs") in told[0].getMessage()


async def test_an_unpinned_config_or_one_for_another_bot_changes_nothing(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    provider = FakeProvider()
    await start_bot(provider, system_prompt="base")
    alice = fake_discord.user("Alice")
    await fake_discord.post(GENERAL, alice, ".config\n---\nsystem_prompt: never pinned")
    other = await fake_discord.post(GENERAL, alice, ".config Echo\n---\nsystem_prompt: echo's")
    await fake_discord.pin(other)
    await ask(fake_discord, GENERAL, alice, "hello")
    await fake_discord.wait_bot_messages(GENERAL, 1)
    assert provider.requests[0].system == "base"
    assert "reactions" not in other  # not flagged either: it is simply not for this bot


async def test_prefill_reaches_the_model_as_this_exact_request(
    fake_discord: DiscordServer, start_bot: Start, llm_server: LLMServer
) -> None:
    llm_server.queue(Scripted(text=" Morning, Caz."))
    provider, providers = real_provider(llm_server, "anthropic")
    bob, carol = fake_discord.user("Bob"), fake_discord.user("Carol")
    await fake_discord.post(GENERAL, bob, "morning all")
    await start_bot(
        provider, providers=providers, mode="prefill", prompt_caching=False, builtin_tools=False
    )
    await ask(fake_discord, GENERAL, carol, "good morning")
    (reply,) = await fake_discord.wait_bot_messages(GENERAL, 1)
    assert reply["content"] == "Morning, Caz."
    (request,) = llm_server.requests
    assert (request.method, request.path) == ("POST", "/v1/messages")
    assert request.body == {
        "model": "m",
        "max_tokens": 1024,
        "system": "The system is in CLI simulation mode.",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "<cmd>cat untitled.txt</cmd>"}]},
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "text",
                        "text": "Bob: morning all\n\nCaz: @Salon good morning\n\nSalon:",
                    }
                ],
            },
        ],
        "stop_sequences": ["\nCaz:", "\nBob:", "\ncaz:", "\nbob:"],  # the most recent speaker first
        "stream": True,
    }


async def test_a_tool_call_lands_in_the_jsonl_log_and_the_webhook_shows_it(
    fake_discord: DiscordServer, start_bot: Start, tmp_path: Path
) -> None:
    call = ToolCall("c1", "get_current_time", {"timezone": "UTC"})
    await start_bot(FakeProvider([FakeReply(calls=(call,)), "It is late."]))
    await ask(fake_discord, GENERAL, fake_discord.user("Alice"), "time?")
    await fake_discord.wait_bot_messages(GENERAL, 1)
    (log,) = (tmp_path / "data-salon" / "tools").rglob("*.jsonl")
    (record,) = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert log.parent.name == "discord_10"
    assert record["channel"] == "discord:10"
    assert record["call"] == {"id": "c1", "name": "get_current_time", "arguments": call.arguments}
    assert not record["result"]["is_error"]
    (shown_use,) = [m for m in fake_discord.channels[GENERAL] if m.get("webhook_id")]
    assert shown_use["author"]["username"] == "Salon"
    assert shown_use["content"].startswith(".Salon>[get_current_time]: timezone: UTC\n")
    assert record["result"]["content"] in shown_use["content"]


async def test_a_rate_limited_send_waits_and_posts_once(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    app, _ = await start_bot(FakeProvider(["exactly once"]))
    fake_discord.rate_limit("POST", "/channels/10/messages", retry_after=0.2)
    await ask(fake_discord, GENERAL, fake_discord.user("Alice"), "hi")
    await fake_discord.wait_bot_messages(GENERAL, 1)
    await app.agent.wait_idle()
    assert said(fake_discord) == ["exactly once"]
    assert fake_discord.calls[SENDING] == 2  # the 429, then the send discord.py waited for


async def test_a_429_without_via_is_waited_out_and_posted_once(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    """discord.py takes a 429 without ``Via`` for a Cloudflare ban and does not wait;
    Salon waits Retry-After (whole seconds) and sends again."""
    app, _ = await start_bot(FakeProvider(["exactly once"]))
    fake_discord.rate_limit("POST", "/channels/10/messages", retry_after=0.5, via=False)
    await ask(fake_discord, GENERAL, fake_discord.user("Alice"), "hi")
    await fake_discord.wait_bot_messages(GENERAL, 1)
    await app.agent.wait_idle()
    assert said(fake_discord) == ["exactly once"]  # no error note, no second copy
    sends = [
        t for key, t in zip(fake_discord.log, fake_discord.log_times, strict=True) if key == SENDING
    ]
    assert len(sends) == 2
    assert sends[1] - sends[0] >= 1.0  # Retry-After: 1


@pytest.mark.parametrize("via", [True, False])
async def test_a_429_asking_too_long_a_wait_is_one_clear_error(
    fake_discord: DiscordServer, start_bot: Start, via: bool
) -> None:
    app, _ = await start_bot(FakeProvider(["never shown"]))
    fake_discord.rate_limit("POST", "/channels/10/messages", retry_after=3600, via=via)
    await ask(fake_discord, GENERAL, fake_discord.user("Alice"), "hi")
    await fake_discord.wait_bot_messages(GENERAL, 1)
    await app.agent.wait_idle()
    (note,) = said(fake_discord)
    assert "could not post in #general: rate limited for 3600s" in note, note
    assert fake_discord.calls[SENDING] == 2  # the 429, then the note


async def test_a_100_kb_answer_arrives_whole_in_order_within_the_limit(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    paragraphs = [f"Part {i}: " + " ".join(f"w{i}.{j}" for j in range(700)) for i in range(20)]
    answer = "\n\n".join(paragraphs)
    assert len(answer) > 100_000
    app, _ = await start_bot(FakeProvider([answer]))
    await ask(fake_discord, GENERAL, fake_discord.user("Alice"), "tell me everything")

    def complete() -> bool:
        return any("w19.699" in text for text in said(fake_discord))

    async with asyncio.timeout(60), fake_discord.sent:
        await fake_discord.sent.wait_for(complete)
    await app.agent.wait_idle()
    sent = said(fake_discord)
    assert len(sent) > 20  # every paragraph is over the limit: each was cut
    assert all(len(text) <= 1800 for text in sent)
    assert " ".join(sent).split() == answer.split()  # every word, once, in order


async def test_an_answer_streamed_in_pieces_keeps_every_space(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    answer = " ".join(f"w{i}" for i in range(600))  # one paragraph, over the limit
    cut = answer.index(" ", 2500) + 1  # the first piece ends with a space
    app, _ = await start_bot(FakeProvider([FakeReply((answer[:cut], answer[cut:]))]))
    await ask(fake_discord, GENERAL, fake_discord.user("Alice"), "go on")
    await fake_discord.wait_bot_messages(GENERAL, 2)
    await app.agent.wait_idle()
    assert " ".join(said(fake_discord)).split() == answer.split()


async def test_a_100_kb_text_file_is_cut_to_the_configured_size(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    lines = [f"line {i:05}: " + "x" * 87 for i in range(1000)]  # 100 bytes a line
    data = "\n".join(lines).encode()
    provider = FakeProvider()
    await start_bot(provider, discord={"max_text_attachment_kb": 8})
    alice = fake_discord.user("Alice")
    files = [("notes.txt", "text/plain", data)]
    await fake_discord.post(GENERAL, alice, "my notes", files=files)
    await ask(fake_discord, GENERAL, alice, "read them")
    await fake_discord.wait_bot_messages(GENERAL, 1)
    text = shown(provider)
    kept = data[: 8 * 1024].decode()
    assert f"Alice: my notes\n[file notes.txt]\n{kept}\n[cut: the first 8 kB of 98 kB]" in text
    assert "line 00082" not in text


async def test_a_client_ended_by_discord_is_logged_and_replaced(
    fake_discord: DiscordServer, start_bot: Start, caplog: pytest.LogCaptureFixture
) -> None:
    _app, platform = await start_bot(FakeProvider(["first", "second"]))
    alice = fake_discord.user("Alice")
    await ask(fake_discord, GENERAL, alice, "hello")
    await fake_discord.wait_bot_messages(GENERAL, 1)
    fake_discord.identified.clear()
    await fake_discord.drop_connections(code=4011)  # "sharding required": not resumable
    await asyncio.wait_for(fake_discord.identified.wait(), 15)  # a new client, afresh
    await asyncio.wait_for(platform.ready.wait(), 15)
    await ask(fake_discord, GENERAL, alice, "still there?")
    await fake_discord.wait_bot_messages(GENERAL, 2)
    assert platform.connection.restarts == 1
    assert any("Discord connection failed" in r.getMessage() for r in caplog.records)


async def test_an_answer_replies_to_its_trigger_or_is_plain_once_the_trigger_is_gone(
    fake_discord: DiscordServer, start_bot: Start, llm_server: LLMServer
) -> None:
    """``reply_to_trigger``: the seed's ``message.reply``. A trigger deleted while the
    model writes leaves a plain message, not a refused one (Discord's 400 "Unknown
    message" is for a reference that must exist)."""
    resume = asyncio.Event()
    llm_server.queue(
        "Hello Alice.", Scripted(chunks=["Still here."], pause_before_chunk=0, resume=resume)
    )
    provider, providers = real_provider(llm_server, "openai")
    await start_bot(provider, providers=providers, reply_to_trigger=True)
    alice = fake_discord.user("Alice")
    first = await ask(fake_discord, GENERAL, alice, "hi")
    (answer,) = await fake_discord.wait_bot_messages(GENERAL, 1)
    assert answer["content"] == "Hello Alice."
    assert answer["message_reference"]["message_id"] == first["id"]
    assert answer["referenced_message"]["id"] == first["id"]
    typed = fake_discord.calls[TYPING]
    second = await ask(fake_discord, GENERAL, alice, "still there?")
    await fake_discord.wait_calls(TYPING, typed + 1)  # the model is writing
    await fake_discord.delete(second)
    resume.set()
    _, plain = await fake_discord.wait_bot_messages(GENERAL, 2)
    assert plain["content"] == "Still here."
    assert "message_reference" not in plain
