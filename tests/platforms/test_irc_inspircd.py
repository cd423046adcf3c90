"""IRC against Debian's InspIRCd 3 as networks run it: flood control with fakelag, channel
modes and bans, IRCv3. miniircd (tests/platforms/test_irc.py) stays the fast default."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from fakes.inspircd import SERVER_NAME, InspIRCd, require_inspircd, self_signed
from fakes.irc import Human
from salon.app import BotApp
from salon.config import IrcConfig, Secrets
from salon.errors import PlatformError
from salon.llm import FakeProvider
from salon.model import ChannelRef, MessageEvent
from salon.platforms.irc import IrcPlatform, TokenBucket
from tests.conftest import ServeApp, bot_config
from tests.platforms.test_irc import RecordingLog, RecordingSink

BOT = "salonbot"
SALON = ChannelRef("irc", "#salon", name="#salon")


@pytest.fixture
def nicklen() -> int:
    """NICKLEN of the server; a test overrides it with its own fixture."""
    return 30


@pytest.fixture
def services() -> bool:
    """Whether Atheme is linked to the server; a test overrides it with its own fixture."""
    return False


@pytest.fixture
async def inspircd(nicklen: int, services: bool) -> AsyncIterator[InspIRCd]:
    require_inspircd(services=services)
    server = InspIRCd(nicklen=nicklen, services=services)
    await server.start()
    yield server
    await server.stop()
    server.cleanup()


class People:
    """The test's people on the server (on its unthrottled port), closed after the test."""

    def __init__(self, server: InspIRCd) -> None:
        self.server = server
        self.all: list[Human] = []

    async def join(
        self, nick: str = "alice", channel: str | None = "#salon", *, caps: tuple[str, ...] = ()
    ) -> Human:
        person = Human(nick, self.server.people_port, caps=caps)
        self.all.append(person)
        await person.connect()
        if channel:
            await person.join(channel)
        return person

    async def register(self, account: str, password: str, *, certfp: str = "") -> None:
        """Register a services account (Atheme confirms at once), with the fingerprint of
        a TLS client certificate that logs into it where given."""
        person = await self.join(account, channel=None)
        await person.say("NickServ", f"REGISTER {password} {account}@example.com")
        # Atheme writes names in bold (\x02).
        await person.expect(rf"^:NickServ!\S+ NOTICE {account} :.*is now registered")
        if certfp:
            await person.say("NickServ", f"CERT ADD {certfp}")
            await person.expect(rf"^:NickServ!\S+ NOTICE {account} :Added fingerprint")
        await person.close()


@pytest.fixture
async def people(inspircd: InspIRCd) -> AsyncIterator[People]:
    crowd = People(inspircd)
    yield crowd
    for person in crowd.all:
        await person.close()


class LogWatch(logging.Handler):
    """Salon's log lines as they are written; ``wait`` for one holding some words."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []
        self._new = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())
        self._new.set()

    async def wait(self, words: str, *, within: float = 15.0) -> str:
        async with asyncio.timeout(within):
            while not (found := [ln for ln in self.lines if words in ln]):
                self._new.clear()
                await self._new.wait()
        return found[0]


@pytest.fixture
def salon_log() -> Iterator[LogWatch]:
    watch = LogWatch()
    logger = logging.getLogger("salon")
    level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(watch)
    yield watch
    logger.removeHandler(watch)
    logger.setLevel(level)


Start = Callable[..., Awaitable[tuple[BotApp, IrcPlatform]]]


@pytest.fixture
def start_bot(inspircd: InspIRCd, tmp_path: Path, serve_app: ServeApp) -> Start:
    """Start a bot on the server's throttled port; ``irc`` overrides its IRC settings."""

    async def start(
        provider: FakeProvider, *, secrets: dict[str, str] | None = None, **irc: Any
    ) -> tuple[BotApp, IrcPlatform]:
        settings = {
            "server": "127.0.0.1",
            "port": inspircd.port,
            "tls": False,
            "nick": BOT,
            "fallback_nicks": [f"{BOT}_"],
            "channels": ["#salon"],
            "reconnect_backoff_initial": 0.05,
            **irc,
        }
        config = bot_config(data_dir=str(tmp_path / "data"), platforms={"irc": settings})
        app = BotApp(
            key="salon",
            config=config,
            root=tmp_path,
            secrets=Secrets(secrets or {}),
            provider=provider,
        )
        (platform,) = app.unattended_platforms()
        assert isinstance(platform, IrcPlatform)
        await serve_app(app, [platform])
        await asyncio.wait_for(platform.wait_connected(), 20)
        return app, platform

    return start


