"""A reasoning model whose chat template opens ``<think>`` itself, on an OpenAI-compatible
server with the default settings (``reasoning_style: openai``, thinking off): its text
starts with reasoning and no opening tag. What came before the ``</think>`` is reasoning
while nothing of the answer has been posted yet; through the real SDK and the agent."""

from __future__ import annotations

from typing import Any

from fakes.llm_server import LLMServer, Scripted
from salon.config import Secrets
from salon.llm import Provider
from salon.llm.factory import build_provider
from salon.model import Participant
from tests.agent.conftest import StartAgent
from tests.conftest import bot_config

ALICE = Participant("alice", "Alice")
REASONING = ["The user asks for", " a capital; thinking about", " it first.</th", "ink>\n\n"]


def openai(server: LLMServer, **more: Any) -> Provider:
    """An OpenAI-compatible provider on the loopback server, its reasoning_style the default."""
    settings = {
        "type": "openai",
        "model": "m",
        "base_url": server.base_url + "/v1",
        "retries": 0,
        "backoff_initial": 0,
        "api_key_env": "TEST_KEY",
        **more,
    }
    return build_provider(bot_config(providers={"test": settings}), Secrets({"TEST_KEY": "k"}))


async def answers(llm_server: LLMServer, start_agent: StartAgent, **config: Any) -> list[str]:
    agent, platform = await start_agent(openai(llm_server), **config)
    await platform.post(platform.channel("dm", is_direct=True), ALICE, "capital of France?")
    await agent.wait_idle()
    return [m.text for m in platform.sent]


async def test_reasoning_before_a_closing_tag_is_not_posted_with_the_defaults(
    llm_server: LLMServer, start_agent: StartAgent
) -> None:
    llm_server.queue(Scripted(chunks=[*REASONING, "The answer ", "is Paris."]))
    assert await answers(llm_server, start_agent) == ["The answer is Paris."]


async def test_reasoning_before_a_closing_tag_is_the_answers_reasoning(
    llm_server: LLMServer, start_agent: StartAgent
) -> None:
    llm_server.queue(Scripted(chunks=[*REASONING, "Paris."]))
    sent = await answers(llm_server, start_agent, thinking={"show": "spoiler"})
    assert sent == ["Paris.", "-# ||The user asks for a capital; thinking about it first.||"]


async def test_a_closing_tag_after_a_posted_paragraph_leaves_the_answer(
    llm_server: LLMServer, start_agent: StartAgent
) -> None:
    llm_server.queue(Scripted(chunks=["Paris.\n\n", "It is in France.</think> ", "Yes."]))
    assert await answers(llm_server, start_agent) == ["Paris.", "It is in France.Yes."]
