from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from salon.agent import Agent
from salon.config import Redactor
from salon.llm import Provider
from salon.platforms.memory import MemoryPlatform
from salon.store.sql import SQLStore, sqlite_url
from tests.conftest import bot_config


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLStore]:
    store = SQLStore(sqlite_url(tmp_path / "salon.db"))
    await store.open()
    yield store
    await store.close()


StartAgent = Callable[..., Any]


@pytest.fixture
async def start_agent(store: SQLStore) -> AsyncIterator[StartAgent]:
    """Start an agent on a memory platform; everything is torn down after the test."""
    tasks: list[asyncio.Task[None]] = []

    async def start(
        provider: Provider, *, redactor: Redactor | None = None, **config: Any
    ) -> tuple[Agent, MemoryPlatform]:
        platform = MemoryPlatform(bot_name="Salon")
        agent = Agent(
            bot="salon",
            config=bot_config(**config),
            provider=provider,
            platforms={platform.name: platform},
            store=store,
            redactor=redactor,
            answers=store.traces,
            limits=store.limits,
            notes=store.notes,
            chatlog=store.chatlog,
        )
        await platform.start(agent.submit)
        tasks.append(asyncio.create_task(agent.run()))
        return agent, platform

    yield start
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
