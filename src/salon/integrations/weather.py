"""Weather: current conditions and a few days of forecast, and a list of cities.

Open-Meteo needs no key (its geocoding API finds the place, its forecast API the weather);
AccuWeather is used when its key is configured (city search, current conditions, the 5-day
forecast). The key goes in an ``Authorization: Bearer`` header, as AccuWeather's developer
portal documents; a key from the older portal may need the ``apikey`` query parameter
instead, so a 401 to the header is tried once that way, which is kept when it works. A 403
is data the key's subscription does not include (or a spent limit), said so, not "bad key".
The city list of the sprite orchestrator is the ``get_coolest_cities`` tool, read from
config.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol

from pydantic import Field

from salon.config import WeatherIntegration
from salon.integrations._discipline import Clock, Discipline
from salon.integrations._http import VendorError, VendorHttp
from salon.integrations._server import (
    READ_ONLY,
    Lookup,
    expect_shape,
    guarded,
    text_result,
)
from salon.tools.native import Result, ToolSet

__all__ = ["AccuWeather", "OpenMeteo", "build_weather_server"]

logger = logging.getLogger(__name__)

Units = Literal["metric", "imperial"]

# WMO weather interpretation codes, as Open-Meteo documents them.
_WMO = {
    0: "clear sky",
    1: "mainly clear",
    2: "partly cloudy",
    3: "overcast",
    45: "fog",
    48: "depositing rime fog",
    51: "light drizzle",
    53: "drizzle",
    55: "dense drizzle",
    56: "light freezing drizzle",
    57: "dense freezing drizzle",
    61: "slight rain",
    63: "rain",
    65: "heavy rain",
    66: "light freezing rain",
    67: "heavy freezing rain",
    71: "slight snow",
    73: "snow",
    75: "heavy snow",
    77: "snow grains",
    80: "slight rain showers",
    81: "rain showers",
    82: "violent rain showers",
    85: "slight snow showers",
    86: "heavy snow showers",
    95: "thunderstorm",
    96: "thunderstorm with slight hail",
    99: "thunderstorm with heavy hail",
}


class WeatherSource(Protocol):
    name: str

    async def report(self, location: str, units: Units, days: int) -> str: ...


def _num(value: Any) -> str:
    return f"{float(value):g}"


def _place_name(*parts: Any) -> str:
    seen: list[str] = []
    for part in parts:
        if isinstance(part, str) and part and part not in seen:
            seen.append(part)
    return ", ".join(seen)


class OpenMeteo:
    """Open-Meteo's geocoding and forecast APIs (no key)."""

    name = "Open-Meteo"

    def __init__(self, http: VendorHttp, base_url: str | None) -> None:
        self.http = http
        base = base_url.rstrip("/") if base_url else None
        self.search_url = f"{base or 'https://geocoding-api.open-meteo.com'}/v1/search"
        self.forecast_url = f"{base or 'https://api.open-meteo.com'}/v1/forecast"

    async def report(self, location: str, units: Units, days: int) -> str:
        place = await self._place(location)
        params: dict[str, Any] = {
            "latitude": place["latitude"],
            "longitude": place["longitude"],
            "current": "temperature_2m,apparent_temperature,relative_humidity_2m,"
            "weather_code,wind_speed_10m,precipitation",
            "daily": "weather_code,temperature_2m_max,temperature_2m_min,"
            "precipitation_probability_max",
            "timezone": "auto",
            "forecast_days": days,
        }
        if units == "imperial":
            params |= {
                "temperature_unit": "fahrenheit",
                "wind_speed_unit": "mph",
                "precipitation_unit": "inch",
            }
        data = await self.http.get_json(self.forecast_url, params=params)
        with expect_shape(self.name):
            name = _place_name(place.get("name"), place.get("admin1"), place.get("country"))
            return "\n".join([f"Weather for {name} ({self.name}):", *_open_meteo_lines(data)])

    async def _place(self, location: str) -> dict[str, Any]:
        params = {"name": location, "count": 1, "language": "en", "format": "json"}
        found = await self.http.get_json(self.search_url, params=params)
        with expect_shape(self.name):
            results = found.get("results") or []  # left out entirely when nothing matches
            if not results:
                raise VendorError(
                    f"{self.name} knows no place called {location!r}; try the city's "
                    "name alone, or add its country after a comma"
                )
            place: dict[str, Any] = results[0]
            if not all(isinstance(place.get(k), int | float) for k in ("latitude", "longitude")):
                raise ValueError("a place without coordinates")
            return place


