"""IRC against a real miniircd on 127.0.0.1, with a raw IRC client as the human."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from salon.app import BotApp
from salon.config import Secrets
from salon.llm import FakeProvider
from salon.model import ToolCall
from salon.platforms.irc import IrcPlatform, TokenBucket, irc_lines
from tests.conftest import ServeApp, bot_config
from tests.fakes.irc import Human, IrcServer

BOT = "salonbot"


@pytest.fixture
async def ircd() -> AsyncIterator[IrcServer]:
    server = IrcServer()
    await server.start()
    yield server
    await server.stop()


Start = Callable[..., Any]


@pytest.fixture
def start_bot(ircd: IrcServer, tmp_path: Path, serve_app: ServeApp) -> Start:
    async def start(
        provider: FakeProvider, extra_servers: Any = (), **irc: Any
    ) -> tuple[BotApp, IrcPlatform]:
        settings = {
            "server": "127.0.0.1",
            "port": ircd.port,
            "tls": False,
            "nick": BOT,
            "fallback_nicks": [f"{BOT}_"],
            "channels": ["#salon"],
            "commands": [".terrarium", "!ask"],
            "flood_burst": 50,
            "reconnect_backoff_initial": 0.05,
            **irc,
        }
        config = bot_config(data_dir=str(tmp_path / "data"), platforms={"irc": settings})
        app = BotApp(
            key="salon",
            config=config,
            root=tmp_path,
            secrets=Secrets({}),
            provider=provider,
            extra_servers=extra_servers,
        )
        (platform,) = app.unattended_platforms()
        assert isinstance(platform, IrcPlatform)
        await serve_app(app, [platform])
        await asyncio.wait_for(platform.wait_connected(), 15)
        return app, platform

    return start


_PEOPLE: list[Human] = []


@pytest.fixture(autouse=True)
async def _close_people() -> AsyncIterator[None]:
    """Every human's connection is closed after the test, passed or failed."""
    yield
    while _PEOPLE:
        await _PEOPLE.pop().close()


async def human(ircd: IrcServer, nick: str = "alice", channel: str | None = "#salon") -> Human:
    person = Human(nick, ircd.port)
    _PEOPLE.append(person)
    await person.connect()
    if channel:
        await person.join(channel)
    return person


def test_lines_fit_in_bytes_and_never_split_a_character() -> None:
    text = "é" * 500 + "\n\nsecond paragraph\nthird line"
    lines = irc_lines(text, 400)
    assert all(len(line.encode("utf-8")) <= 400 for line in lines)
    assert "".join(lines[:-2]) == "é" * 500
    assert lines[-2:] == ["second paragraph", "third line"]
    words = irc_lines("word " * 200, 100)
    assert all(line.endswith("word") for line in words)


def test_token_bucket_allows_a_burst_then_paces() -> None:
    bucket = TokenBucket(burst=3, rate=2.0)
    assert [bucket.delay() == 0 for _ in range(3)] == [True] * 3
    assert 0.4 < bucket.delay() <= 0.5


async def test_addressed_bot_answers_in_lines(ircd: IrcServer, start_bot: Start) -> None:
    long = " ".join(["lorem"] * 150)  # ~900 bytes: needs three lines
    provider = FakeProvider([f"First paragraph.\n\nSecond one.\n\n{long}"])
    await start_bot(provider)
    alice = await human(ircd)
    await alice.say("#salon", "just chatting")
    await alice.say("#salon", f"{BOT}: tell me something")
    said = await alice.privmsgs_from(BOT, 5)
    assert said[:2] == ["First paragraph.", "Second one."]
    assert all(len(s.encode()) <= 400 for s in said)
    assert " ".join(said[2:]) == long
    assert len(provider.requests) == 1
    seen = provider.requests[0].messages[-1].plain_text
    assert seen == "alice: just chatting\nalice: salonbot: tell me something"
    await alice.close()


async def test_commands_and_private_messages(ircd: IrcServer, start_bot: Start) -> None:
    provider = FakeProvider(["one", "two", "three"])
    await start_bot(provider)
    alice = await human(ircd)
    await alice.say("#salon", ".terrarium what's new?")
    await alice.privmsgs_from(BOT, 1)
    await alice.say("#salon", "!ask anything")
    await alice.privmsgs_from(BOT, 2)
    mark = len(alice.lines)
    await alice.say(BOT, "psst, in private")
    line = await alice.expect(rf"^:{BOT}!\S+ PRIVMSG alice :three$", after=mark)
    assert line
    assert provider.requests[-1].messages[-1].plain_text == "alice: psst, in private"
    await alice.close()


async def test_nick_collision_takes_the_fallback(ircd: IrcServer, start_bot: Start) -> None:
    squatter = await human(ircd, BOT, channel="#salon")
    provider = FakeProvider(["I go by another name"])
    _, platform = await start_bot(provider)
    assert platform.self_participant.name == f"{BOT}_"
    await squatter.say("#salon", f"{BOT}_: who are you?")
    assert await squatter.privmsgs_from(f"{BOT}_", 1) == ["I go by another name"]
    await squatter.close()


