from __future__ import annotations

import asyncio
import importlib.util
import os
import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from fakes.databases import Database, postgres_database, sqlite_database
from fakes.llm_server import LLMServer
from salon.app import BotApp
from salon.config import BotConfig
from salon.llm.anthropic import AnthropicProvider
from salon.llm.google import GoogleProvider
from salon.llm.local import default_model_path
from salon.llm.openai_compat import OpenAIProvider
from salon.platforms.base import Platform


@pytest.fixture
async def llm_server() -> AsyncIterator[LLMServer]:
    async with LLMServer() as server:
        yield server


@pytest.fixture(autouse=True)
async def _providers_closed(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[None]:
    """The model's fake keeps connections open, as real servers do: a provider a test
    built and did not close holds a pooled socket, which would reach the garbage collector
    in some later test (a ResourceWarning, an error here). Every provider with a network
    client built during a test is closed when it ends, in its own event loop. (The bots
    close theirs: ``tests/llm/test_keep_alive.py`` checks that without this.)"""
    built: list[Any] = []
    for kind in (OpenAIProvider, AnthropicProvider, GoogleProvider):
        monkeypatch.setattr(kind, "__init__", _recorded(kind.__init__, built))
    yield
    for provider in built:
        await provider.aclose()


def _recorded(init: Callable[..., None], built: list[Any]) -> Callable[..., None]:
    def recording(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        built.append(self)

    return recording


@pytest.fixture(params=["sqlite", "postgresql"])
async def database(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Database]:
    """Each store test runs on both databases Salon supports."""
    if request.param == "sqlite":
        yield sqlite_database(tmp_path / "salon.db")
        return
    async with postgres_database() as db:
        yield db


@pytest.fixture
async def pg_database() -> AsyncIterator[Database]:
    """A PostgreSQL database alone: for what only PostgreSQL does (several processes on
    several machines, LISTEN/NOTIFY)."""
    async with postgres_database() as db:
        yield db


def bot_config(**overrides: Any) -> BotConfig:
    """A valid bot config for unit tests; keyword arguments override any key."""
    data: dict[str, Any] = {
        "name": "Salon",
        "provider": "test",
        "providers": {"test": {"type": "openai", "model": "test-model", "backoff_initial": 0}},
        "shutdown_grace": 4,  # a test's stop waits no minute for a hung answer
    }
    data.update(overrides)
    return BotConfig.model_validate(data)


WriteConfig = Callable[..., Path]


@pytest.fixture
def write_config(tmp_path: Path) -> WriteConfig:
    """Write ``shared.yaml`` and ``bots/<name>.yaml`` files (dedented) into a temp dir."""

    def write(shared: str | None = None, **bots: str) -> Path:
        root = tmp_path / "config"
        (root / "bots").mkdir(parents=True, exist_ok=True)
        if shared is not None:
            (root / "shared.yaml").write_text(textwrap.dedent(shared), encoding="utf-8")
        for name, text in bots.items():
            (root / "bots" / f"{name}.yaml").write_text(textwrap.dedent(text), encoding="utf-8")
        return root

    return write


ServeApp = Callable[[BotApp, Sequence[Platform]], Awaitable[None]]


@pytest.fixture
async def serve_app() -> AsyncIterator[ServeApp]:
    """Open a BotApp and serve platforms in the background; stopped and closed after."""
    running: list[tuple[BotApp, asyncio.Event, asyncio.Task[None]]] = []

    async def serve(app: BotApp, platforms: Sequence[Platform]) -> None:
        await app.__aenter__()
        stop = asyncio.Event()
        running.append((app, stop, asyncio.create_task(app.serve(stop, platforms))))

    yield serve
    for app, stop, task in running:
        stop.set()
        await asyncio.wait_for(task, 15)
        await app.__aexit__(None, None, None)


@pytest.fixture
def local_model() -> Path:
    """The SmolLM2 file of the ``local`` extra. Skipped where the extra is not installed,
    except in CI, where scripts/test installs it and its absence is a failure."""
    path = default_model_path()
    if importlib.util.find_spec("llama_cpp") is None or path is None:
        if os.environ.get("CI"):
            pytest.fail("the local extra is missing in CI: scripts/test installs it")
        pytest.skip("the local extra is not installed (scripts/install --local)")
    return path
