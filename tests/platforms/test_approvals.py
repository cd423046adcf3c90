"""Approvals in text on the terminal, and approvals left open by a restart."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

from salon.app import BotApp
from salon.config import Secrets
from salon.llm import FakeProvider, FakeReply
from salon.model import ToolCall
from salon.platforms.memory import MemoryPlatform
from salon.platforms.terminal import terminal_for
from tests.conftest import bot_config
from tests.platforms.test_terminal import lines_from
from tests.tools.conftest import in_process


def danger_server(ran: list[str]) -> MCPServer:
    server = MCPServer("danger")

    @server.tool(annotations=ToolAnnotations(destructive_hint=True))
    def wipe(target: str) -> str:
        """Wipe something."""
        ran.append(target)
        return f"wiped {target}"

    return server


async def test_terminal_asks_yes_or_no(tmp_path: Path) -> None:
    ran: list[str] = []
    provider = FakeProvider(
        [FakeReply(calls=(ToolCall("c1", "wipe", {"target": "disk"}),)), "Done."]
    )
    queue: asyncio.Queue[str | None] = asyncio.Queue()
    out = io.StringIO()
    config = bot_config(data_dir=str(tmp_path / "data"), builtin_tools=False)
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
    text = out.getvalue()
    assert "Salon wants to run wipe (target: disk). Allow? [yes/no]" in text
    assert ".Salon<[wipe]: wiped disk" in text
    assert text.endswith("Salon: Done.\n\n")


async def test_pending_approval_is_closed_aloud_after_restart(tmp_path: Path) -> None:
    config = bot_config(data_dir=str(tmp_path / "data"), builtin_tools=False)

    def app() -> BotApp:
        return BotApp(
            key="salon", config=config, root=tmp_path, secrets=Secrets({}), provider=FakeProvider()
        )

    platform = MemoryPlatform(bot_name="Salon")
    room = platform.channel("room")
    async with app() as first:
        await first.store.open_approval("salon", room.key, "wipe", "{}", "alice")
    stop = asyncio.Event()
    async with app() as second:
        serving = asyncio.create_task(second.serve(stop, [platform]))
        sent = await platform.wait_sent(1)
        stop.set()
        await asyncio.wait_for(serving, 10)
        assert await second.store.pending_approvals("salon") == []
    assert sent[0].channel.key == room.key
    assert "approval asked for wipe was still open" in sent[0].text
