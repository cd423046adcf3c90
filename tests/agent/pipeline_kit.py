"""What the pipeline's tests share: an agent on the memory platform with a real in-process
MCP server for tools and the real openai SDK against the loopback LLM server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

from fakes.llm_server import LLMServer
from salon.agent import Agent
from salon.agent.conversation.toolrunner import ToolRunner
from salon.config import Secrets
from salon.llm import Provider
from salon.llm.factory import build_provider
from salon.platforms.memory import MemoryPlatform
from salon.store.sql import SQLStore
from salon.tools.hub import ToolHub
from salon.tools.log import ToolLog
from tests.conftest import bot_config
from tests.tools.conftest import in_process


def weather_server(calls: list[dict[str, Any]]) -> MCPServer:
    server = MCPServer("wx")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def get_weather(location: str, units: str = "metric") -> str:
        """The weather at a place."""
        calls.append({"location": location, "units": units})
        return f"{location}: 12 C, rain"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def activity_key() -> str:
        """A key for the activity page (internal)."""
        calls.append({"activity_key": True})
        return "key-123"

    return server


def providers_for(server: LLMServer, retries: int = 0) -> dict[str, Any]:
    return {
        "test": {
            "type": "openai",
            "model": "main-model",
            "base_url": server.base_url + "/v1",
            "retries": retries,
            "backoff_initial": 0,
            "api_key_env": "TEST_KEY",
        }
    }


def real_provider(config: Any) -> Provider:
    return build_provider(config, Secrets({"TEST_KEY": "k-test"}))


@asynccontextmanager
async def pipeline_agent(
    store: SQLStore,
    tmp_path: Path,
    server: LLMServer,
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    platform: MemoryPlatform | None = None,
    **config: Any,
) -> AsyncIterator[tuple[Agent, MemoryPlatform]]:
    cfg = bot_config(providers=providers_for(server), **config)
    hub = ToolHub([in_process(weather_server(tool_calls if tool_calls is not None else []))])
    await hub.start()
    runner = ToolRunner(
        bot="salon", config=cfg, tools=hub, store=store, log=ToolLog(tmp_path / "tools", "salon")
    )
    platform = platform or MemoryPlatform(bot_name="Salon")
    agent = Agent(
        bot="salon",
        config=cfg,
        provider=real_provider(cfg),
        platforms={platform.name: platform},
        store=store,
        tools=runner,
        providers=real_provider,
        answers=store.traces,
        limits=store.limits,
        notes=store.notes,
        chatlog=store.chatlog,
    )
    await platform.start(agent.submit)
    task = asyncio.create_task(agent.run())
    try:
        yield agent, platform
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await hub.stop()
