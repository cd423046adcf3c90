"""The agent with the real openai/anthropic SDKs against the loopback LLM server."""

from __future__ import annotations

import asyncio

import pytest

from fakes.llm_server import LLMServer, Scripted
from salon.config import Secrets
from salon.llm.factory import build_provider
from salon.model import Participant
from tests.agent.conftest import StartAgent
from tests.conftest import bot_config

ALICE = Participant("alice", "Alice")
VENDORS = ["openai", "anthropic"]


def real_provider(server: LLMServer, vendor: str, retries: int = 2):  # type: ignore[no-untyped-def]
    base = server.base_url + ("/v1" if vendor == "openai" else "")
    providers = {
        "test": {
            "type": vendor,
            "model": "m",
            "base_url": base,
            "retries": retries,
            "backoff_initial": 0,
            "api_key_env": "TEST_KEY",
            "cache_min_tokens": 0,  # these conversations are short: mark them anyway
        }
    }
    return build_provider(bot_config(providers=providers), Secrets({"TEST_KEY": "k-test"}))


@pytest.mark.parametrize("vendor", VENDORS)
async def test_paragraphs_arrive_while_the_model_still_writes(
    llm_server: LLMServer, start_agent: StartAgent, vendor: str
) -> None:
    resume = asyncio.Event()
    chunks = ["Para one ", "is here.\n\n", "Para two."]
    # Anthropic streams two framing events before the first text delta.
    pause_at = 2 if vendor == "openai" else 4
    llm_server.queue(Scripted(chunks=chunks, pause_before_chunk=pause_at, resume=resume))
    _agent, platform = await start_agent(real_provider(llm_server, vendor))
    await platform.post(platform.channel("dm", is_direct=True), ALICE, "go")
    first = await platform.wait_sent(1)
    assert [m.text for m in first] == ["Para one is here."]  # the rest is not written yet
    resume.set()
    sent = await platform.wait_sent(2)
    assert [m.text for m in sent] == ["Para one is here.", "Para two."]


@pytest.mark.parametrize("vendor", VENDORS)
async def test_500_after_retries_tells_the_channel_and_the_loop_lives(
    llm_server: LLMServer, start_agent: StartAgent, vendor: str
) -> None:
    llm_server.queue(*[Scripted(status=500, error_message="model melted")] * 2, "back again")
    _agent, platform = await start_agent(real_provider(llm_server, vendor, retries=1))
    dm = platform.channel("dm", is_direct=True)
    await platform.post(dm, ALICE, "hello")
    sent = await platform.wait_sent(1)
    assert "could not answer" in sent[0].text
    assert "model melted" in sent[0].text
    await platform.post(dm, ALICE, "again?")
    sent = await platform.wait_sent(2)
    assert sent[1].text == "back again"
    assert len(llm_server.requests) == 3


@pytest.mark.parametrize("vendor", VENDORS)
async def test_429_then_success_answers_once(
    llm_server: LLMServer, start_agent: StartAgent, vendor: str
) -> None:
    llm_server.queue(Scripted(status=429, headers={"retry-after": "0"}), "patience pays")
    agent, platform = await start_agent(real_provider(llm_server, vendor))
    await platform.post(platform.channel("dm", is_direct=True), ALICE, "hello")
    await agent.wait_idle()
    assert [m.text for m in platform.sent] == ["patience pays"]


@pytest.mark.parametrize("vendor", VENDORS)
async def test_malformed_stream_is_reported(
    llm_server: LLMServer, start_agent: StartAgent, vendor: str
) -> None:
    llm_server.queue(Scripted(raw_events=["{garbage"]), "fine now")
    _agent, platform = await start_agent(real_provider(llm_server, vendor))
    dm = platform.channel("dm", is_direct=True)
    await platform.post(dm, ALICE, "hello")
    sent = await platform.wait_sent(1)
    assert "malformed response stream" in sent[0].text
    await platform.post(dm, ALICE, "hello?")
    assert (await platform.wait_sent(2))[1].text == "fine now"


async def test_a_server_refusing_tools_gets_asked_without_them(
    llm_server: LLMServer, start_agent: StartAgent
) -> None:
    from fakes import mcp_server
    from salon.agent.conversation.toolrunner import ToolRunner
    from salon.tools.hub import ToolHub
    from tests.tools.conftest import in_process

    llm_server.queue(
        Scripted(status=400, error_message="model does not support tools"), "plain answer", "again"
    )
    async with ToolHub([in_process(mcp_server.build())]) as hub:
        agent, platform = await start_agent(real_provider(llm_server, "openai", retries=0))
        config = agent.config
        agent.tools = ToolRunner(bot="salon", config=config, tools=hub, store=agent.store, log=None)
        dm = platform.channel("dm", is_direct=True)
        await platform.post(dm, ALICE, "hello")
        assert (await platform.wait_sent(1))[0].text == "plain answer"
        await platform.post(dm, ALICE, "and now?")
        await platform.wait_sent(2)
    first, second, third = (r.body for r in llm_server.requests)
    assert "tools" in first
    assert "tools" not in second
    assert "tools" not in third  # remembered: no more refused requests


async def test_a_lone_surrogate_in_a_message_does_not_break_later_answers(
    llm_server: LLMServer, start_agent: StartAgent
) -> None:
    llm_server.queue("first", "second")
    agent, platform = await start_agent(real_provider(llm_server, "openai"))
    dm = platform.channel("dm", is_direct=True)
    await platform.post(dm, ALICE, "broken \ud83d text")  # half of an emoji, from raw JSON
    await agent.wait_idle()
    await platform.post(dm, ALICE, "still there?")
    await agent.wait_idle()
    assert [m.text for m in platform.sent] == ["first", "second"]
    said = [m["content"] for m in llm_server.requests[-1].body["messages"]]
    assert "Alice: broken \ufffd text" in said
