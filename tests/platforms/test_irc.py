"""IRC against a real miniircd on 127.0.0.1, with a raw IRC client as the human."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fakes.irc import Human, IrcServer, StubServer
from salon.app import BotApp
from salon.config import IrcConfig, Secrets
from salon.errors import PlatformError, StoreError
from salon.llm import FakeProvider, FakeReply
from salon.model import (
    Attachment,
    ChannelRef,
    Event,
    Message,
    MessageEvent,
    Participant,
    ToolCall,
)
from salon.platforms.base import Capability, PlatformBase
from salon.platforms.irc import IrcPlatform, TokenBucket, dot_lines, irc_lines
from salon.platforms.irc.client import Client
from salon.tools.caller import Caller
from tests.conftest import ServeApp, bot_config
from tests.platforms.test_approvals import danger_server
from tests.tools.conftest import in_process

BOT = "salonbot"
SALON = ChannelRef("irc", "#salon", name="#salon")


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


async def human(
    ircd: IrcServer, nick: str = "alice", channel: str | None = "#salon", *, user: str | None = None
) -> Human:
    person = Human(nick, ircd.port, user=user)
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
    assert irc_lines("a\0b\r\nc", 100) == ["ab", "c"]  # IRC forbids NUL and CR in a line


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
        ToolCall("u", "get_current_users", {}),
        caller=Caller.from_arguments({"channel": "irc:#salon"}),
    )
    assert users.content == f"alice, bob, {BOT}"
    await bob.send("PART #salon :later")
    await asyncio.wait_for(platform.wait_seen("part", "bob"), 10)
    users = await app.hub.call(
        ToolCall("u", "get_current_users", {}),
        caller=Caller.from_arguments({"channel": "irc:#salon"}),
    )
    assert users.content == f"alice, {BOT}"
    await alice.close()
    await bob.close()
    await app.agent.wait_idle()  # the answer is sent and logged...
    await app.store.chatlog.flush()  # ...and committed before the second run reads

    async with BotApp(
        key="salon", config=app.config, root=app.root, secrets=Secrets({}), provider=FakeProvider()
    ) as reborn:
        found = await reborn.hub.call(
            ToolCall("s", "search_chat_logs", {"query": "staging database"}),
            caller=Caller.from_arguments({"channel": "irc:#salon"}),
        )
        stats = await reborn.hub.call(
            ToolCall("t", "get_channel_stats", {}),
            caller=Caller.from_arguments({"channel": "irc:#salon"}),
        )
        recent = await reborn.hub.call(
            ToolCall("r", "get_recent_messages", {"limit": 10}),
            caller=Caller.from_arguments({"channel": "irc:#salon"}),
        )
    assert "<alice> the deploy broke the staging database" in found.content
    assert '"participants": 2' in stats.content
    assert "* alice sighs" in recent.content


async def test_approval_is_asked_in_the_channel(ircd: IrcServer, start_bot: Start) -> None:
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


async def test_a_nick_change_does_not_make_the_bot_deaf(
    ircd: IrcServer, start_bot: Start, caplog: pytest.LogCaptureFixture
) -> None:
    app, platform = await start_bot(FakeProvider(["still listening"]))
    alice = await human(ircd)
    bob = await human(ircd, "bob")
    await asyncio.wait_for(platform.wait_seen("join", "bob"), 10)
    await bob.send("NICK robert")
    await alice.say("#salon", f"{BOT}: are you there?")
    assert await alice.privmsgs_from(BOT, 1) == ["still listening"]
    await app.agent.wait_idle()
    history = await app.store.chat_history("salon", SALON, limit=10)
    assert [(m.author.name, m.text) for m in history] == [
        ("alice", f"{BOT}: are you there?"),
        (BOT, "still listening"),
    ]
    assert not [r for r in caplog.records if "stalled" in r.getMessage()]


async def test_an_answer_of_several_lines_is_stored_once(ircd: IrcServer, start_bot: Start) -> None:
    answer = "Listen:\n" + " ".join(["lorem"] * 150)  # one message, four IRC lines
    provider = FakeProvider([answer, "again"])
    app, _ = await start_bot(provider)
    alice = await human(ircd)
    await alice.say("#salon", f"{BOT}: tell me something")
    assert len(await alice.privmsgs_from(BOT, 4)) == 4
    await alice.say("#salon", f"{BOT}: and?")
    assert (await alice.privmsgs_from(BOT, 5))[4] == "again"
    await app.agent.wait_idle()
    history = await app.store.chat_history("salon", SALON, limit=50)
    assert [m.text for m in history if m.author.name == BOT] == [answer, "again"]
    stats = await app.store.chatlog.channel_stats("salon", "irc:#salon")
    assert stats["top_posters"] == {BOT: 2, "alice": 2}
    seen = "\n".join(m.plain_text for m in provider.requests[1].messages)
    assert seen.count("Listen:") == 1


class RecordingLog:
    """A chat log in memory that records how each line was logged; it can refuse or act
    on the bot's durable lines."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, bool]] = []  # (message id, kind, durable)
        self.forgotten: list[str] = []
        self.refuse = False
        self.on_durable: Callable[[], Awaitable[None]] | None = None

    async def log_message(
        self, bot: str, message: Message, kind: str = "message", *, durable: bool = False
    ) -> None:
        if durable and self.refuse:
            raise StoreError("disk full")
        self.rows.append((message.id, kind, durable))
        if durable and self.on_durable is not None:
            await self.on_durable()

    async def forget_message(self, bot: str, message_id: str) -> None:
        self.forgotten.append(message_id)
        self.rows = [r for r in self.rows if r[0] != message_id]

    async def chat_history(
        self, bot: str, channel: ChannelRef, *, limit: int, before_id: str | None = None
    ) -> Sequence[Message]:
        return []


