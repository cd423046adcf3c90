"""What a model returns is made safe at the provider boundary, for every vendor: a lone
surrogate (valid in JSON as an escape, ``"\\ud800"``, but not encodable as UTF-8) becomes
U+FFFD in text, tool names and tool arguments, as inbound texts are cleaned."""

from __future__ import annotations

import json

import pytest

from fakes.llm_server import LLMServer, Scripted
from salon.errors import ProviderError
from salon.llm import StreamEvent, ToolCallEvent, ToolDefinition
from tests.llm._vendors import VENDORS, collect, provider_for, request, text_of

ECHO = ToolDefinition("echo", "Say it back.", {"type": "object", "properties": {}})


def calls(events: list[StreamEvent]) -> list[ToolCallEvent]:
    return [e for e in events if isinstance(e, ToolCallEvent)]


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_lone_surrogate_in_streamed_text_arrives_as_a_replacement_character(
    llm_server: LLMServer, vendor: str
) -> None:
    llm_server.queue(Scripted(chunks=["half an emoji: \ud83d", " and the rest"]))
    provider = provider_for(llm_server, vendor)
    try:
        events = await collect(provider)
    finally:
        await provider.aclose()
    text = text_of(events)
    assert text == "half an emoji: \ufffd and the rest"
    text.encode("utf-8")  # what the trace and the platform will do with it


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_lone_surrogate_in_a_tool_call_arrives_as_a_replacement_character(
    llm_server: LLMServer, vendor: str
) -> None:
    arguments = {"text": "broken \udc00 here", "nested": [{"k\ud800": "v\ud800"}]}
    llm_server.queue(Scripted(tool_calls=[("call_1", "ec\ud800ho", arguments)]))
    provider = provider_for(llm_server, vendor)
    try:
        events = await collect(provider, request(tools=(ECHO,)))
    finally:
        await provider.aclose()
    (event,) = calls(events)
    assert event.call.name == "ec\ufffdho"
    assert event.call.arguments == {
        "text": "broken \ufffd here",
        "nested": [{"k\ufffd": "v\ufffd"}],
    }
    json.dumps(event.call.arguments, ensure_ascii=False).encode("utf-8")


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_lone_surrogate_in_a_servers_error_arrives_as_a_replacement_character(
    llm_server: LLMServer, vendor: str
) -> None:
    # The error is shown in the channel and logged in the chat log and the trace.
    llm_server.queue(Scripted(status=400, error_message="no such word: \ud83d"))
    provider = provider_for(llm_server, vendor)
    try:
        with pytest.raises(ProviderError) as caught:
            await collect(provider)
    finally:
        await provider.aclose()
    assert str(caught.value).endswith("no such word: \ufffd")
