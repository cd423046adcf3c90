"""Reasoning models through the agent: thoughts kept for the tool loop and a restart,
reasoning tokens counted and priced, thinking traced, and shown only as configured."""

from __future__ import annotations

import asyncio
import io
import logging
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from salon import trace_cli
from salon.agent import Agent
from salon.agent.conversation.toolrunner import ToolRunner
from salon.errors import ProviderError
from salon.llm import FakeProvider, FakeReply
from salon.llm.base import ThinkingPart, ToolResultPart, ToolUsePart
from salon.model import Participant, Thought, ToolCall, Usage
from salon.platforms.memory import MemoryPlatform
from salon.store.sql import SQLStore
from salon.tools.hub import ToolHub
from salon.tools.log import ToolLog
from tests.agent.test_tool_loop import kit
from tests.agent.test_traces import SECRET, ask, make_app, running
from tests.conftest import bot_config
from tests.tools.conftest import in_process

ALICE = Participant("alice", "Alice")
THINKING = "Alice asks about two words, so I look both up before I answer."
FIRST = Thought("fake", "claude-sonnet-5-5", text=THINKING, signature="c2lnbmVkLTE=")
HIDDEN = Thought("fake", "claude-sonnet-5-5", redacted="b3BhcXVlLTE=")


def both_words() -> FakeReply:
    calls = (ToolCall("c1", "lookup", {"word": "tea"}), ToolCall("c2", "lookup", {"word": "jam"}))
    return FakeReply(calls=calls, thinking=(THINKING,), thoughts=(FIRST, HIDDEN))


Start = Callable[..., Any]


@pytest.fixture
async def start(store: SQLStore, tmp_path: Path) -> AsyncIterator[Start]:
    """An agent with the kit's tools and a tool log under ``tmp_path`` (a second start is
    a restart: a new agent, a tool log read back from disk)."""
    stack: list[Any] = []

    async def make(
        provider: FakeProvider, platform: MemoryPlatform | None = None, **config: Any
    ) -> tuple[Agent, MemoryPlatform]:
        server, _ = kit()
        hub = ToolHub([in_process(server)])
        await hub.start()
        stack.append(hub)
        cfg = bot_config(model="claude-sonnet-5-5", **config)
        log = ToolLog(tmp_path / "tools", "salon")
        log.seed(hours=1)
        runner = ToolRunner(bot="salon", config=cfg, tools=hub, store=store, log=log)
        platform = platform or MemoryPlatform(bot_name="Salon")
        agent = Agent(
            bot="salon",
            config=cfg,
            provider=provider,
            platforms={"memory": platform},
            store=store,
            tools=runner,
        )
        await platform.start(agent.submit)
        stack.append(asyncio.create_task(agent.run()))
        return agent, platform

    yield make
    for item in reversed(stack):
        if isinstance(item, asyncio.Task):
            item.cancel()
            await asyncio.gather(item, return_exceptions=True)
        else:
            await item.stop()


async def test_the_tool_loop_sends_the_turns_thoughts_back_first(start: Start) -> None:
    provider = FakeProvider([both_words(), "Tea is a drink, jam a spread."])
    agent, platform = await start(provider)
    await platform.post(platform.channel("dm", is_direct=True), ALICE, "tea? jam?")
    await agent.wait_idle()
    asked = provider.requests[1].messages[-2]
    assert [type(p) for p in asked.parts] == [ThinkingPart, ThinkingPart, ToolUsePart, ToolUsePart]
    assert [m.text for m in platform.sent] == ["Tea is a drink, jam a spread."]


