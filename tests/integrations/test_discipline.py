"""Per-API request discipline: one FIFO queue, a timeout that excludes the wait, a TTL cache."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from fakes.vendors.base import Reply
from fakes.vendors.open_meteo import OpenMeteoFake
from salon.config import WeatherIntegration
from salon.integrations._discipline import CallQueue, ResultCache, cache_key
from salon.integrations._http import VendorError
from salon.integrations.weather import build_weather_server
from tests.integrations.conftest import ManualClock, connect, no_secrets, text_of, within


async def test_the_second_call_waits_and_the_timeout_does_not_count_the_wait(
    open_meteo: OpenMeteoFake, tmp_path: Path, clock: ManualClock
) -> None:
    """A hangs until its timeout; B waits behind it, then runs on its own full timeout."""
    never, later = asyncio.Event(), asyncio.Event()
    open_meteo.script("/v1/search", Reply(hold=never), Reply(hold=later, json={"results": []}))
    config = WeatherIntegration(base_url=open_meteo.base_url, timeout=0.5)
    server = build_weather_server(config, lookup=no_secrets, root=tmp_path, clock=clock)
    async with connect(server) as client:
        first = asyncio.create_task(client.call_tool("get_weather", {"location": "Seattle"}))
        await within(open_meteo.arrived.wait())
        second = asyncio.create_task(client.call_tool("get_weather", {"location": "Atlantis"}))
        await within(open_meteo.abort_seen.wait())  # A was cancelled at its timeout
        later.set()  # B has by now waited about as long as the whole timeout
        a, b = await within(asyncio.gather(first, second))
    assert a.is_error
    assert "did not finish within 0.5 seconds" in text_of(a)
    assert text_of(b).startswith("Open-Meteo knows no place called 'Atlantis'")
    assert open_meteo.log == ["arrive /v1/search", "abort /v1/search", "arrive /v1/search"]


async def test_concurrency_lets_that_many_run_at_once(
    open_meteo: OpenMeteoFake, tmp_path: Path, clock: ManualClock
) -> None:
    gate = asyncio.Event()
    open_meteo.script("/v1/search", Reply(hold=gate, json={}), Reply(hold=gate, json={}))
    config = WeatherIntegration(base_url=open_meteo.base_url, concurrency=2)
    server = build_weather_server(config, lookup=no_secrets, root=tmp_path, clock=clock)
    async with connect(server) as client:
        calls = [
            asyncio.create_task(client.call_tool("get_weather", {"location": place}))
            for place in ("Here", "There")
        ]
        while len(open_meteo.requests) < 2:
            open_meteo.arrived.clear()
            await within(open_meteo.arrived.wait())
        gate.set()
        await within(asyncio.gather(*calls))
    assert open_meteo.log == ["arrive /v1/search", "arrive /v1/search"]


async def test_read_only_results_are_cached_on_normalized_arguments(
    open_meteo: OpenMeteoFake, tmp_path: Path, clock: ManualClock
) -> None:
    config = WeatherIntegration(base_url=open_meteo.base_url, cache_ttl=600)
    server = build_weather_server(config, lookup=no_secrets, root=tmp_path, clock=clock)
    async with connect(server) as client:
        first = await client.call_tool("get_weather", {"location": "Seattle"})
        again = await client.call_tool("get_weather", {"location": "  seattle ", "units": "metric"})
        assert len(open_meteo.requests) == 2  # one search, one forecast: the second call hit
        assert text_of(again) == text_of(first)
        clock.now += 601
        await client.call_tool("get_weather", {"location": "Seattle"})
    assert len(open_meteo.requests) == 4


async def test_errors_are_not_cached(
    open_meteo: OpenMeteoFake, tmp_path: Path, clock: ManualClock
) -> None:
    open_meteo.script("/v1/search", Reply(status=503))
    config = WeatherIntegration(base_url=open_meteo.base_url)
    server = build_weather_server(config, lookup=no_secrets, root=tmp_path, clock=clock)
    async with connect(server) as client:
        failed = await client.call_tool("get_weather", {"location": "Seattle"})
        worked = await client.call_tool("get_weather", {"location": "Seattle"})
    assert failed.is_error
    assert not worked.is_error


def test_the_cache_is_bounded_in_entries_and_bytes(clock: ManualClock) -> None:
    cache = ResultCache(ttl=60, max_entries=3, max_bytes=100, clock=clock)
    for key in "abcd":
        cache.put(key, "x" * 10)
    assert len(cache) == 3
    assert cache.get("a") is None  # the oldest went first
    cache.get("b")  # used recently: stays
    cache.put("e", "y" * 90)  # 4 entries, 120 bytes: the least recently used go until both fit
    assert [cache.get(k) for k in "bcde"] == ["x" * 10, None, None, "y" * 90]
    cache.put("huge", "z" * 101)  # larger than the whole cache: not kept
    assert cache.get("huge") is None
    clock.now += 61
    assert [cache.get(k) for k in "bde"] == [None, None, None]
    assert len(cache) == 0
    cache.put("f", "z" * 100)  # the expired entries gave their bytes back: a full one fits
    assert cache.get("f") == "z" * 100


def test_no_cache_when_ttl_is_zero(clock: ManualClock) -> None:
    cache = ResultCache(ttl=0, max_entries=3, max_bytes=100, clock=clock)
    cache.put("a", "x")
    assert cache.get("a") is None


def test_cache_keys_ignore_case_spacing_order_and_unset_values() -> None:
    assert cache_key("t", {"a": " Big  City ", "b": 1, "c": None}) == cache_key(
        "t", {"b": 1, "a": "big city"}
    )
    assert cache_key("t", {"a": "x"}) != cache_key("u", {"a": "x"})


async def test_the_queue_is_first_come_first_served() -> None:
    queue = CallQueue("Vendor", concurrency=1, max_waiting=5, wait_timeout=10)
    order: list[str] = []
    gates = {name: asyncio.Event() for name in "abc"}

    async def work(name: str) -> str:
        order.append(name)
        await gates[name].wait()
        return name

    tasks = []
    for name in "abc":
        tasks.append(asyncio.create_task(queue.run(lambda n=name: work(n), 10)))  # type: ignore[misc]
        await asyncio.sleep(0)  # let it reach the queue in this order
    assert order == ["a"]
    assert queue.waiting == 2
    gates["a"].set()
    gates["b"].set()
    gates["c"].set()
    assert await within(asyncio.gather(*tasks)) == ["a", "b", "c"]
    assert order == ["a", "b", "c"]
    assert queue.running == 0


async def test_a_full_queue_refuses_at_once() -> None:
    queue = CallQueue("Vendor", concurrency=1, max_waiting=1, wait_timeout=10)
    gate = asyncio.Event()
    first = asyncio.create_task(queue.run(gate.wait, 10))
    await asyncio.sleep(0)
    second = asyncio.create_task(queue.run(gate.wait, 10))
    await asyncio.sleep(0)
    with pytest.raises(VendorError, match="Vendor is busy with earlier requests"):
        await queue.run(gate.wait, 10)
    gate.set()
    await within(asyncio.gather(first, second))


async def test_waiting_too_long_for_a_turn_is_busy_and_gives_the_turn_on() -> None:
    queue = CallQueue("Vendor", concurrency=1, max_waiting=5, wait_timeout=0.05)
    gate = asyncio.Event()
    first = asyncio.create_task(queue.run(gate.wait, 10))
    await asyncio.sleep(0)
    with pytest.raises(VendorError, match="busy"):
        await queue.run(gate.wait, 10)
    gate.set()
    await within(first)
    assert await within(queue.run(lambda: asyncio.sleep(0, "next"), 10)) == "next"
    assert queue.running == 0


async def test_a_cancelled_waiter_leaves_the_line() -> None:
    queue = CallQueue("Vendor", concurrency=1, max_waiting=5, wait_timeout=10)
    gate = asyncio.Event()
    first = asyncio.create_task(queue.run(gate.wait, 10))
    await asyncio.sleep(0)
    waiter = asyncio.create_task(queue.run(gate.wait, 10))
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert queue.waiting == 0
    gate.set()
    await within(first)
    assert queue.running == 0