async def test_a_server_privmsg_is_logged_not_answered(
    inspircd: InspIRCd,
    people: People,
    start_bot: Start,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # On connect InspIRCd tells every client, in a PRIVMSG from the server itself, that
    # raw I/O is logged. It is not a person: the model never sees it, nobody is answered.
    caplog.set_level(logging.INFO, "salon.platforms")
    provider = FakeProvider(["for alice"])
    await start_bot(provider)
    alice = await people.join()
    await alice.say("#salon", f"{BOT}: hello")
    assert await alice.privmsgs_from(BOT, 1) == ["for alice"]
    assert len(provider.requests) == 1
    assert "Raw I/O" not in provider.requests[0].messages[-1].plain_text
    assert f"PRIVMSG {SERVER_NAME} " not in inspircd.raw_log
    said = [r.getMessage() for r in caplog.records if r.name.startswith("salon.platforms")]
    assert any(f"{SERVER_NAME} says: *** Raw I/O logging" in line for line in said)


async def test_model_text_never_becomes_a_ctcp(
    inspircd: InspIRCd, people: People, start_bot: Start
) -> None:
    provider = FakeProvider(
        ["\x01VERSION\x01", "take \x01DCC SEND evil.exe 2130706433 4444 10\x01 this", "/me waves"]
    )
    await start_bot(provider)
    alice = await people.join()
    for n in range(3):
        await alice.say("#salon", f"{BOT}: {n}")
        await alice.privmsgs_from(BOT, n + 1)
    said = await alice.privmsgs_from(BOT, 3)
    assert said == [
        "VERSION",
        "take DCC SEND evil.exe 2130706433 4444 10 this",
        "\x01ACTION waves\x01",
    ]


@pytest.mark.parametrize(
    "case", [(BOT, "#salon", 480), ("a" * 30, "#" + "c" * 63, 400)], ids=["480", "long-names"]
)
async def test_no_word_is_lost_to_the_servers_line_limit(
    people: People, start_bot: Start, case: tuple[str, str, int]
) -> None:
    # The server relays ":nick!user@host PRIVMSG #chan :text" in at most 512 bytes: what
    # the bot's own prefix takes, the text cannot.
    nick, channel, max_line_bytes = case
    answer = " ".join(f"word{n}" for n in range(300))
    provider = FakeProvider([answer])
    await start_bot(provider, nick=nick, channels=[channel], max_line_bytes=max_line_bytes)
    alice = await people.join(channel=channel)
    await alice.say(channel, f"{nick}: talk")
    lines = await alice.privmsgs_from(nick, 4)
    async with asyncio.timeout(15):
        while " ".join(lines).split()[-1:] != ["word299"] and len(lines) < 10:
            lines = await alice.privmsgs_from(nick, len(lines) + 1)
    assert " ".join(lines) == answer


@pytest.mark.parametrize(
    ("mode", "reason", "services"),
    [("m", "(moderated) mode is set", False), ("M", "identified to a registered account", True)],
    ids=["moderated-404", "registered-only-477"],
)
async def test_a_line_the_channel_refuses_is_reported_not_kept(
    people: People, start_bot: Start, salon_log: LogWatch, mode: str, reason: str
) -> None:
    alice = await people.join()  # the channel's first: its operator
    if mode == "M":  # only those logged into services may speak: alice is, the bot not
        await alice.say("NickServ", "REGISTER alice-pw alice@example.com")
        await alice.expect(r"^:NickServ!\S+ NOTICE alice :.*is now registered")
    await alice.send(f"MODE #salon +{mode}")
    await alice.expect(rf" MODE #salon :?\+{mode}")
    app, _ = await start_bot(FakeProvider(["nobody sees this"]))
    await alice.say("#salon", f"{BOT}: hello")
    line = await salon_log.wait("IRC refused a line in #salon")
    assert reason in line
    await salon_log.wait("activation in irc:#salon failed")
    await app.agent.wait_idle()
    await app.traces.flush()
    (summary,) = await app.store.traces.list_traces()
    assert summary.outcome == "error"
    assert "refused" in (summary.error or "")
    history = await app.store.chat_history("salon", SALON, limit=10)
    assert "nobody sees this" not in [m.text for m in history]


async def test_a_ban_is_reported_and_the_join_retried_until_lifted(
    people: People, start_bot: Start, salon_log: LogWatch
) -> None:
    alice = await people.join()
    await start_bot(FakeProvider([]), rejoin_delay_initial=0.1, rejoin_delay_max=0.5)
    await alice.expect(rf"^:{BOT}!\S+ JOIN :?#salon")
    mark = len(alice.lines)
    await alice.send(f"MODE #salon +b {BOT}!*@*")
    await alice.send(f"KICK #salon {BOT} :out")
    line = await salon_log.wait("cannot join #salon")
    assert "banned" in line.lower() or "+b" in line
    await alice.send(f"MODE #salon -b {BOT}!*@*")
    await alice.expect(rf"^:{BOT}!\S+ JOIN :?#salon", after=mark)


async def test_stopping_says_goodbye_before_closing(people: People, start_bot: Start) -> None:
    # What SIGTERM comes to: the platform stops. People see the bot's own QUIT message.
    alice = await people.join()
    _, platform = await start_bot(FakeProvider([]))
    await alice.expect(rf"^:{BOT}!\S+ JOIN :?#salon")
    await platform.stop()
    line = await alice.expect(rf"^:{BOT}!\S+ QUIT ")
    assert line.endswith(":Quit: bye") or line.endswith(":bye"), line


async def test_repeated_kicks_make_the_bot_wait_longer_before_rejoining(
    people: People, start_bot: Start, salon_log: LogWatch
) -> None:
    alice = await people.join()
    await start_bot(FakeProvider([]), rejoin_delay_initial=0.3)
    joined = rf"^:{BOT}!\S+ JOIN :?#salon"
    await alice.expect(joined)
    loop = asyncio.get_running_loop()
    waits = []
    for _ in range(3):
        mark = len(alice.lines)
        await alice.send(f"KICK #salon {BOT} :go away")
        kicked = loop.time()
        await alice.expect(joined, after=mark)
        waits.append(loop.time() - kicked)
    assert waits[0] >= 0.3
    assert waits[1] >= 0.6
    assert waits[2] >= 1.2
    line = await salon_log.wait("kicked from #salon")
    assert "alice" in line
    assert "go away" in line


async def test_ctcp_version_floods_get_one_paced_answer_of_salons_own(
    people: People, start_bot: Start
) -> None:
    # 30 VERSION requests in a burst: answered at once, they cost the bot the server's
    # fakelag (a penalty of 30 against a threshold of 10) and its answers to people.
    await start_bot(FakeProvider(["still quick"]), ctcp_version="Salon test build")
    flooder = await people.join("flooder", channel=None)
    alice = await people.join()
    for _ in range(30):
        await flooder.send(f"PRIVMSG {BOT} :\x01VERSION\x01")
    await alice.say("#salon", f"{BOT}: are you there?")
    async with asyncio.timeout(8):
        assert await alice.privmsgs_from(BOT, 1) == ["still quick"]
    reply = await flooder.expect(rf"^:{BOT}!\S+ NOTICE flooder :\x01VERSION ")
    assert reply.endswith(":\x01VERSION Salon test build\x01")
    replies = [ln for ln in flooder.lines if f"{BOT}!" in ln and " NOTICE " in ln]
    assert len(replies) == 1


@pytest.mark.parametrize("nicklen", [9])
async def test_taken_and_too_long_nicks_are_reported_and_the_nick_regained(
    people: People, start_bot: Start, salon_log: LogWatch
) -> None:
    squatter = await people.join(BOT)
    await people.join(f"{BOT}_", channel=None)
    alice = await people.join()
    _, platform = await start_bot(FakeProvider([]), fallback_nicks=[f"{BOT}_", f"{BOT}__"])
    nick = platform.self_participant.name
    assert len(nick) <= 9
    assert nick.startswith(BOT[:7])
    for refused in (BOT, f"{BOT}_", f"{BOT}__"):
        await salon_log.wait(f"nick {refused} refused")
    mark = len(alice.lines)
    await squatter.close()  # the nick frees: the bot takes it back
    await alice.expect(rf"^:{nick}!\S+ NICK :?{BOT}$", after=mark)
    await asyncio.wait_for(platform.wait_seen("nick", nick), 10)
    assert platform.self_participant.name == BOT


@pytest.mark.parametrize("nicklen", [9])
async def test_with_every_nick_taken_the_bot_says_so_and_tries_again_later(
    people: People, start_bot: Start, salon_log: LogWatch
) -> None:
    squatter = await people.join(BOT, channel=None)
    for nick in (f"{BOT}_", f"{BOT}1", f"{BOT}2", f"{BOT}3"):
        await people.join(nick, channel=None)
    starting = asyncio.create_task(start_bot(FakeProvider([])))
    try:
        await salon_log.wait("every nick was refused")
        await squatter.close()
        _, platform = await asyncio.wait_for(starting, 20)
    finally:
        starting.cancel()
    assert platform.self_participant.name == BOT


@dataclass
class Bare:
    platform: IrcPlatform
    log: RecordingLog
    sink: RecordingSink


StartBare = Callable[[], Awaitable[Bare]]


@pytest.fixture
async def start_bare(inspircd: InspIRCd) -> AsyncIterator[StartBare]:
    """Start the adapter alone (no agent) in #salon, its log and events kept."""
    running: list[IrcPlatform] = []

    async def start() -> Bare:
        config = IrcConfig(
            server="127.0.0.1", port=inspircd.port, tls=False, nick=BOT, channels=["#salon"]
        )
        log, sink = RecordingLog(), RecordingSink()
        platform = IrcPlatform(
            bot="salon", bot_name="Salon", config=config, secrets=Secrets({}), chat_log=log
        )
        running.append(platform)
        await platform.start(sink)
        await asyncio.wait_for(platform.wait_connected(), 20)
        return Bare(platform, log, sink)

    yield start
    for platform in running:
        await platform.stop()


async def test_server_time_batch_and_labels_are_asked_for_and_times_are_the_servers(
    people: People, start_bare: StartBare
) -> None:
    bare = await start_bare()
    platform, sink = bare.platform, bare.sink
    client = platform._connection.client
    assert client is not None
    for cap in ("server-time", "batch", "labeled-response", "echo-message"):
        assert client.capability(cap), cap
    alice = await people.join(caps=("server-time", "echo-message"))
    await alice.say("#salon", "what time is it?")
    echo = await alice.expect(r"PRIVMSG #salon :what time is it\?$")
    stamp = re.search(r"(?:^@|;)time=([^; ]+)", echo)
    assert stamp is not None
    (event,) = await sink.wait(1)
    assert isinstance(event, MessageEvent)
    when = datetime.fromisoformat(stamp[1].replace("Z", "+00:00"))
    assert event.message.created_at == when


@pytest.mark.parametrize("services", [True])
@pytest.mark.parametrize("password", ["right-pw", "wrong-pw"])
async def test_sasl_plain_logs_in_or_says_why_not(
    people: People, start_bot: Start, salon_log: LogWatch, password: str
) -> None:
    await people.register("salonacct", "right-pw")
    await start_bot(
        FakeProvider([]),
        sasl_username="salonacct",
        sasl_password_env="IRC_SASL_PASSWORD",
        secrets={"IRC_SASL_PASSWORD": password},
    )
    if password == "right-pw":
        await salon_log.wait("IRC: logged in as salonacct")
    else:
        line = await salon_log.wait("IRC: SASL PLAIN as salonacct failed")
        assert password not in line
    assert not [ln for ln in salon_log.lines if password in ln]


@pytest.mark.parametrize("services", [True])
async def test_sasl_external_logs_in_with_the_tls_client_certificate(
    inspircd: InspIRCd, people: People, start_bot: Start, salon_log: LogWatch, tmp_path: Path
) -> None:
    cert, key = tmp_path / "bot.pem", tmp_path / "bot.key"
    await people.register("salonacct", "unused-pw", certfp=self_signed(BOT, cert, key))
    await start_bot(
        FakeProvider([]),
        port=inspircd.tls_port,
        tls=True,
        tls_verify=False,  # the test server's certificate is self-signed
        sasl_mechanism="EXTERNAL",
        tls_client_cert=str(cert),
        tls_client_key=str(key),
    )
    await salon_log.wait("IRC: logged in as salonacct")


def test_sasl_external_without_a_certificate_is_a_config_error() -> None:
    with pytest.raises(ValueError, match="EXTERNAL needs tls and a tls_client_cert"):
        IrcConfig(server="irc.example", nick=BOT, sasl_mechanism="EXTERNAL")


async def test_an_answer_refused_after_its_first_line_was_seen_stays_in_the_store(
    people: People, start_bare: StartBare
) -> None:
    alice = await people.join()  # the operator: the bot will not be one
    bare = await start_bare()
    bare.platform._sender.bucket = TokenBucket(1, 0.5)  # the second line waits its turn: 2 s
    sending = asyncio.create_task(bare.platform.send(SALON, " ".join(["word"] * 120)))
    await alice.privmsgs_from(BOT, 1)  # the first line is on screen
    await alice.send("MODE #salon +m")  # the second will be refused
    with pytest.raises(PlatformError, match="refused"):
        await asyncio.wait_for(sending, 15)
    assert [row for row in bare.log.rows if row[2]]  # someone saw part of it: it stays
    assert bare.log.forgotten == []


async def test_a_flood_of_private_notices_cannot_flood_salons_log(
    people: People, start_bot: Start, salon_log: LogWatch
) -> None:
    _, platform = await start_bot(FakeProvider([]))
    pest = await people.join("pest", channel=None)
    for n in range(100):
        await pest.send(f"NOTICE {BOT} :notice {n}")
    await salon_log.wait("says: notice 0")
    await salon_log.wait("IRC: more notices than")
    await pest.join("#salon")  # handled after every notice: lines are handled in order
    await asyncio.wait_for(platform.wait_seen("join", "pest"), 10)
    said = [ln for ln in salon_log.lines if "says: notice" in ln]
    assert 10 <= len(said) <= 30


async def test_the_fake_takes_new_ports_when_one_it_chose_is_taken_meanwhile() -> None:
    """A port chosen free can be taken (any connection's ephemeral port) before InspIRCd
    binds it: the fake starts on new ones instead of leaving Atheme unlinked."""
    import socket

    require_inspircd(services=True)
    server = InspIRCd(services=True)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server.link_port = taken.getsockname()[1]
        try:
            await server.start()
            assert server.link_port != taken.getsockname()[1]
            assert server.services is not None
            assert server.services.returncode is None
        finally:
            await server.stop()
            server.cleanup()