def _open_meteo_lines(data: dict[str, Any]) -> list[str]:
    now, unit = data["current"], data["current_units"]
    temp = unit["temperature_2m"]
    lines = [
        f"Now: {_num(now['temperature_2m'])} {temp} (feels like "
        f"{_num(now['apparent_temperature'])} {temp}), {_WMO.get(now['weather_code'], 'unknown')}"
        f", humidity {_num(now['relative_humidity_2m'])}%, wind "
        f"{_num(now['wind_speed_10m'])} {unit['wind_speed_10m']}, precipitation "
        f"{_num(now['precipitation'])} {unit['precipitation']}",
        "Forecast:",
    ]
    daily, dunit = data["daily"], data["daily_units"]
    for i, day in enumerate(daily["time"]):
        chance = daily["precipitation_probability_max"][i]
        rain = f", {_num(chance)}% chance of precipitation" if chance is not None else ""
        lines.append(
            f"- {day}: {_num(daily['temperature_2m_min'][i])} to "
            f"{_num(daily['temperature_2m_max'][i])} {dunit['temperature_2m_max']}, "
            f"{_WMO.get(daily['weather_code'][i], 'unknown')}{rain}"
        )
    return lines


class AccuWeather:
    """AccuWeather's Core Weather API: city search, current conditions, 5-day forecast."""

    name = "AccuWeather"

    def __init__(self, http: VendorHttp, base_url: str | None, key: str) -> None:
        self.http = http
        self.base = (base_url or "https://dataservice.accuweather.com").rstrip("/")
        self._key = key
        self._bearer = True  # until the header is refused and the parameter is not

    async def _get(self, path: str, params: dict[str, Any]) -> Any:
        try:
            return await self._get_as(self._bearer, path, params)
        except VendorError as exc:
            if exc.status != 401 or not self._bearer:
                raise
        answer = await self._get_as(False, path, params)  # an older portal's key
        logger.info("AccuWeather takes this key as the apikey parameter; keeping to that")
        self._bearer = False
        return answer

    async def _get_as(self, bearer: bool, path: str, params: dict[str, Any]) -> Any:
        headers = {"Authorization": f"Bearer {self._key}"} if bearer else None
        query = params if bearer else {**params, "apikey": self._key}
        try:
            return await self.http.get_json(f"{self.base}{path}", params=query, headers=headers)
        except VendorError as exc:
            if exc.status != 403:
                raise
            said = f": {exc.detail}" if exc.detail else ""
            raise VendorError(
                f"AccuWeather does not give this key access to that data (HTTP 403){said}; the "
                "subscription does not include it, or its limit is reached",
                status=403,
            ) from None

    async def report(self, location: str, units: Units, days: int) -> str:
        found = await self._get("/locations/v1/cities/search", {"q": location})
        with expect_shape(self.name):
            if not found:
                raise VendorError(
                    f"{self.name} knows no city called {location!r}; try a larger city nearby"
                )
            city = found[0]
            key = str(city["Key"])
            name = _place_name(
                city.get("LocalizedName"),
                (city.get("AdministrativeArea") or {}).get("LocalizedName"),
                (city.get("Country") or {}).get("LocalizedName"),
            )
        current = await self._get(f"/currentconditions/v1/{key}", {"details": "true"})
        forecast = await self._get(
            f"/forecasts/v1/daily/5day/{key}",
            {"metric": "true" if units == "metric" else "false"},
        )
        with expect_shape(self.name):
            lines = [_accu_now(current[0], units), *_accu_days(forecast, days)]
            return "\n".join([f"Weather for {name} ({self.name}):", *lines])


