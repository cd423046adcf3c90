"""The real google-genai SDK against the loopback fake of the Gemini API."""

from __future__ import annotations

import base64

import pytest

from fakes.llm_server import LLMServer, Scripted
from salon.config import Secrets
from salon.errors import ProviderError, RateLimited
from salon.llm import (
    ChatMessage,
    ImagePart,
    LLMRequest,
    Provider,
    StreamEvent,
    TextDelta,
    TextPart,
    ToolCallEvent,
    ToolDefinition,
    UsageEvent,
)
from salon.llm.base import ThinkingPart, ThoughtEvent, ToolResultPart, ToolUsePart
from salon.llm.factory import build_provider
from salon.model import ToolCall, ToolResult, Usage
from tests.conftest import bot_config


def gemini(server: LLMServer, **settings: object) -> Provider:
    config = bot_config(
        provider="gemini",
        providers={
            "gemini": {
                "type": "google",
                "model": "gemini-test",
                "base_url": server.base_url,
                "api_key_env": "GEMINI_KEY",
                "retries": 0,
                **settings,
            }
        },
    )
    return build_provider(config, Secrets({"GEMINI_KEY": "gm-secret"}))


async def collect(provider: Provider, request: LLMRequest) -> list[StreamEvent]:
    return [event async for event in provider.stream(request)]


def text_of(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


async def test_streams_text_with_system_image_and_usage(llm_server: LLMServer) -> None:
    llm_server.queue(
        Scripted(chunks=["Hel", "lo"], input_tokens=30, cache_read_tokens=70, output_tokens=4)
    )
    provider = gemini(llm_server, extra_body={"safetySettings": []})
    request = LLMRequest(
        model="gemini-test",
        system="be brief",
        messages=(
            ChatMessage("user", (TextPart("Alice: look"), ImagePart("image/png", b"\x89PNG"))),
            ChatMessage.text("assistant", "Salon: nice"),
            ChatMessage.text("user", "Alice: and?"),
        ),
        temperature=0.3,
        stop=("\nAlice:",),
    )
    events = await collect(provider, request)
    assert text_of(events) == "Hello"
    usage = sum((e.usage for e in events if isinstance(e, UsageEvent)), Usage())
    assert usage == Usage(input_tokens=30, output_tokens=4, cache_read_tokens=70)
    (sent,) = llm_server.requests
    assert sent.path.endswith("/models/gemini-test:streamGenerateContent?alt=sse")
    assert sent.headers["x-goog-api-key"] == "gm-secret"
    body = sent.body
    assert body["systemInstruction"]["parts"] == [{"text": "be brief"}]
    assert [c["role"] for c in body["contents"]] == ["user", "model", "user"]
    image = body["contents"][0]["parts"][1]
    image = image.get("inlineData") or image["inline_data"]
    mime = image.get("mimeType") or image["mime_type"]
    assert (mime, base64.b64decode(image["data"])) == ("image/png", b"\x89PNG")
    assert body["generationConfig"]["stopSequences"] == ["\nAlice:"]
    assert body["generationConfig"]["temperature"] == 0.3
    assert body["safetySettings"] == []  # extra_body fields reach the request
    await provider.aclose()


async def test_prefill_ends_with_a_model_turn(llm_server: LLMServer) -> None:
    llm_server.queue(Scripted(text=" and so it ends."))
    provider = gemini(llm_server)
    request = LLMRequest(
        model="gemini-test",
        messages=(
            ChatMessage.text("user", "<cmd>cat untitled.txt</cmd>"),
            ChatMessage.text("assistant", "Alice: tell a story\n\nSalon:"),
        ),
    )
    assert text_of(await collect(provider, request)) == " and so it ends."
    contents = llm_server.requests[0].body["contents"]
    assert contents[-1] == {"role": "model", "parts": [{"text": "Alice: tell a story\n\nSalon:"}]}
    await provider.aclose()


async def test_function_calls_round_trip(llm_server: LLMServer) -> None:
    llm_server.queue(Scripted(text="", tool_calls=[("x", "get_time", {"zone": "Europe/Paris"})]))
    provider = gemini(llm_server)
    tool = ToolDefinition(
        "get_time", "the time", {"type": "object", "properties": {"zone": {"type": "string"}}}
    )
    request = LLMRequest(
        model="gemini-test", messages=(ChatMessage.text("user", "time?"),), tools=(tool,)
    )
    events = await collect(provider, request)
    (call,) = [e.call for e in events if isinstance(e, ToolCallEvent)]
    assert (call.name, call.arguments) == ("get_time", {"zone": "Europe/Paris"})
    # Gemini 3 signs every function call and refuses the next step without the signature.
    signed = tuple(ThinkingPart(e.thought) for e in events if isinstance(e, ThoughtEvent))
    declared = llm_server.requests[0].body["tools"][0]["functionDeclarations"][0]
    assert declared["name"] == "get_time"
    schema = declared.get("parametersJsonSchema") or declared["parameters_json_schema"]
    assert schema["properties"]["zone"] == {"type": "string"}
    follow = LLMRequest(
        model="gemini-test",
        messages=(
            ChatMessage.text("user", "time?"),
            ChatMessage(
                "assistant",
                (*signed, ToolUsePart(ToolCall(call.id, call.name, call.arguments))),
            ),
            ChatMessage("user", (ToolResultPart(ToolResult(call.id, "09:00")),)),
        ),
        tools=(tool,),
    )
    llm_server.queue("It is nine.")
    assert text_of(await collect(provider, follow)) == "It is nine."
    contents = llm_server.requests[1].body["contents"]
    assert contents[1]["parts"][0]["functionCall"]["name"] == "get_time"
    response = contents[2]["parts"][0]["functionResponse"]
    assert (response["name"], response["response"]) == ("get_time", {"output": "09:00"})
    await provider.aclose()


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (Scripted(block_reason="SAFETY"), "the prompt was blocked: SAFETY"),
        (Scripted(text="", finish_reason="SAFETY"), "the answer was blocked: SAFETY"),
        (Scripted(text=""), "the model returned nothing (finish reason STOP)"),
    ],
)
async def test_blocks_and_empty_answers_are_clear_errors(
    llm_server: LLMServer, reply: Scripted, expected: str
) -> None:
    llm_server.queue(reply)
    provider = gemini(llm_server)
    request = LLMRequest(model="gemini-test", messages=(ChatMessage.text("user", "hi"),))
    with pytest.raises(ProviderError) as caught:
        await collect(provider, request)
    assert expected in str(caught.value)
    await provider.aclose()


async def test_http_errors_carry_the_vendors_message(llm_server: LLMServer) -> None:
    llm_server.queue(
        Scripted(status=400, error_message="API key not valid. Please pass a valid API key."),
        Scripted(status=429, error_message="Resource has been exhausted"),
    )
    provider = gemini(llm_server)
    request = LLMRequest(model="gemini-test", messages=(ChatMessage.text("user", "hi"),))
    with pytest.raises(ProviderError) as caught:
        await collect(provider, request)
    assert caught.value.status == 400
    assert "API key not valid" in str(caught.value)
    assert "gm-secret" not in str(caught.value)
    with pytest.raises(RateLimited):
        await collect(provider, request)
    await provider.aclose()