async def test_a_restart_in_the_middle_of_a_tool_loop_sends_the_thoughts_again(
    start: Start, tmp_path: Path
) -> None:
    broken = FakeReply(error=ProviderError("fake: HTTP 529: overloaded", status=529))
    provider = FakeProvider([both_words(), broken])
    agent, platform = await start(provider)
    dm = platform.channel("dm", is_direct=True)
    await platform.post(dm, ALICE, "tea? jam?")
    await agent.wait_idle()  # the tools ran; the answer after them failed
    saved = ToolLog(tmp_path / "tools", "salon")
    assert saved.seed(hours=1) == 2
    first, second = saved.for_channel(dm.key, None)
    assert first.thoughts == (FIRST, HIDDEN)  # the turn's thoughts go with its first call
    assert second.thoughts == ()

    again = FakeProvider(["Tea is a drink, jam a spread."])
    agent, _ = await start(again, platform)  # the process started again, the channel as it was
    await platform.post(dm, ALICE, "so?")
    await agent.wait_idle()
    messages = again.requests[0].messages
    assert [m.role for m in messages] == ["user", "assistant", "user"]
    made = messages[1].parts
    assert [type(p) for p in made] == [ThinkingPart, ThinkingPart, ToolUsePart, ToolUsePart]
    assert [p.thought for p in made[:2]] == [FIRST, HIDDEN]  # type: ignore[union-attr]
    assert all(isinstance(p, ToolResultPart) for p in messages[2].parts[:2])
    assert all(THINKING not in m.plain_text for m in messages)


async def test_reasoning_is_traced_priced_as_output_and_never_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    thinking = f"The key {SECRET} must not be said. So: a short greeting."
    usage = Usage(input_tokens=10, output_tokens=905, reasoning_tokens=900)
    reply = FakeReply(("Hello, Alice.",), thinking=(thinking[:20], thinking[20:]), usage=usage)
    app = make_app(tmp_path, FakeProvider([reply]), model="claude-sonnet-5-5")
    platform = MemoryPlatform(bot_name="Salon")
    caplog.set_level(logging.DEBUG)
    async with running(app, platform):
        await ask(app, platform, "hi", 1)
        (summary,) = await app.store.traces.list_traces()
        _, body = await app.store.traces.get_trace(summary.id) or (None, {})
        totals = await app.store.channels.usage_totals("salon")
    out = io.StringIO()
    await app.store.open()
    try:
        assert await trace_cli.show(app.store.traces, str(summary.id), out=out) == 0
    finally:
        await app.store.close()
    shown = out.getvalue()
    # Collapsed: one line with its token count, the secret redacted.
    (line,) = [ln for ln in shown.splitlines() if "thinking" in ln]
    assert line.startswith("  thinking (900 tokens, ")
    assert "The key *** must not be said." in line
    assert SECRET not in shown
    assert "900 reasoning" in shown
    assert [m.text for m in platform.sent] == ["Hello, Alice."]
    (call,) = body["calls"]
    assert call["thinking"] == thinking.replace(SECRET, "***")
    assert (call["output_tokens"], call["reasoning_tokens"]) == (905, 900)
    assert summary.reasoning_tokens == 900
    # Sonnet 5.5: $2 in, $10 out a million; the reasoning is in the 905, priced once.
    assert summary.cost == pytest.approx((10 * 2 + 905 * 10) / 1e6)
    assert totals.reasoning_tokens == 900
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert not [line for line in said if "short greeting" in line]


async def test_a_reasoning_heavy_answer_is_charged_to_the_budget(
    start_agent: Any, store: SQLStore
) -> None:
    thought = FakeReply(("Yes.",), usage=Usage(10, 950, reasoning_tokens=940))
    agent, platform = await start_agent(
        FakeProvider([thought, "again"]),
        limits={"channel_budget": {"tokens": 900}},
        max_tokens=100,
    )
    dm = platform.channel("dm", is_direct=True)
    await platform.post(dm, ALICE, "think hard")
    await agent.wait_idle()
    await platform.post(dm, ALICE, "and again")
    await agent.wait_idle()
    day = int(time.time() // 86400)
    assert await store.spent("salon", f"channel:{dm.key}:tokens", day) == 960
    assert platform.sent[0].text == "Yes."
    assert "daily budget" in platform.sent[1].text  # the thinking was paid for
