"""The real openai and anthropic SDKs against the loopback fake server."""

from __future__ import annotations

import pytest

from fakes.llm_server import LLMServer, Scripted
from salon.config import Secrets
from salon.errors import ProviderError, RateLimited
from salon.llm import (
    ChatMessage,
    LLMRequest,
    Provider,
    StreamEvent,
    TextDelta,
    TextPart,
    UsageEvent,
)
from salon.llm.factory import build_provider
from salon.model import Usage
from tests.conftest import bot_config

VENDORS = ["openai", "anthropic"]


def provider_for(server: LLMServer, vendor: str, **provider: object) -> Provider:
    base_url = server.base_url + ("/v1" if vendor == "openai" else "")
    config = bot_config(
        providers={
            "test": {
                "type": vendor,
                "model": "m1",
                "base_url": base_url,
                "api_key_env": "TEST_KEY",
                "backoff_initial": 0,
                **provider,
            }
        }
    )
    return build_provider(config, Secrets({"TEST_KEY": "sk-test-key"}))


def request(text: str = "hi") -> LLMRequest:
    return LLMRequest(model="m1", messages=(ChatMessage.text("user", text),), system="be brief")


async def collect(provider: Provider) -> list[StreamEvent]:
    return [event async for event in provider.stream(request())]


def text_of(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def usage_of(events: list[StreamEvent]) -> Usage:
    total = Usage()
    for event in events:
        if isinstance(event, UsageEvent):
            total += event.usage
    return total


@pytest.mark.parametrize("vendor", VENDORS)
async def test_streams_text_and_usage(llm_server: LLMServer, vendor: str) -> None:
    llm_server.queue(
        Scripted(chunks=["Hel", "lo"], input_tokens=20, output_tokens=3, cache_read_tokens=5)
    )
    provider = provider_for(llm_server, vendor)
    events = await collect(provider)
    await provider.aclose()
    assert text_of(events) == "Hello"
    usage = usage_of(events)
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens) == (20, 3, 5)


@pytest.mark.parametrize("vendor", VENDORS)
async def test_sends_system_model_key_and_custom_fields(llm_server: LLMServer, vendor: str) -> None:
    provider = provider_for(
        llm_server, vendor, extra_body={"top_k": 7}, headers={"X-Title": "salon"}
    )
    await collect(provider)
    sent = llm_server.requests[0]
    assert sent.body["model"] == "m1"
    assert sent.body["top_k"] == 7
    assert sent.headers["x-title"] == "salon"
    if vendor == "openai":
        assert sent.path == "/v1/chat/completions"
        assert sent.headers["authorization"] == "Bearer sk-test-key"
        assert sent.body["messages"][0] == {"role": "system", "content": "be brief"}
    else:
        assert sent.path == "/v1/messages"
        key = sent.headers.get("x-api-key") or sent.headers["authorization"].removeprefix("Bearer ")
        assert key == "sk-test-key"
        assert sent.body["system"] == "be brief"


@pytest.mark.parametrize("vendor", VENDORS)
async def test_429_then_success_is_retried(llm_server: LLMServer, vendor: str) -> None:
    llm_server.queue(Scripted(status=429, headers={"retry-after": "0"}), "after retry")
    events = await collect(provider_for(llm_server, vendor, retries=2))
    assert text_of(events) == "after retry"
    assert len(llm_server.requests) == 2


@pytest.mark.parametrize("vendor", VENDORS)
async def test_500_exhausting_retries_raises_provider_error(
    llm_server: LLMServer, vendor: str
) -> None:
    for _ in range(3):
        llm_server.queue(Scripted(status=500, error_message="the GPU caught fire"))
    with pytest.raises(ProviderError) as caught:
        await collect(provider_for(llm_server, vendor, retries=2))
    assert not isinstance(caught.value, RateLimited)
    assert caught.value.status == 500
    assert "the GPU caught fire" in str(caught.value)
    assert len(llm_server.requests) == 3


@pytest.mark.parametrize("vendor", VENDORS)
async def test_400_is_not_retried(llm_server: LLMServer, vendor: str) -> None:
    llm_server.queue(Scripted(status=400, error_message="bad field"))
    with pytest.raises(ProviderError, match="bad field"):
        await collect(provider_for(llm_server, vendor, retries=3))
    assert len(llm_server.requests) == 1


