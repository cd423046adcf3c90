"""A running bot's upkeep: heartbeats, events pushed in from outside, config reload."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from salon.app import BotApp
from salon.config import Secrets, load_config_dir
from salon.llm import FakeProvider
from salon.model import Participant
from salon.platforms.memory import MemoryPlatform
from salon.store.sql import SQLStore, sqlite_url
from tests.conftest import WriteConfig, bot_config

ALICE = Participant("alice", "Alice")


@asynccontextmanager
async def serving(app: BotApp, platform: MemoryPlatform) -> AsyncIterator[None]:
    stop = asyncio.Event()
    async with app:
        task = asyncio.create_task(app.serve(stop, [platform]))
        await asyncio.wait_for(platform.started.wait(), 5)
        try:
            yield
        finally:
            stop.set()
            await asyncio.wait_for(task, 15)


async def test_a_running_bot_beats_and_its_last_beat_says_it_stopped(tmp_path: Path) -> None:
    app = BotApp(
        key="salon",
        config=bot_config(data_dir=str(tmp_path / "data")),
        root=tmp_path,
        secrets=Secrets({}),
        provider=FakeProvider(),
    )
    platform = MemoryPlatform(bot_name="Salon")
    async with serving(app, platform):
        await asyncio.wait_for(app.upkeep.wait_beats(1), 10)
        (alive,) = await app.store.health.health_reports()
    assert alive.platforms == {"memory": True}
    assert time.time() - alive.updated_at < 5
    assert {"agent", "scheduler", "traces", "chat-log writer"} <= set(alive.tasks)
    store = SQLStore(sqlite_url(tmp_path / "data" / "salon.db"))
    await store.open()
    (stopped,) = await store.health.health_reports()
    await store.close()
    assert stopped.updated_at == 0.0
    assert stopped.platforms == {"memory": False}


async def test_an_event_pushed_in_from_outside_is_answered_in_its_channel(tmp_path: Path) -> None:
    provider = FakeProvider(["Congratulations on the deploy."])
    app = BotApp(
        key="salon",
        config=bot_config(data_dir=str(tmp_path / "data")),
        root=tmp_path,
        secrets=Secrets({}),
        provider=provider,
    )
    platform = MemoryPlatform(bot_name="Salon")
    async with serving(app, platform):
        outside = SQLStore(sqlite_url(tmp_path / "data" / "salon.db"))  # the web process
        await outside.open()
        await outside.inbox.enqueue_event("salon", "memory:general", "deploy 42 finished", "CI")
        await outside.close()
        (answer,) = await platform.wait_sent(1)
    assert answer.channel.key == "memory:general"
    assert provider.requests[0].messages[-1].plain_text.endswith("CI: deploy 42 finished")


async def test_a_config_edit_applies_without_a_restart_and_a_broken_one_is_refused(
    write_config: WriteConfig, tmp_path: Path
) -> None:
    providers = "providers: {test: {type: openai, model: m}}\nprovider: test\n"
    root = write_config(
        providers + f"data_dir: {tmp_path / 'data'}\n", salon="system_prompt: You are calm.\n"
    )
    configs = load_config_dir(root)
    provider = FakeProvider(["one", "two", "three"])
    app = BotApp(
        key="salon",
        config=configs.bots["salon"],
        root=root,
        secrets=Secrets({}),
        provider=provider,
        channel_configs=configs.channel_configs("salon"),
        watch_config=True,
    )
    platform = MemoryPlatform(bot_name="Salon")
    dm = platform.channel("dm", is_direct=True)
    async with serving(app, platform):
        (root / "bots" / "salon.yaml").write_text("system_prompt: You are cheerful.\n")
        await asyncio.wait_for(app.upkeep.wait_reloads(1), 10)
        await platform.post(dm, ALICE, "hi")
        await platform.wait_sent(1)
        (root / "bots" / "salon.yaml").write_text("system_prompt: [unclosed\n")
        await asyncio.wait_for(app.upkeep.wait_reloads(2), 10)
        await platform.post(dm, ALICE, "still there?")
        await platform.wait_sent(2)
        health = app.upkeep.health()
    assert provider.requests[0].system == "You are cheerful."
    assert provider.requests[1].system == "You are cheerful."  # the broken edit changed nothing
    assert health.reload_error is not None
    assert "salon.yaml" in health.reload_error


async def test_a_log_level_edit_applies_at_once(write_config: WriteConfig, tmp_path: Path) -> None:
    """``001``'s DEBUG_LOGGING is hot-reloaded; so is ``log_level`` (the configurator's
    debug toggle writes it): the process's log follows without a restart."""
    providers = "providers: {test: {type: openai, model: m}}\nprovider: test\n"
    root = write_config(providers + f"data_dir: {tmp_path / 'data'}\n", salon="log_level: INFO\n")
    configs = load_config_dir(root)
    app = BotApp(
        key="salon",
        config=configs.bots["salon"],
        root=root,
        secrets=Secrets({}),
        provider=FakeProvider(["one"]),
        channel_configs=configs.channel_configs("salon"),
        watch_config=True,
    )
    logger = logging.getLogger()
    before = logger.level
    logger.setLevel(logging.INFO)
    try:
        async with serving(app, MemoryPlatform(bot_name="Salon")):
            (root / "bots" / "salon.yaml").write_text("log_level: DEBUG\n")
            await asyncio.wait_for(app.upkeep.wait_reloads(1), 10)
            debug = logger.level
            health = app.upkeep.health()
            (root / "bots" / "salon.yaml").write_text("log_level: WARNING\n")
            await asyncio.wait_for(app.upkeep.wait_reloads(2), 10)
            warning = logger.level
    finally:
        logger.setLevel(before)
    assert debug == logging.DEBUG
    assert health.reload_error is None  # no "restart the bot to apply: log_level"
    assert warning == logging.WARNING
