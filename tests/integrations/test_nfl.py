"""The NFL integration (ESPN's site API) through an MCP client session."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp.server.mcpserver import MCPServer

from fakes.vendors.base import Reply
from fakes.vendors.espn import EspnFake
from salon.config import NflIntegration
from salon.integrations._http import VendorError
from salon.integrations.nfl import build_nfl_server, find_team
from tests.integrations.conftest import ManualClock, connect, no_secrets, text_of

PATH = "/apis/site/v2/sports/football/nfl"


def _server(espn: EspnFake, tmp_path: Path, clock: ManualClock) -> MCPServer:
    config = NflIntegration(base_url=espn.base_url)
    return build_nfl_server(config, lookup=no_secrets, root=tmp_path, clock=clock)


async def test_scoreboard_of_the_current_week(
    espn: EspnFake, tmp_path: Path, clock: ManualClock
) -> None:
    async with connect(_server(espn, tmp_path, clock)) as client:
        result = await client.call_tool("nfl_scoreboard", {})
    text = text_of(result)
    assert not result.is_error, text
    assert text.splitlines() == [
        "NFL scoreboard, 2026 week 3:",
        "2026-09-27: Kansas City Chiefs 24 at Miami Dolphins 10 (Final)",
        "2026-09-28: Dallas Cowboys at New York Giants (9/27 - 8:20 PM EDT)",
    ]
    (seen,) = espn.requests
    assert seen.path == f"{PATH}/scoreboard"
    assert seen.query == {}
    assert seen.headers["user-agent"].startswith("salon/")


@pytest.mark.parametrize(
    ("arguments", "query"),
    [
        ({"date": "2026-09-27"}, {"dates": "20260927"}),
        ({"week": 3}, {"week": "3", "seasontype": "2"}),
        (
            {"week": 1, "season_type": "postseason", "season": 2025},
            {"week": "1", "seasontype": "3", "dates": "2025"},
        ),
    ],
)
async def test_scoreboard_for_a_date_or_a_week(
    espn: EspnFake,
    tmp_path: Path,
    clock: ManualClock,
    arguments: dict[str, object],
    query: dict[str, str],
) -> None:
    async with connect(_server(espn, tmp_path, clock)) as client:
        result = await client.call_tool("nfl_scoreboard", arguments)
    assert not result.is_error
    assert espn.requests[0].query == query


async def test_a_bad_date_is_refused_by_the_schema(
    espn: EspnFake, tmp_path: Path, clock: ManualClock
) -> None:
    async with connect(_server(espn, tmp_path, clock)) as client:
        result = await client.call_tool("nfl_scoreboard", {"date": "next sunday"})
    assert result.is_error
    assert espn.requests == []


async def test_team_schedule_with_results_and_next_games(
    espn: EspnFake, tmp_path: Path, clock: ManualClock
) -> None:
    async with connect(_server(espn, tmp_path, clock)) as client:
        result = await client.call_tool("nfl_team_schedule", {"team": "chiefs"})
    assert text_of(result).splitlines() == [
        "Kansas City Chiefs: recent results",
        "- 2026-09-27: Kansas City Chiefs 24 at Miami Dolphins 10 (Final)",
        "Next games:",
        "- 2026-10-04: Las Vegas Raiders at Kansas City Chiefs (Sun, October 4th at 4:25 PM EDT)",
    ]
    assert espn.requests[0].path == f"{PATH}/teams/kc/schedule"


async def test_an_unknown_team_is_refused_before_any_request(
    espn: EspnFake, tmp_path: Path, clock: ManualClock
) -> None:
    async with connect(_server(espn, tmp_path, clock)) as client:
        result = await client.call_tool("nfl_team_schedule", {"team": "Springfield Atoms"})
    assert result.is_error
    assert text_of(result).startswith("'Springfield Atoms' is not an NFL team")
    assert espn.requests == []


async def test_headlines_for_the_league_and_for_a_team(
    espn: EspnFake, tmp_path: Path, clock: ManualClock
) -> None:
    async with connect(_server(espn, tmp_path, clock)) as client:
        league = await client.call_tool("nfl_headlines", {"limit": 2})
        team = await client.call_tool("nfl_headlines", {"team": "SEA", "limit": 1})
    assert text_of(league).splitlines() == [
        "Headlines about the NFL (ESPN):",
        "- 2026-09-28 Headline 1: What happened 1. <https://www.espn.com/nfl/story/_/id/1>",
        "- 2026-09-28 Headline 2: What happened 2. <https://www.espn.com/nfl/story/_/id/2>",
    ]
    assert text_of(team).startswith("Headlines about Seattle Seahawks (ESPN):")
    assert espn.requests[1].query == {"limit": "1", "team": "26"}


async def test_espn_failing_is_reported(espn: EspnFake, tmp_path: Path, clock: ManualClock) -> None:
    espn.script(
        f"{PATH}/scoreboard", Reply(status=502, body=b"Bad Gateway", content_type="text/plain")
    )
    async with connect(_server(espn, tmp_path, clock)) as client:
        result = await client.call_tool("nfl_scoreboard", {})
    assert result.is_error
    assert text_of(result) == "ESPN had a server error (HTTP 502); try again in a minute"


def test_teams_by_abbreviation_alias_nickname_or_name() -> None:
    assert find_team("kc") == "KC"
    assert find_team("WAS") == "WSH"
    assert find_team("49ers") == "SF"
    assert find_team("new york giants") == "NYG"
    with pytest.raises(VendorError):
        find_team("New York")
