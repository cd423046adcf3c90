"""A thinking model's reasoning never reaches a channel, the chat log or a later prompt:
inline ``<think>`` (cut across chunks, unclosed, or with no opening tag) and
``reasoning_content`` streams, from an OpenAI-compatible server through the real SDK, to
the fake Discord (real discord.py) and to miniircd."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from fakes.discord_server import DiscordServer
from fakes.irc import Human, IrcServer
from fakes.llm_server import LLMServer, Scripted
from salon.app import BotApp
from salon.config import Secrets
from salon.llm import Provider
from salon.llm.factory import build_provider
from salon.model import ChannelRef
from salon.platforms.irc import IrcPlatform
from tests.conftest import ServeApp, bot_config
from tests.platforms.conftest import GENERAL, Start, ask, real_provider

SECRETS = ("PLUGH", "XYZZY", "FROTZ", "GNUSTO")
# What a thinking model streams, one reply per question, and what may be posted of it.
REPLIES = [
    Scripted(chunks=["<thi", "nk>PLUGH is the pass", "word</thi", "nk>\n\n", "Hello Alice."]),
    Scripted(chunks=["<think>XYZZY: should I", " tell them?"]),  # never closed: nothing said
    Scripted(chunks=["FROTZ, said", " the template</th", "ink>\n\nFine."]),  # no opening tag
    Scripted(text="Noon.", thinking_chunks=["GNUSTO ", "first"], reasoning_tokens=9),
    Scripted(text="Last."),
]
# A reply that was all reasoning is an empty answer: the agent's note says so, nothing more.
EMPTY = "(Salon had nothing to say: the answer was empty)"
POSTED = ["Hello Alice.", EMPTY, "Fine.", "Noon.", "Last."]
THINKING = {"enabled": True}


def qwen_provider(llm: LLMServer) -> tuple[Provider, dict[str, Any]]:
    """A Qwen3-style model on a server that leaves its template's text as it is: the
    template may open the block itself, so a tag-less start is expected."""
    _, providers = real_provider(llm, "openai")
    providers["test"]["reasoning_style"] = "chat_template"
    return build_provider(bot_config(providers=providers), Secrets({"TEST_KEY": "k"})), providers


def leaked(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


async def answered(app: BotApp, llm: LLMServer, said: Any) -> None:
    """Say something (``said``, awaited) and wait until the model was asked and the bot
    is done with it."""
    llm.received.clear()
    await said
    await asyncio.wait_for(llm.received.wait(), 15)
    await app.agent.wait_idle()


def prompts(llm: LLMServer) -> str:
    """Every request the model was sent, as the JSON that went."""
    return json.dumps([r.body for r in llm.requests])


async def test_reasoning_never_reaches_discord_the_log_or_the_next_prompt(
    fake_discord: DiscordServer, start_bot: Start, llm_server: LLMServer
) -> None:
    llm_server.queue(*REPLIES)
    provider, providers = qwen_provider(llm_server)
    app, _ = await start_bot(provider, providers=providers, thinking=THINKING)
    alice = fake_discord.user("Alice")
    for question in ("hi", "tell me", "ok?", "time?", "bye"):
        await answered(app, llm_server, ask(fake_discord, GENERAL, alice, question))
    await fake_discord.wait_bot_messages(GENERAL, len(POSTED))
    posted = [m["content"] for m in fake_discord.channels[GENERAL]]
    assert [p for p in posted if not p.startswith(f"<@{fake_discord.bot.id}>")] == POSTED
    assert leaked(json.dumps(fake_discord.channels)) == []
    history = await app.store.chat_history("salon", ChannelRef("discord", GENERAL), limit=50)
    assert leaked(" ".join(m.text for m in history)) == []
    assert len(llm_server.requests) == len(REPLIES)
    assert leaked(prompts(llm_server)) == []  # the later prompts carry none of it


@pytest.fixture
async def ircd() -> AsyncIterator[IrcServer]:
    server = IrcServer()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def alice(ircd: IrcServer) -> AsyncIterator[Human]:
    person = Human("alice", ircd.port)
    await person.connect()
    await person.join("#salon")
    yield person
    await person.close()


async def irc_bot(ircd: IrcServer, llm: LLMServer, tmp_path: Path, serve_app: ServeApp) -> BotApp:
    provider, providers = qwen_provider(llm)
    settings: dict[str, Any] = {
        "server": "127.0.0.1",
        "port": ircd.port,
        "tls": False,
        "nick": "salonbot",
        "channels": ["#salon"],
        "flood_burst": 50,
    }
    config = bot_config(
        data_dir=str(tmp_path / "data"),
        platforms={"irc": settings},
        providers=providers,
        thinking=THINKING,
    )
    app = BotApp(key="salon", config=config, root=tmp_path, secrets=Secrets({}), provider=provider)
    (platform,) = app.unattended_platforms()
    assert isinstance(platform, IrcPlatform)
    await serve_app(app, [platform])
    await asyncio.wait_for(platform.wait_connected(), 15)
    return app


async def test_reasoning_never_reaches_irc_the_log_or_the_next_prompt(
    ircd: IrcServer, alice: Human, llm_server: LLMServer, tmp_path: Path, serve_app: ServeApp
) -> None:
    llm_server.queue(*REPLIES)
    app = await irc_bot(ircd, llm_server, tmp_path, serve_app)
    for question in ("hi", "tell me", "ok?", "time?", "bye"):
        await answered(app, llm_server, alice.say("#salon", f"salonbot: {question}"))
    said = await alice.privmsgs_from("salonbot", len(POSTED))
    assert said == POSTED
    assert leaked("\n".join(alice.lines)) == []  # nor in a notice, a dotted line, anything
    channel = ChannelRef("irc", "#salon", name="#salon")
    history = await app.store.chat_history("salon", channel, limit=50)
    assert leaked(" ".join(m.text for m in history)) == []
    assert len(llm_server.requests) == len(REPLIES)
    assert leaked(prompts(llm_server)) == []
