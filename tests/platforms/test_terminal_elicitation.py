"""A tool server's question at the terminal: a field at a time, each answered by a line."""

from __future__ import annotations

import asyncio
import io
from dataclasses import replace
from pathlib import Path

from salon.app import BotApp
from salon.config import Secrets
from salon.llm import FakeProvider, FakeReply
from salon.model import ToolCall
from salon.platforms.terminal import terminal_for
from tests.conftest import bot_config
from tests.platforms.test_terminal import lines_from
from tests.tools.test_elicitation import asking_server
from tests.tools.test_mcp_http import LoopbackServer, http_spec

__all__ = ["asking_server"]  # the fixture used


async def test_a_servers_question_is_answered_line_by_line(
    tmp_path: Path, asking_server: LoopbackServer
) -> None:
    spec = replace(http_spec("kit", asking_server.url), elicitation=True)
    provider = FakeProvider([FakeReply(calls=(ToolCall("c1", "book", {}),)), "Booked."])
    out = io.StringIO()
    queue: asyncio.Queue[str | None] = asyncio.Queue()
    config = bot_config(data_dir=str(tmp_path / "data"), default_tool_policy="allow")
    app = BotApp(
        key="salon",
        config=config,
        root=tmp_path,
        secrets=Secrets({}),
        provider=provider,
        extra_servers=[spec],
    )

    async def answer(terminal: object, prompt: str, line: str) -> None:
        while prompt not in out.getvalue():
            await terminal.wait_output()  # type: ignore[attr-defined]
        queue.put_nowait(line + "\n")

    async with app:
        terminal = terminal_for(app.build_context(), lines=lines_from(queue), out=out)
        serving = asyncio.create_task(app.serve(terminal.closed, [terminal]))
        queue.put_nowait("book a table\n")
        async with asyncio.timeout(15):
            await answer(terminal, "Day (Which day)?", "friday")
            await answer(terminal, "Guests (How many people)?", "lots")
            await answer(terminal, "Guests needs a whole number", "3")
            await answer(terminal, "Room?", "large")
            await answer(terminal, "Confirm (Book it now)?", "skip")
            await answer(terminal, "Booked.", "")
            queue.put_nowait(None)
            await serving
    assert out.getvalue().startswith("you: kit asks: Which booking?\n")
    results = [p for m in provider.requests[1].messages for p in m.parts if hasattr(p, "result")]
    assert [p.result.content for p in results] == [
        'booked {"day":"friday","guests":3,"room":"large","confirm":true}'
    ]