def _accu_value(block: dict[str, Any], units: Units) -> str:
    side = block["Metric" if units == "metric" else "Imperial"]
    return f"{_num(side['Value'])} °{side['Unit']}"


def _accu_now(now: dict[str, Any], units: Units) -> str:
    parts = [f"Now: {_accu_value(now['Temperature'], units)}"]
    if now.get("RealFeelTemperature"):
        parts[0] += f" (feels like {_accu_value(now['RealFeelTemperature'], units)})"
    parts.append(str(now["WeatherText"]).lower())
    if now.get("RelativeHumidity") is not None:
        parts.append(f"humidity {_num(now['RelativeHumidity'])}%")
    wind = (now.get("Wind") or {}).get("Speed")
    if wind:
        side = wind["Metric" if units == "metric" else "Imperial"]
        parts.append(f"wind {_num(side['Value'])} {side['Unit']}")
    if now.get("HasPrecipitation"):
        parts.append(str(now.get("PrecipitationType") or "precipitation").lower())
    return ", ".join(parts)


def _accu_days(forecast: dict[str, Any], days: int) -> list[str]:
    lines = ["Forecast:"]
    headline = (forecast.get("Headline") or {}).get("Text")
    if headline:
        lines.append(f"Outlook: {headline}")
    for day in forecast["DailyForecasts"][:days]:
        low, high = day["Temperature"]["Minimum"], day["Temperature"]["Maximum"]
        lines.append(
            f"- {str(day['Date'])[:10]}: {_num(low['Value'])} to {_num(high['Value'])} "
            f"°{high['Unit']}, day {str(day['Day']['IconPhrase']).lower()}, night "
            f"{str(day['Night']['IconPhrase']).lower()}"
        )
    return lines


def _source(config: WeatherIntegration, lookup: Lookup) -> tuple[WeatherSource, VendorHttp]:
    env_name = config.accuweather_api_key_env
    key = lookup(env_name) if env_name else None
    if config.provider == "accuweather" or (config.provider == "auto" and key):
        if not key:  # salon.config.integrations keeps such a config from being built
            raise ValueError("AccuWeather needs its key")
        http = VendorHttp("AccuWeather", timeout=config.timeout, key_hint=f"the key in {env_name}")
        return AccuWeather(http, config.base_url, key), http
    http = VendorHttp("Open-Meteo", timeout=config.timeout)
    return OpenMeteo(http, config.base_url), http


def build_weather_server(
    config: WeatherIntegration, *, lookup: Lookup, root: Path, clock: Clock
) -> ToolSet:
    source, http = _source(config, lookup)
    discipline = Discipline(source.name, config, clock)
    server = ToolSet(
        "weather",
        instructions=f"Current weather and a short forecast, from {source.name}.",
        resources=[http],
    )

    @server.tool(annotations=READ_ONLY, structured_output=False)
    async def get_weather(
        location: Annotated[
            str, Field(min_length=2, max_length=100, description="a city, e.g. 'Seattle'")
        ],
        units: Annotated[
            Units | None, Field(description="metric (°C, km/h) or imperial (°F, mph)")
        ] = None,
        days: Annotated[int | None, Field(ge=1, le=5, description="days of forecast")] = None,
    ) -> Result:
        """Current conditions and the forecast for the next days at a place."""
        chosen: Units = units or config.units
        count = days or config.forecast_days
        arguments = {"location": location, "units": chosen, "days": count}

        async def fetch() -> Result:
            text = await discipline.cached(
                "get_weather", arguments, lambda: source.report(location.strip(), chosen, count)
            )
            return text_result(text)

        return await guarded(source.name, fetch)

    @server.tool(annotations=READ_ONLY, structured_output=False)
    def get_coolest_cities() -> Result:
        """A list of cool cities worth asking about (ask get_weather about any of them)."""
        return text_result("Cool cities: " + ", ".join(config.cities))

    return server
