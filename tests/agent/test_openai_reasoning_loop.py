"""The tool loop of a thinking model behind an OpenAI-compatible server, through the real
openai SDK: what the server needs back of the model's reasoning goes back on the assistant
turn (OpenRouter's ``reasoning_details`` as they came, DeepSeek's ``reasoning_content``,
without which DeepSeek refuses the request), and none of it is posted."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from fakes.llm_server import LLMServer, Scripted
from salon.agent import Agent
from salon.agent.conversation.toolrunner import ToolRunner
from salon.config import Secrets
from salon.llm.factory import build_provider
from salon.model import Participant
from salon.platforms.memory import MemoryPlatform
from salon.store.sql import SQLStore
from salon.tools.hub import ToolHub
from salon.tools.log import ToolLog
from tests.agent.test_tool_loop import kit
from tests.conftest import bot_config
from tests.tools.conftest import in_process

ALICE = Participant("alice", "Alice")
THOUGHT = ["I should look ", "the word up."]

Run = Callable[..., Any]


@pytest.fixture
async def run_loop(store: SQLStore, tmp_path: Path, llm_server: LLMServer) -> AsyncIterator[Run]:
    """Ask a bot on ``model`` with ``reasoning_style`` (and ``more`` config) the
    ``questions``, one after the other; its answers as sent."""
    stack: list[Any] = []

    async def run(
        model: str,
        style: str,
        questions: tuple[str, ...] = ("what is a salon?",),
        **more: Any,
    ) -> list[str]:
        server, _ran = kit()
        hub = ToolHub([in_process(server)])
        await hub.start()
        stack.append(hub)
        provider_config = {
            "type": "openai",
            "model": model,
            "base_url": llm_server.base_url + "/v1",
            "api_key_env": "TEST_KEY",
            "retries": 0,
            "backoff_initial": 0,
            "reasoning_style": style,
        }
        config = bot_config(providers={"test": provider_config}, thinking={"enabled": True}, **more)
        provider = build_provider(config, Secrets({"TEST_KEY": "k-test"}))
        log = ToolLog(tmp_path / "tools", "salon")
        runner = ToolRunner(bot="salon", config=config, tools=hub, store=store, log=log)
        platform = MemoryPlatform(bot_name="Salon")
        agent = Agent(
            bot="salon",
            config=config,
            provider=provider,
            platforms={"memory": platform},
            store=store,
            tools=runner,
        )
        await platform.start(agent.submit)
        stack.append(asyncio.create_task(agent.run()))
        for question in questions:
            await platform.post(platform.channel("dm", is_direct=True), ALICE, question)
            await agent.wait_idle()
        return [m.text for m in platform.sent]

    yield run
    for item in reversed(stack):
        if isinstance(item, asyncio.Task):
            item.cancel()
            await asyncio.gather(item, return_exceptions=True)
        else:
            await item.stop()


def looks_up(**reasoning: Any) -> Scripted:
    calls = [("call_1", "lookup", {"word": "salon"})]
    return Scripted(thinking_chunks=THOUGHT, tool_calls=calls, **reasoning)


def assistant_turn(llm: LLMServer) -> dict[str, Any]:
    (turn,) = [m for m in llm.requests[1].body["messages"] if m.get("tool_calls")]
    return turn  # type: ignore[no-any-return]


async def test_openrouter_gets_its_reasoning_details_back_in_the_tool_loop(
    run_loop: Run, llm_server: LLMServer
) -> None:
    llm_server.queue(looks_up(reasoning_field="openrouter"), "A salon is a room.")
    sent = await run_loop("anthropic/claude-sonnet-4", "openrouter")
    assert sent[-1] == "A salon is a room."
    assert llm_server.requests[0].body["reasoning"] == {"enabled": True}
    (detail,) = assistant_turn(llm_server)["reasoning_details"]
    assert detail == {
        "type": "reasoning.text",
        "index": 0,
        "format": "anthropic-claude-v1",
        "text": "I should look the word up.",
        "signature": "sig-26",
    }
    assert not [s for s in sent if "look the word" in s]


async def test_deepseek_gets_its_reasoning_content_back_in_the_tool_loop(
    run_loop: Run, llm_server: LLMServer
) -> None:
    llm_server.queue(looks_up(), "A salon is a room.")
    sent = await run_loop("deepseek-reasoner", "deepseek")
    assert sent[-1] == "A salon is a room."  # the fake refuses a turn without it, as DeepSeek
    assert assistant_turn(llm_server)["reasoning_content"] == "I should look the word up."
    assert not [s for s in sent if "look the word" in s]


async def test_deepseek_takes_a_later_activation_whose_history_has_tool_calls(
    run_loop: Run, llm_server: LLMServer
) -> None:
    """The chat log keeps the tool calls, not the reasoning they came with: in a later
    activation they are tool-call turns with no reasoning of their own, which DeepSeek's
    thinking mode refuses unless the field is there."""
    llm_server.queue(looks_up(), "A salon is a room.", "Yes, a room.")
    sent = await run_loop("deepseek-reasoner", "deepseek", questions=("what is a salon?", "sure?"))
    assert sent[-1] == "Yes, a room."
    later = [m for m in llm_server.requests[2].body["messages"] if m.get("tool_calls")]
    assert later
    assert all("reasoning_content" in m for m in later)


CALL = '<function_calls>\n<invoke name="lookup">\n<parameter name="word">salon</parameter>\n</invoke>\n'


async def test_the_text_tool_protocol_reads_the_answer_after_the_reasoning(
    run_loop: Run, llm_server: LLMServer
) -> None:
    chunks = ["<think>I will call ", "lookup, secretly</thi", "nk>\n\nLet me look.\n", CALL]
    llm_server.queue(Scripted(chunks=chunks), "A salon is a room.")
    sent = await run_loop("m1", "openai", tool_mode="text")
    assert sent == ["Let me look.", "A salon is a room."]
    continued = llm_server.requests[1].body["messages"][-1]
    assert continued["role"] == "assistant"
    assert "salon means something" in continued["content"]
    assert "secretly" not in str(llm_server.requests[1].body)


async def test_the_leading_label_after_the_reasoning_is_still_taken_off(
    run_loop: Run, llm_server: LLMServer
) -> None:
    llm_server.queue(Scripted(chunks=["<think>hmm</think>", "\n\nSalon: ", "Hello."]))
    assert await run_loop("m1", "openai") == ["Hello."]
