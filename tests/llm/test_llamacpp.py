"""Native tool calls against llama.cpp's server habits (the fake's ``llamacpp`` flavour) and
the streamed tool-call shapes the OpenAI format allows, through the real openai SDK."""

from __future__ import annotations

import json

import pytest

from fakes.llm_server import LLMServer, Scripted
from salon.llm import (
    ChatMessage,
    LLMRequest,
    ToolCallEvent,
    ToolDefinition,
    ToolResultPart,
    ToolUsePart,
)
from salon.model import ToolCall, ToolResult
from tests.llm._vendors import collect, provider_for, stops, text_of

SCHEMA = {"type": "object", "properties": {"tz": {"type": "string"}}}
TOOLS = (ToolDefinition("get_time", "tells the time", SCHEMA),)
ASK = LLMRequest(model="m1", messages=(ChatMessage.text("user", "time?"),), tools=TOOLS)


@pytest.fixture
async def llamacpp() -> LLMServer:
    async with LLMServer(flavour="llamacpp") as server:
        yield server  # type: ignore[misc]


async def test_a_name_repeated_in_every_delta_is_not_concatenated(llamacpp: LLMServer) -> None:
    llamacpp.queue(Scripted(tool_calls=[("call_1", "get_time", {"tz": "UTC"})]))
    provider = provider_for(llamacpp, "openai")
    events = await collect(provider, ASK)
    await provider.aclose()
    calls = [e.call for e in events if isinstance(e, ToolCallEvent)]
    assert calls == [ToolCall("call_1", "get_time", {"tz": "UTC"})]
    assert stops(events) == ["tool_calls"]


async def test_a_follow_up_without_text_sends_empty_content_not_null(llamacpp: LLMServer) -> None:
    llamacpp.queue(Scripted(tool_calls=[("call_1", "get_time", {"tz": "UTC"})]), "It is noon.")
    provider = provider_for(llamacpp, "openai", retries=0)
    (call,) = [e.call for e in await collect(provider, ASK) if isinstance(e, ToolCallEvent)]
    follow_up = LLMRequest(
        model="m1",
        tools=TOOLS,
        messages=(
            *ASK.messages,
            ChatMessage("assistant", (ToolUsePart(call),)),
            ChatMessage("user", (ToolResultPart(ToolResult(call.id, "12:00")),)),
        ),
    )
    assert text_of(await collect(provider, follow_up)) == "It is noon."
    await provider.aclose()
    assistant = llamacpp.requests[1].body["messages"][1]
    assert assistant["content"] == ""
    assert assistant["tool_calls"][0]["function"]["name"] == "get_time"


def chunk(fragment: dict[str, object] | None, finish: str | None = None) -> str:
    delta = {"tool_calls": [fragment]} if fragment else {}
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return json.dumps(
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "m1",
            "choices": [choice],
        }
    )


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        (["get_", "time"], "get_time"),  # fragments of one name, as the format allows
        (["get_", "get_time"], "get_time"),  # llama.cpp resends the name whole as it grows
        (["get_time", "get_time", "get_time"], "get_time"),  # and some builds in every delta
    ],
)
async def test_streamed_calls_accumulate_by_index(
    llm_server: LLMServer, names: list[str], expected: str
) -> None:
    arguments = ['{"tz"', ': "UTC"}', ""]
    events = [
        chunk(
            {
                "index": 0,
                "id": "call_9",
                "type": "function",
                "function": {"name": names[0], "arguments": ""},
            }
        )
    ]
    for name, part in zip([*names[1:], None, None], arguments, strict=False):
        function = {"arguments": part} if name is None else {"name": name, "arguments": part}
        events.append(chunk({"index": 0, "function": function}))
    events.append(
        chunk(
            {
                "index": 1,
                "id": "call_10",
                "type": "function",
                "function": {"name": "ping", "arguments": "{}"},
            }
        )
    )
    events += [chunk(None, "tool_calls"), "[DONE]"]
    llm_server.queue(Scripted(raw_events=events))
    provider = provider_for(llm_server, "openai")
    received = await collect(provider, ASK)
    await provider.aclose()
    calls = [e.call for e in received if isinstance(e, ToolCallEvent)]
    assert calls == [ToolCall("call_9", expected, {"tz": "UTC"}), ToolCall("call_10", "ping", {})]
