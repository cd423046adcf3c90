"""NFL scores, schedules and headlines from ESPN's public site API (no key).

ESPN does not document this API; the shapes are the ones its clients rely on: the
scoreboard's competitors carry ``score`` as a string, a team schedule's as an object with
``displayValue``. Teams are resolved locally (the 32 are stable), so an unknown team is
refused before any request. Salon sends its own User-Agent.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

from salon.config import NflIntegration
from salon.integrations._discipline import Clock, Discipline
from salon.integrations._http import VendorError, VendorHttp
from salon.integrations._server import (
    READ_ONLY,
    Lookup,
    error_result,
    expect_shape,
    guarded,
    text_result,
)
from salon.tools.native import Result, ToolSet

__all__ = ["TEAMS", "build_nfl_server", "find_team"]

SERVICE = "ESPN"
_PATH = "/apis/site/v2/sports/football/nfl"
SeasonType = Literal["preseason", "regular", "postseason"]
_SEASON_TYPES = {"preseason": 1, "regular": 2, "postseason": 3}

# abbreviation: (ESPN team id, full name)
TEAMS: dict[str, tuple[int, str]] = {
    "ARI": (22, "Arizona Cardinals"),
    "ATL": (1, "Atlanta Falcons"),
    "BAL": (33, "Baltimore Ravens"),
    "BUF": (2, "Buffalo Bills"),
    "CAR": (29, "Carolina Panthers"),
    "CHI": (3, "Chicago Bears"),
    "CIN": (4, "Cincinnati Bengals"),
    "CLE": (5, "Cleveland Browns"),
    "DAL": (6, "Dallas Cowboys"),
    "DEN": (7, "Denver Broncos"),
    "DET": (8, "Detroit Lions"),
    "GB": (9, "Green Bay Packers"),
    "HOU": (34, "Houston Texans"),
    "IND": (11, "Indianapolis Colts"),
    "JAX": (30, "Jacksonville Jaguars"),
    "KC": (12, "Kansas City Chiefs"),
    "LAC": (24, "Los Angeles Chargers"),
    "LAR": (14, "Los Angeles Rams"),
    "LV": (13, "Las Vegas Raiders"),
    "MIA": (15, "Miami Dolphins"),
    "MIN": (16, "Minnesota Vikings"),
    "NE": (17, "New England Patriots"),
    "NO": (18, "New Orleans Saints"),
    "NYG": (19, "New York Giants"),
    "NYJ": (20, "New York Jets"),
    "PHI": (21, "Philadelphia Eagles"),
    "PIT": (23, "Pittsburgh Steelers"),
    "SEA": (26, "Seattle Seahawks"),
    "SF": (25, "San Francisco 49ers"),
    "TB": (27, "Tampa Bay Buccaneers"),
    "TEN": (10, "Tennessee Titans"),
    "WSH": (28, "Washington Commanders"),
}
_ALIASES = {"WAS": "WSH", "JAC": "JAX", "LA": "LAR", "OAK": "LV", "SD": "LAC", "STL": "LAR"}


def find_team(name: str) -> str:
    """The abbreviation for a team given as abbreviation, nickname or full name."""
    text = " ".join(name.split())
    code = _ALIASES.get(text.upper(), text.upper())
    if code in TEAMS:
        return code
    wanted = text.casefold()
    matches = [
        abbr
        for abbr, (_, full) in TEAMS.items()
        if wanted == full.casefold() or wanted == full.split()[-1].casefold()
    ]
    if len(matches) == 1:
        return matches[0]
    known = ", ".join(sorted(TEAMS))
    raise VendorError(f"{name!r} is not an NFL team; use an abbreviation ({known}) or a name")


class Espn:
    def __init__(self, http: VendorHttp, base_url: str | None) -> None:
        self.http = http
        self.base = (base_url or "https://site.api.espn.com").rstrip("/") + _PATH

    async def scoreboard(
        self, date: str | None, week: int | None, season_type: SeasonType, season: int | None
    ) -> str:
        params: dict[str, Any] = {}
        if date:
            params["dates"] = date.replace("-", "")
        elif week is not None:
            params |= {"week": week, "seasontype": _SEASON_TYPES[season_type]}
            if season is not None:
                params["dates"] = season
        elif season is not None:
            params |= {"dates": season, "seasontype": _SEASON_TYPES[season_type]}
        data = await self.http.get_json(f"{self.base}/scoreboard", params=params)
        with expect_shape(SERVICE):
            games = [_game_line(event) for event in data.get("events") or []]
            title = _scoreboard_title(data, date)
        return "\n".join([title, *games]) if games else f"{title}\nNo games."

    async def schedule(self, team: str, season: int | None) -> str:
        params = {"season": season} if season else None
        data = await self.http.get_json(f"{self.base}/teams/{team.lower()}/schedule", params=params)
        with expect_shape(SERVICE):
            name = (data.get("team") or {}).get("displayName") or TEAMS[team][1]
            events = data.get("events") or []
            done = [e for e in events if _status(e)[1]]
            ahead = [e for e in events if not _status(e)[1]]
            lines = [f"{name}: recent results"]
            lines += [f"- {_game_line(e)}" for e in done[-5:]] or ["- none yet"]
            lines.append("Next games:")
            lines += [f"- {_game_line(e)}" for e in ahead[:5]] or ["- none scheduled"]
        return "\n".join(lines)

    async def headlines(self, team: str | None, limit: int) -> str:
        params: dict[str, Any] = {"limit": limit}
        if team:
            params["team"] = TEAMS[team][0]
        data = await self.http.get_json(f"{self.base}/news", params=params)
        with expect_shape(SERVICE):
            lines = [_article_line(a) for a in (data.get("articles") or [])[:limit]]
        about = TEAMS[team][1] if team else "the NFL"
        return "\n".join([f"Headlines about {about} (ESPN):", *lines]) if lines else "No headlines."


def _scoreboard_title(data: dict[str, Any], date: str | None) -> str:
    week = (data.get("week") or {}).get("number")
    season = (data.get("season") or {}).get("year")
    if date:
        return f"NFL games on {date}:"
    if week and season:
        return f"NFL scoreboard, {season} week {week}:"
    return "NFL scoreboard:"


def _status(event: dict[str, Any]) -> tuple[str, bool, str]:
    """(detail for people, completed, state: pre | in | post)."""
    competition = (event.get("competitions") or [{}])[0]
    status = competition.get("status") or event.get("status") or {}
    kind = status.get("type") or {}
    detail = str(kind.get("shortDetail") or kind.get("detail") or "")
    return detail, bool(kind.get("completed")), str(kind.get("state") or "pre")


def _score(competitor: dict[str, Any]) -> str:
    score = competitor.get("score")
    if isinstance(score, dict):  # team schedules send {"value": 24.0, "displayValue": "24"}
        score = score.get("displayValue")
    return "" if score is None else str(score)


def _game_line(event: dict[str, Any]) -> str:
    competition = event["competitions"][0]
    sides = {c["homeAway"]: c for c in competition["competitors"]}
    detail, _, state = _status(event)

    def side(c: dict[str, Any]) -> str:
        name = str(c["team"]["displayName"])
        return f"{name} {_score(c)}" if state != "pre" and _score(c) else name

    when = str(event.get("date", ""))[:10]
    return f"{when}: {side(sides['away'])} at {side(sides['home'])} ({detail})"


def _article_line(article: dict[str, Any]) -> str:
    link = ((article.get("links") or {}).get("web") or {}).get("href")
    when = str(article.get("published", ""))[:10]
    text = f"- {when} {article['headline']}"
    if article.get("description"):
        text += f": {article['description']}"
    return f"{text} <{link}>" if link else text


_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def build_nfl_server(
    config: NflIntegration, *, lookup: Lookup, root: Path, clock: Clock
) -> ToolSet:
    http = VendorHttp(SERVICE, timeout=config.timeout)
    espn = Espn(http, config.base_url)
    discipline = Discipline(SERVICE, config, clock)
    server = ToolSet(
        "nfl",
        instructions="NFL scores, team schedules and news (ESPN).",
        resources=[http],
    )
    _add_scoreboard(server, espn, discipline)
    _add_team_tools(server, espn, discipline)
    return server


async def _answer(
    discipline: Discipline, tool: str, arguments: dict[str, Any], work: Callable[[], Any]
) -> Result:
    async def run() -> Result:
        return text_result(await discipline.cached(tool, arguments, work))

    return await guarded(SERVICE, run)


def _add_scoreboard(server: ToolSet, espn: Espn, discipline: Discipline) -> None:
    @server.tool(annotations=READ_ONLY, structured_output=False)
    async def nfl_scoreboard(
        date: Annotated[
            str | None, Field(pattern=_DATE.pattern, description="a day, YYYY-MM-DD")
        ] = None,
        week: Annotated[int | None, Field(ge=1, le=23, description="week of the season")] = None,
        season_type: SeasonType = "regular",
        season: Annotated[int | None, Field(ge=1970, le=2100, description="e.g. 2026")] = None,
    ) -> Result:
        """NFL games with scores and status: today's by default, or one day, or one week."""
        arguments = {"date": date, "week": week, "season_type": season_type, "season": season}
        return await _answer(
            discipline,
            "nfl_scoreboard",
            arguments,
            lambda: espn.scoreboard(date, week, season_type, season),
        )


