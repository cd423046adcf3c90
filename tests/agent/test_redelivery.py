"""A message handed to the agent twice is answered once; only a message older than the
process (give or take a minute of clock skew) costs a store lookup: an earlier process may
have answered it."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from salon.app import BotApp
from salon.config import Secrets
from salon.llm import FakeProvider
from salon.model import MessageEvent, Participant
from salon.platforms.memory import MemoryPlatform
from tests.conftest import bot_config

ALICE = Participant("alice", "Alice")


async def test_only_a_message_older_than_the_process_is_looked_up(tmp_path: Path) -> None:
    provider = FakeProvider(["One.", "Two.", "Three."])
    config = bot_config(data_dir=str(tmp_path / "data"))
    app = BotApp(key="salon", config=config, root=tmp_path, secrets=Secrets({}), provider=provider)
    platform = MemoryPlatform(bot_name="Salon")
    dm = platform.channel("dm", is_direct=True)
    looked: list[str] = []
    stop = asyncio.Event()
    async with app:
        store_answered = app.store.traces.answered

        async def answered(bot: str, platform_name: str, message_id: str) -> bool:
            looked.append(message_id)
            return await store_answered(bot, platform_name, message_id)

        app.store.traces.answered = answered  # type: ignore[method-assign]
        serving = asyncio.create_task(app.serve(stop, [platform]))
        await asyncio.wait_for(platform.started.wait(), 5)
        fresh = await platform.post(dm, ALICE, "hello")
        await platform.wait_sent(1)
        await app.agent.submit(MessageEvent(fresh))  # delivered again: dropped at once
        now = datetime.now(UTC)
        later = replace(fresh, id="later-1", created_at=now + timedelta(minutes=2))
        await app.agent.submit(MessageEvent(later))  # as once the process has run a while
        await platform.wait_sent(2)
        old = replace(fresh, id="old-1", created_at=now - timedelta(days=1))
        await app.agent.submit(MessageEvent(old))  # never answered by anyone: answered now
        await platform.wait_sent(3)
        await app.agent.wait_idle()
        stop.set()
        await asyncio.wait_for(serving, 10)
    assert [m.text for m in platform.sent] == ["One.", "Two.", "Three."]
    assert "later-1" not in looked
    assert "old-1" in looked
