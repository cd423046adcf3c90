"""Schedules end to end: the model sets a reminder, time passes, the bot speaks up."""

from __future__ import annotations

import asyncio
import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

from fakes.clock import FakeClock
from salon.app import BotApp
from salon.config import Secrets
from salon.llm import FakeProvider, FakeReply, ToolResultPart
from salon.model import Participant, ToolCall
from salon.platforms.memory import MemoryPlatform
from salon.platforms.terminal import terminal_for
from tests.conftest import bot_config
from tests.platforms.test_terminal import lines_from

ALICE = Participant("alice", "Alice")
T0 = datetime(2026, 11, 22, 20, 0, tzinfo=UTC)


def create(call_id: str, when: str, prompt: str = "call the bank") -> FakeReply:
    return FakeReply(
        calls=(ToolCall(call_id, "schedule_create", {"when": when, "prompt": prompt}),)
    )


async def test_reminder_fires_in_its_channel(tmp_path: Path) -> None:
    provider = FakeProvider(
        [
            create("bad1", "61 * * * *"),
            create("bad2", "2026-11-22T08:00"),
            create("ok", "2026-11-23T09:00"),
            "I will remind you at nine.",
            "Time to call the bank, Alice!",
        ]
    )
    clock = FakeClock(T0)
    config = bot_config(
        data_dir=str(tmp_path / "data"), timezone="Europe/Paris", default_tool_policy="allow"
    )
    app = BotApp(
        key="salon",
        config=config,
        root=tmp_path,
        secrets=Secrets({}),
        provider=provider,
        clock=clock,
    )
    platform = MemoryPlatform(bot_name="Salon")
    dm = platform.channel("dm", is_direct=True)
    stop = asyncio.Event()
    async with app:
        serving = asyncio.create_task(app.serve(stop, [platform]))
        await asyncio.wait_for(platform.started.wait(), 5)
        await platform.post(dm, ALICE, "remind me at 9 tomorrow to call the bank")
        await platform.wait_sent(1)
        results = [
            p.result
            for request in provider.requests[1:4]
            for p in request.messages[-1].parts
            if isinstance(p, ToolResultPart)
        ]
        assert results[0].is_error
        assert "invalid cron expression" in results[0].content
        assert results[1].is_error
        assert "is in the past" in results[1].content
        assert not results[2].is_error
        assert "scheduled #1 once at 2026-11-23 09:00 CET" in results[2].content
        (schedule,) = await app.store.schedules.find("salon")
        assert schedule.next_due == datetime(2026, 11, 23, 8, 0, tzinfo=UTC)
        assert schedule.created_by.name == "Alice"

        rests = app.scheduler.rests
        await clock.advance(timedelta(hours=12))
        await asyncio.wait_for(app.scheduler.wait_rests(rests + 1), 5)
        sent = await platform.wait_sent(2)
        stop.set()
        await asyncio.wait_for(serving, 10)
    assert sent[-1].text == "Time to call the bank, Alice!"
    assert sent[-1].channel.key == dm.key
    last_seen = provider.requests[-1].messages[-1].plain_text
    assert last_seen == "Scheduler: (scheduled task #1, set by Alice) call the bank"
    assert "Alice: remind me at 9 tomorrow" in provider.requests[-1].messages[0].plain_text


async def test_terminal_lists_and_cancels_schedules(tmp_path: Path) -> None:
    provider = FakeProvider([create("c", "0 8 * * *", "stretch"), "Daily at eight."])
    config = bot_config(data_dir=str(tmp_path / "data"), default_tool_policy="allow")
    app = BotApp(
        key="salon",
        config=config,
        root=tmp_path,
        secrets=Secrets({}),
        provider=provider,
        clock=FakeClock(T0),
    )
    queue: asyncio.Queue[str | None] = asyncio.Queue()
    out = io.StringIO()
    async with app:
        terminal = terminal_for(app.build_context(), lines=lines_from(queue), out=out)
        serving = asyncio.create_task(app.serve(terminal.closed, [terminal]))
        queue.put_nowait("remind me to stretch every morning at 8\n")
        async with asyncio.timeout(10):
            while "Daily at eight." not in out.getvalue():
                await terminal.wait_output()
        for line in ("/schedules\n", "/schedules cancel 1\n", "/schedules\n", None):
            queue.put_nowait(line)
        await asyncio.wait_for(serving, 10)
    text = out.getvalue()
    assert "#1 cron '0 8 * * *' (UTC, next 2026-11-23 08:00 UTC): stretch" in text
    assert "cancelled schedule #1" in text
    assert text.rstrip().endswith("no schedules here")
