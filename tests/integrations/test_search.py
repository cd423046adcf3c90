"""Web search through SerpAPI: trimmed results and Google's AI overview."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from mcp.server.mcpserver import MCPServer

from fakes.vendors.base import Reply
from fakes.vendors.serpapi import SerpApiFake
from salon.config import SearchIntegration
from salon.integrations.search import build_search_server
from tests.integrations.conftest import ManualClock, connect, secrets_of, text_of


def _server(
    fake: SerpApiFake, tmp_path: Path, clock: ManualClock, key: str = "serp-test-key"
) -> MCPServer:
    config = SearchIntegration(base_url=fake.base_url, results=3)
    return build_search_server(
        config, lookup=secrets_of({"SERPAPI_API_KEY": key}), root=tmp_path, clock=clock
    )


async def test_results_are_trimmed_and_the_overview_comes_first(
    serpapi: SerpApiFake, tmp_path: Path, clock: ManualClock
) -> None:
    async with connect(_server(serpapi, tmp_path, clock)) as client:
        result = await client.call_tool("web_search", {"query": "pixel art"})
    text = text_of(result)
    assert not result.is_error, text
    assert text.splitlines() == [
        "Google results for 'pixel art' (SerpAPI):",
        "AI overview:",
        "Pixel art is a form of digital art drawn pixel by pixel.",
        "  - Sprites are small images used in games.",
        "  - Palettes are often limited.",
        "  source: Pixel art - Wikipedia <https://en.wikipedia.org/wiki/Pixel_art>",
        "  source: Sprites explained <https://example.org/sprites>",
        "Results:",
        "1. pixel art result 1 <https://example.org/1>",
        "   About pixel art, part 1.",
        "2. pixel art result 2 <https://example.org/2>",
        "   About pixel art, part 2.",
        "3. pixel art result 3 <https://example.org/3>",
        "   About pixel art, part 3.",
    ]
    (seen,) = serpapi.requests
    assert seen.query["engine"] == "google"
    assert seen.query["q"] == "pixel art"
    assert seen.query["hl"] == "en"
    assert seen.query["gl"] == "us"


async def test_a_lazy_overview_is_fetched_with_its_page_token(
    serpapi: SerpApiFake, tmp_path: Path, clock: ManualClock
) -> None:
    serpapi.lazy_queries.add("sprites")
    async with connect(_server(serpapi, tmp_path, clock)) as client:
        result = await client.call_tool("web_search", {"query": "sprites", "results": 1})
    text = text_of(result)
    assert "AI overview:\nPixel art is a form of digital art" in text
    assert "2. " not in text
    second = serpapi.requests[1]
    assert second.query["engine"] == "google_ai_overview"
    assert second.query["page_token"] == "token-1"


async def test_the_key_travels_as_a_parameter_and_is_never_logged(
    serpapi: SerpApiFake, tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="salon")
    serpapi.script("/search.json", Reply(status=500, json={"error": "Internal error"}))
    async with connect(_server(serpapi, tmp_path, clock)) as client:
        await client.call_tool("web_search", {"query": "pixel art"})
        await client.call_tool("web_search", {"query": "pixel art"})
    assert serpapi.requests[0].query["api_key"] == "serp-test-key"
    ours = [r.getMessage() for r in caplog.records if r.name.startswith("salon")]
    assert ours  # the failure was logged ...
    assert not [line for line in ours if "serp-test-key" in line]  # ... without the key


async def test_no_results_is_an_answer_not_a_failure(
    serpapi: SerpApiFake, tmp_path: Path, clock: ManualClock
) -> None:
    serpapi.empty_queries.add("qwxzv")
    async with connect(_server(serpapi, tmp_path, clock)) as client:
        result = await client.call_tool("web_search", {"query": "qwxzv"})
    assert not result.is_error
    assert text_of(result).endswith("Google returned no results for this query.")


async def test_a_refused_key_names_its_variable_and_never_the_key(
    serpapi: SerpApiFake, tmp_path: Path, clock: ManualClock
) -> None:
    async with connect(_server(serpapi, tmp_path, clock, key="not-the-key")) as client:
        result = await client.call_tool("web_search", {"query": "pixel art"})
    assert result.is_error
    text = text_of(result)
    assert text.startswith("SerpAPI refused the request (HTTP 401): Invalid API key.")
    assert text.endswith("check the key in SERPAPI_API_KEY")
    assert "not-the-key" not in text


async def test_out_of_searches(serpapi: SerpApiFake, tmp_path: Path, clock: ManualClock) -> None:
    serpapi.script(
        "/search.json", Reply(status=429, json={"error": "Your account has run out of searches."})
    )
    async with connect(_server(serpapi, tmp_path, clock)) as client:
        result = await client.call_tool("web_search", {"query": "pixel art"})
    assert result.is_error
    assert text_of(result) == (
        "SerpAPI is rate-limiting requests (HTTP 429): Your account has run out of searches.; "
        "try again later"
    )


async def test_an_expired_page_token_of_a_cached_search_is_replaced_by_a_fresh_search(
    serpapi: SerpApiFake, tmp_path: Path, clock: ManualClock
) -> None:
    serpapi.lazy_queries.add("sprites")
    async with connect(_server(serpapi, tmp_path, clock)) as client:
        await client.call_tool("web_search", {"query": "sprites"})
        serpapi.expire_tokens()  # minutes pass; SerpAPI still serves the search from its cache
        clock.now += 3600  # and Salon's own cache has expired
        result = await client.call_tool("web_search", {"query": "sprites"})
    text = text_of(result)
    assert "AI overview:\nPixel art is a form of digital art" in text
    asked = [
        (r.query["engine"], r.query.get("page_token"), r.query.get("no_cache"))
        for r in serpapi.requests
    ]
    assert asked == [
        ("google", None, None),
        ("google_ai_overview", "token-1", None),
        ("google", None, None),  # served from SerpAPI's cache, with token-1
        ("google_ai_overview", "token-1", None),  # expired: "Fully empty"
        ("google", None, "true"),  # once, past the cache: a fresh token
        ("google_ai_overview", "token-2", None),
    ]


async def test_an_overview_that_stays_empty_is_asked_for_once_more_only(
    serpapi: SerpApiFake, tmp_path: Path, clock: ManualClock
) -> None:
    serpapi.lazy_queries.add("sprites")
    empty = {
        "search_information": {"ai_overview_state": "Fully empty"},
        "error": "Google hasn't returned any results for this query.",
    }
    serpapi.script(
        "/search.json",
        Reply(json={"ai_overview": {"page_token": "t"}, "organic_results": []}),
        Reply(json=empty),
        Reply(json={"ai_overview": {"page_token": "u"}, "organic_results": []}),
        Reply(json=empty),
    )
    async with connect(_server(serpapi, tmp_path, clock)) as client:
        result = await client.call_tool("web_search", {"query": "sprites"})
    assert not result.is_error
    assert text_of(result).splitlines() == [
        "Google results for 'sprites' (SerpAPI):",
        "(Google's AI overview for this search could not be fetched.)",
        "Google returned no results for this query.",
    ]
    assert len(serpapi.requests) == 4


async def test_title_only_items_tables_code_and_expandable_blocks_are_kept(
    serpapi: SerpApiFake, tmp_path: Path, clock: ManualClock
) -> None:
    serpapi.rich_queries.add("python loops")
    async with connect(_server(serpapi, tmp_path, clock)) as client:
        result = await client.call_tool("web_search", {"query": "python loops", "results": 1})
    assert text_of(result).splitlines()[:13] == [
        "Google results for 'python loops' (SerpAPI):",
        "AI overview:",
        "Loops in Python",
        "  - for loops",
        "  - while loops: repeat while a condition holds.",
        "Loop | Use",
        "for | a known sequence",
        "while | a condition",
        "```python",
        "for i in range(3):",
        "    print(i)",
        "```",
        "Tips",
    ]
    assert "  Prefer for over while." in text_of(result)
