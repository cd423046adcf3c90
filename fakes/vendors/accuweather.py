"""AccuWeather's Core Weather API on loopback: city search, current conditions, 5-day forecast.

As AccuWeather documents it: the key in ``Authorization: Bearer`` (developer.accuweather.com)
or, as the older portal's keys need it, in the ``apikey`` query parameter
(apidev.accuweather.com); a missing or refused key is HTTP 401 with an RFC 7807 body that
also carries the legacy ``Code``/``Message``/``Reference``; a key without access to a
resource (not in its subscription, or past its limit) is HTTP 403; units follow
``metric=true`` (imperial by default).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from fakes.vendors.base import VendorFake, json_response

__all__ = ["AccuWeatherFake"]

SEATTLE = {
    "Version": 1,
    "Key": "351409",
    "Type": "City",
    "Rank": 21,
    "LocalizedName": "Seattle",
    "EnglishName": "Seattle",
    "Country": {"ID": "US", "LocalizedName": "United States"},
    "AdministrativeArea": {"ID": "WA", "LocalizedName": "Washington"},
}


def _both(celsius: float) -> dict[str, Any]:
    return {
        "Metric": {"Value": celsius, "Unit": "C", "UnitType": 17},
        "Imperial": {"Value": round(celsius * 9 / 5 + 32), "Unit": "F", "UnitType": 18},
    }


class AccuWeatherFake(VendorFake):
    def __init__(self, key: str = "accu-test-key", legacy_key: str = "accu-old-key") -> None:
        super().__init__()
        self.key = key  # the developer portal's: a Bearer token or the apikey parameter
        self.legacy_key = legacy_key  # the older portal's: the apikey parameter only
        self.no_access: set[str] = set()  # path prefixes the keys' subscription leaves out
        self.temperature_c = 9.4
        self.route("GET", "/locations/v1/cities/search", self._search)
        self.route("GET", "/currentconditions/v1/{key}", self._current)
        self.route("GET", "/forecasts/v1/daily/5day/{key}", self._daily)

    def _refused(self, request: web.Request) -> web.Response | None:
        bearer = request.headers.get("Authorization") == f"Bearer {self.key}"
        if bearer or request.query.get("apikey") in (self.key, self.legacy_key):
            if any(request.path.startswith(p) for p in self.no_access):
                return json_response(
                    {
                        "type": "https://httpproblems.com/http-status/403",
                        "title": "Forbidden",
                        "status": 403,
                        "instance": request.path,
                    },
                    403,
                )
            return None
        return json_response(
            {
                "type": "https://httpproblems.com/http-status/401",
                "title": "Unauthorized",
                "status": 401,
                "instance": request.path,
                "Code": "Unauthorized",
                "Message": "Api Authorization failed",
                "Reference": request.path,
            },
            401,
        )

    async def _search(self, request: web.Request) -> web.Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        found = [SEATTLE] if request.query.get("q", "").strip().lower() == "seattle" else []
        return json_response(found)

    async def _current(self, request: web.Request) -> web.Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        now = {
            "LocalObservationDateTime": "2026-11-23T09:05:00-08:00",
            "EpochTime": 1795453500,
            "WeatherText": "Light rain",
            "WeatherIcon": 12,
            "HasPrecipitation": True,
            "PrecipitationType": "Rain",
            "IsDayTime": True,
            "Temperature": _both(self.temperature_c),
            "RealFeelTemperature": {
                "Metric": {"Value": 7.0, "Unit": "C", "UnitType": 17, "Phrase": "Chilly"},
                "Imperial": {"Value": 45.0, "Unit": "F", "UnitType": 18, "Phrase": "Chilly"},
            },
            "RelativeHumidity": 88,
            "Wind": {
                "Direction": {"Degrees": 180, "Localized": "S", "English": "S"},
                "Speed": {
                    "Metric": {"Value": 14.8, "Unit": "km/h", "UnitType": 7},
                    "Imperial": {"Value": 9.2, "Unit": "mi/h", "UnitType": 9},
                },
            },
        }
        return json_response([now])

    async def _daily(self, request: web.Request) -> web.Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        metric = request.query.get("metric") == "true"
        unit, low, high = ("C", 6.0, 11.0) if metric else ("F", 43.0, 52.0)
        days = [
            {
                "Date": f"2026-11-{23 + i}T07:00:00-08:00",
                "Temperature": {
                    "Minimum": {"Value": low, "Unit": unit, "UnitType": 17 if metric else 18},
                    "Maximum": {"Value": high, "Unit": unit, "UnitType": 17 if metric else 18},
                },
                "Day": {"Icon": 12, "IconPhrase": "Showers", "HasPrecipitation": True},
                "Night": {"Icon": 7, "IconPhrase": "Cloudy", "HasPrecipitation": False},
            }
            for i in range(5)
        ]
        headline = {"Text": "Rain at times through the weekend", "Category": "rain"}
        return json_response({"Headline": headline, "DailyForecasts": days})
