"""What a schedule may be: five-field cron only (minute resolution), no closer together
than ``schedule_min_interval``, and at most ``schedule_max_recurring`` recurring ones per
person. Each refusal is a tool error the model can read and relay."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from salon.app import BotApp
from salon.config import Secrets
from salon.llm import FakeProvider, FakeReply
from salon.model import Participant, ToolCall
from salon.platforms.memory import MemoryPlatform
from salon.store.sql import SQLStore, sqlite_url
from salon.tools.builtin import OPERATOR, ScheduleBook, build_builtin_server
from salon.tools.native import Result, ToolSet
from tests.conftest import bot_config

NOW = datetime(2026, 11, 22, 20, 0, tzinfo=UTC)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLStore]:
    store = SQLStore(sqlite_url(tmp_path / "salon.db"))
    await store.open()
    try:
        yield store
    finally:
        await store.close()


def tools(store: SQLStore, **rules: Any) -> ToolSet:
    async def nobody(_channel: str) -> list[str]:
        return []

    book = ScheduleBook(
        store.schedules, timezone="UTC", now=lambda: NOW, changed=lambda: None, **rules
    )
    return build_builtin_server("salon", store.chatlog, nobody, book)


async def create(tools: ToolSet, when: str, who: str = "alice") -> Result:
    arguments = {"when": when, "prompt": "p", "channel": "memory:general", "requester_id": who}
    return await tools.call("schedule_create", arguments)


@pytest.mark.parametrize("when", ["* * * * * *", "*/10 * * * * *", "0 9 * * 1 2026"])
async def test_a_cron_with_seconds_or_years_is_refused(store: SQLStore, when: str) -> None:
    result = await create(tools(store), when)
    assert result.is_error
    assert "five fields" in str(result.content[0])
    assert await store.schedules.find("salon") == []


async def test_a_cron_closer_together_than_the_minimum_is_refused(store: SQLStore) -> None:
    rules = tools(store, min_interval=600.0)
    refused = await create(rules, "*/5 * * * *")
    assert refused.is_error
    assert "every 5 minutes" in str(refused.content[0])
    assert "at most every 10 minutes" in str(refused.content[0])
    gap_within_an_hour = await create(rules, "0,1 9 * * *")  # 9:00 and 9:01
    assert gap_within_an_hour.is_error
    assert not (await create(rules, "*/10 * * * *")).is_error
    assert not (await create(rules, "2026-11-23T09:00")).is_error  # a one-shot has no interval
    assert len(await store.schedules.find("salon")) == 2


async def test_a_daily_time_is_a_day_apart_across_daylight_saving(store: SQLStore) -> None:
    """When Paris's clocks go back, croniter fires 02:00 twice, an hour apart: that is not
    the interval the cron asks for."""
    arguments = {"when": "0 2 * * *", "prompt": "p", "timezone": "Europe/Paris"}
    result = await tools(store, min_interval=7200.0).call(
        "schedule_create", arguments | {"channel": "memory:general", "requester_id": "alice"}
    )
    assert not result.is_error, result.content


async def test_every_minute_is_the_default_minimum(store: SQLStore) -> None:
    assert not (await create(tools(store), "* * * * *")).is_error


async def test_recurring_schedules_are_capped_per_person(store: SQLStore) -> None:
    rules = tools(store, max_recurring=2)
    assert not (await create(rules, "0 8 * * *")).is_error
    assert not (await create(rules, "0 9 * * *")).is_error
    third = await create(rules, "0 10 * * *")
    assert third.is_error
    assert "2 recurring schedules" in str(third.content[0])
    assert not (await create(rules, "2026-11-23T09:00")).is_error  # one-shots do not count
    assert not (await create(rules, "0 10 * * *", who="bob")).is_error  # per person
    assert not (await create(rules, "0 10 * * *", who=OPERATOR)).is_error  # the operator
    (first, *_) = await store.schedules.find("salon")
    assert await store.schedules.cancel_schedule("salon", first.id)
    assert not (await create(rules, "0 11 * * *")).is_error  # a cancelled one frees a place


async def test_the_bot_config_sets_the_rules_and_the_model_reads_the_refusal(
    tmp_path: Path,
) -> None:
    every_five = FakeReply(
        calls=(ToolCall("c", "schedule_create", {"when": "*/5 * * * *", "prompt": "p"}),)
    )
    provider = FakeProvider([every_five, "I cannot: at most every ten minutes."])
    config = bot_config(
        data_dir=str(tmp_path / "data"), default_tool_policy="allow", schedule_min_interval=600
    )
    app = BotApp(key="salon", config=config, root=tmp_path, secrets=Secrets({}), provider=provider)
    platform = MemoryPlatform(bot_name="Salon")
    dm = platform.channel("dm", is_direct=True)
    stop = asyncio.Event()
    async with app:
        serving = asyncio.create_task(app.serve(stop, [platform]))
        await asyncio.wait_for(platform.started.wait(), 5)
        await platform.post(dm, Participant("alice", "Alice"), "check the oven every 5 minutes")
        (said,) = await platform.wait_sent(1)
        await app.agent.wait_idle()
        stop.set()
        await asyncio.wait_for(serving, 10)
        assert await app.store.schedules.find("salon") == []
    (result,) = (p.result for p in provider.requests[1].messages[-1].parts)  # type: ignore[attr-defined]
    assert result.is_error
    assert "at most every 10 minutes" in result.content
    assert said.text == "I cannot: at most every ten minutes."
