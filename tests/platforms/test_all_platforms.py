"""One bot on Discord, IRC, Matrix, Slack and the terminal at once: the fake Discord,
miniircd, a real Synapse, the fake Slack and an in-process terminal, each asked at the same
time. Each answer reaches its own platform only, each channel is its own context, each
trace names its platform, and a limit counts each platform's people apart."""

from __future__ import annotations

import asyncio
import io
import re
from collections.abc import AsyncIterator
from pathlib import Path

from fakes.discord_server import DiscordServer
from fakes.irc import Human, IrcServer
from fakes.slack_server import APP_TOKEN, BOT_TOKEN, SlackServer
from fakes.synapse import Synapse
from salon.app import BotApp
from salon.config import Secrets
from salon.llm import FakeProvider, FakeReply
from salon.llm.base import LLMRequest, StopEvent, StreamEvent, TextDelta, UsageEvent
from salon.platforms.discord import DiscordPlatform
from salon.platforms.terminal import terminal_for
from tests.conftest import ServeApp, bot_config
from tests.platforms import test_irc, test_matrix, test_slack
from tests.platforms.conftest import GENERAL as DISCORD_GENERAL
from tests.platforms.conftest import ask
from tests.platforms.test_matrix import Room, from_bot
from tests.platforms.test_slack import GENERAL as SLACK_GENERAL
from tests.platforms.test_slack import mention

ircd, synapse, fake_slack = test_irc.ircd, test_matrix.synapse, test_slack.fake_slack  # fixtures

PLATFORMS = ("discord", "irc", "matrix", "slack", "terminal")
_WAIT = 30.0
_ASKED = re.compile(r"from-(\w+)")


class ByPlatform(FakeProvider):
    """Answers ``answer-<platform>`` for the platforms whose words its context holds (each
    ask says ``from-<platform>``), so an answer shows which context it was given."""

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        asked = sorted(set(_ASKED.findall(_text(request))))
        reply = FakeReply.text("answer-" + "+".join(asked))
        for chunk in reply.chunks:
            yield TextDelta(chunk)
        yield UsageEvent(reply.usage)
        if reply.stop is not None:
            yield StopEvent(reply.stop)


def _text(request: LLMRequest) -> str:
    return "\n".join(m.plain_text for m in request.messages)


async def lines_from(queue: asyncio.Queue[str | None]) -> AsyncIterator[str]:
    while (line := await queue.get()) is not None:
        yield line