class RecordingSink:
    """Where the adapter hands its events, kept for assertions; ``hold`` keeps the next
    event waiting (a full agent queue) until ``release``."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._new = asyncio.Condition()
        self._holding = False
        self._released = asyncio.Event()

    def hold(self) -> None:
        self._holding = True
        self._released.clear()

    def release(self) -> None:
        self._released.set()

    async def __call__(self, event: Event) -> None:
        if self._holding:
            self._holding = False
            await self._released.wait()
        async with self._new:
            self.events.append(event)
            self._new.notify_all()

    async def wait(self, count: int) -> list[Event]:
        async with asyncio.timeout(10), self._new:
            await self._new.wait_for(lambda: len(self.events) >= count)
        return self.events


@dataclass
class Bare:
    platform: IrcPlatform
    log: RecordingLog
    sink: RecordingSink


@pytest.fixture
async def bare(ircd: IrcServer) -> AsyncIterator[Bare]:
    """The adapter alone (no agent) joined to #salon, with a recording chat log and sink."""
    log = RecordingLog()
    config = IrcConfig(
        server="127.0.0.1",
        port=ircd.port,
        tls=False,
        nick=BOT,
        channels=["#salon"],
        flood_burst=50,
        reconnect_backoff_initial=0.05,
    )
    platform = IrcPlatform(
        bot="salon", bot_name="Salon", config=config, secrets=Secrets({}), chat_log=log
    )
    sink = RecordingSink()
    await platform.start(sink)
    await asyncio.wait_for(platform.wait_connected(), 15)
    yield Bare(platform, log, sink)
    await platform.stop()


async def test_a_bot_line_is_stored_before_it_is_shown(ircd: IrcServer, bare: Bare) -> None:
    platform, log = bare.platform, bare.log
    alice = await human(ircd)
    await asyncio.wait_for(platform.wait_seen("join", "alice"), 10)
    before = len(log.rows)
    log.refuse = True
    with pytest.raises(StoreError):
        await platform.send(SALON, "never shown")
    log.refuse = False
    sent = await platform.send(SALON, "shown\nin two lines")
    assert await alice.privmsgs_from(BOT, 2) == ["shown", "in two lines"]
    assert log.rows[before:] == [(sent.id, "message", True)]


async def test_a_line_that_cannot_be_sent_is_forgotten(ircd: IrcServer, bare: Bare) -> None:
    platform, log = bare.platform, bare.log

    async def server_goes_away() -> None:
        await ircd.stop()
        await asyncio.wait_for(platform.wait_disconnected(), 10)

    log.on_durable = server_goes_away
    with pytest.raises(PlatformError):
        await platform.send(SALON, "lost on the way")
    assert not [row for row in log.rows if row[2]]
    assert len(log.forgotten) == 1


async def test_a_message_cut_after_a_line_was_shown_stays_in_the_store(
    ircd: IrcServer, bare: Bare
) -> None:
    platform, log = bare.platform, bare.log
    platform._sender.bucket = TokenBucket(1, 0.5)  # the second line waits its turn: 2 s
    watcher = await human(ircd, "watcher")
    long = " ".join(["word"] * 120)  # two IRC lines
    sending = asyncio.create_task(platform.send(SALON, long))
    await watcher.privmsgs_from(BOT, 1)  # the first line is on screen
    await ircd.stop()
    with pytest.raises(PlatformError):
        await asyncio.wait_for(sending, 15)
    assert [row for row in log.rows if row[2]]  # someone saw part of it: it stays
    assert log.forgotten == []
    await watcher.close()


