"""``!memory`` and ``!forget`` on IRC (a real miniircd): the answer goes to the person alone,
by NOTICE, never to the channel; the command is not a message for the bot or the log."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from fakes.irc import IrcServer
from salon.app import BotApp
from salon.config import Secrets
from salon.llm import FakeProvider
from salon.model import ChannelRef
from salon.notes import NoteScope, Provenance, Scope
from salon.platforms.irc import IrcPlatform
from salon.platforms.irc.memorycmds import MEMORY_COMMANDS_PER_MINUTE
from tests.conftest import ServeApp, bot_config
from tests.platforms.test_irc import (
    BOT,
    _close_people,  # noqa: F401 - closes the humans (autouse)
    human,
)

SAID = datetime(2026, 11, 20, 18, 30, tzinfo=UTC)
NOTICE = rf"^:{BOT}!\S+ NOTICE alice :(.*)$"


@pytest.fixture
async def ircd() -> AsyncIterator[IrcServer]:
    server = IrcServer()
    await server.start()
    yield server
    await server.stop()


async def _start(
    ircd: IrcServer, tmp_path: Path, serve_app: ServeApp, provider: FakeProvider
) -> BotApp:
    settings = {
        "server": "127.0.0.1",
        "port": ircd.port,
        "tls": False,
        "nick": BOT,
        "channels": ["#salon"],
        "flood_burst": 50,
    }
    config = bot_config(
        data_dir=str(tmp_path / "data"), platforms={"irc": settings}, memory={"enabled": True}
    )
    app = BotApp(key="salon", config=config, root=tmp_path, secrets=Secrets({}), provider=provider)
    (platform,) = app.unattended_platforms()
    assert isinstance(platform, IrcPlatform)
    await serve_app(app, [platform])
    await asyncio.wait_for(platform.wait_connected(), 15)
    return app


async def _note(app: BotApp, person: str, text: str) -> int:
    said = Provenance(person, person[4:], "irc:#salon", "#salon", "", SAID)
    return (await app.store.notes.add_note("salon", NoteScope(Scope.PERSON, person), text, said)).id


async def test_memory_answers_by_private_notice_never_in_the_channel(
    ircd: IrcServer, tmp_path: Path, serve_app: ServeApp
) -> None:
    provider = FakeProvider(["hello there"])
    app = await _start(ircd, tmp_path, serve_app, provider)
    await _note(app, "irc:alice", "alice likes quokkas")
    await _note(app, "irc:bob", "bob likes zebrafish")
    alice = await human(ircd)
    bob = await human(ircd, "bob")
    await alice.say("#salon", "!memory")
    await alice.expect(r"NOTICE alice :.*alice likes quokkas")
    notices = [m[1] for ln in alice.lines if (m := re.match(NOTICE, ln))]
    assert not any("zebrafish" in n for n in notices)
    assert any("said by alice in #salon, 2026-11-20 18:30 UTC" in n for n in notices)
    await alice.say("#salon", f"{BOT}: hi")  # the bot's next line in the channel
    await bob.expect(rf"^:{BOT}!\S+ PRIVMSG #salon :hello there$")
    from_bot = [ln for ln in bob.lines if ln.startswith(f":{BOT}!") and " #salon " in ln]
    assert len(from_bot) == 1  # nothing of !memory's answer reached the channel
    assert "!memory" not in "\n".join(m.plain_text for m in provider.requests[0].messages)
    logged = await app.store.chatlog.chat_history("salon", ChannelRef("irc", "#salon"), limit=50)
    assert all("!memory" not in m.text for m in logged)


async def test_forget_all_by_private_message_asks_first(
    ircd: IrcServer, tmp_path: Path, serve_app: ServeApp
) -> None:
    app = await _start(ircd, tmp_path, serve_app, FakeProvider())
    await _note(app, "irc:alice", "alice likes quokkas")
    kept = await _note(app, "irc:bob", "bob likes zebrafish")
    alice = await human(ircd, channel=None)
    await alice.say(BOT, "!forget all")
    await alice.expect(r"NOTICE alice :This deletes all 1 note .*To go ahead: !forget all confirm")
    mark = len(alice.lines)
    await alice.say(BOT, "!forget all confirm")
    await alice.expect(r"NOTICE alice :Forgot 1 note about you or from you\.", after=mark)
    assert await app.store.notes.notes_of_person("irc:alice") == []
    assert [n.id for n in await app.store.notes.notes_of_person("irc:bob")] == [kept]


async def test_a_flood_of_commands_is_answered_only_so_far(
    ircd: IrcServer, tmp_path: Path, serve_app: ServeApp
) -> None:
    await _start(ircd, tmp_path, serve_app, FakeProvider(["hi alice"]))
    alice = await human(ircd, channel=None)
    for _ in range(MEMORY_COMMANDS_PER_MINUTE + 5):
        await alice.say(BOT, "!memory")
    await alice.say(BOT, "hello")  # answered by the model after the commands were handled
    await alice.expect(rf"^:{BOT}!\S+ PRIVMSG alice :hi alice$")
    answered = [ln for ln in alice.lines if re.search(r"NOTICE alice :I keep no notes", ln)]
    refused = [ln for ln in alice.lines if "Too many memory commands" in ln]
    assert len(answered) == MEMORY_COMMANDS_PER_MINUTE
    assert len(refused) == 1
