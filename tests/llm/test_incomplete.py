"""A stream cut short before the vendor's finish reason reports no StopEvent, in every wire
format, so the agent can tell a finished answer from a truncated one."""

from __future__ import annotations

import pytest

from fakes.llm_server import LLMServer, Scripted
from salon.llm import ChatMessage, LLMRequest, ToolCallEvent, ToolDefinition, UsageEvent
from tests.llm._vendors import VENDORS, collect, provider_for, request, stops, text_of

FINISH = {"openai": "stop", "anthropic": "end_turn", "google": "stop", "bedrock": "end_turn"}


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_finished_stream_ends_with_the_vendors_reason(
    llm_server: LLMServer, vendor: str
) -> None:
    llm_server.queue(Scripted(chunks=["Hel", "lo"]))
    provider = provider_for(llm_server, vendor)
    events = await collect(provider)
    await provider.aclose()
    assert text_of(events) == "Hello"
    assert stops(events) == [FINISH[vendor]]


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_truncated_stream_has_no_stop_event(llm_server: LLMServer, vendor: str) -> None:
    llm_server.queue(Scripted(chunks=["Hel", "lo"], fault="truncate"))
    provider = provider_for(llm_server, vendor)
    events = await collect(provider)
    await provider.aclose()
    assert text_of(events).startswith("Hel")  # what came is reported as it came
    assert stops(events) == []
    assert len(llm_server.requests) == 1
    if vendor in ("anthropic", "bedrock"):  # message_start told the prompt's size
        usage = [e.usage for e in events if isinstance(e, UsageEvent)]
        assert [u.input_tokens for u in usage] == [12]


async def test_a_truncated_completions_stream_has_no_stop_event(llm_server: LLMServer) -> None:
    llm_server.queue(Scripted(chunks=["Hel", "lo"], fault="truncate"))
    provider = provider_for(llm_server, "openai", prefill_style="completions")
    prefill = LLMRequest(
        model="m1", messages=(ChatMessage.text("assistant", "Alice: hi\n\nSalon:"),), prefill=True
    )
    events = await collect(provider, prefill)
    await provider.aclose()
    assert llm_server.requests[0].path == "/v1/completions"
    assert text_of(events) == "Hello"
    assert stops(events) == []


async def test_tool_calls_cut_before_the_finish_reason_are_not_reported(
    llm_server: LLMServer,
) -> None:
    llm_server.queue(Scripted(tool_calls=[("call_1", "get_time", {"tz": "UTC"})], fault="truncate"))
    provider = provider_for(llm_server, "openai")
    tools = (ToolDefinition("get_time", "the time", {"type": "object"}),)
    events = await collect(provider, request("time?", tools=tools))
    await provider.aclose()
    assert [e for e in events if isinstance(e, ToolCallEvent)] == []
    assert stops(events) == []


async def test_the_fake_provider_can_cut_a_stream_short() -> None:
    from salon.llm import FakeProvider, FakeReply

    provider = FakeProvider([FakeReply(("Hel",), stop=None), "whole"])
    assert stops(await collect(provider)) == []
    assert stops(await collect(provider)) == ["end_turn"]
