"""`salon chat`'s turns: each line answered on its own, the prompt shown whenever the
terminal waits for a line, and a question of the bot's answered by the next line."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import Any

from salon.app import BotApp
from salon.config import Secrets
from salon.llm import FakeProvider, FakeReply
from salon.model import ToolCall
from salon.platforms.terminal import terminal_for
from tests.conftest import bot_config
from tests.platforms.test_terminal import lines_from


async def chat(tmp_path: Path, provider: FakeProvider, typed: list[str], **config: Any) -> str:
    out = io.StringIO()
    queue: asyncio.Queue[str | None] = asyncio.Queue()
    for text in [*typed, None]:
        queue.put_nowait(None if text is None else text + "\n")
    bot = bot_config(data_dir=str(tmp_path / "data"), **config)
    app = BotApp(key="salon", config=bot, root=tmp_path, secrets=Secrets({}), provider=provider)
    async with app:
        terminal = terminal_for(
            app.build_context(),
            lines=lines_from(queue),
            out=out,
            settled=app.agent.wait_idle,
            prompt="you: ",
        )
        await asyncio.wait_for(app.serve(terminal.closed, [terminal]), 10)
    return out.getvalue()


async def test_each_line_is_its_own_turn_after_a_prompt(tmp_path: Path) -> None:
    provider = FakeProvider(["one", "two"])
    output = await chat(tmp_path, provider, ["first", "second"])
    assert output == "you: Salon: one\n\nyou: Salon: two\n\nyou: "
    assert [r.messages[-1].plain_text for r in provider.requests] == [
        "you: first",
        "you: second",
    ]


async def test_a_question_during_a_turn_is_answered_by_the_next_line(tmp_path: Path) -> None:
    call = FakeReply(calls=(ToolCall("c1", "get_recent_messages", {}),))
    provider = FakeProvider([call, "read them", "two"])
    ask = {"tool_policies": {"get_recent_messages": {"policy": "ask"}}}
    output = await chat(tmp_path, provider, ["read the log", "yes", "second"], **ask)
    assert "wants to run" in output
    assert output.endswith("Salon: read them\n\nyou: Salon: two\n\nyou: ")
    assert provider.requests[-1].messages[-1].plain_text == "you: second"