async def test_approval_is_bound_to_the_requester_not_the_nick(
    ircd: IrcServer, start_bot: Start
) -> None:
    ran: list[str] = []
    provider = FakeProvider(
        [FakeReply(calls=(ToolCall("c1", "wipe", {"target": "logs"}),)), "Wiped."]
    )
    app, platform = await start_bot(
        provider, extra_servers=[in_process(danger_server(ran), "danger")]
    )
    alice = await human(ircd, user="alice")
    await alice.say("#salon", f"{BOT}: wipe the logs")
    assert await alice.privmsgs_from(BOT, 1) == [
        "alice: may I run wipe (target: logs)? Answer yes or no."
    ]
    await alice.close()
    await asyncio.wait_for(platform.wait_seen("quit", "alice"), 10)
    impostor = await human(ircd, "alice", user="mallory")
    await impostor.say("#salon", "yes")
    await impostor.send("NICK mallory")  # handled after the "yes", in order
    await asyncio.wait_for(platform.wait_seen("nick", "alice"), 10)
    history = await app.store.chat_history("salon", SALON, limit=10)
    assert [(m.author.name, m.text) for m in history][-1] == ("alice", "yes")  # a mere message
    assert ran == []
    alice = await human(ircd, user="alice")
    await alice.say("#salon", "yes")
    assert await alice.privmsgs_from(BOT, 1) == ["Wiped."]
    assert ran == ["logs"]


async def test_participants_carry_their_identity(ircd: IrcServer, bare: Bare) -> None:
    alice = await human(ircd, user="ally")
    await alice.say("#salon", "hello")
    (event,) = await bare.sink.wait(1)
    assert isinstance(event, MessageEvent)
    assert event.message.author.identity.startswith("alice!ally@")


async def test_the_answer_to_an_approval_is_a_note(ircd: IrcServer, start_bot: Start) -> None:
    ran: list[str] = []
    provider = FakeProvider(
        [FakeReply(calls=(ToolCall("c1", "wipe", {"target": "logs"}),)), "Wiped.", "Sure."]
    )
    app, _ = await start_bot(provider, extra_servers=[in_process(danger_server(ran), "danger")])
    alice = await human(ircd)
    await alice.say("#salon", f"{BOT}: wipe the logs")
    await alice.privmsgs_from(BOT, 1)
    await alice.say("#salon", "yes")
    await alice.privmsgs_from(BOT, 2)
    await alice.say("#salon", f"{BOT}: thanks")
    assert (await alice.privmsgs_from(BOT, 3))[2] == "Sure."
    seen = provider.requests[-1].messages[-1].plain_text
    assert "may I run" not in seen
    assert "alice: yes" not in seen
    history = await app.store.chat_history("salon", SALON, limit=10)
    assert "yes" not in [m.text for m in history]


def test_tool_log_lines_all_start_with_a_dot() -> None:
    text = ".Salon>[search]: " + "word " * 60 + "\n.Salon<[search]: " + "result " * 200
    lines = dot_lines(text, 100)
    assert len(lines) == 4
    assert all(line.startswith(".") for line in lines)
    assert all(len(line.encode()) <= 100 for line in lines)
    assert lines[-1].endswith("…")
    assert dot_lines(".a>[t]: x\n.a<[t]: y", 100) == [".a>[t]: x", ".a<[t]: y"]


async def test_a_direct_message_is_privmsgs_to_the_nick_and_never_logged(
    ircd: IrcServer, bare: Bare
) -> None:
    """What only one person may see (the link that connects their account): PRIVMSGs to
    their nick, a line each, none in the channel or the chat log."""
    platform, log = bare.platform, bare.log
    alice = await human(ircd)
    bob = await human(ircd, "bob")
    await asyncio.wait_for(platform.wait_seen("join", "bob"), 10)
    before = len(log.rows)
    await platform.send_direct(Participant("irc:alice", "alice"), "connect here:\nhttp://x/a")
    assert await alice.privmsgs_from(BOT, 2) == ["connect here:", "http://x/a"]
    assert any(ln.endswith(" PRIVMSG alice :http://x/a") for ln in alice.lines)
    await platform.send(SALON, "after")
    await bob.privmsgs_from(BOT, 1)
    assert [ln for ln in bob.lines if "http://x/a" in ln] == []
    assert len(log.rows) == before + 1  # "after" only