def _add_team_tools(server: ToolSet, espn: Espn, discipline: Discipline) -> None:
    @server.tool(annotations=READ_ONLY, structured_output=False)
    async def nfl_team_schedule(
        team: Annotated[str, Field(min_length=2, max_length=40, description="'KC' or 'Chiefs'")],
        season: Annotated[int | None, Field(ge=1970, le=2100)] = None,
    ) -> Result:
        """A team's recent results and next games."""
        try:
            code = find_team(team)
        except VendorError as exc:
            return error_result(str(exc))
        arguments = {"team": code, "season": season}
        return await _answer(
            discipline, "nfl_team_schedule", arguments, lambda: espn.schedule(code, season)
        )

    @server.tool(annotations=READ_ONLY, structured_output=False)
    async def nfl_headlines(
        team: Annotated[str | None, Field(max_length=40, description="only this team's")] = None,
        limit: Annotated[int, Field(ge=1, le=20)] = 5,
    ) -> Result:
        """The latest NFL news headlines, for the league or one team."""
        try:
            code = find_team(team) if team else None
        except VendorError as exc:
            return error_result(str(exc))
        arguments = {"team": code, "limit": limit}
        return await _answer(
            discipline, "nfl_headlines", arguments, lambda: espn.headlines(code, limit)
        )
