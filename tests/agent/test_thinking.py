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
from salon.config import Redactor
from salon.context import is_visible
from salon.errors import ProviderError
from salon.llm import FakeProvider, FakeReply
from salon.llm.base import ThinkingPart, ToolResultPart, ToolUsePart
from salon.model import Message, Participant, Tag, Thought, ToolCall, Usage
from salon.platforms.base import Capability
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
    assert await store.limits.spent("salon", f"channel:{dm.key}:tokens", day) == 960
    assert platform.sent[0].text == "Yes."
    assert "daily budget" in platform.sent[1].text  # the thinking was paid for


class PlainPlatform(MemoryPlatform):
    """A platform with no spoilers (as IRC and a terminal): notes are plain lines."""

    capabilities = frozenset(Capability) - {Capability.SPOILERS}


LONG = f"First I recall what tea is. The key is {SECRET}. " + "Then more. " * 60


async def thought_answer(
    store: SQLStore, platform: MemoryPlatform, show: str | None
) -> list[Message]:
    thinking = {"thinking": {"enabled": True, "show": show}} if show else {}
    reply = FakeReply(("Tea is a drink.",), thinking=(LONG[:50], LONG[50:]))
    agent = Agent(
        bot="salon",
        config=bot_config(**thinking),
        provider=FakeProvider([reply]),
        platforms={platform.name: platform},
        store=store,
        redactor=Redactor(frozenset({SECRET})),
    )
    await platform.start(agent.submit)
    task = asyncio.create_task(agent.run())
    try:
        await platform.post(platform.channel("dm", is_direct=True), ALICE, "tea?")
        await agent.wait_idle()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return platform.sent


@pytest.mark.parametrize("show", [None, "hidden", "trace"])
async def test_thinking_is_never_posted_unless_asked_for(store: SQLStore, show: str | None) -> None:
    sent = await thought_answer(store, MemoryPlatform(bot_name="Salon"), show)
    assert [m.text for m in sent] == ["Tea is a drink."]


async def test_a_spoiler_is_a_short_line_of_subtext_under_the_answer(store: SQLStore) -> None:
    platform = MemoryPlatform(bot_name="Salon")
    answer, note = await thought_answer(store, platform, "spoiler")
    assert answer.text == "Tea is a drink."
    assert note.text.startswith("-# ||First I recall what tea is. The key is ***. Then")
    assert note.text.endswith("…||")
    assert "\n" not in note.text
    assert len(note.text) <= 220
    assert Tag.NOTE in note.tags  # never read back as the bot's words


async def test_without_spoilers_the_summary_is_a_dot_message(store: SQLStore) -> None:
    platform = PlainPlatform(bot_name="Salon")
    _, note = await thought_answer(store, platform, "spoiler")
    assert note.text.startswith(".Salon thought: First I recall what tea is. The key is ***.")
    assert not is_visible(note, bot_config(name="Other").visibility)  # no bot reads a dot message
