"""The weather integration through an MCP client session, against loopback fakes."""

from __future__ import annotations

from pathlib import Path

from fakes.vendors.accuweather import AccuWeatherFake
from fakes.vendors.open_meteo import OpenMeteoFake, Place
from salon.config import WeatherIntegration
from salon.integrations.weather import build_weather_server
from tests.integrations.conftest import ManualClock, connect, no_secrets, secrets_of, text_of


async def test_open_meteo_current_and_forecast(
    open_meteo: OpenMeteoFake, tmp_path: Path, clock: ManualClock
) -> None:
    config = WeatherIntegration(base_url=open_meteo.base_url)
    server = build_weather_server(config, lookup=no_secrets, root=tmp_path, clock=clock)
    async with connect(server) as client:
        result = await client.call_tool("get_weather", {"location": "Seattle", "days": 2})
    text = text_of(result)
    assert not result.is_error, text
    assert "Weather for Seattle, Washington, United States (Open-Meteo)" in text
    assert "Now: 11.5 °C (feels like 9.5 °C), overcast" in text
    assert text.count("\n- 2026-11-") == 2
    search, forecast = open_meteo.requests
    assert search.path == "/v1/search"
    assert search.query["name"] == "Seattle"
    assert forecast.query["forecast_days"] == "2"
    assert "temperature_unit" not in forecast.query
    assert search.headers["user-agent"].startswith("salon/")


async def test_imperial_units_are_asked_of_open_meteo(
    open_meteo: OpenMeteoFake, tmp_path: Path, clock: ManualClock
) -> None:
    open_meteo.places["oslo"] = Place("Oslo", 59.91, 10.75, "Norway", "Oslo", "Europe/Oslo", -3.0)
    config = WeatherIntegration(base_url=open_meteo.base_url, units="imperial")
    server = build_weather_server(config, lookup=no_secrets, root=tmp_path, clock=clock)
    async with connect(server) as client:
        result = await client.call_tool("get_weather", {"location": "Oslo"})
    text = text_of(result)
    assert "Now: 26.6 °F" in text
    assert "wind 7 mp/h" in text
    forecast = open_meteo.requests[-1]
    assert forecast.query["temperature_unit"] == "fahrenheit"
    assert forecast.query["wind_speed_unit"] == "mph"
    assert forecast.query["precipitation_unit"] == "inch"
    assert forecast.query["forecast_days"] == "3"


async def test_unknown_place_is_an_error_the_model_can_act_on(
    open_meteo: OpenMeteoFake, tmp_path: Path, clock: ManualClock
) -> None:
    config = WeatherIntegration(base_url=open_meteo.base_url)
    server = build_weather_server(config, lookup=no_secrets, root=tmp_path, clock=clock)
    async with connect(server) as client:
        result = await client.call_tool("get_weather", {"location": "Atlantis"})
    assert result.is_error
    assert text_of(result).startswith("Open-Meteo knows no place called 'Atlantis'")
    assert [r.path for r in open_meteo.requests] == ["/v1/search"]


async def test_accuweather_with_its_key(
    accuweather: AccuWeatherFake, tmp_path: Path, clock: ManualClock
) -> None:
    config = WeatherIntegration(base_url=accuweather.base_url, accuweather_api_key_env="ACCU_KEY")
    lookup = secrets_of({"ACCU_KEY": "accu-test-key"})
    server = build_weather_server(config, lookup=lookup, root=tmp_path, clock=clock)
    async with connect(server) as client:
        result = await client.call_tool("get_weather", {"location": "Seattle", "days": 2})
    text = text_of(result)
    assert not result.is_error, text
    assert "Weather for Seattle, Washington, United States (AccuWeather)" in text
    assert "Now: 9.4 °C (feels like 7 °C), light rain, humidity 88%, wind 14.8 km/h, rain" in text
    assert "- 2026-11-23: 6 to 11 °C, day showers, night cloudy" in text
    assert "2026-11-25" not in text
    paths = [r.path for r in accuweather.requests]
    assert paths == [
        "/locations/v1/cities/search",
        "/currentconditions/v1/351409",
        "/forecasts/v1/daily/5day/351409",
    ]
    assert all(r.headers["authorization"] == "Bearer accu-test-key" for r in accuweather.requests)
    assert all("apikey" not in r.query for r in accuweather.requests)
    assert accuweather.requests[-1].query["metric"] == "true"


