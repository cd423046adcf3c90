"""Files and progress of tool calls on their way to the channel, and what the model, the
tool log and the trace see of them (never base64)."""

from __future__ import annotations

import asyncio
import base64
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, ImageContent, TextContent, ToolAnnotations

from fakes.vendors.images import tiny_png
from salon.app import BotApp
from salon.config import Secrets
from salon.llm import FakeProvider, FakeReply
from salon.llm.base import TextPart, ToolResultPart, ToolUsePart
from salon.model import Participant, Tag, ToolCall
from salon.platforms.memory import MemoryPlatform
from tests.conftest import bot_config
from tests.tools.conftest import in_process

ALICE = Participant("alice", "Alice")
PNG = tiny_png(3, 3, 17)
B64 = base64.b64encode(PNG).decode()
BASE64ISH = re.compile(r"[A-Za-z0-9+/]{60,}")
LOOKS = ToolAnnotations(read_only_hint=True)


def painter(steps: int = 3, gate: asyncio.Event | None = None) -> MCPServer:
    server = MCPServer("painter")

    @server.tool(annotations=LOOKS, structured_output=False)
    async def draw(what: str, ctx: Context) -> CallToolResult:
        """Paint slowly, reporting each step."""
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps, f"step {step}/{steps}")
            if gate is not None and step == 1:
                await gate.wait()
        image = ImageContent(
            type="image", data=B64, mime_type="image/png", _meta={"salon/name": what}
        )
        return CallToolResult(content=[TextContent(type="text", text=f"painted {what}"), image])

    @server.tool(annotations=LOOKS, structured_output=False)
    def leak() -> CallToolResult:
        """Answers with an image written into its text."""
        return CallToolResult(
            content=[TextContent(type="text", text=f"see data:image/png;base64,{B64} there")]
        )

    @server.tool(annotations=LOOKS)
    def store(blob: str) -> str:
        """Takes data as an argument."""
        return f"stored {len(blob)} characters"

    return server


@asynccontextmanager
async def running(
    tmp_path: Path, replies: list[Any], server: MCPServer, **config: Any
) -> AsyncIterator[tuple[BotApp, MemoryPlatform, FakeProvider]]:
    provider = FakeProvider(replies, default="done")
    app = BotApp(
        key="salon",
        config=bot_config(data_dir=str(tmp_path / "data"), **config),
        root=tmp_path,
        secrets=Secrets({}),
        provider=provider,
        extra_servers=[in_process(server)],
    )
    platform = MemoryPlatform(bot_name="Salon")
    stop = asyncio.Event()
    async with app:
        serving = asyncio.create_task(app.serve(stop, [platform]))
        await asyncio.wait_for(platform.started.wait(), 5)
        try:
            yield app, platform, provider
        finally:
            stop.set()
            await asyncio.wait_for(serving, 15)


def asks(name: str, **arguments: Any) -> FakeReply:
    return FakeReply(calls=(ToolCall("c1", name, arguments),))


def _text(part: object) -> str:
    if isinstance(part, ToolResultPart):
        return part.result.content
    if isinstance(part, ToolUsePart):
        return json.dumps(part.call.arguments)
    return part.text if isinstance(part, TextPart) else ""


async def answer(app: BotApp, platform: MemoryPlatform, text: str, sent: int) -> None:
    await platform.post(platform.channel("dm", is_direct=True), ALICE, text)
    await platform.wait_sent(sent)
    await asyncio.wait_for(app.agent.wait_idle(), 10)


async def test_an_image_reaches_the_channel_saved_and_the_model_reads_its_path(
    tmp_path: Path,
) -> None:
    replies = [asks("draw", what="castle"), "Here it is."]
    async with running(tmp_path, replies, painter()) as (app, platform, provider):
        await answer(app, platform, "paint a castle", 2)
    (image,) = platform.files
    saved = Path(image.path)
    kept = await asyncio.to_thread(saved.read_bytes)
    assert (image.label, image.data, kept) == ("castle", PNG, PNG)
    assert saved.parent.parent.parent.parent == tmp_path / "data" / "outputs"
    assert saved.name == "Alice-castle.png"
    shown = [m for m in platform.sent if m.attachments]
    assert [(m.text, m.tags) for m in shown] == [("(draw: what: castle)", frozenset({Tag.NOTE}))]
    result = provider.requests[1].messages[-1].parts[0]
    assert isinstance(result, ToolResultPart)
    relative = saved.relative_to(tmp_path / "data").as_posix()
    assert result.result.content == (
        f"painted castle\n[image castle (image/png, {len(PNG)} bytes) saved as {relative}, "
        "shown in the channel]"
    )


async def test_progress_is_one_note_edited_as_the_call_advances(tmp_path: Path) -> None:
    gate = asyncio.Event()
    replies = [asks("draw", what="tower"), "Done."]
    async with running(tmp_path, replies, painter(steps=4, gate=gate)) as (app, platform, _):
        await platform.post(platform.channel("dm", is_direct=True), ALICE, "paint")
        (note,) = await platform.wait_sent(1)  # the first report, while the call waits
        assert note.text == "⏳ draw: step 1/4 (25%)"
        assert Tag.NOTE in note.tags
        gate.set()
        await asyncio.wait_for(app.agent.wait_idle(), 10)
    jobs = {key for key, _, _ in platform.progress_log}
    assert len(jobs) == 1
    texts = [text for _, text, _ in platform.progress_log]
    assert texts[0] == "⏳ draw: step 1/4 (25%)"
    assert re.fullmatch(r"✅ draw: done in \d+ s", texts[-1])
    assert [done for _, _, done in platform.progress_log][-1] is True
    notes = [m for m in platform.messages(note.channel) if m.id == note.id]
    assert notes[0].text == texts[-1]  # the same message, edited to its end


@pytest.mark.parametrize("tool_mode", ["native", "text"])
async def test_no_base64_reaches_the_model_the_log_or_the_trace(
    tmp_path: Path, tool_mode: str
) -> None:
    data_uri = f"data:image/png;base64,{B64 * 3}"
    calls = (ToolCall("c1", "leak", {}), ToolCall("c2", "store", {"blob": data_uri}))
    written = (
        '<function_calls>\n<invoke name="leak">\n</invoke>\n<invoke name="store">\n'
        f'<parameter name="blob">{data_uri}</parameter>\n</invoke>\n'
    )
    first = FakeReply(calls=calls) if tool_mode == "native" else written
    replies: list[Any] = [first, "seen"]
    async with running(tmp_path, replies, painter(), tool_mode=tool_mode) as (
        app,
        platform,
        provider,
    ):
        await answer(app, platform, "look", 2)
        await app.traces.flush()
        (summary,) = await app.store.traces.list_traces()
        _, trace = await app.store.traces.get_trace(summary.id) or (None, {})
    follow_up = provider.requests[1]
    sent = json.dumps([_text(part) for message in follow_up.messages for part in message.parts])
    assert "saved as outputs/" in sent
    logged = "\n".join(p.read_text() for p in (tmp_path / "data" / "tools").rglob("*.jsonl"))
    tools = json.dumps(trace["tools"])
    for seen in (sent, logged, tools, "\n".join(platform.tool_logs)):
        assert "base64," not in seen
        assert not BASE64ISH.search(seen), seen[:300]
    assert "[image/png: 300 base64 characters left out]" in tools
