"""The terminal platform in-process: lines in, answers out, history in the store."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator
from pathlib import Path

from salon.app import BotApp
from salon.config import Secrets
from salon.llm import FakeProvider
from salon.model import Attachment, ChannelRef, Participant
from salon.platforms.base import Capability
from salon.platforms.terminal import CHANNEL, terminal_for
from tests.conftest import bot_config


async def lines_from(queue: asyncio.Queue[str | None]) -> AsyncIterator[str]:
    while (line := await queue.get()) is not None:
        yield line


async def chat_once(tmp_path: Path, provider: FakeProvider, typed: list[str]) -> str:
    out = io.StringIO()
    queue: asyncio.Queue[str | None] = asyncio.Queue()
    for text in typed:
        queue.put_nowait(text + "\n")
    queue.put_nowait(None)
    config = bot_config(data_dir=str(tmp_path / "data"))
    app = BotApp(key="salon", config=config, root=tmp_path, secrets=Secrets({}), provider=provider)
    async with app:
        terminal = terminal_for(app.build_context(), lines=lines_from(queue), out=out)
        await asyncio.wait_for(app.serve(terminal.closed, [terminal]), 10)
    return out.getvalue()


async def test_every_line_addresses_the_bot(tmp_path: Path) -> None:
    provider = FakeProvider(["Hello!"])
    output = await chat_once(tmp_path, provider, ["hi there"])
    assert output == "Salon: Hello!\n\n"
    assert provider.requests[0].messages[-1].plain_text == "you: hi there"


async def test_history_survives_a_restart(tmp_path: Path) -> None:
    await chat_once(tmp_path, FakeProvider(["Nice to meet you, Ann."]), ["my name is Ann"])
    provider = FakeProvider(["You are Ann."])
    output = await chat_once(tmp_path, provider, ["who am I?"])
    assert output == "Salon: You are Ann.\n\n"
    seen = [(m.role, m.plain_text) for m in provider.requests[0].messages]
    assert seen == [
        ("user", "you: my name is Ann"),
        ("assistant", "Nice to meet you, Ann."),
        ("user", "you: who am I?"),
    ]


async def test_quit_word_ends_the_session_without_activation(tmp_path: Path) -> None:
    provider = FakeProvider()
    output = await chat_once(tmp_path, provider, ["/quit", "never read"])
    assert output == ""
    assert provider.requests == []


async def test_a_silent_model_is_said_to_be_still_waited_for(tmp_path: Path) -> None:
    from fakes.providers import GatedProvider

    provider = GatedProvider()
    out = io.StringIO()
    queue: asyncio.Queue[str | None] = asyncio.Queue()
    config = bot_config(data_dir=str(tmp_path / "data"))
    app = BotApp(key="salon", config=config, root=tmp_path, secrets=Secrets({}), provider=provider)
    async with app:
        terminal = terminal_for(
            app.build_context(), lines=lines_from(queue), out=out, waiting_notice=0.05
        )
        serving = asyncio.create_task(app.serve(terminal.closed, [terminal]))
        queue.put_nowait("hello?\n")
        async with asyncio.timeout(10):
            while "still waiting for the model" not in out.getvalue():
                await terminal.wait_output()
        provider.gates[0].set()
        queue.put_nowait(None)
        await asyncio.wait_for(serving, 10)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("(Salon is still waiting for the model: ")
    assert "Salon: answer 1" in lines


async def test_files_show_their_saved_path_and_progress_one_line(tmp_path: Path) -> None:
    out = io.StringIO()
    config = bot_config(data_dir=str(tmp_path / "data"))
    app = BotApp(
        key="salon", config=config, root=tmp_path, secrets=Secrets({}), provider=FakeProvider()
    )
    async with app:
        terminal = terminal_for(app.build_context(), lines=lines_from(asyncio.Queue()), out=out)
        here = ChannelRef("terminal", "local")
        saved = Attachment(
            "a.png",
            "image/png",
            3,
            url="https://x.example/a.png",
            path="/d/outputs/a.png",
            label="castle",
        )
        await terminal.send(here, "(generate_image: prompt: castle)", files=[saved], note=True)
        await terminal.progress(here, "j", "⏳ generate_image: step 1/4")
        await terminal.progress(here, "j", "⏳ generate_image: step 2/4")
        await terminal.progress(here, "j", "✅ generate_image: done in 2 s", done=True)
    assert out.getvalue() == (
        "(generate_image: prompt: castle)\n[castle: /d/outputs/a.png]\n\n"
        "⏳ generate_image: step 1/4\n\n"
    )


async def test_a_direct_message_is_shown_to_the_one_person_and_never_logged(
    tmp_path: Path,
) -> None:
    """The link that connects someone's account (per_user OAuth) is theirs: the terminal
    has one person, who sees it marked as for them alone; the chat log keeps nothing."""
    out = io.StringIO()
    config = bot_config(data_dir=str(tmp_path / "data"))
    provider = FakeProvider([])
    app = BotApp(key="salon", config=config, root=tmp_path, secrets=Secrets({}), provider=provider)
    async with app:
        terminal = terminal_for(app.build_context(), lines=lines_from(asyncio.Queue()), out=out)
        assert terminal.can(Capability.DIRECT_MESSAGES)
        await terminal.send_direct(Participant("user", "you"), "connect here:\nhttp://x/a")
        logged = await app.store.chat_history("salon", CHANNEL, limit=9)
    assert out.getvalue() == "(Salon to you only) connect here:\nhttp://x/a\n\n"
    assert logged == []
