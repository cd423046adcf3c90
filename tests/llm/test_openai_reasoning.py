"""Reasoning through the real openai SDK against the loopback server: what a bot's
``thinking`` sends, how ``reasoning_content``/``reasoning``/``reasoning_details`` and inline
``<think>`` come back, what goes back in a tool loop, and the reasoning tokens."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

import pytest

from fakes.llm_server import LLMServer, Scripted
from salon.agent.conversation.stream import Streamed, read_stream
from salon.agent.recording.recorder import PendingCall
from salon.config import Secrets
from salon.errors import ProviderError
from salon.llm import ChatMessage, LLMRequest, Provider, StreamEvent, TextDelta, UsageEvent
from salon.llm.base import (
    TextPart,
    Thinking,
    ThinkingDelta,
    ThinkingPart,
    ThoughtEvent,
    ToolCallEvent,
    ToolDefinition,
    ToolResultPart,
    ToolUsePart,
)
from salon.llm.factory import build_provider
from salon.model import Thought, ToolCall, ToolResult
from tests.conftest import bot_config

THOUGHT = ["The user asks", " for the time."]
_CALL = ToolCall("call_1", "clock", {})
ON = Thinking()
TOOLS = (ToolDefinition("clock", "tells the time", {"type": "object", "properties": {}}),)


def provider_for(server: LLMServer, model: str = "m1", **provider: Any) -> Provider:
    config = bot_config(
        providers={
            "test": {
                "type": "openai",
                "model": model,
                "base_url": server.base_url + "/v1",
                "api_key_env": "TEST_KEY",
                "backoff_initial": 0,
                "retries": 0,
                **provider,
            }
        }
    )
    return build_provider(config, Secrets({"TEST_KEY": "sk-test-key"}))


def asked(model: str = "m1", thinking: Thinking | None = ON, *more: ChatMessage) -> LLMRequest:
    messages = (ChatMessage.text("user", "time?"), *more)
    return LLMRequest(model=model, messages=messages, tools=TOOLS, thinking=thinking)


async def events_of(provider: Provider, request: LLMRequest) -> list[StreamEvent]:
    return [event async for event in provider.stream(request)]


def answer(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def thinking(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, ThinkingDelta))


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning", "openrouter"])
async def test_reasoning_deltas_are_thinking_never_answer(
    llm_server: LLMServer, field: str
) -> None:
    llm_server.queue(
        Scripted(chunks=["It is noon."], thinking_chunks=THOUGHT, reasoning_field=field)
    )
    events = await events_of(provider_for(llm_server), asked())
    assert answer(events) == "It is noon."
    assert thinking(events) == "The user asks for the time."
    assert any(isinstance(e, ThinkingDelta) for e in events[:2])  # as it streams, first
    (thought,) = [e.thought for e in events if isinstance(e, ThoughtEvent)]
    assert (thought.vendor, thought.model, thought.text) == ("openai", "m1", "".join(THOUGHT))


async def test_reasoning_tokens_are_read_from_the_usage_details(llm_server: LLMServer) -> None:
    llm_server.queue(Scripted(text="Noon.", thinking="hm", output_tokens=3, reasoning_tokens=40))
    events = await events_of(provider_for(llm_server), asked())
    (usage,) = [e.usage for e in events if isinstance(e, UsageEvent)]
    assert (usage.output_tokens, usage.reasoning_tokens) == (43, 40)


async def test_inline_think_split_across_chunks_is_thinking(llm_server: LLMServer) -> None:
    chunks = ["<thi", "nk>secret plan", "</thi", "nk>\n\nIt is noon."]
    llm_server.queue(Scripted(chunks=chunks))
    events = await events_of(provider_for(llm_server), asked(thinking=None))
    assert (answer(events), thinking(events)) == ("It is noon.", "secret plan")


@pytest.mark.parametrize("style", ["chat_template", "none"])
async def test_a_tagless_start_is_thinking_when_the_bot_thinks(
    llm_server: LLMServer, style: str
) -> None:
    llm_server.queue(Scripted(chunks=["secret", " plan</think>", "It is noon."]))
    events = await events_of(provider_for(llm_server, reasoning_style=style), asked())
    assert (answer(events), thinking(events)) == ("It is noon.", "secret plan")


@pytest.mark.parametrize(
    ("style", "reasoning", "prefill"),
    [
        ("openai", [], False),  # OpenAI's reasoning models hide it: the text is the answer
        ("deepseek", ["hm"], False),
        ("chat_template", ["hm"], False),  # the server parses it out: content is answer
        ("chat_template", [], True),  # a continued transcript is answer
    ],
)
async def test_an_answer_is_not_held_where_reasoning_cannot_be_in_it(
    llm_server: LLMServer, style: str, reasoning: list[str], prefill: bool
) -> None:
    resume = asyncio.Event()
    frames = len(reasoning) + 1  # the reasoning, then the answer's first chunk
    llm_server.queue(
        Scripted(
            chunks=["It is ", "noon."],
            thinking_chunks=reasoning,
            pause_before_chunk=frames,
            resume=resume,
        )
    )
    request = asked()
    if prefill:
        request = replace(
            request,
            prefill=True,
            messages=(*request.messages, ChatMessage.text("assistant", "Bot:")),
        )
    provider = provider_for(llm_server, reasoning_style=style)
    stream = provider.stream(request)
    try:
        seen: list[StreamEvent] = []
        while not any(isinstance(e, TextDelta) for e in seen):
            seen.append(await asyncio.wait_for(anext(stream), 5))
        assert answer(seen) == "It is "  # while the server still holds the rest
    finally:
        resume.set()
        await stream.aclose()


@pytest.mark.parametrize(
    ("style", "wanted", "sent"),
    [
        ("openai", Thinking(effort="low"), {"reasoning_effort": "low"}),
        ("openai", None, {}),
        ("openrouter", Thinking(effort="high"), {"reasoning": {"effort": "high"}}),
        ("openrouter", Thinking(budget_tokens=2000), {"reasoning": {"max_tokens": 2000}}),
        ("openrouter", Thinking(), {"reasoning": {"enabled": True}}),
        (
            "deepseek",
            Thinking(effort="high"),
            {"thinking": {"type": "enabled"}, "reasoning_effort": "high"},
        ),
        ("deepseek", None, {"thinking": {"type": "disabled"}}),
        ("chat_template", Thinking(), {"chat_template_kwargs": {"enable_thinking": True}}),
        ("chat_template", None, {"chat_template_kwargs": {"enable_thinking": False}}),
        ("none", Thinking(effort="high"), {}),
    ],
)
async def test_thinking_goes_out_as_the_style_says(
    llm_server: LLMServer, style: str, wanted: Thinking | None, sent: dict[str, Any]
) -> None:
    provider = provider_for(llm_server, reasoning_style=style)
    await events_of(provider, asked(thinking=wanted))
    body = llm_server.requests[0].body
    fields = ("reasoning_effort", "reasoning", "thinking", "chat_template_kwargs")
    assert {k: body[k] for k in fields if k in body} == sent


async def test_extra_body_still_wins_over_the_style(llm_server: LLMServer) -> None:
    extra = {"chat_template_kwargs": {"enable_thinking": True, "thinking_budget": 512}}
    provider = provider_for(llm_server, reasoning_style="chat_template", extra_body=extra)
    await events_of(provider, asked(thinking=None))
    assert llm_server.requests[0].body["chat_template_kwargs"] == extra["chat_template_kwargs"]


def follow_up(model: str, thought: Thought) -> LLMRequest:
    return asked(
        model,
        Thinking(),
        ChatMessage(
            "assistant", (ThinkingPart(thought), TextPart("Checking."), ToolUsePart(_CALL))
        ),
        ChatMessage("user", (ToolResultPart(ToolResult("call_1", "12:00")),)),
    )


async def test_deepseek_refuses_a_tool_turn_without_its_reasoning_and_gets_it(
    llm_server: LLMServer,
) -> None:
    model = "deepseek-reasoner"
    provider = provider_for(llm_server, model, reasoning_style="deepseek")
    llm_server.queue(Scripted(thinking_chunks=THOUGHT, tool_calls=[("call_1", "clock", {})]))
    events = await events_of(provider, asked(model))
    assert [e.call for e in events if isinstance(e, ToolCallEvent)] == [_CALL]
    (thought,) = [e.thought for e in events if isinstance(e, ThoughtEvent)]
    # Without its reasoning the tool turn is refused, as DeepSeek documents (a provider
    # not told it is DeepSeek sends it without).
    bare = follow_up(model, Thought("anthropic", model, text="not mine"))
    with pytest.raises(ProviderError, match="Missing `reasoning_content`"):
        await events_of(provider_for(llm_server, model, reasoning_style="none"), bare)
    await events_of(provider, follow_up(model, thought))
    assistant = llm_server.requests[-1].body["messages"][1]
    assert assistant["reasoning_content"] == "The user asks for the time."
    assert "reasoning_details" not in assistant
    await events_of(provider, bare)  # another's reasoning is not sent: an empty one is
    assert llm_server.requests[-1].body["messages"][1]["reasoning_content"] == ""


async def test_openrouter_reasoning_details_go_back_as_they_came(llm_server: LLMServer) -> None:
    provider = provider_for(llm_server, reasoning_style="openrouter")
    llm_server.queue(
        Scripted(
            thinking_chunks=THOUGHT,
            reasoning_field="openrouter",
            tool_calls=[("call_1", "clock", {})],
        )
    )
    events = await events_of(provider, asked())
    (thought,) = [e.thought for e in events if isinstance(e, ThoughtEvent)]
    await events_of(provider, follow_up("m1", thought))
    assistant = llm_server.requests[-1].body["messages"][1]
    assert assistant["reasoning_details"] == [
        {
            "type": "reasoning.text",
            "index": 0,
            "format": "anthropic-claude-v1",
            "text": "The user asks for the time.",
            "signature": "sig-27",
        }
    ]
    assert "reasoning_content" not in assistant


async def test_another_models_thoughts_never_go_back(llm_server: LLMServer) -> None:
    provider = provider_for(llm_server)
    await events_of(provider, follow_up("m1", Thought("openai", "m0", text="old model's")))
    assistant = llm_server.requests[-1].body["messages"][1]
    assert "reasoning_content" not in assistant
    assert "old model's" not in str(llm_server.requests[-1].body)


async def test_the_agent_keeps_reasoning_as_thinking_and_shows_only_the_answer(
    llm_server: LLMServer,
) -> None:
    llm_server.queue(
        Scripted(chunks=["It is ", "noon."], thinking_chunks=THOUGHT, reasoning_tokens=5)
    )
    provider = provider_for(llm_server)
    request = asked()
    pending = PendingCall("answer", provider, request, time.time(), time.perf_counter())
    into, shown = Streamed(), []

    async def show(text: str) -> None:
        shown.append(text)

    await read_stream(provider, pending, into, show)
    assert "".join(shown) == into.text == "It is noon."
    assert into.thinking == "The user asks for the time."
    assert [t.text for t in into.thoughts] == ["The user asks for the time."]
    assert (pending.usage.reasoning_tokens, pending.usage.output_tokens) == (5, 12)


async def test_a_lone_surrogate_in_reasoning_does_not_break_the_tool_loop(
    llm_server: LLMServer,
) -> None:
    broken = ['{"choices": [{"index": 0, "delta": {"reasoning_content": "I \\ud800 think"}}]}']
    finish = '{"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}'
    llm_server.queue(Scripted(raw_events=[*broken, finish, "[DONE]"]))
    provider = provider_for(llm_server, reasoning_style="deepseek")
    events = await events_of(provider, asked())
    (thought,) = [e.thought for e in events if isinstance(e, ThoughtEvent)]
    assert thought.text == "I \ufffd think"
    await events_of(provider, follow_up("m1", thought))  # the SDK can encode it
    assert llm_server.requests[-1].body["messages"][1]["reasoning_content"] == "I \ufffd think"
