"""A tool server's question during a call (MCP elicitation) goes to the person the call
runs for, where they are; only they answer; no answer in time declines; the trace keeps
the answer and who gave it. Offered to a server only when its config says so."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from fakes import mcp_server
from salon.llm import FakeProvider, FakeReply
from salon.model import (
    Elicitation,
    ElicitationAnswer,
    FormField,
    Participant,
    ToolCall,
)
from salon.platforms.forms import ask_in_text
from salon.platforms.memory import MemoryPlatform
from salon.tools.caller import Caller
from salon.tools.hub import ToolHub
from tests.agent.test_traces import make_app, running
from tests.tools.test_mcp_http import LoopbackServer, http_spec

ALICE = Participant("alice", "Alice")
BOB = Participant("bob", "Bob")


@pytest.fixture
async def asking_server() -> AsyncIterator[LoopbackServer]:
    """The test server as a 2025-era server (sessions): it sends its questions on the
    call's stream, as the servers that elicit today do."""
    server = LoopbackServer(
        lambda: mcp_server.handshake_only(mcp_server.build().streamable_http_app())
    )
    await server.start()
    yield server
    await server.stop()


@pytest.mark.parametrize(("enabled", "said"), [(False, "does not ask"), (True, "asks its user")])
async def test_the_client_offers_elicitation_only_when_the_config_says_so(
    asking_server: LoopbackServer, enabled: bool, said: str
) -> None:
    spec = replace(http_spec("kit", asking_server.url), elicitation=enabled)
    async with ToolHub([spec]) as hub:
        result = await hub.call(ToolCall("c1", "offers", {}))
    assert result.content == said


async def test_a_question_goes_to_the_requester_alone_and_the_trace_keeps_who_answered(
    tmp_path: Path, asking_server: LoopbackServer
) -> None:
    spec = replace(http_spec("kit", asking_server.url), elicitation=True)
    asks = FakeReply(calls=(ToolCall("c1", "book", {}),))
    app = make_app(tmp_path, FakeProvider([asks, "Booked."]), [spec], default_tool_policy="allow")
    platform = MemoryPlatform(bot_name="Salon")
    async with running(app, platform):
        await platform.post(platform.channel("dm", is_direct=True), ALICE, "book a table")
        (question,) = await platform.wait_questions(1, within=10)
        assert question.request.requester == ALICE
        assert question.request.message == "Which booking?"
        assert [f.name for f in question.request.fields] == ["day", "guests", "room", "confirm"]
        assert question.request.fields[2].options == ("small", "large")
        assert not platform.answer_question(0, BOB, {"day": "never"})  # not Bob's to answer
        assert platform.answer_question(0, ALICE, {"day": "friday", "guests": 4})
        await platform.wait_sent(1)
        await app.agent.wait_idle()
        await app.traces.flush()
        (summary,) = await app.store.traces.list_traces()
        _, body = await app.store.traces.get_trace(summary.id) or (None, {})
    (tool,) = body["tools"]
    # what Alice left alone went with its default, as a form shows it
    assert tool["result"] == 'booked {"day":"friday","guests":4,"room":"small","confirm":true}'
    (asked,) = tool["asked"]
    assert (asked["server"], asked["message"]) == ("kit", "Which booking?")
    assert (asked["answer"], asked["by"], asked["requester"]) == ("accept", "Alice", "Alice")


async def test_a_question_nobody_answers_in_time_is_declined(
    tmp_path: Path, asking_server: LoopbackServer
) -> None:
    spec = replace(http_spec("kit", asking_server.url), elicitation=True)
    asks = FakeReply(calls=(ToolCall("c1", "book", {}),))
    app = make_app(
        tmp_path,
        FakeProvider([asks, "No booking."]),
        [spec],
        approval_timeout=0.3,
        default_tool_policy="allow",
    )
    platform = MemoryPlatform(bot_name="Salon")
    async with running(app, platform):
        await platform.post(platform.channel("dm", is_direct=True), ALICE, "book a table")
        await platform.wait_sent(1, within=10)
        await app.agent.wait_idle()
        await app.traces.flush()
        (summary,) = await app.store.traces.list_traces()
        _, body = await app.store.traces.get_trace(summary.id) or (None, {})
    (tool,) = body["tools"]
    assert tool["result"] == "booking declined"
    assert [(a["answer"], a["by"]) for a in tool["asked"]] == [("decline", "")]


async def test_a_question_while_two_peoples_calls_run_is_declined(
    asking_server: LoopbackServer,
) -> None:
    """The server does not say which call asks: with two people's calls in flight on the
    connection, asking either could put one person's question to the other."""
    spec = replace(http_spec("kit", asking_server.url), elicitation=True)
    asked: list[str] = []

    async def elicit(server: str, message: str, fields: tuple[FormField, ...]) -> ElicitationAnswer:
        asked.append(message)
        return ElicitationAnswer("accept", {"day": "monday"}, by="someone")

    async with ToolHub([spec]) as hub:
        slow = asyncio.create_task(
            hub.call(
                ToolCall("c1", "lookup_slowly", {"seconds": 2}),
                caller=Caller.from_arguments({"requester_id": "bob", "channel": "memory:general"}),
                elicit=elicit,
            )
        )
        result = await hub.call(
            ToolCall("c2", "book", {}),
            caller=Caller.from_arguments({"requester_id": "alice", "channel": "memory:general"}),
            elicit=elicit,
        )
        await slow
    assert result.content == "booking declined"
    assert asked == []


FIELDS = (
    FormField("day", "string", title="Day", required=True),
    FormField("guests", "integer", default=2),
    FormField("room", "string", options=("small", "large"), default="small"),
    FormField("confirm", "boolean", default=True),
)


async def _in_text(replies: list[str | None]) -> tuple[ElicitationAnswer, list[str]]:
    said: list[str] = []

    async def say(text: str) -> None:
        said.append(text)

    async def reply(question: str, within: float) -> tuple[str, str] | None:
        said.append(question)
        text = replies.pop(0)
        return None if text is None else (text, "Alice")

    request = Elicitation("kit", "Which booking?", FIELDS, ALICE, timeout=5)
    return await ask_in_text(say, reply, request), said


async def test_in_text_each_field_is_asked_in_turn_and_skip_keeps_the_default() -> None:
    answer, said = await _in_text(["friday", "four", "4", "skip", "no"])
    assert answer == ElicitationAnswer(
        "accept", {"day": "friday", "guests": 4, "room": "small", "confirm": False}, "Alice"
    )
    assert said[0] == "Alice: kit asks: Which booking?"
    assert said[3] == "Alice: guests needs a whole number; or decline."
    assert "one of small, large; skip for 'small'" in said[4]


async def test_in_text_decline_or_silence_declines() -> None:
    assert (await _in_text(["decline"]))[0] == ElicitationAnswer("decline", by="Alice")
    assert (await _in_text(["friday", None]))[0] == ElicitationAnswer("decline")