async def test_one_bot_on_five_platforms_keeps_each_apart(
    *,
    fake_discord: DiscordServer,
    ircd: IrcServer,
    synapse: Synapse,
    fake_slack: SlackServer,
    tmp_path: Path,
    serve_app: ServeApp,
) -> None:
    room = Room(synapse, tmp_path, serve_app)
    await room.create()
    irc_alice = Human("alice", ircd.port)
    await irc_alice.connect()
    await irc_alice.join("#salon")
    platforms = {
        "discord": {
            "token_env": "DISCORD_TOKEN",
            "api_base_url": fake_discord.api,
            "gateway_url": fake_discord.gateway,
        },
        "irc": {
            "server": "127.0.0.1",
            "port": ircd.port,
            "tls": False,
            "nick": "salonbot",
            "channels": ["#salon"],
            "flood_burst": 50,
        },
        "matrix": {
            "homeserver": synapse.url,
            "user_id": room.bot,
            "access_token_env": "BOT_TOKEN",
            "rooms": [room.id],
            "sync_timeout": 1.0,
        },
        "slack": {"api_base_url": fake_slack.base_url},
    }
    config = bot_config(
        data_dir=str(tmp_path / "data"),
        platforms=platforms,
        builtin_tools=False,
        limits={"user_rate": {"requests": 1, "per_seconds": 3600}},
    )
    secrets = {
        "DISCORD_TOKEN": "token-123",
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_APP_TOKEN": APP_TOKEN,
        **room.secrets,
    }
    provider = ByPlatform()
    app = BotApp(
        key="salon", config=config, root=tmp_path, secrets=Secrets(secrets), provider=provider
    )
    unattended = app.unattended_platforms()
    assert sorted(p.name for p in unattended) == ["discord", "irc", "matrix", "slack"]
    for platform in unattended:
        if isinstance(platform, DiscordPlatform):
            platform.guild_ready_timeout = 0.5  # the fake sends its one guild at once
    typed: asyncio.Queue[str | None] = asyncio.Queue()
    out = io.StringIO()
    terminal = terminal_for(app.build_context(), lines=lines_from(typed), out=out)
    try:
        await serve_app(app, [*unattended, terminal])
        await _all_ready(app, fake_slack)

        # Alice asks on every platform at once.
        discord_alice = fake_discord.user("Alice")
        slack_alice = fake_slack.user("Alice")
        await asyncio.gather(
            ask(fake_discord, DISCORD_GENERAL, discord_alice, "hello from-discord"),
            irc_alice.say("#salon", "salonbot: hello from-irc"),
            room.alice.say(room.id, f"{room.bot} hello from-matrix"),
            fake_slack.post(SLACK_GENERAL, slack_alice, mention(fake_slack, "hello from-slack")),
            typed.put("hello from-terminal\n"),
        )
        (on_discord,) = await fake_discord.wait_bot_messages(DISCORD_GENERAL, 1)
        assert on_discord["content"] == "answer-discord"
        assert await irc_alice.privmsgs_from("salonbot", 1) == ["answer-irc"]
        on_matrix = await room.alice.wait(room.id, from_bot(room.bot, notice=False))
        assert on_matrix["content"]["body"] == "answer-matrix"
        (on_slack,) = await fake_slack.wait_bot_messages(SLACK_GENERAL, 1)
        assert on_slack["text"] == "answer-slack"
        await _written(terminal, out, "answer-terminal")
        assert out.getvalue() == "Salon: answer-terminal\n\n"

        # Each context held its own platform's words only (the answer names them all).
        await app.agent.wait_idle()
        assert sorted(_ASKED.findall(" ".join(_text(r) for r in provider.requests))) == sorted(
            PLATFORMS
        )
        assert len(provider.requests) == 5

        # Each trace names its platform and a channel of it.
        await app.traces.flush()
        traces = await app.store.traces.list_traces()
        assert sorted(t.platform for t in traces) == sorted(PLATFORMS)
        assert all(t.channel.startswith(t.platform + ":") for t in traces)

        # One request per person: Alice used hers on Slack; asking there again is refused
        # there, and her allowance elsewhere was her own on each platform (all answered).
        await fake_slack.post(SLACK_GENERAL, slack_alice, mention(fake_slack, "again from-slack"))
        refusal = (await fake_slack.wait_bot_messages(SLACK_GENERAL, 2))[-1]
        assert "1 request" in refusal["text"]
        await app.agent.wait_idle()
        assert len(provider.requests) == 5
        said = [
            m
            for m in fake_discord.channels[DISCORD_GENERAL]
            if m["author"]["id"] == fake_discord.bot.id
        ]
        assert [m["content"] for m in said] == ["answer-discord"]
        assert out.getvalue() == "Salon: answer-terminal\n\n"
        assert len(fake_slack.messages(SLACK_GENERAL)) == 2
    finally:
        typed.put_nowait(None)
        await irc_alice.close()
        await room.alice.close()
        await room.bob.close()


async def _all_ready(app: BotApp, fake_slack: SlackServer) -> None:
    """Every unattended platform connected (each its own way of saying so)."""
    from salon.platforms.irc import IrcPlatform
    from salon.platforms.matrix import MatrixPlatform
    from salon.platforms.slack.platform import SlackPlatform

    async with asyncio.timeout(_WAIT):
        for platform in app.platforms.values():
            if isinstance(platform, DiscordPlatform):
                await platform.ready.wait()
            elif isinstance(platform, IrcPlatform):
                await platform.wait_connected()
            elif isinstance(platform, MatrixPlatform):
                await platform.wait_synced()
            elif isinstance(platform, SlackPlatform):
                await platform.ready.wait()
        await fake_slack.connected()


async def _written(terminal: object, out: io.StringIO, text: str) -> None:
    from salon.platforms.terminal import TerminalPlatform

    assert isinstance(terminal, TerminalPlatform)
    async with asyncio.timeout(_WAIT):
        while text not in out.getvalue():
            try:
                await asyncio.wait_for(terminal.wait_output(), 1)
            except TimeoutError:
                continue  # written between the look and the wait: look again
