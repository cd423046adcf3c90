"""ESPN's public NFL site API on loopback: scoreboard, team schedule, news.

ESPN does not document this API; the shapes follow recorded answers its clients rely on:
scoreboard competitors carry ``score`` as a string, schedule competitors as an object with
``displayValue``; news articles have ``headline``, ``description``, ``published`` and
``links.web.href``. Any User-Agent is answered (public clients send browser-like ones).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from fakes.vendors.base import VendorFake, json_response

__all__ = ["EspnFake"]

_PATH = "/apis/site/v2/sports/football/nfl"


def _side(
    home_away: str, abbr: str, name: str, score: Any, winner: bool | None = None
) -> dict[str, Any]:
    side: dict[str, Any] = {
        "id": abbr,
        "homeAway": home_away,
        "team": {
            "id": abbr,
            "abbreviation": abbr,
            "displayName": name,
            "shortDisplayName": name.rsplit(maxsplit=1)[-1],
        },
    }
    if score is not None:
        side["score"] = score
    if winner is not None:
        side["winner"] = winner
    return side


def _status(state: str, detail: str) -> dict[str, Any]:
    names = {
        "pre": ("1", "STATUS_SCHEDULED"),
        "in": ("2", "STATUS_IN_PROGRESS"),
        "post": ("3", "STATUS_FINAL"),
    }
    code, name = names[state]
    return {
        "clock": 0,
        "period": 4 if state == "post" else 0,
        "type": {
            "id": code,
            "name": name,
            "state": state,
            "completed": state == "post",
            "description": detail,
            "detail": detail,
            "shortDetail": detail,
        },
    }


def _event(
    eid: str, date: str, away: dict[str, Any], home: dict[str, Any], status: dict[str, Any]
) -> dict[str, Any]:
    return {
        "id": eid,
        "date": date,
        "name": f"{away['team']['displayName']} at {home['team']['displayName']}",
        "shortName": f"{away['team']['abbreviation']} @ {home['team']['abbreviation']}",
        "season": {"year": 2026, "type": 2},
        "week": {"number": 3},
        "competitions": [{"id": eid, "date": date, "competitors": [home, away], "status": status}],
    }


class EspnFake(VendorFake):
    def __init__(self) -> None:
        super().__init__()
        self.route("GET", f"{_PATH}/scoreboard", self._scoreboard)
        self.route("GET", f"{_PATH}/teams/{{team}}/schedule", self._schedule)
        self.route("GET", f"{_PATH}/news", self._news)

    async def _scoreboard(self, request: web.Request) -> web.Response:
        events = [
            _event(
                "401872952",
                "2026-09-27T17:00Z",
                _side("away", "KC", "Kansas City Chiefs", "24", True),
                _side("home", "MIA", "Miami Dolphins", "10", False),
                _status("post", "Final"),
            ),
            _event(
                "401872960",
                "2026-09-28T00:20Z",
                _side("away", "DAL", "Dallas Cowboys", "0"),
                _side("home", "NYG", "New York Giants", "0"),
                _status("pre", "9/27 - 8:20 PM EDT"),
            ),
        ]
        return json_response(
            {
                "leagues": [{"abbreviation": "NFL"}],
                "season": {"type": 2, "year": 2026},
                "week": {"number": 3},
                "events": events,
            }
        )

    async def _schedule(self, request: web.Request) -> web.Response:
        team = request.match_info["team"].upper()
        if team != "KC":
            return json_response({"code": 400, "message": "Failed to get team"}, 400)
        past = _event(
            "401872952",
            "2026-09-27T17:00Z",
            _side("away", "KC", "Kansas City Chiefs", {"value": 24.0, "displayValue": "24"}),
            _side("home", "MIA", "Miami Dolphins", {"value": 10.0, "displayValue": "10"}),
            _status("post", "Final"),
        )
        ahead = _event(
            "401872970",
            "2026-10-04T20:25Z",
            _side("away", "LV", "Las Vegas Raiders", None),
            _side("home", "KC", "Kansas City Chiefs", None),
            _status("pre", "Sun, October 4th at 4:25 PM EDT"),
        )
        return json_response(
            {
                "team": {"id": "12", "abbreviation": "KC", "displayName": "Kansas City Chiefs"},
                "requestedSeason": {"year": 2026},
                "events": [past, ahead],
            }
        )

    async def _news(self, request: web.Request) -> web.Response:
        limit = int(request.query.get("limit", "10"))
        articles = [
            {
                "headline": f"Headline {i}",
                "description": f"What happened {i}.",
                "published": "2026-09-28T12:00:00Z",
                "links": {"web": {"href": f"https://www.espn.com/nfl/story/_/id/{i}"}},
            }
            for i in range(1, 31)
        ]
        return json_response({"header": "NFL News", "articles": articles[:limit]})