async def test_accuweather_refusing_the_key_names_the_variable(
    accuweather: AccuWeatherFake, tmp_path: Path, clock: ManualClock
) -> None:
    config = WeatherIntegration(base_url=accuweather.base_url, accuweather_api_key_env="ACCU_KEY")
    lookup = secrets_of({"ACCU_KEY": "wrong-key"})
    server = build_weather_server(config, lookup=lookup, root=tmp_path, clock=clock)
    async with connect(server) as client:
        result = await client.call_tool("get_weather", {"location": "Seattle"})
    assert result.is_error
    text = text_of(result)
    assert text == (
        "AccuWeather refused the request (HTTP 401): Api Authorization failed; "
        "check the key in ACCU_KEY"
    )
    assert "wrong-key" not in text


async def test_a_403_is_data_the_subscription_leaves_out_not_a_bad_key(
    accuweather: AccuWeatherFake, tmp_path: Path, clock: ManualClock
) -> None:
    accuweather.no_access.add("/forecasts/v1/daily/5day")
    config = WeatherIntegration(base_url=accuweather.base_url, accuweather_api_key_env="ACCU_KEY")
    lookup = secrets_of({"ACCU_KEY": "accu-test-key"})
    server = build_weather_server(config, lookup=lookup, root=tmp_path, clock=clock)
    async with connect(server) as client:
        result = await client.call_tool("get_weather", {"location": "Seattle"})
    assert result.is_error
    assert text_of(result) == (
        "AccuWeather does not give this key access to that data (HTTP 403): Forbidden; the "
        "subscription does not include it, or its limit is reached"
    )


async def test_a_key_from_the_older_portal_goes_as_the_apikey_parameter(
    accuweather: AccuWeatherFake, tmp_path: Path, clock: ManualClock
) -> None:
    config = WeatherIntegration(base_url=accuweather.base_url, accuweather_api_key_env="ACCU_KEY")
    lookup = secrets_of({"ACCU_KEY": "accu-old-key"})
    server = build_weather_server(config, lookup=lookup, root=tmp_path, clock=clock)
    async with connect(server) as client:
        result = await client.call_tool("get_weather", {"location": "Seattle"})
    assert not result.is_error, text_of(result)
    assert "Weather for Seattle, Washington, United States (AccuWeather)" in text_of(result)
    sent = [
        (r.path, r.headers.get("authorization"), r.query.get("apikey"))
        for r in accuweather.requests
    ]
    assert sent == [
        ("/locations/v1/cities/search", "Bearer accu-old-key", None),  # refused: 401
        ("/locations/v1/cities/search", None, "accu-old-key"),
        ("/currentconditions/v1/351409", None, "accu-old-key"),  # the way that worked, from then on
        ("/forecasts/v1/daily/5day/351409", None, "accu-old-key"),
    ]


async def test_the_city_list_of_the_sprite_orchestrator(
    open_meteo: OpenMeteoFake, tmp_path: Path, clock: ManualClock
) -> None:
    config = WeatherIntegration(base_url=open_meteo.base_url, cities=["Tromsø", "Nuuk"])
    server = build_weather_server(config, lookup=no_secrets, root=tmp_path, clock=clock)
    async with connect(server) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        result = await client.call_tool("get_coolest_cities", {})
    assert text_of(result) == "Cool cities: Tromsø, Nuuk"
    assert open_meteo.requests == []
    weather = tools["get_weather"]
    assert weather.annotations is not None
    assert weather.annotations.read_only_hint is True
    assert weather.annotations.destructive_hint is False
    schema = weather.input_schema
    assert schema["required"] == ["location"]
    assert schema["properties"]["units"]["anyOf"][0]["enum"] == ["metric", "imperial"]
    assert schema["properties"]["days"]["anyOf"][0]["maximum"] == 5
