"""A thinking bot's tool loop through the agent, the real anthropic SDK (Anthropic and
Bedrock) and the loopback fake, which refuses a loop whose thinking did not come back."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

from fakes.anthropic_reasoning import anthropic_signature
from fakes.llm_server import LLMServer, Scripted
from salon.agent import Agent
from salon.agent.conversation.toolrunner import ToolRunner
from salon.model import Participant
from salon.platforms.memory import MemoryPlatform
from salon.tools.hub import ToolHub
from tests.agent.conftest import StartAgent
from tests.llm._vendors import provider_for
from tests.tools.conftest import in_process

ALICE = Participant("alice", "Alice")
VENDORS = ["anthropic", "bedrock"]
THOUGHT = "Alice wants a definition; the lookup tool has one."
THINKING = {"enabled": True, "budget_tokens": 2048}
INTERLEAVED = "interleaved-thinking-2025-05-14"


def kit() -> MCPServer:
    server = MCPServer("kit")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def lookup(word: str) -> str:
        """Look a word up."""
        return f"{word} means a room"

    return server


@pytest.fixture
async def hub() -> AsyncIterator[ToolHub]:
    async with ToolHub([in_process(kit())]) as started:
        yield started


async def thinking_bot(
    start_agent: StartAgent, server: LLMServer, vendor: str, hub: ToolHub, **config: Any
) -> tuple[Agent, MemoryPlatform]:
    agent, platform = await start_agent(
        provider_for(server, vendor), thinking=THINKING, max_tokens=4096, **config
    )
    agent.tools = ToolRunner(
        bot="salon", config=agent.config, tools=hub, store=agent.store, log=None
    )
    return agent, platform


def asks_lookup(**fields: Any) -> Scripted:
    return Scripted(tool_calls=[("c1", "lookup", {"word": "salon"})], **fields)


def said(platform: MemoryPlatform) -> str:
    return "\n".join(m.text for m in platform.sent)


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_tool_loop_with_thinking_sends_the_thinking_back_unchanged(
    llm_server: LLMServer, start_agent: StartAgent, hub: ToolHub, vendor: str
) -> None:
    llm_server.queue(
        asks_lookup(thinking_chunks=["Alice wants a definition; ", "the lookup tool has one."]),
        Scripted(text="A salon is a room.", thinking="Now I can answer."),
    )
    agent, platform = await thinking_bot(start_agent, llm_server, vendor, hub)
    await platform.post(platform.channel("dm", is_direct=True), ALICE, "what is a salon?")
    await agent.wait_idle()
    assert said(platform) == "A salon is a room."
    first, second = (r.body for r in llm_server.requests)
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    asked, answered = second["messages"][-2:]
    assert asked["role"] == "assistant"
    assert asked["content"][0] == {
        "type": "thinking",
        "thinking": THOUGHT,
        "signature": anthropic_signature(THOUGHT),
    }
    assert asked["content"][1]["type"] == "tool_use"
    assert answered["content"][0]["type"] == "tool_result"
    assert "means a room" in json.dumps(answered)


@pytest.mark.parametrize("vendor", VENDORS)
async def test_each_round_of_a_loop_keeps_its_own_thinking_in_order(
    llm_server: LLMServer, start_agent: StartAgent, hub: ToolHub, vendor: str
) -> None:
    """Interleaved thinking: the model thinks again after a tool's result; each assistant
    message of the loop opens with the thinking it came with, none repeated."""
    llm_server.queue(
        asks_lookup(thinking="first thought"),
        asks_lookup(thinking="second thought", redacted_thinking="c2VjcmV0"),
        Scripted(text="A room."),
    )
    agent, platform = await thinking_bot(start_agent, llm_server, vendor, hub)
    await platform.post(platform.channel("dm", is_direct=True), ALICE, "what is a salon?")
    await agent.wait_idle()
    assert said(platform) == "A room."
    third = llm_server.requests[2]
    assert INTERLEAVED in json.dumps(third.body) + third.headers.get("anthropic-beta", "")
    asked = [m["content"] for m in third.body["messages"] if m["role"] == "assistant"]
    thinking = [[b for b in c if "thinking" in b["type"]] for c in asked[-2:]]
    assert thinking == [
        [
            {
                "type": "thinking",
                "thinking": "first thought",
                "signature": anthropic_signature("first thought"),
            }
        ],
        [
            {
                "type": "thinking",
                "thinking": "second thought",
                "signature": anthropic_signature("second thought"),
            },
            {"type": "redacted_thinking", "data": "c2VjcmV0"},
        ],
    ]
    assert [c[len(t)]["type"] for c, t in zip(asked[-2:], thinking, strict=True)] == [
        "tool_use"
    ] * 2


@pytest.mark.parametrize("vendor", VENDORS)
async def test_thinking_never_reaches_the_channel(
    llm_server: LLMServer, start_agent: StartAgent, hub: ToolHub, vendor: str
) -> None:
    llm_server.queue(
        asks_lookup(text="Let me check.\n\n", thinking="SECRET-PLAN: look it up first."),
        Scripted(text="It is a room.", thinking="SECRET-PLAN: now answer briefly."),
        Scripted(text="Still a room.", thinking="SECRET-PLAN: a second question."),
    )
    agent, platform = await thinking_bot(start_agent, llm_server, vendor, hub)
    dm = platform.channel("dm", is_direct=True)
    await platform.post(dm, ALICE, "what is a salon?")
    await agent.wait_idle()
    await platform.post(dm, ALICE, "and again?")
    await agent.wait_idle()
    assert llm_server.requests[0].body["thinking"]  # asked for, and streamed
    assert [m.text for m in platform.sent] == ["Let me check.", "It is a room.", "Still a room."]
    assert "SECRET-PLAN" not in said(platform)
    # Nor is it ever re-sent as visible text in a later activation.
    later = llm_server.requests[-1].body["messages"]
    visible = [b.get("text", "") for m in later for b in m["content"] if b["type"] == "text"]
    assert not any("SECRET-PLAN" in text for text in visible)


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_prefill_bot_with_thinking_answers_without_it(
    llm_server: LLMServer, start_agent: StartAgent, hub: ToolHub, vendor: str
) -> None:
    llm_server.queue(Scripted(text=" Hello Alice.", thinking="not asked for"))
    agent, platform = await thinking_bot(start_agent, llm_server, vendor, hub, mode="prefill")
    await platform.post(platform.channel("dm", is_direct=True), ALICE, "hi Salon")
    await agent.wait_idle()
    assert said(platform) == "Hello Alice."
    (sent,) = llm_server.requests
    assert "thinking" not in sent.body
    assert sent.body["messages"][-1]["role"] == "assistant"