async def test_server_restart_reconnects_and_rejoins(ircd: IrcServer, start_bot: Start) -> None:
    provider = FakeProvider(["before", "after"])
    _, platform = await start_bot(provider)
    alice = await human(ircd)
    await alice.say("#salon", f"{BOT}: ping")
    await alice.privmsgs_from(BOT, 1)
    await alice.close()
    await ircd.restart()
    async with asyncio.timeout(20):
        while platform.connections < 2:
            await platform.wait_reconnected()
    alice = await human(ircd)
    await alice.say("#salon", f"{BOT}: still there?")
    assert await alice.privmsgs_from(BOT, 1) == ["after"]
    await alice.close()


async def test_log_search_and_users_after_restart(ircd: IrcServer, start_bot: Start) -> None:
    app, platform = await start_bot(FakeProvider(["noted"]))
    alice = await human(ircd)
    bob = await human(ircd, "bob")
    await asyncio.wait_for(platform.wait_seen("join", "bob"), 10)
    await alice.say("#salon", "the deploy broke the staging database")
    await alice.say("#salon", "\x01ACTION sighs\x01")
    await alice.say("#salon", f"{BOT}: remember that")
    await alice.privmsgs_from(BOT, 1)
    users = await app.hub.call(
        ToolCall("u", "get_current_users", {}), hidden={"channel": "irc:#salon"}
    )
    assert users.content == f"alice, bob, {BOT}"
    await bob.send("PART #salon :later")
    await asyncio.wait_for(platform.wait_seen("part", "bob"), 10)
    users = await app.hub.call(
        ToolCall("u", "get_current_users", {}), hidden={"channel": "irc:#salon"}
    )
    assert users.content == f"alice, {BOT}"
    await alice.close()
    await bob.close()
    await app.agent.wait_idle()  # the answer is sent and logged...
    await app.store.flush()  # ...and committed before the second run reads

    async with BotApp(
        key="salon", config=app.config, root=app.root, secrets=Secrets({}), provider=FakeProvider()
    ) as reborn:
        found = await reborn.hub.call(
            ToolCall("s", "search_chat_logs", {"query": "staging database"}),
            hidden={"channel": "irc:#salon"},
        )
        stats = await reborn.hub.call(
            ToolCall("t", "get_channel_stats", {}), hidden={"channel": "irc:#salon"}
        )
        recent = await reborn.hub.call(
            ToolCall("r", "get_recent_messages", {"limit": 10}), hidden={"channel": "irc:#salon"}
        )
    assert "<alice> the deploy broke the staging database" in found.content
    assert '"participants": 2' in stats.content
    assert "* alice sighs" in recent.content


async def test_approval_is_asked_in_the_channel(ircd: IrcServer, start_bot: Start) -> None:
    from salon.llm import FakeReply
    from tests.platforms.test_approvals import danger_server
    from tests.tools.conftest import in_process

    ran: list[str] = []
    provider = FakeProvider(
        [FakeReply(calls=(ToolCall("c1", "wipe", {"target": "logs"}),)), "Wiped."]
    )
    await start_bot(provider, extra_servers=[in_process(danger_server(ran), "danger")])
    alice = await human(ircd)
    bob = await human(ircd, "bob")
    await alice.say("#salon", f"{BOT}: wipe the logs")
    asked = await alice.privmsgs_from(BOT, 1)
    assert asked == ["alice: may I run wipe (target: logs)? Answer yes or no."], "\n".join(
        alice.lines[-12:]
    )
    await bob.say("#salon", "yes")  # not bob's question
    await alice.say("#salon", "yes")
    said = await alice.privmsgs_from(BOT, 2)
    assert said[1] == "Wiped."
    assert ran == ["logs"]
    await alice.close()
    await bob.close()


async def test_one_bot_on_two_platforms_keeps_separate_contexts(
    ircd: IrcServer, tmp_path: Path
) -> None:
    from salon.model import Participant
    from salon.platforms.memory import MemoryPlatform

    provider = FakeProvider(["hello irc", "hello memory"])
    irc = {
        "server": "127.0.0.1",
        "port": ircd.port,
        "tls": False,
        "nick": BOT,
        "channels": ["#salon"],
    }
    config = bot_config(data_dir=str(tmp_path / "data"), platforms={"irc": irc})
    memory = MemoryPlatform(name="memory", bot_name="Salon")
    stop = asyncio.Event()
    async with BotApp(
        key="salon", config=config, root=tmp_path, secrets=Secrets({}), provider=provider
    ) as app:
        (irc_platform,) = app.unattended_platforms()
        serving = asyncio.create_task(app.serve(stop, [irc_platform, memory]))
        await asyncio.wait_for(memory.started.wait(), 15)
        alice = await human(ircd)
        await alice.say("#salon", f"{BOT}: secret irc words")
        assert await alice.privmsgs_from(BOT, 1) == ["hello irc"]
        dm = memory.channel("dm", is_direct=True)
        await memory.post(dm, Participant("m", "Mia"), "hi from memory")
        sent = await memory.wait_sent(1)
        await alice.close()
        stop.set()
        await asyncio.wait_for(serving, 15)
    assert sent[0].text == "hello memory"
    irc_view, memory_view = (r.messages[-1].plain_text for r in provider.requests)
    assert "secret irc words" in irc_view
    assert memory_view == "Mia: hi from memory"
