"""A Gemini bot that thinks, through Salon's agent and tool loop, with the real google-genai
SDK against the loopback fake (which refuses a function call step without its signature)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

from fakes.llm_server import LLMServer, Scripted
from salon.agent import Agent
from salon.agent.conversation.toolrunner import ToolRunner
from salon.config import Secrets
from salon.llm.factory import build_provider
from salon.model import Participant
from salon.platforms.memory import MemoryPlatform
from salon.store.sql import SQLStore
from salon.tools.hub import ToolHub
from tests.conftest import bot_config
from tests.tools.conftest import in_process

ALICE = Participant("alice", "Alice")
MODEL = "gemini-3-pro-preview"
SECRET = "PRIVATE-REASONING"  # in every thought: it must never reach the channel


def dictionary() -> tuple[MCPServer, list[str]]:
    server = MCPServer("dictionary")
    ran: list[str] = []

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def lookup(word: str) -> str:
        """Look a word up."""
        ran.append(word)
        return f"{word}: a room for talk"

    return server, ran


Start = Callable[..., Any]


@pytest.fixture
async def start(store: SQLStore, llm_server: LLMServer) -> AsyncIterator[Start]:
    stack: list[Any] = []

    async def make(**config: Any) -> tuple[Agent, MemoryPlatform, list[str]]:
        server, ran = dictionary()
        hub = ToolHub([in_process(server)])
        await hub.start()
        stack.append(hub)
        providers = {
            "gemini": {
                "type": "google",
                "model": MODEL,
                "base_url": llm_server.base_url,
                "api_key_env": "GEMINI_KEY",
                "retries": 0,
            }
        }
        cfg = bot_config(provider="gemini", providers=providers, **config)
        provider = build_provider(cfg, Secrets({"GEMINI_KEY": "gm-secret"}))
        stack.append(provider)
        runner = ToolRunner(bot="salon", config=cfg, tools=hub, store=store, log=None)
        platform = MemoryPlatform(bot_name="Salon")
        agent = Agent(
            bot="salon",
            config=cfg,
            provider=provider,
            platforms={platform.name: platform},
            store=store,
            tools=runner,
        )
        await platform.start(agent.submit)
        stack.append(asyncio.create_task(agent.run()))
        return agent, platform, ran

    yield make
    for item in reversed(stack):
        if isinstance(item, asyncio.Task):
            item.cancel()
            await asyncio.gather(item, return_exceptions=True)
        elif isinstance(item, ToolHub):
            await item.stop()
        else:
            await item.aclose()


def call_parts(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The function call parts of the request's model turns, in order."""
    return [
        part
        for content in body["contents"]
        if content.get("role") == "model"
        for part in content["parts"]
        if "functionCall" in part or "function_call" in part
    ]


async def test_a_thinking_tool_loop_sends_the_signature_back_and_shows_no_thought(
    llm_server: LLMServer, start: Start
) -> None:
    llm_server.queue(
        Scripted(
            thinking=f"{SECRET}: better look the word up first.",
            tool_calls=[("c1", "lookup", {"word": "salon"})],
            reasoning_tokens=30,
        ),
        Scripted(
            thinking_chunks=[f"{SECRET}: the tool ", "says a room."],
            chunks=["It means ", "a room for talk."],
            reasoning_tokens=20,
        ),
    )
    agent, platform, ran = await start(thinking={"enabled": True, "budget_tokens": 2048})
    await platform.post(platform.channel("dm", is_direct=True), ALICE, "what is a salon?")
    await agent.wait_idle()
    assert ran == ["salon"]
    assert [m.text for m in platform.sent] == ["It means a room for talk."]
    shown = [m.text for m in platform.sent] + list(platform.tool_logs)
    assert not any(SECRET in text for text in shown)
    first, second = (r.body for r in llm_server.requests)
    assert first["generationConfig"]["thinkingConfig"]  # thinking was asked for
    (call,) = call_parts(second)  # the fake refuses this step without the signature
    assert call.get("thoughtSignature") or call.get("thought_signature")
    assert SECRET not in str(second["contents"])  # the reasoning itself never goes back


async def test_a_gemini_3_tool_loop_works_with_thinking_left_unset(
    llm_server: LLMServer, start: Start
) -> None:
    """Gemini 3 signs its function calls whether or not thinking is configured."""
    llm_server.queue(
        Scripted(tool_calls=[("c1", "lookup", {"word": "salon"})]), "It means a room for talk."
    )
    agent, platform, ran = await start()
    await platform.post(platform.channel("dm", is_direct=True), ALICE, "what is a salon?")
    await agent.wait_idle()
    assert ran == ["salon"]
    assert [m.text for m in platform.sent] == ["It means a room for talk."]
    first, second = (r.body for r in llm_server.requests)
    assert "thinkingConfig" not in first["generationConfig"]
    (call,) = call_parts(second)
    assert call.get("thoughtSignature") or call.get("thought_signature")
