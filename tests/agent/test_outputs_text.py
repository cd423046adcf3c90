"""``outputs.save_text``: an answer whose tools made files is saved beside them as
``<requester>-answer.txt`` (``001``'s ``username-response_text.txt``); off by default."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

from fakes.vendors.images import tiny_png
from salon.agent.conversation.toolrunner import ToolRunner
from salon.config import OutputsConfig
from salon.llm import FakeProvider, FakeReply
from salon.model import Participant, ToolCall
from salon.tools.hub import ServerSpec, ToolHub
from salon.tools.native import Annotations, Image, Result, ToolSet
from salon.tools.outputs import OutputDir
from tests.agent.conftest import StartAgent

ALICE = Participant("alice", "Alice")
PNG = tiny_png(4, 4, 90)


def painter() -> ToolSet:
    tools = ToolSet("painter", instructions="draws")

    @tools.tool(annotations=Annotations(read_only=True), structured_output=False)
    async def draw(subject: str) -> Result:
        """Draw a picture."""
        return Result(("drawn", Image(PNG, "image/png", name=subject)))

    return tools


async def _ask(start_agent: StartAgent, tmp_path: Path, **outputs: object) -> list[Path]:
    provider = FakeProvider(
        [
            FakeReply(calls=(ToolCall("c1", "draw", {"subject": "cat"}),), stop="tool_use"),
            FakeReply.text("Here is your cat, drawn in ink."),
        ]
    )
    agent, platform = await start_agent(provider, outputs=outputs)
    moment = datetime(2026, 3, 7, 14, 30, tzinfo=UTC)
    folder = OutputDir(tmp_path, OutputsConfig(), now=lambda: moment)
    async with ToolHub([ServerSpec(name="painter", tools=painter())], outputs=folder) as hub:
        agent.tools = ToolRunner(
            bot="salon", config=agent.config, tools=hub, store=agent.store, log=None
        )
        await platform.post(platform.channel("dm", is_direct=True), ALICE, "draw a cat")
        async with asyncio.timeout(10):
            await agent.wait_idle()
    assert "Here is your cat" in "\n".join(m.text for m in platform.sent)
    return sorted((tmp_path / "outputs").rglob("*.*"))


async def test_the_answer_is_saved_beside_the_image(
    start_agent: StartAgent, tmp_path: Path
) -> None:
    files = await _ask(start_agent, tmp_path, save_text=True)
    assert [f.name for f in files] == ["Alice-answer.txt", "Alice-cat.png"]
    assert files[0].parent == files[1].parent
    assert files[0].read_text(encoding="utf-8") == "Here is your cat, drawn in ink."


async def test_off_by_default(start_agent: StartAgent, tmp_path: Path) -> None:
    files = await _ask(start_agent, tmp_path)
    assert [f.name for f in files] == ["Alice-cat.png"]
