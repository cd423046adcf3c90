"""Keyword routing and the tool path's rules, on the memory platform with the real openai
SDK against the loopback LLM server and a real in-process MCP server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fakes.llm_server import LLMServer, Scripted
from salon.model import Participant
from salon.store.sql import SQLStore
from tests.agent.pipeline_kit import pipeline_agent

ALICE = Participant("alice", "Alice")
KEYWORDS: dict[str, Any] = {
    "!weather": {"tool": "get_weather", "description": "the weather somewhere"},
    "help": {"internal": True},
    "activity_key": {"tool": "activity_key", "internal": True},
}


async def test_a_keyword_calls_its_tool_without_the_model(
    store: SQLStore, tmp_path: Path, llm_server: LLMServer
) -> None:
    calls: list[dict[str, Any]] = []
    async with pipeline_agent(store, tmp_path, llm_server, tool_calls=calls, keywords=KEYWORDS) as (
        agent,
        platform,
    ):
        general = platform.channel("general")
        await platform.post(general, ALICE, "!weather Seattle")
        await agent.wait_idle()
    assert calls == [{"location": "Seattle", "units": "metric"}]
    assert llm_server.requests == []
    assert [m.text for m in platform.sent] == ["Seattle: 12 C, rain"]


async def test_final_pass_asks_the_model_exactly_once(
    store: SQLStore, tmp_path: Path, llm_server: LLMServer
) -> None:
    keywords = {**KEYWORDS, "weather": {"tool": "get_weather", "final_pass": True}}
    keywords.pop("!weather")
    llm_server.queue("Grab an umbrella in Seattle.")
    async with pipeline_agent(store, tmp_path, llm_server, keywords=keywords) as (agent, platform):
        await platform.post(platform.channel("dm", is_direct=True), ALICE, "!Weather Seattle")
        await agent.wait_idle()
    assert len(llm_server.requests) == 1
    assert "Seattle: 12 C, rain" in json.dumps(llm_server.requests[0].body)
    assert "tools" not in llm_server.requests[0].body
    assert [m.text for m in platform.sent] == ["Grab an umbrella in Seattle."]


async def test_a_failed_final_pass_sends_the_raw_result(
    store: SQLStore, tmp_path: Path, llm_server: LLMServer
) -> None:
    keywords = {"weather": {"tool": "get_weather", "final_pass": True}}
    llm_server.queue(Scripted(status=500, error_message="model melted"))
    async with pipeline_agent(store, tmp_path, llm_server, keywords=keywords) as (agent, platform):
        await platform.post(platform.channel("general"), ALICE, "!weather Oslo")
        await agent.wait_idle()
    assert len(llm_server.requests) == 1
    assert [m.text for m in platform.sent] == ["Oslo: 12 C, rain"]


async def test_help_lists_keywords_and_internal_tools_are_never_offered(
    store: SQLStore, tmp_path: Path, llm_server: LLMServer
) -> None:
    llm_server.queue("hello there")
    async with pipeline_agent(store, tmp_path, llm_server, keywords=KEYWORDS) as (
        agent,
        platform,
    ):
        dm = platform.channel("dm", is_direct=True)
        await platform.post(dm, ALICE, "!help")
        await agent.wait_idle()
        await platform.post(dm, ALICE, "hi")
        await agent.wait_idle()
    listing = platform.sent[0]
    assert "!weather: the weather somewhere" in listing.text
    assert "!activity_key" in listing.text
    assert "!help" in listing.text
    (request,) = llm_server.requests  # !help asked no model
    offered = {t["function"]["name"] for t in request.body["tools"]}
    assert "get_weather" in offered
    assert "activity_key" not in offered


async def test_a_message_that_is_not_a_keyword_is_left_alone(
    store: SQLStore, tmp_path: Path, llm_server: LLMServer
) -> None:
    async with pipeline_agent(store, tmp_path, llm_server, keywords=KEYWORDS) as (
        agent,
        platform,
    ):
        await platform.post(platform.channel("general"), ALICE, "weather Seattle is nice")
        await platform.post(platform.channel("general"), ALICE, "!unknown thing")
        await agent.wait_idle()
    assert platform.sent == []
    assert llm_server.requests == []


async def test_tool_calls_beyond_the_turn_limit_get_an_error_result(
    store: SQLStore, tmp_path: Path, llm_server: LLMServer
) -> None:
    calls: list[dict[str, Any]] = []
    places = ["Oslo", "Rome", "Lima", "Pune"]
    asked = [(f"c{i}", "get_weather", {"location": p}) for i, p in enumerate(places)]
    llm_server.queue(Scripted(tool_calls=asked), "Four places, three answers.")
    async with pipeline_agent(
        store,
        tmp_path,
        llm_server,
        tool_calls=calls,
        max_tool_calls_per_turn=3,
        final_pass_combined=True,
    ) as (agent, platform):
        await platform.post(platform.channel("dm", is_direct=True), ALICE, "weather?")
        await agent.wait_idle()
    assert sorted(c["location"] for c in calls) == ["Lima", "Oslo", "Rome"]  # concurrent
    assert len(llm_server.requests) == 2  # the tools' results went to one final call
    results = [m for m in llm_server.requests[1].body["messages"] if m["role"] == "tool"]
    assert len(results) == 4
    assert "at most 3 tool calls per turn" in results[3]["content"]
    assert platform.sent[-1].text == "Four places, three answers."


async def test_final_pass_combined_ends_after_one_final_call(
    store: SQLStore, tmp_path: Path, llm_server: LLMServer
) -> None:
    calls: list[dict[str, Any]] = []
    first = Scripted(tool_calls=[("c1", "get_weather", {"location": "Oslo"})])
    again = Scripted(text="Oslo is wet.", tool_calls=[("c2", "get_weather", {"location": "Rome"})])
    llm_server.queue(first, again)
    async with pipeline_agent(
        store, tmp_path, llm_server, tool_calls=calls, final_pass_combined=True
    ) as (agent, platform):
        await platform.post(platform.channel("dm", is_direct=True), ALICE, "weather?")
        await agent.wait_idle()
    assert [c["location"] for c in calls] == ["Oslo"]
    assert len(llm_server.requests) == 2


async def test_a_keyword_counts_as_a_request(
    store: SQLStore, tmp_path: Path, llm_server: LLMServer
) -> None:
    calls: list[dict[str, Any]] = []
    async with pipeline_agent(
        store,
        tmp_path,
        llm_server,
        tool_calls=calls,
        keywords=KEYWORDS,
        limits={"user_rate": {"requests": 1}},
    ) as (agent, platform):
        general = platform.channel("general")
        await platform.post(general, ALICE, "!weather Oslo")
        await agent.wait_idle()
        await platform.post(general, ALICE, "!weather Rome")
        await agent.wait_idle()
    assert [c["location"] for c in calls] == ["Oslo"]
    assert "you have reached 1 request per hour" in platform.sent[-1].text


async def test_a_failed_keyword_call_is_told_as_a_note_without_the_model(
    store: SQLStore, tmp_path: Path, llm_server: LLMServer
) -> None:
    keywords = {"weather": {"tool": "get_weather", "final_pass": True, "argument": "nowhere"}}
    async with pipeline_agent(store, tmp_path, llm_server, keywords=keywords) as (
        agent,
        platform,
    ):
        await platform.post(platform.channel("general"), ALICE, "!weather Oslo")
        await agent.wait_idle()
    assert llm_server.requests == []
    (note,) = platform.sent
    assert note.text.startswith("(!weather failed:")
    assert "note" in str(note.tags)


async def test_a_keyword_in_a_reply_puts_the_replied_to_message_first(
    store: SQLStore, tmp_path: Path, llm_server: LLMServer
) -> None:
    """Bob Bot's !generate: the message replied to goes before the rest of the line."""
    calls: list[dict[str, Any]] = []
    keywords = {"weather": {"tool": "get_weather", "reply_context": True}}
    async with pipeline_agent(store, tmp_path, llm_server, tool_calls=calls, keywords=keywords) as (
        agent,
        platform,
    ):
        general = platform.channel("general")
        asked = platform.add(general, ALICE, "Seattle")
        for text in ("!weather tomorrow", "!weather", "!weather Oslo"):
            replied = asked if text != "!weather Oslo" else None
            await platform.post(general, ALICE, text, reply_to=replied)
            await agent.wait_idle()  # one at a time: waiting triggers would join one answer
    assert [c["location"] for c in calls] == ["Seattle\ntomorrow", "Seattle", "Oslo"]
