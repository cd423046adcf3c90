"""Every kind of vendor failure becomes one sentence the model can read, never a crash."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from fakes.vendors.base import Reply
from fakes.vendors.open_meteo import OpenMeteoFake
from salon.config import WeatherIntegration
from salon.integrations._http import retry_after_seconds
from salon.integrations.weather import build_weather_server
from tests.integrations.conftest import ManualClock, connect, no_secrets, text_of, within


async def _ask(fake: OpenMeteoFake, tmp_path: Path, clock: ManualClock, **settings: object) -> str:
    config = WeatherIntegration(base_url=fake.base_url, **settings)  # type: ignore[arg-type]
    server = build_weather_server(config, lookup=no_secrets, root=tmp_path, clock=clock)
    async with connect(server) as client:
        result = await client.call_tool("get_weather", {"location": "Seattle"})
    assert result.is_error
    return text_of(result)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (
            Reply(status=401, json={"error": True, "reason": "API key invalid"}),
            "Open-Meteo refused the request (HTTP 401): API key invalid",
        ),
        (
            Reply(status=404, body=b"Not Found", content_type="text/plain"),
            "Open-Meteo found nothing there (HTTP 404); check the name or id",
        ),
        (
            Reply(
                status=429,
                json={"error": True, "reason": "Too many"},
                headers={"Retry-After": "42"},
            ),
            "Open-Meteo is rate-limiting requests (HTTP 429): Too many; try again in 42 seconds",
        ),
        (
            Reply(status=429, json={}),
            "Open-Meteo is rate-limiting requests (HTTP 429); try again later",
        ),
        (
            Reply(status=503, body=b"<html>down</html>", content_type="text/html"),
            "Open-Meteo had a server error (HTTP 503); try again in a minute",
        ),
        (
            Reply(
                status=400,
                json={"error": True, "reason": "Latitude must be in range of -90 to 90°."},
            ),
            "Open-Meteo rejected the request (HTTP 400): Latitude must be in range of -90 to 90°.",
        ),
        (
            Reply(body=b'{"results": [', content_type="application/json"),
            "Open-Meteo sent an answer that is not valid JSON; try again later",
        ),
        (
            Reply(json={"results": "nope"}),
            "Open-Meteo sent an answer in an unexpected shape; try again later",
        ),
    ],
)
async def test_each_failure_is_one_clear_sentence(
    open_meteo: OpenMeteoFake, tmp_path: Path, clock: ManualClock, reply: Reply, expected: str
) -> None:
    open_meteo.script("/v1/search", reply)
    assert await _ask(open_meteo, tmp_path, clock) == expected


async def test_the_forecast_failing_after_the_search_is_reported_too(
    open_meteo: OpenMeteoFake, tmp_path: Path, clock: ManualClock
) -> None:
    open_meteo.script("/v1/forecast", Reply(status=500, json={"error": True, "reason": "boom"}))
    text = await _ask(open_meteo, tmp_path, clock)
    assert text == "Open-Meteo had a server error (HTTP 500); try again in a minute"


async def test_a_vendor_that_does_not_answer_times_out_and_the_request_is_dropped(
    open_meteo: OpenMeteoFake, tmp_path: Path, clock: ManualClock
) -> None:
    never = asyncio.Event()
    open_meteo.script("/v1/search", Reply(hold=never))
    text = await _ask(open_meteo, tmp_path, clock, timeout=0.3)
    assert text == (
        "Open-Meteo did not finish within 0.3 seconds, so the request was cancelled; "
        "try again later or ask for less"
    )
    await within(open_meteo.abort_seen.wait())
    assert open_meteo.aborted == 1


async def test_an_unreachable_vendor(tmp_path: Path, clock: ManualClock) -> None:
    fake = OpenMeteoFake()
    await fake.start()
    base = fake.base_url
    await fake.stop()  # nothing listens there any more
    config = WeatherIntegration(base_url=base)
    server = build_weather_server(config, lookup=no_secrets, root=tmp_path, clock=clock)
    async with connect(server) as client:
        result = await client.call_tool("get_weather", {"location": "Seattle"})
    assert result.is_error
    assert text_of(result) == "could not reach Open-Meteo; check its base_url or the network"


def test_retry_after_as_seconds_or_a_date() -> None:
    assert retry_after_seconds("120") == 120.0
    assert retry_after_seconds("Wed, 21 Oct 2026 07:28:00 GMT", now=1792567650.0) == 30.0
    assert retry_after_seconds("soon") is None
    assert retry_after_seconds(None) is None
    # Headers are read as Latin-1: a superscript digit is a character str.isdigit() takes.
    assert retry_after_seconds("\u00b2") is None


def test_a_query_is_encoded_as_httpx2_encodes_params() -> None:
    import httpx2

    from salon.integrations._http import with_query

    params = {
        "q": "São Paulo & more, 100%",
        "flag": True,
        "off": False,
        "none": None,
        "n": 3,
        "x": -122.33207,
        "ids": ["a b", 2],
    }
    url = "http://127.0.0.1:9/v1/search"
    built = httpx2.Request("GET", url, params=params).url
    assert httpx2.Request("GET", with_query(url, params)).url == built
    assert with_query(url, {}) == url
    assert with_query(url + "?k=1", {"a": 1}) == url + "?k=1&a=1"
