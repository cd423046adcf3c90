"""Planner tool mode: a JSON plan first, the tool (the real mcp-server-time), then the answer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from fakes.llm_server import LLMServer, Scripted
from salon.agent import Agent
from salon.agent.conversation.planner import Plan, answer_request, parse_plan
from salon.agent.conversation.toolrunner import ToolRunner
from salon.llm import ChatMessage, LLMRequest
from salon.model import Participant, ToolCall, ToolResult
from salon.platforms.memory import MemoryPlatform
from salon.store.sql import SQLStore
from salon.tools.hub import MessageHandler, ServerSpec, ToolHub
from tests.agent.test_with_real_sdk import real_provider
from tests.conftest import bot_config
from tests.tools.conftest import MCP_SERVER_TIME

ALICE = Participant("alice", "Alice")
TOOLS = {"get_current_time", "convert_time"}


def test_plans_are_read_bare_fenced_or_inside_prose() -> None:
    bare = '{"use_tool": true, "tool": "get_current_time", "args": {"timezone": "UTC"}}'
    assert parse_plan(bare, TOOLS) == Plan(True, "get_current_time", {"timezone": "UTC"})
    fenced = f'Sure.\n```json\n{bare[:-1]}, "reason": "time"}}\n```\nDone.'
    assert parse_plan(fenced, TOOLS) == Plan(True, "get_current_time", {"timezone": "UTC"}, "time")
    assert parse_plan('I will not. {"use_tool": false, "reason": "chat"}', TOOLS) == Plan(
        False, reason="chat"
    )
    assert parse_plan('{"use_tool": true, "tool": "get_current_time"}', TOOLS) == Plan(
        True, "get_current_time", {}
    )
    for broken in (
        "no plan at all",
        '{"use_tool": "yes", "tool": "get_current_time"}',
        '{"use_tool": true, "tool": "rm_rf", "args": {}}',
        '{"use_tool": true, "tool": "get_current_time", "args": [1]}',
        '{"use_tool": true, "tool": "get_current_time", "args": {"timezone": ',
    ):
        assert parse_plan(broken, TOOLS) is None, broken


def test_the_result_goes_before_the_bots_name_in_a_transcript() -> None:
    request = LLMRequest(
        model="m",
        messages=(
            ChatMessage.text("user", "<cmd>cat untitled.txt</cmd>"),
            ChatMessage.text("assistant", "Alice: what time is it?\n\nSalon:"),
        ),
        prefill=True,
    )
    call = ToolCall("p1", "get_current_time", {"timezone": "UTC"})
    answered = answer_request(request, call, ToolResult("p1", "09:00"))
    text = answered.messages[-1].plain_text
    assert text == (
        'Alice: what time is it?\n\n[tool get_current_time({"timezone": "UTC"}) returned:\n'
        "09:00\n]\n\nSalon:"
    )


@pytest.fixture
async def planner_bot(
    llm_server: LLMServer, store: SQLStore, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[Agent, MemoryPlatform]]:
    params = StdioServerParameters(command=str(MCP_SERVER_TIME))

    def connect(on_message: MessageHandler) -> Client:
        return Client(params, message_handler=on_message, cache=None)

    hub = ToolHub([ServerSpec("time", connect, start_timeout=20)])
    await hub.start()
    overrides = getattr(request, "param", {})  # more config keys, by indirect parametrize
    config = bot_config(tool_mode="planner", default_tool_policy="allow", **overrides)
    runner = ToolRunner(bot="salon", config=config, tools=hub, store=store, log=None)
    platform = MemoryPlatform(bot_name="Salon")
    agent = Agent(
        bot="salon",
        config=config,
        provider=real_provider(llm_server, "openai"),
        platforms={platform.name: platform},
        store=store,
        tools=runner,
    )
    await platform.start(agent.submit)
    task = asyncio.create_task(agent.run())
    yield agent, platform
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await hub.stop()


async def test_planner_runs_the_tool_then_answers(
    llm_server: LLMServer, planner_bot: tuple[Agent, MemoryPlatform]
) -> None:
    agent, platform = planner_bot
    plan = (
        "```json\n"
        '{"use_tool": true, "tool": "get_current_time", "args": {"timezone": "Asia/Tokyo"},'
        ' "reason": "Alice asks for the time in Tokyo"}\n```'
    )
    llm_server.queue(plan, "It is evening in Tokyo.")
    dm = platform.channel("dm", is_direct=True)
    await platform.post(dm, ALICE, "what time is it in Tokyo?")
    await agent.wait_idle()
    assert [m.text for m in platform.sent] == ["It is evening in Tokyo."]  # the plan is unseen
    planning, answering = (r.body for r in llm_server.requests)
    assert "tools" not in planning
    assert "tools" not in answering
    ask = planning["messages"][-1]["content"]
    assert "planning step" in ask
    assert "get_current_time" in ask
    told = answering["messages"][-1]["content"]
    assert told.startswith('[tool get_current_time({"timezone": "Asia/Tokyo"}) returned:')
    assert '"timezone": "Asia/Tokyo"' in told  # what the real server answered
    assert answering["messages"][-2]["content"] == "Alice: what time is it in Tokyo?"


async def test_an_unreadable_plan_falls_back_to_a_direct_answer(
    llm_server: LLMServer, planner_bot: tuple[Agent, MemoryPlatform]
) -> None:
    agent, platform = planner_bot
    llm_server.queue('I would use {"use_tool": maybe', "Hello Alice!")
    dm = platform.channel("dm", is_direct=True)
    await platform.post(dm, ALICE, "hello")
    await agent.wait_idle()
    assert [m.text for m in platform.sent] == ["Hello Alice!"]
    planning, answering = (r.body for r in llm_server.requests)
    assert answering["messages"][-1]["content"] == "Alice: hello"  # the plain request
    assert len(answering["messages"]) == len(planning["messages"]) - 1


async def test_a_failed_planning_call_falls_back_to_a_direct_answer(
    llm_server: LLMServer, planner_bot: tuple[Agent, MemoryPlatform]
) -> None:
    """As the seed's planner does on a timeout or an API error: no plan, a plain answer."""
    agent, platform = planner_bot
    llm_server.queue(Scripted(status=400, error_message="planner refused"), "Hello Alice!")
    dm = platform.channel("dm", is_direct=True)
    await platform.post(dm, ALICE, "hello")
    await agent.wait_idle()
    assert [m.text for m in platform.sent] == ["Hello Alice!"]
    _, answering = (r.body for r in llm_server.requests)
    assert answering["messages"][-1]["content"] == "Alice: hello"


@pytest.mark.parametrize(
    "planner_bot", [{"temperature": 1.2, "planner_temperature": 1.0}], indirect=True
)
async def test_planning_and_answering_have_their_own_temperatures(
    llm_server: LLMServer, planner_bot: tuple[Agent, MemoryPlatform]
) -> None:
    """The seed plans at 1.0 (creative but structured) and answers at 1.2."""
    agent, platform = planner_bot
    llm_server.queue('{"use_tool": false, "reason": "chat"}', "Hello Alice!")
    await platform.post(platform.channel("dm", is_direct=True), ALICE, "hello")
    await agent.wait_idle()
    planning, answering = (r.body for r in llm_server.requests)
    assert (planning["temperature"], answering["temperature"]) == (1.0, 1.2)
