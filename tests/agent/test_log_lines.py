"""One log line per request and one per reply, as the seed's logger writes them: cut to
100 and 200 characters, whole under DEBUG, each with the activation's id."""

from __future__ import annotations

import logging

import pytest

from salon.llm import FakeProvider
from salon.model import Participant
from tests.agent.conftest import StartAgent

ALICE = Participant("alice", "Alice")
QUESTION = "q" * 150
ANSWER = "a" * 300


def lines(caplog: pytest.LogCaptureFixture, start: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith(start)]


async def test_a_request_and_its_reply_are_logged_cut(
    start_agent: StartAgent, caplog: pytest.LogCaptureFixture
) -> None:
    agent, platform = await start_agent(FakeProvider([ANSWER]))
    with caplog.at_level(logging.INFO, logger="salon.agent.dispatch"):
        await platform.post(platform.channel("dm", is_direct=True), ALICE, QUESTION)
        await agent.wait_idle()
    (request,) = lines(caplog, "request from Alice in memory:dm: ")
    (reply,) = lines(caplog, "reply in memory:dm: ")
    assert request.endswith(f"'{'q' * 100}…'")
    assert reply.endswith(f"'{'a' * 200}…'")


async def test_under_debug_they_are_whole(
    start_agent: StartAgent, caplog: pytest.LogCaptureFixture
) -> None:
    agent, platform = await start_agent(FakeProvider([ANSWER]))
    with caplog.at_level(logging.DEBUG, logger="salon.agent.dispatch"):
        await platform.post(platform.channel("dm", is_direct=True), ALICE, QUESTION)
        await agent.wait_idle()
    (request,) = lines(caplog, "request from Alice")
    (reply,) = lines(caplog, "reply in")
    assert QUESTION in request
    assert ANSWER in reply
