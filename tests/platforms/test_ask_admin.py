"""Policy ``ask_admin`` in the terminal, where the one typing is the operator, and on IRC,
where there are no roles and no operator, so nobody can approve: the requester is told so
at once instead of being asked in vain. (Discord: test_discord_ask_admin.py.)"""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from fakes.irc import Human, IrcServer
from salon.app import BotApp
from salon.config import Secrets
from salon.llm import FakeProvider, FakeReply
from salon.model import ToolCall
from salon.platforms.irc import IrcPlatform
from salon.platforms.terminal import terminal_for
from tests.conftest import ServeApp, bot_config
from tests.platforms.test_approvals import danger_server
from tests.platforms.test_terminal import lines_from
from tests.tools.conftest import in_process

BOT = "salonbot"


@pytest.fixture
async def ircd() -> AsyncIterator[IrcServer]:
    server = IrcServer()
    await server.start()
    yield server
    await server.stop()


async def test_in_the_terminal_the_operator_approves(tmp_path: Path) -> None:
    ran: list[str] = []
    provider = FakeProvider(
        [FakeReply(calls=(ToolCall("c1", "wipe", {"target": "disk"}),)), "Done."]
    )
    queue: asyncio.Queue[str | None] = asyncio.Queue()
    out = io.StringIO()
    config = bot_config(
        data_dir=str(tmp_path / "data"),
        builtin_tools=False,
        tool_policies={"wipe": {"policy": "ask_admin"}},
    )
    app = BotApp(
        key="salon",
        config=config,
        root=tmp_path,
        secrets=Secrets({}),
        provider=provider,
        extra_servers=[in_process(danger_server(ran), "danger")],
    )
    async with app:
        terminal = terminal_for(app.build_context(), lines=lines_from(queue), out=out)
        serving = asyncio.create_task(app.serve(terminal.closed, [terminal]))
        queue.put_nowait("wipe the disk\n")
        async with asyncio.timeout(10):
            while "Allow? [yes/no]" not in out.getvalue():
                await terminal.wait_output()
        queue.put_nowait("yes\n")
        queue.put_nowait(None)
        await asyncio.wait_for(serving, 10)
    assert ran == ["disk"]


async def test_ask_admin_on_irc_is_refused_at_once(
    ircd: IrcServer, tmp_path: Path, serve_app: ServeApp
) -> None:
    ran: list[str] = []
    provider = FakeProvider(
        [FakeReply(calls=(ToolCall("c1", "wipe", {"target": "logs"}),)), "Wiped."]
    )
    irc = {"server": "127.0.0.1", "port": ircd.port, "tls": False, "nick": BOT}
    config = bot_config(
        data_dir=str(tmp_path / "data"),
        platforms={"irc": {**irc, "channels": ["#salon"], "flood_burst": 50}},
        tool_policies={"wipe": {"policy": "ask_admin"}},
        authorized_roles=["mods"],
    )
    app = BotApp(
        key="salon",
        config=config,
        root=tmp_path,
        secrets=Secrets({}),
        provider=provider,
        extra_servers=[in_process(danger_server(ran), "danger")],
    )
    (platform,) = app.unattended_platforms()
    assert isinstance(platform, IrcPlatform)
    await serve_app(app, [platform])
    await asyncio.wait_for(platform.wait_connected(), 15)
    alice = Human("alice", ircd.port)
    await alice.connect()
    try:
        await alice.join("#salon")
        await alice.say("#salon", f"{BOT}: wipe the logs")
        said = await alice.privmsgs_from(BOT, 2)
    finally:
        await alice.close()
    assert said == [
        "alice: wipe (target: logs) needs the approval of someone else with an authorized "
        "role, or of the bot's operator, and nobody can give it on IRC.",
        "(cancelled: wipe was not run)",
    ]
    assert ran == []