async def test_tool_log_notices_keep_the_dot(ircd: IrcServer, bare: Bare) -> None:
    platform, log = bare.platform, bare.log
    alice = await human(ircd)
    await asyncio.wait_for(platform.wait_seen("join", "alice"), 10)
    before = len(log.rows)
    await platform.send_tool_log(SALON, ".Salon<[search]: " + "result " * 300)
    pattern = rf"^:{BOT}!\S+ NOTICE #salon :(.*)$"
    await alice.expect(pattern)
    async with asyncio.timeout(10):
        while len(notices := [ln for ln in alice.lines if re.match(pattern, ln)]) < 4:
            await alice.expect(pattern, after=len(alice.lines))
    texts = [re.sub(pattern, r"\1", ln) for ln in notices]
    assert all(t.startswith(".") for t in texts)
    assert texts[-1].endswith("…")
    assert log.rows[before:] == []  # a dot message is shown, never logged: no bot reads it


async def test_a_line_of_broken_utf8_reaches_the_bot_readable(
    ircd: IrcServer, start_bot: Start
) -> None:
    provider = FakeProvider(["got it", "and that"])
    await start_bot(provider)
    alice = await human(ircd)
    await alice.send_bytes(b"PRIVMSG #salon :" + BOT.encode() + b": caf\xe9 \xed\xa0\x80 ok")
    assert await alice.privmsgs_from(BOT, 1) == ["got it"]
    await alice.say("#salon", f"{BOT}: still fine?")
    assert (await alice.privmsgs_from(BOT, 2))[1] == "and that"
    for request in provider.requests:
        for message in request.messages:
            message.plain_text.encode("utf-8")  # no lone surrogate anywhere
    first, _, second = (m.plain_text for m in provider.requests[1].messages[-3:])
    assert first.startswith(f"alice: {BOT}: caf")
    assert first.endswith(" ok")
    assert second == f"alice: {BOT}: still fine?"


def test_irc_offers_none_of_the_optional_abilities_but_direct_messages() -> None:
    assert IrcPlatform.capabilities == frozenset({Capability.DIRECT_MESSAGES})
    for name in ("delete_message", "react", "pinned", "reply_chain", "history_until", "typing"):
        assert getattr(IrcPlatform, name) is getattr(PlatformBase, name), name


StubStart = Callable[..., Awaitable[IrcPlatform]]


@pytest.fixture
async def stub_platform() -> AsyncIterator[StubStart]:
    """Start the adapter alone against a stub server; both stopped after the test."""
    running: list[tuple[StubServer, IrcPlatform, asyncio.Task[None]]] = []

    async def start(
        server: StubServer, sink: RecordingSink | None = None, **irc: Any
    ) -> IrcPlatform:
        await server.start()
        config = IrcConfig(
            server="127.0.0.1",
            port=server.port,
            tls=False,
            nick=BOT,
            reconnect_backoff_initial=0.05,
            **irc,
        )
        log = RecordingLog()
        platform = IrcPlatform(
            bot="salon", bot_name="Salon", config=config, secrets=Secrets({}), chat_log=log
        )
        # start() returns only once connected, which a stub may never allow
        starting = asyncio.create_task(platform.start(sink or RecordingSink()))
        running.append((server, platform, starting))
        return platform

    yield start
    for server, platform, starting in running:
        starting.cancel()
        await asyncio.gather(starting, return_exceptions=True)
        await platform.stop()
        await server.stop()


async def test_a_server_that_never_welcomes_is_left_and_tried_again(
    stub_platform: StubStart, caplog: pytest.LogCaptureFixture
) -> None:
    server = StubServer()
    await stub_platform(server, register_timeout=0.2)
    await asyncio.wait_for(server.wait_accepted(2), 10)
    assert any("no welcome" in r.getMessage() for r in caplog.records)


async def test_a_connection_reset_is_noticed_and_the_bot_comes_back(
    stub_platform: StubStart,
) -> None:
    server = StubServer("resetting")
    await stub_platform(server, channels=["#salon"])
    await asyncio.wait_for(server.wait_accepted(2), 10)


