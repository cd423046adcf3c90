"""A request as sent by each vendor's provider reads as one transcript on the page."""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from html import unescape
from typing import Any

import pytest

from salon.config import Secrets
from salon.llm.base import (
    ChatMessage,
    ImagePart,
    LLMRequest,
    TextPart,
    ToolDefinition,
    ToolResultPart,
    ToolUsePart,
    request_as_sent,
)
from salon.llm.factory import build_provider
from salon.model import ToolCall, ToolResult
from salon.web.pages import transcript
from tests.conftest import bot_config

REQUEST = LLMRequest(
    model="m",
    system="You are Salon.",
    stop=("\nAlice:",),
    tools=(ToolDefinition("weather", "the weather", {"type": "object", "properties": {}}),),
    messages=(
        ChatMessage("user", (TextPart("Alice: weather in Oslo?", cache_breakpoint=True),)),
        ChatMessage("assistant", (ToolUsePart(ToolCall("c1", "weather", {"city": "Oslo"})),)),
        ChatMessage("user", (ToolResultPart(ToolResult("c1", "minus four and snow")),)),
    ),
)


@pytest.mark.parametrize("vendor", ["openai", "anthropic", "google"])
def test_each_vendor_s_request_reads_as_a_transcript(vendor: str) -> None:
    config = bot_config(
        providers={
            "test": {"type": vendor, "model": "m", "api_key_env": "K", "cache_min_tokens": 0}
        },
        provider="test",
    )
    provider = build_provider(config, Secrets({"K": "key-for-the-test"}))
    sent: dict[str, Any] = json.loads(json.dumps(request_as_sent(provider, REQUEST), default=str))
    page = transcript(sent)
    shown = unescape(page)
    assert "You are Salon." in shown
    assert "Alice: weather in Oslo?" in shown
    assert "[tool call" in shown
    assert '"city": "Oslo"' in shown or '\\"city\\": \\"Oslo\\"' in shown
    assert "minus four and snow" in shown
    # OpenAI gives a result a turn of its own (role "tool"); the others a block in a turn.
    assert "[tool result" in shown or 'class="turn role-tool"' in page
    assert "tools: weather" in shown
    assert "Alice:" in shown.split("stop:")[1]
    if vendor == "anthropic":
        assert "cache breakpoint" in shown


@pytest.mark.parametrize("vendor", ["openai", "anthropic", "google"])
def test_a_request_as_sent_keeps_an_image_as_its_size_and_hash(vendor: str) -> None:
    config = bot_config(
        providers={
            "test": {"type": vendor, "model": "m", "api_key_env": "K", "cache_min_tokens": 0}
        },
        provider="test",
    )
    provider = build_provider(config, Secrets({"K": "key-for-the-test"}))
    picture = bytes(range(256)) * 8
    with_image = replace(
        REQUEST,
        messages=(
            *REQUEST.messages,
            ChatMessage("user", (TextPart("Bob: look"), ImagePart("image/png", picture))),
        ),
    )
    sent = json.dumps(request_as_sent(provider, with_image), default=str)
    assert "<image: 2048 bytes, sha256 " in sent
    assert base64.b64encode(picture).decode()[:64] not in sent
    text_only = replace(REQUEST, messages=REQUEST.messages[:1])
    assert request_as_sent(provider, text_only) == provider.wire(text_only)


def test_a_calls_thinking_is_shown_collapsed_with_its_token_count() -> None:
    from salon.trace import TraceSummary
    from salon.web.pages import trace_detail

    summary = TraceSummary(
        1, "salon", "memory", "memory:room", 0.0, 1.0, "answered", None, "Alice", None,
        "m", 10, 905, 0, 0, 0.0, None, None, None, None, 1000.0, 900,
    )  # fmt: skip
    call = {
        "kind": "answer", "provider": "p", "model": "m", "request": {}, "input_tokens": 10,
        "output_tokens": 905, "cache_read_tokens": 0, "cache_write_tokens": 0,
        "reasoning_tokens": 900, "thinking": "first <b>think</b>, then answer",
    }  # fmt: skip
    page = trace_detail(summary, {"calls": [call]})
    assert (
        '<details class="thinking"><summary>thinking · 900 reasoning tokens</summary>'
        "<pre>first &lt;b&gt;think&lt;/b&gt;, then answer</pre></details>"
    ) in page
    assert "905 out (900 reasoning)" in page
    assert "905 out (900 reasoning)" in trace_detail(summary, {"calls": []})


def test_thinking_blocks_of_a_request_read_as_thinking_not_as_text() -> None:
    sent = {
        "messages": [
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "secret plan", "signature": "c2ln"},
                    {"type": "redacted_thinking", "data": "b3BhcXVl"},
                    {"type": "text", "text": "the answer"},
                ],
            }
        ]
    }
    shown = unescape(transcript(sent))
    assert "[thinking: 11 characters]" in shown
    assert "[redacted thinking]" in shown
    assert "secret plan" not in shown  # the call's own thinking is shown once, collapsed
    assert "c2ln" not in shown
