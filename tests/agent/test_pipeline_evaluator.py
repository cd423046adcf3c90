"""The context evaluator and the speak gate: short calls of their own, through the real
SDKs against the loopback LLM server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fakes.llm_server import LLMServer, Recorded, Scripted
from salon.model import MessageEvent, Participant, Tag
from salon.store.sql import SQLStore
from tests.agent.conftest import StartAgent
from tests.agent.pipeline_kit import pipeline_agent
from tests.agent.test_prefill_agent import ANTHROPIC, breakpoint_text
from tests.agent.test_with_real_sdk import real_provider

ALICE = Participant("alice", "Alice")
BOB = Participant("bob", "Bob")
EVALUATOR: dict[str, Any] = {"enabled": True, "min_depth": 1, "max_depth": 10}


def is_evaluator(request: Recorded) -> bool:
    return "You pick the context" in json.dumps(request.body)


def main_requests(server: LLMServer) -> list[Recorded]:
    return [r for r in server.requests if not is_evaluator(r) and not is_gate(r)]


def is_gate(request: Recorded) -> bool:
    return "would Salon reply next" in json.dumps(request.body)


def answering(evaluator: str, main: str = "Sunny answer.", gate: str = "no") -> Any:
    def respond(request: Recorded) -> Scripted:
        if is_evaluator(request):
            return Scripted(text=evaluator)
        if is_gate(request):
            return Scripted(text=gate)
        return Scripted(text=main)

    return respond


async def _talk(platform: Any, channel: Any) -> None:
    platform.add(channel, BOB, "the football match was wild")
    platform.add(channel, ALICE, "that goal in the last minute!")
    platform.add(channel, BOB, "anyway, what do I plant in spring?")
    platform.add(channel, ALICE, "tomatoes, if it is warm")


async def test_the_evaluator_drops_off_topic_messages_from_the_main_request(
    store: SQLStore, tmp_path: Path, llm_server: LLMServer
) -> None:
    llm_server.respond = answering('{"keep": [1, 2, 3]}')
    async with pipeline_agent(
        store,
        tmp_path,
        llm_server,
        context_evaluator={**EVALUATOR, "model": "cheap-model"},
        prompt_caching=False,
        system_prompt="You are Salon the gardener.",
    ) as (agent, platform):
        dm = platform.channel("dm", is_direct=True)
        await _talk(platform, dm)
        await platform.post(dm, BOB, "and peppers?")
        await agent.wait_idle()
    evaluator = next(r for r in llm_server.requests if is_evaluator(r))
    assert "gardener" not in json.dumps(evaluator.body)  # its own prompt, never the persona
    assert evaluator.body["model"] == "cheap-model"
    (main,) = main_requests(llm_server)
    assert main.body["model"] == "main-model"
    sent = json.dumps(main.body)
    assert "football" not in sent
    assert "last minute" not in sent
    assert "plant in spring" in sent
    assert "peppers" in sent


async def test_a_malformed_evaluator_answer_keeps_the_whole_history(
    store: SQLStore, tmp_path: Path, llm_server: LLMServer
) -> None:
    llm_server.respond = answering("keep the last two, I think")
    async with pipeline_agent(
        store, tmp_path, llm_server, context_evaluator=EVALUATOR, prompt_caching=False
    ) as (agent, platform):
        dm = platform.channel("dm", is_direct=True)
        await _talk(platform, dm)
        await platform.post(dm, BOB, "and peppers?")
        await agent.wait_idle()
    (main,) = main_requests(llm_server)
    assert "football" in json.dumps(main.body)
    assert platform.sent[-1].text == "Sunny answer."


async def test_a_failed_evaluator_call_keeps_the_whole_history(
    store: SQLStore, tmp_path: Path, llm_server: LLMServer
) -> None:
    llm_server.queue(Scripted(status=500, error_message="evaluator down"), "Fine answer.")
    async with pipeline_agent(
        store, tmp_path, llm_server, context_evaluator=EVALUATOR, prompt_caching=False
    ) as (agent, platform):
        dm = platform.channel("dm", is_direct=True)
        await _talk(platform, dm)
        await platform.post(dm, BOB, "and peppers?")
        await agent.wait_idle()
    assert len(llm_server.requests) == 2
    assert "football" in json.dumps(llm_server.requests[1].body)
    assert platform.sent[-1].text == "Fine answer."


async def test_prefill_cached_prefix_stays_byte_identical_with_the_evaluator(
    llm_server: LLMServer, start_agent: StartAgent
) -> None:
    llm_server.respond = answering('{"keep": [1]}', main=" Hello.")
    agent, platform = await start_agent(
        real_provider(llm_server, "anthropic"),
        mode="prefill",
        providers=ANTHROPIC,
        cache_breakpoint_offset=1,
        rolling_threshold=20,
        context_evaluator={"enabled": True, "min_depth": 1, "max_depth": 30},
    )
    dm = platform.channel("dm", is_direct=True)
    for i in range(5):
        platform.add(dm, ALICE, f"line {i}")
    await platform.post(dm, ALICE, "hi Salon")
    await agent.wait_idle()
    for i in range(3):
        platform.add(dm, BOB, f"aside {i}")
    await platform.post(dm, ALICE, "again")
    await agent.wait_idle()
    first, second = (r.body for r in main_requests(llm_server))
    assert breakpoint_text(first) == breakpoint_text(second)
    assert breakpoint_text(first).endswith("Alice: line 4")
    last_turn = json.dumps(second["messages"][-1])
    assert "aside" not in last_turn  # dropped after the breakpoint, never before it


async def test_the_evaluator_judges_only_what_is_left_once_other_bots_go(
    store: SQLStore, tmp_path: Path, llm_server: LLMServer
) -> None:
    """other_bots_in_context: false. The evaluator lists only the lines the answer's
    context will hold, and makes no call when what is left is within its min_depth."""
    bob_bot = Participant("bobbot", "Bobbot", is_bot=True)
    llm_server.respond = answering('{"keep": [1, 2]}')
    async with pipeline_agent(
        store,
        tmp_path,
        llm_server,
        context_evaluator={**EVALUATOR, "min_depth": 2},
        other_bots_in_context=False,
        prompt_caching=False,
    ) as (agent, platform):
        dm = platform.channel("dm", is_direct=True)
        platform.add(dm, bob_bot, "bot line one about trains")
        platform.add(dm, bob_bot, "bot line two about trains")
        await platform.post(dm, ALICE, "what do I plant in spring?")
        await agent.wait_idle()
        assert not any(is_evaluator(r) for r in llm_server.requests)  # 1 left, min_depth 2
        platform.add(dm, ALICE, "peas were fine last year")
        platform.add(dm, bob_bot, "bot line three about trains")
        await platform.post(dm, ALICE, "and peppers?")
        await agent.wait_idle()
    (evaluator,) = [r for r in llm_server.requests if is_evaluator(r)]
    listed = json.dumps(evaluator.body)
    assert "trains" not in listed
    assert "peppers" in listed
    assert "peas were fine" in listed


async def test_with_the_gate_saying_no_a_monitored_message_gets_no_main_call(
    store: SQLStore, tmp_path: Path, llm_server: LLMServer
) -> None:
    llm_server.respond = answering("{}", gate="No.")
    async with pipeline_agent(store, tmp_path, llm_server, speak_gate={"enabled": True}) as (
        agent,
        platform,
    ):
        room = platform.channel("room")
        message = platform.add(room, ALICE, "nice weather today", tags=frozenset({Tag.MONITORED}))
        await agent.submit(MessageEvent(message))
        await agent.wait_idle()
        stats = agent.pipeline.gate_stats
    assert [is_gate(r) for r in llm_server.requests] == [True]
    assert platform.sent == []
    assert (stats.yes, stats.no) == (0, 1)
    assert stats.tokens > 0


async def test_a_mention_always_passes_the_gate(
    store: SQLStore, tmp_path: Path, llm_server: LLMServer
) -> None:
    llm_server.respond = answering("{}", gate="no")
    async with pipeline_agent(store, tmp_path, llm_server, speak_gate={"enabled": True}) as (
        agent,
        platform,
    ):
        room = platform.channel("room")
        await platform.post(room, ALICE, "@Salon hello", mentions=[platform.self_participant])
        await agent.wait_idle()
    assert not any(is_gate(r) for r in llm_server.requests)
    assert [m.text for m in platform.sent] == ["Sunny answer."]
