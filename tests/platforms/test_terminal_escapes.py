"""What `salon chat` prints from the model and from people: control characters shown, never
obeyed by the operator's terminal (a title change, a cleared screen, a drawn link)."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

from salon.app import BotApp
from salon.config import Secrets
from salon.llm import FakeProvider
from salon.model import Participant
from salon.platforms.terminal import CHANNEL, terminal_for
from tests.conftest import bot_config
from tests.platforms.test_terminal import chat_once, lines_from

TITLE = "\x1b]0;pwned\x07"
CLEAR = "\x1b[2J\x1b[H"
LINK = "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\"


async def test_the_models_escapes_are_shown_not_obeyed(tmp_path: Path) -> None:
    provider = FakeProvider([f"{TITLE}Hi{CLEAR}\nsee\t{LINK}\r\x9b31m"])
    output = await chat_once(tmp_path, provider, ["hi"])
    assert "\x1b" not in output
    assert "\x07" not in output
    assert "\r" not in output
    assert "\x9b" not in output
    assert output == (
        "Salon: \\x1b]0;pwned\\x07Hi\\x1b[2J\\x1b[H\nsee\t"
        "\\x1b]8;;https://evil.example\\x1b\\click\\x1b]8;;\\x1b\\\\x0d\\x9b31m\n\n"
    )


async def test_a_direct_message_and_a_tool_log_are_shown_safely(tmp_path: Path) -> None:
    out = io.StringIO()
    config = bot_config(data_dir=str(tmp_path / "data"))
    app = BotApp(
        key="salon", config=config, root=tmp_path, secrets=Secrets({}), provider=FakeProvider([])
    )
    async with app:
        terminal = terminal_for(app.build_context(), lines=lines_from(asyncio.Queue()), out=out)
        await terminal.send_direct(Participant("user", "you"), f"link {LINK}")
        await terminal.send_tool_log(CHANNEL, f".tool said {CLEAR}")
    assert "\x1b" not in out.getvalue()
    assert "\\x1b[2J" in out.getvalue()
