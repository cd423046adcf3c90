"""Open-Meteo's geocoding API (/v1/search) and forecast API (/v1/forecast), on loopback.

Shapes as Open-Meteo documents them: a search with no match leaves ``results`` out; the
forecast echoes ``current``/``daily`` with their ``*_units``; units follow
``temperature_unit``, ``wind_speed_unit`` and ``precipitation_unit``; a bad request is HTTP
400 with ``{"error": true, "reason": ...}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web

from fakes.vendors.base import VendorFake, json_response

__all__ = ["OpenMeteoFake", "Place"]


@dataclass
class Place:
    name: str
    latitude: float
    longitude: float
    country: str
    admin1: str
    timezone: str
    temperature_c: float = 11.5
    weather_code: int = 3


SEATTLE = Place(
    "Seattle", 47.60621, -122.33207, "United States", "Washington", "America/Los_Angeles"
)


class OpenMeteoFake(VendorFake):
    def __init__(self) -> None:
        super().__init__()
        self.places: dict[str, Place] = {"seattle": SEATTLE}
        self.route("GET", "/v1/search", self._search)
        self.route("GET", "/v1/forecast", self._forecast)

    async def _search(self, request: web.Request) -> web.Response:
        name = request.query.get("name", "").split(",")[0].strip().lower()
        place = self.places.get(name)
        if place is None:
            return json_response({"generationtime_ms": 0.4})
        result = {
            "id": 5809844,
            "name": place.name,
            "latitude": place.latitude,
            "longitude": place.longitude,
            "country": place.country,
            "admin1": place.admin1,
            "timezone": place.timezone,
        }
        return json_response({"results": [result], "generationtime_ms": 0.6})

    def _place_at(self, lat: float, lon: float) -> Place | None:
        for place in self.places.values():
            if abs(place.latitude - lat) < 0.01 and abs(place.longitude - lon) < 0.01:
                return place
        return None

    async def _forecast(self, request: web.Request) -> web.Response:
        q = request.query
        try:
            lat, lon = float(q["latitude"]), float(q["longitude"])
        except (KeyError, ValueError):
            return json_response({"error": True, "reason": "Parameter 'latitude' is missing"}, 400)
        place = self._place_at(lat, lon) or SEATTLE
        days = int(q.get("forecast_days", "7"))
        body = {
            "latitude": lat,
            "longitude": lon,
            "timezone": place.timezone,
            **_current(
                place,
                q.get("temperature_unit"),
                q.get("wind_speed_unit"),
                q.get("precipitation_unit"),
            ),
            **_daily(place, days, q.get("temperature_unit")),
        }
        return json_response(body)


def _temp(celsius: float, unit: str | None) -> float:
    return round(celsius * 9 / 5 + 32, 1) if unit == "fahrenheit" else celsius


def _current(
    place: Place, temp_unit: str | None, wind_unit: str | None, rain_unit: str | None
) -> dict[str, Any]:
    symbol = "°F" if temp_unit == "fahrenheit" else "°C"
    return {
        "current_units": {
            "time": "iso8601",
            "temperature_2m": symbol,
            "apparent_temperature": symbol,
            "relative_humidity_2m": "%",
            "weather_code": "wmo code",
            "wind_speed_10m": "mp/h" if wind_unit == "mph" else "km/h",
            "precipitation": "inch" if rain_unit == "inch" else "mm",
        },
        "current": {
            "time": "2026-11-23T09:00",
            "interval": 900,
            "temperature_2m": _temp(place.temperature_c, temp_unit),
            "apparent_temperature": _temp(place.temperature_c - 2, temp_unit),
            "relative_humidity_2m": 81,
            "weather_code": place.weather_code,
            "wind_speed_10m": 7.0 if wind_unit == "mph" else 11.3,
            "precipitation": 0.0,
        },
    }


def _daily(place: Place, days: int, temp_unit: str | None) -> dict[str, Any]:
    symbol = "°F" if temp_unit == "fahrenheit" else "°C"
    return {
        "daily_units": {
            "time": "iso8601",
            "weather_code": "wmo code",
            "temperature_2m_max": symbol,
            "temperature_2m_min": symbol,
            "precipitation_probability_max": "%",
        },
        "daily": {
            "time": [f"2026-11-{23 + i}" for i in range(days)],
            "weather_code": [61] * days,
            "temperature_2m_max": [_temp(place.temperature_c + 2, temp_unit)] * days,
            "temperature_2m_min": [_temp(place.temperature_c - 4, temp_unit)] * days,
            "precipitation_probability_max": [70] * days,
        },
    }