async def test_a_channel_that_cannot_be_joined_does_not_hold_the_bot(
    ircd: IrcServer, start_bot: Start, caplog: pytest.LogCaptureFixture
) -> None:
    keeper = await human(ircd, "keeper", channel="#locked")
    await keeper.send("MODE #locked +k secret")
    await keeper.expect(r" MODE #locked \+k")
    await start_bot(FakeProvider(["here"]), channels=["#salon", "#locked"], join_timeout=0.5)
    assert any("could not join #locked" in r.getMessage() for r in caplog.records)
    alice = await human(ircd)
    await alice.say("#salon", f"{BOT}: hello?")
    assert await alice.privmsgs_from(BOT, 1) == ["here"]


async def test_a_line_whose_handling_stalls_does_not_stop_the_next(
    ircd: IrcServer, bare: Bare, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Client, "stall_seconds", 0.2)
    alice = await human(ircd)
    bare.sink.hold()
    await alice.say("#salon", "one")
    await alice.say("#salon", "two")
    try:
        (event,) = await bare.sink.wait(1)
    finally:
        bare.sink.release()
    assert isinstance(event, MessageEvent)
    assert event.message.text == "two"
    assert any("handling PRIVMSG stalled" in r.getMessage() for r in caplog.records)
    await bare.sink.wait(2)


async def test_the_services_account_is_the_identity_where_the_server_tags_it(
    stub_platform: StubStart,
) -> None:
    server = StubServer("accounts")
    sink = RecordingSink()
    await stub_platform(server, sink, channels=["#salon"])
    await asyncio.wait_for(server.joined.wait(), 10)
    await server.relay("@account=Alice :alice!a@home.example PRIVMSG #salon :hi")
    await server.relay("@account=alice :alice!b@elsewhere.example PRIVMSG #salon :me again")
    await server.relay(":alice!a@home.example PRIVMSG #salon :logged out")
    events = await sink.wait(3)
    identities = [e.message.author.identity for e in events if isinstance(e, MessageEvent)]
    assert identities == ["account:alice", "account:alice", "alice!a@home.example"]


async def test_files_are_shown_as_links_or_paths_and_progress_as_one_line(
    ircd: IrcServer, bare: Bare
) -> None:
    platform = bare.platform
    alice = await human(ircd)
    await asyncio.wait_for(platform.wait_seen("join", "alice"), 10)
    files = [
        Attachment("a-south.png", "image/png", 9, url="https://cdn.example/s.png", label="south"),
        Attachment("a-west.png", "image/png", 9, path="/data/outputs/a-west.png", label="west"),
    ]
    await platform.send(SALON, "(generate_sprite: description: knight)", files=files, note=True)
    for text in ("⏳ generate_sprite: queued", "⏳ generate_sprite: step 2/9"):
        await platform.progress(SALON, "job-1", text)
    await platform.progress(SALON, "job-1", "✅ generate_sprite: done in 3 s", done=True)
    await platform.send(SALON, "after")
    assert await alice.privmsgs_from(BOT, 5) == [
        "(generate_sprite: description: knight)",
        "[south: https://cdn.example/s.png]",
        "[west: /data/outputs/a-west.png]",
        "⏳ generate_sprite: queued",  # edits do not exist on IRC: the first report only
        "after",
    ]


async def test_a_linked_channel_is_shown_only_to_who_is_in_it_now(
    ircd: IrcServer, tmp_path: Path, serve_app: ServeApp
) -> None:
    provider = FakeProvider(["one", "two"])
    settings = {"server": "127.0.0.1", "port": ircd.port, "tls": False, "nick": BOT}
    config = bot_config(
        data_dir=str(tmp_path / "data"),
        platforms={"irc": settings | {"channels": ["#salon", "#dev"], "flood_burst": 50}},
        links=[{"channel": "irc:#dev", "where": ["#salon"]}],
    )
    app = BotApp(key="salon", config=config, root=tmp_path, secrets=Secrets({}), provider=provider)
    (platform,) = app.unattended_platforms()
    assert isinstance(platform, IrcPlatform)
    await serve_app(app, [platform])
    await asyncio.wait_for(platform.wait_connected(), 15)
    alice = await human(ircd, "alice", "#salon")
    await alice.join("#dev")
    bob = await human(ircd, "bob", "#salon")
    await asyncio.wait_for(platform.wait_seen("join", "bob"), 10)
    await alice.say("#dev", "DEV-TALK the build is red")
    await bob.say("#salon", f"{BOT}: news?")
    await bob.privmsgs_from(BOT, 1)
    assert "DEV-TALK" not in provider.requests[-1].messages[-1].plain_text
    await alice.say("#salon", f"{BOT}: news?")
    await alice.privmsgs_from(BOT, 2)
    assert "DEV-TALK the build is red" in provider.requests[-1].messages[0].plain_text