@pytest.mark.parametrize("vendor", VENDORS)
async def test_rate_limit_exhausted_is_rate_limited(llm_server: LLMServer, vendor: str) -> None:
    llm_server.queue(Scripted(status=429, error_message="slow down"))
    with pytest.raises(RateLimited, match="slow down"):
        await collect(provider_for(llm_server, vendor, retries=0))


@pytest.mark.parametrize("vendor", VENDORS)
async def test_malformed_stream_is_a_provider_error(llm_server: LLMServer, vendor: str) -> None:
    llm_server.queue(Scripted(raw_events=["{this is not json"]))
    with pytest.raises(ProviderError, match="malformed"):
        await collect(provider_for(llm_server, vendor, retries=2))
    assert len(llm_server.requests) == 1  # a garbled stream is not retried


async def test_unreachable_server_is_a_provider_error() -> None:
    server = LLMServer()
    await server.start()
    await server.stop()  # the port is now closed
    with pytest.raises(ProviderError, match="cannot reach"):
        await collect(provider_for(server, "openai", retries=0))


@pytest.mark.parametrize("vendor", VENDORS)
async def test_native_tool_calls_round_trip(llm_server: LLMServer, vendor: str) -> None:
    from salon.llm import ToolCallEvent, ToolDefinition, ToolResultPart, ToolUsePart
    from salon.model import ToolCall, ToolResult

    llm_server.queue(
        Scripted(chunks=["Let me check."], tool_calls=[("call_1", "clock", {"tz": "UTC"})])
    )
    provider = provider_for(llm_server, vendor)
    schema = {"type": "object", "properties": {"tz": {"type": "string"}}}
    tools = (ToolDefinition("clock", "tells the time", schema),)
    first = LLMRequest(model="m1", messages=(ChatMessage.text("user", "time?"),), tools=tools)
    events = [e async for e in provider.stream(first)]
    calls = [e.call for e in events if isinstance(e, ToolCallEvent)]
    assert calls == [ToolCall("call_1", "clock", {"tz": "UTC"})]
    assert text_of(events) == "Let me check."

    follow_up = LLMRequest(
        model="m1",
        tools=tools,
        messages=(
            ChatMessage.text("user", "time?"),
            ChatMessage("assistant", (TextPart("Let me check."), ToolUsePart(calls[0]))),
            ChatMessage("user", (ToolResultPart(ToolResult("call_1", "12:00")),)),
        ),
    )
    _ = [e async for e in provider.stream(follow_up)]
    sent = llm_server.requests[1].body
    if vendor == "openai":
        assert sent["tools"][0]["function"]["name"] == "clock"
        assistant, tool = sent["messages"][1], sent["messages"][2]
        assert assistant["tool_calls"][0]["function"] == {
            "name": "clock",
            "arguments": '{"tz": "UTC"}',
        }
        assert tool == {"role": "tool", "tool_call_id": "call_1", "content": "12:00"}
    else:
        assert sent["tools"][0]["input_schema"] == schema
        assert sent["messages"][1]["content"][1] == {
            "type": "tool_use",
            "id": "call_1",
            "name": "clock",
            "input": {"tz": "UTC"},
        }
        result = sent["messages"][2]["content"][0]
        assert (result["type"], result["tool_use_id"], result["content"]) == (
            "tool_result",
            "call_1",
            "12:00",
        )


@pytest.mark.parametrize(
    ("vendor", "markers"),
    [("openai", False), ("anthropic", True), ("bedrock", True), ("google", False)],
)
async def test_traits_survive_the_wrappers(
    llm_server: LLMServer, vendor: str, markers: bool
) -> None:
    from salon.llm import ProviderTraits
    from tests.llm._vendors import provider_for as any_provider

    provider = any_provider(llm_server, vendor)
    assert provider.traits == ProviderTraits(prefix_cache=True, cache_markers=markers)
    await provider.aclose()


async def test_anthropic_is_sent_no_sampling_temperature(
    llm_server: LLMServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Anthropic's API (2026-10-21, what SDK 2.x sends) refuses temperature and the SDK no
    longer takes it: a bot configured with one still answers, without it, and the log says
    once that it is ignored."""
    provider = provider_for(llm_server, "anthropic")
    warm = LLMRequest(model="m1", messages=(ChatMessage.text("user", "hi"),), temperature=0.7)
    for _ in range(2):
        llm_server.queue("fine")
        events = [event async for event in provider.stream(warm)]
        assert text_of(events) == "fine"
    assert all("temperature" not in r.body for r in llm_server.requests)
    said = [r for r in caplog.records if "temperature" in r.getMessage()]
    assert len(said) == 1
    await provider.aclose()
