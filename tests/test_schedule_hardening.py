"""Schedules answered exactly once through stops and store errors, noticed across
processes, and posting only where they may."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from fakes.clock import FakeClock
from salon.app import BotApp
from salon.config import Secrets
from salon.llm import FakeProvider, FakeReply, LLMRequest, ProviderTraits, StopEvent, TextDelta
from salon.llm.base import BaseProvider, StreamEvent
from salon.model import ChannelRef, Participant, Schedule, ToolCall
from salon.platforms.memory import MemoryPlatform
from salon.store.sql import SQLStore, sqlite_url
from tests.conftest import bot_config

ALICE = Participant("alice", "Alice")
T0 = datetime(2026, 11, 22, 20, 0, tzinfo=UTC)


class SlowThenFast(BaseProvider):
    """The first answer blocks until cancelled (a long answer cut by a stop); later ones
    come at once."""

    name = "slow"
    traits = ProviderTraits()

    def __init__(self) -> None:
        self.requests: list[LLMRequest] = []
        self.started = asyncio.Event()

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        if len(self.requests) == 1:
            self.started.set()
            await asyncio.Event().wait()  # until the stop cancels it
        yield TextDelta("Time to water the plants!")
        yield StopEvent("end_turn")

    async def aclose(self) -> None:
        return None


def make_app(tmp_path: Path, provider: Any, clock: FakeClock, **config: Any) -> BotApp:
    cfg = bot_config(data_dir=str(tmp_path / "data"), default_tool_policy="allow", **config)
    return BotApp(
        key="salon", config=cfg, root=tmp_path, secrets=Secrets({}), provider=provider, clock=clock
    )


async def add_schedule(tmp_path: Path, channel: ChannelRef, due: datetime) -> None:
    """Create a schedule through a store of its own, as another process would."""
    store = SQLStore(sqlite_url(tmp_path / "data" / "salon.db"))
    await store.open()
    try:
        schedule = Schedule(
            0, "salon", channel, "water the plants", "UTC", at=due, created_by=ALICE, next_due=due
        )
        await store.schedules.create_schedule(schedule)
    finally:
        await store.close()


async def test_an_occurrence_cut_by_a_stop_is_answered_after_the_restart(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    platform = MemoryPlatform(bot_name="Salon")
    dm = platform.channel("dm", is_direct=True)
    (tmp_path / "data").mkdir()
    await add_schedule(tmp_path, dm, T0)  # due now
    slow = SlowThenFast()
    app = make_app(tmp_path, slow, clock)
    stop = asyncio.Event()
    async with app:
        serving = asyncio.create_task(app.serve(stop, [platform], grace=0.1))
        await asyncio.wait_for(slow.started.wait(), 5)
        stop.set()  # a graceful stop while the model is answering
        await asyncio.wait_for(serving, 10)
    assert platform.sent == []

    again = make_app(tmp_path, FakeProvider(["Time to water the plants!"]), clock)
    stop = asyncio.Event()
    async with again:
        serving = asyncio.create_task(again.serve(stop, [platform]))
        (answer,) = await platform.wait_sent(1)
        await again.agent.wait_idle()
        stop.set()
        await asyncio.wait_for(serving, 10)
    assert answer.text == "Time to water the plants!"

    last = make_app(tmp_path, FakeProvider(["never"]), clock)
    async with last:  # completed: a third start answers nothing more
        stop = asyncio.Event()
        serving = asyncio.create_task(last.serve(stop, [platform]))
        await asyncio.wait_for(last.scheduler.wait_rests(1), 5)
        await last.agent.wait_idle()
        stop.set()
        await asyncio.wait_for(serving, 10)
    assert len(platform.sent) == 1


async def test_a_schedule_made_by_another_process_fires_without_a_restart(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    platform = MemoryPlatform(bot_name="Salon")
    dm = platform.channel("dm", is_direct=True)
    app = make_app(tmp_path, FakeProvider(["Watering now."]), clock)
    app.scheduler.poll_interval = 0.05
    stop = asyncio.Event()
    async with app:
        serving = asyncio.create_task(app.serve(stop, [platform]))
        await asyncio.wait_for(app.scheduler.wait_rests(1), 5)  # asleep, nothing to do
        await add_schedule(tmp_path, dm, T0 + timedelta(seconds=1))
        await clock.advance(timedelta(seconds=2))
        (answer,) = await platform.wait_sent(1)
        stop.set()
        await asyncio.wait_for(serving, 10)
    assert answer.text == "Watering now."


async def test_a_store_error_does_not_end_scheduling(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock(T0)
    platform = MemoryPlatform(bot_name="Salon")
    dm = platform.channel("dm", is_direct=True)
    app = make_app(tmp_path, FakeProvider(["Watering now."]), clock, restart_backoff_initial=0)
    failures = [RuntimeError("database is locked")]
    real = app.store.schedules.find

    async def flaky(bot: str, **kwargs: Any) -> list[Schedule]:
        if failures:
            raise failures.pop()
        return await real(bot, **kwargs)

    app.store.schedules.find = flaky  # type: ignore[method-assign]
    stop = asyncio.Event()
    async with app:
        (tmp_path / "data").mkdir(exist_ok=True)
        await add_schedule(tmp_path, dm, T0)
        serving = asyncio.create_task(app.serve(stop, [platform]))
        (answer,) = await platform.wait_sent(1)
        stop.set()
        await asyncio.wait_for(serving, 10)
    assert answer.text == "Watering now."
    assert app.tasks["scheduler"].restarts == 1
    failed = [
        r for r in caplog.records if r.levelno >= logging.ERROR and "scheduler" in r.getMessage()
    ]
    assert failed  # logged, not silent


def create_in(target: str) -> FakeReply:
    args = {"when": "2026-11-23T09:00", "prompt": "stand-up", "target_channel": target}
    return FakeReply(calls=(ToolCall("c", "schedule_create", args),))


@pytest.mark.parametrize(
    ("target", "roles", "refused"),
    [
        ("slack:#general", (), "this bot is not on 'slack'"),
        ("#general", (), "is not a channel: write platform:channel"),
        ("memory:elsewhere", (), "only post in the channel it is set in"),
        ("memory:elsewhere", ("mods",), None),
        ("memory:general", (), None),
    ],
)
async def test_a_schedule_may_only_post_where_it_is_allowed(
    tmp_path: Path, target: str, roles: tuple[str, ...], refused: str | None
) -> None:
    provider = FakeProvider([create_in(target), "ok"])
    app = make_app(tmp_path, provider, FakeClock(T0), authorized_roles=["mods"])
    platform = MemoryPlatform(bot_name="Salon")
    room = platform.channel("general")
    asker = Participant("alice", "Alice", roles=roles)
    stop = asyncio.Event()
    async with app:
        serving = asyncio.create_task(app.serve(stop, [platform]))
        await asyncio.wait_for(platform.started.wait(), 5)
        me = platform.self_participant
        await platform.post(room, asker, "@Salon stand-up tomorrow", mentions=[me])
        await platform.wait_sent(1)
        await app.agent.wait_idle()
        stop.set()
        await asyncio.wait_for(serving, 10)
        made = await app.store.schedules.find("salon")
    (result,) = (p.result for p in provider.requests[1].messages[-1].parts)  # type: ignore[attr-defined]
    if refused is None:
        assert not result.is_error
        assert [s.channel.key for s in made] == [target]
    else:
        assert result.is_error
        assert refused in result.content
        assert made == []


async def test_a_schedule_keeps_the_identity_of_whoever_set_it(tmp_path: Path) -> None:
    provider = FakeProvider([create_in("memory:general"), "ok"])
    app = make_app(tmp_path, provider, FakeClock(T0))
    platform = MemoryPlatform(bot_name="Salon")
    asker = Participant("irc:alice", "alice", identity="alice!alice@home.example")
    stop = asyncio.Event()
    async with app:
        serving = asyncio.create_task(app.serve(stop, [platform]))
        await asyncio.wait_for(platform.started.wait(), 5)
        await platform.post(
            platform.channel("general"),
            asker,
            "@Salon stand-up",
            mentions=[platform.self_participant],
        )
        await platform.wait_sent(1)
        await app.agent.wait_idle()
        stop.set()
        await asyncio.wait_for(serving, 10)
        (made,) = await app.store.schedules.find("salon")
    assert made.created_by.identity == "alice!alice@home.example"
