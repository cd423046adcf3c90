"""Composition root: builds one bot from its config and owns its tasks and shutdown."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from types import TracebackType

from salon.agent import Agent
from salon.config import BotConfig, ConfigSet, Secrets, resolve_secrets
from salon.llm.base import Provider
from salon.llm.factory import build_provider
from salon.platforms.base import Platform
from salon.platforms.terminal import TerminalPlatform
from salon.store.sqlite import SQLStore, sqlite_url

__all__ = ["BotApp", "data_dir", "database_url", "load_bot"]

logger = logging.getLogger(__name__)

SHUTDOWN_GRACE = 5.0  # seconds an answer in progress may take to finish at shutdown


def data_dir(root: Path, config: BotConfig) -> Path:
    path = Path(config.data_dir)
    return path if path.is_absolute() else root / path


def database_url(root: Path, config: BotConfig) -> str:
    if config.database_url:
        return config.database_url
    directory = data_dir(root, config)
    directory.mkdir(parents=True, exist_ok=True)
    return sqlite_url(directory / "salon.db")


def load_bot(
    configs: ConfigSet, name: str | None, environ: Mapping[str, str] | None = None
) -> tuple[str, BotConfig, Secrets]:
    """Pick a bot and resolve its secrets; raises ConfigError before anything connects."""
    key, config = configs.bot(name)
    secrets = resolve_secrets(
        config, os.environ if environ is None else environ, configs.locator(key)
    )
    return key, config, secrets


class BotApp:
    """One running bot: store, provider, agent and platforms, closed in reverse order."""

    def __init__(
        self,
        *,
        key: str,
        config: BotConfig,
        root: Path,
        secrets: Secrets,
        provider: Provider | None = None,
    ) -> None:
        self.key = key
        self.config = config
        self.root = root
        self.secrets = secrets
        self.store = SQLStore(database_url(root, config))
        self.provider = provider or build_provider(config, secrets)
        self.platforms: dict[str, Platform] = {}
        self._stack = AsyncExitStack()
        self._agent: Agent | None = None

    @property
    def agent(self) -> Agent:
        if self._agent is None:
            raise RuntimeError("BotApp is not started")
        return self._agent

    def terminal(self, **kwargs: object) -> TerminalPlatform:
        terminal = TerminalPlatform(
            bot=self.key,
            bot_name=self.config.name,
            user_name=self.config.platforms.terminal.user_name,
            chat_log=self.store,
            **kwargs,  # type: ignore[arg-type]
        )
        self.platforms[terminal.name] = terminal
        return terminal

    async def __aenter__(self) -> BotApp:
        await self.store.open()
        self._stack.push_async_callback(self.store.close)
        self._stack.push_async_callback(self.provider.aclose)
        self._agent = Agent(
            bot=self.key,
            config=self.config,
            provider=self.provider,
            platforms=self.platforms,
            store=self.store,
            redactor=self.secrets.redactor(),
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._stack.aclose()

    async def serve(self, until: asyncio.Event, platforms: Sequence[Platform] = ()) -> None:
        """Run the agent and the platforms until ``until`` is set, then shut down."""
        for platform in platforms:
            self.platforms[platform.name] = platform
        agent = self.agent
        agent.platforms.update(self.platforms)
        runner = asyncio.create_task(agent.run(), name=f"agent-{self.key}")
        try:
            for platform in self.platforms.values():
                await platform.start(agent.submit)
                logger.info("bot %s is on %s", self.key, platform.name)
            await until.wait()
            await self._drain()
        finally:
            for platform in self.platforms.values():
                await platform.stop()
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)

    async def _drain(self) -> None:
        try:
            async with asyncio.timeout(SHUTDOWN_GRACE + self.config.provider_config().timeout):
                await self.agent.wait_idle()
        except TimeoutError:
            logger.warning("bot %s: gave up waiting for answers in progress", self.key)
