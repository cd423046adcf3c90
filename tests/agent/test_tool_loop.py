"""The tool loop end to end: FakeProvider asks, a real in-process MCP server answers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

from salon.agent import Agent
from salon.agent.conversation.toolrunner import ToolRunner
from salon.config import Redactor
from salon.llm import FakeProvider, FakeReply, ToolResultPart, ToolUsePart
from salon.model import Participant, ToolCall
from salon.platforms.memory import MemoryPlatform
from salon.store.sql import SQLStore
from salon.tools.hub import ToolHub
from salon.tools.log import ToolLog
from tests.conftest import bot_config
from tests.tools.conftest import in_process

ALICE = Participant("alice", "Alice")
MALLORY = Participant("mallory", "Mallory")
SECRET = "tok-9f8e7d6c5b"


def kit() -> tuple[MCPServer, list[str]]:
    server = MCPServer("kit")
    ran: list[str] = []
    barrier = asyncio.Barrier(2)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def lookup(word: str) -> str:
        """Look a word up."""
        ran.append(f"lookup {word}")
        return f"{word} means something"

    @server.tool(annotations=ToolAnnotations(destructive_hint=True))
    def delete(path: str) -> str:
        """Delete a file."""
        ran.append(f"delete {path}")
        return f"deleted {path}"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def leak() -> str:
        """Returns a value Salon passed to the server as a secret."""
        return f"the token is {SECRET}"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def meet(who: str) -> str:
        """Waits until a second call meets it: only concurrent calls finish."""
        async with asyncio.timeout(5):
            await barrier.wait()
        return f"{who} met"

    return server, ran


Setup = Callable[..., Any]


@pytest.fixture
async def setup(store: SQLStore, tmp_path: Path) -> AsyncIterator[Setup]:
    stack: list[Any] = []

    async def make(
        replies: list[FakeReply | str], redactor: Redactor | None = None, **config: Any
    ) -> tuple[Any, ...]:
        server, ran = kit()
        hub = ToolHub([in_process(server)])
        await hub.start()
        stack.append(hub)
        cfg = bot_config(**config)
        log = ToolLog(tmp_path / "tools", "salon")
        runner = ToolRunner(
            bot="salon", config=cfg, tools=hub, store=store, log=log, redactor=redactor
        )
        provider = FakeProvider(replies, default="done")
        platform = MemoryPlatform(bot_name="Salon")
        agent = Agent(
            bot="salon",
            config=cfg,
            provider=provider,
            platforms={"memory": platform},
            store=store,
            tools=runner,
        )
        await platform.start(agent.submit)
        stack.append(asyncio.create_task(agent.run()))
        return agent, platform, provider, ran, log

    yield make
    for item in reversed(stack):
        if isinstance(item, asyncio.Task):
            item.cancel()
            await asyncio.gather(item, return_exceptions=True)
        else:
            await item.stop()


def asks(*calls: ToolCall, text: str = "") -> FakeReply:
    return FakeReply((text,) if text else (), calls=calls)


async def test_call_result_then_answer(setup: Setup) -> None:
    replies = [
        asks(ToolCall("c1", "lookup", {"word": "salon"}), text="Checking.\n\n"),
        "It means a room.",
    ]
    agent, platform, provider, ran, _ = await setup(replies)
    dm = platform.channel("dm", is_direct=True)
    await platform.post(dm, ALICE, "what is a salon?")
    await agent.wait_idle()
    assert ran == ["lookup salon"]
    assert [m.text for m in platform.sent] == ["Checking.", "It means a room."]
    assert platform.tool_logs == [
        ".Salon>[lookup]: word: salon\n.Salon<[lookup]: salon means something"
    ]
    first, second = provider.requests
    assert {t.name for t in first.tools} == {"lookup", "delete", "leak", "meet"}
    asked, answered = second.messages[-2:]
    assert isinstance(asked.parts[-1], ToolUsePart)
    result = answered.parts[0]
    assert isinstance(result, ToolResultPart)
    assert result.result.content == "salon means something"


async def test_calls_of_one_turn_run_concurrently(setup: Setup) -> None:
    both = asks(ToolCall("a", "meet", {"who": "ann"}), ToolCall("b", "meet", {"who": "bob"}))
    agent, platform, provider, _, _ = await setup([both, "both met"])
    await platform.post(platform.channel("dm", is_direct=True), ALICE, "meet")
    await agent.wait_idle()
    results = [
        p.result for p in provider.requests[1].messages[-1].parts if isinstance(p, ToolResultPart)
    ]
    assert [(r.content, r.is_error) for r in results] == [("ann met", False), ("bob met", False)]


async def test_invalid_arguments_go_back_to_the_model(setup: Setup) -> None:
    replies = [
        asks(ToolCall("c1", "lookup", {"word": 7})),
        asks(ToolCall("c2", "lookup", {"word": "7"})),
        "ok",
    ]
    agent, platform, provider, ran, _ = await setup(replies)
    await platform.post(platform.channel("dm", is_direct=True), ALICE, "look up 7")
    await agent.wait_idle()
    bad = provider.requests[1].messages[-1].parts[0]
    assert isinstance(bad, ToolResultPart)
    assert bad.result.is_error
    assert "7 is not of type 'string'" in bad.result.content
    assert ran == ["lookup 7"]


async def test_depth_limit_ends_with_a_visible_note(setup: Setup) -> None:
    forever = [asks(ToolCall(f"c{i}", "lookup", {"word": "again"})) for i in range(10)]
    agent, platform, _provider, ran, _ = await setup(forever, max_tool_depth=3)
    await platform.post(platform.channel("dm", is_direct=True), ALICE, "loop")
    await agent.wait_idle()
    assert len(ran) == 3
    assert platform.sent[-1].text == "(stopped: this answer reached the limit of 3 tool calls)"


async def test_approval_approve_runs_the_tool(setup: Setup, store: SQLStore) -> None:
    replies = [asks(ToolCall("c1", "delete", {"path": "/tmp/x"})), "Deleted."]
    agent, platform, _, ran, _ = await setup(replies)
    await platform.post(platform.channel("dm", is_direct=True), ALICE, "delete /tmp/x")
    (pending,) = await platform.wait_approvals(1)
    assert pending.request.requester == ALICE
    assert "path: /tmp/x" in pending.request.description
    assert await store.pending_approvals("salon") != []
    assert not platform.click(0, MALLORY, approve=True)  # not hers to answer
    assert platform.click(0, ALICE, approve=True)
    await agent.wait_idle()
    assert ran == ["delete /tmp/x"]
    assert platform.sent[-1].text == "Deleted."
    assert await store.pending_approvals("salon") == []


async def test_approval_by_an_authorized_role(setup: Setup) -> None:
    replies = [asks(ToolCall("c1", "delete", {"path": "/a"})), "Deleted."]
    agent, platform, _, ran, _ = await setup(replies, authorized_roles=["admins"])
    platform.roles["mallory"] = {"admins"}
    await platform.post(platform.channel("dm", is_direct=True), ALICE, "delete /a")
    await platform.wait_approvals(1)
    assert platform.click(0, MALLORY, approve=True)
    await agent.wait_idle()
    assert ran == ["delete /a"]


ADMIN_ONLY = {"delete": {"policy": "ask_admin"}}


async def test_ask_admin_needs_someone_else_of_an_authorized_role(setup: Setup) -> None:
    replies = [asks(ToolCall("c1", "delete", {"path": "/a"})), "Deleted."]
    agent, platform, _, ran, _ = await setup(
        replies, tool_policies=ADMIN_ONLY, authorized_roles=["admins"]
    )
    platform.roles["alice"] = {"admins"}  # a role does not let her approve her own call
    platform.roles["mallory"] = {"admins"}
    await platform.post(platform.channel("dm", is_direct=True), ALICE, "delete /a")
    (pending,) = await platform.wait_approvals(1)
    assert not platform.click(0, ALICE, approve=True)
    assert pending.request.refusal() == (
        "Only the bot's operator or someone other than Alice with an authorized role can "
        "approve this (Alice can cancel it)."
    )
    assert platform.click(0, MALLORY, approve=True)
    await agent.wait_idle()
    assert ran == ["delete /a"]


async def test_ask_admin_without_roles_is_for_the_operator_alone(setup: Setup) -> None:
    replies = [asks(ToolCall("c1", "delete", {"path": "/b"})), "Deleted."]
    agent, platform, _, ran, _ = await setup(replies, tool_policies=ADMIN_ONLY)
    platform.operators.add("op")
    await platform.post(platform.channel("dm", is_direct=True), ALICE, "delete /b")
    (pending,) = await platform.wait_approvals(1)
    assert not platform.click(0, ALICE, approve=True)
    assert not platform.click(0, MALLORY, approve=True)
    assert pending.request.refusal() == "Only the bot's operator can approve this."
    assert platform.click(0, Participant("op", "Operator"), approve=True)
    await agent.wait_idle()
    assert ran == ["delete /b"]


async def test_under_ask_admin_the_requester_can_still_cancel(setup: Setup) -> None:
    replies = [asks(ToolCall("c1", "delete", {"path": "/c"})), "never said"]
    agent, platform, _, ran, _ = await setup(replies, tool_policies=ADMIN_ONLY)
    await platform.post(platform.channel("dm", is_direct=True), ALICE, "delete /c")
    await platform.wait_approvals(1)
    assert platform.click(0, ALICE, approve=False)
    await agent.wait_idle()
    assert ran == []
    assert platform.sent[-1].text == "(cancelled: delete was not run)"


async def test_cancel_aborts_the_rest_of_the_activation(setup: Setup) -> None:
    replies = [asks(ToolCall("c1", "delete", {"path": "/etc"}), text="On it.\n\n"), "never said"]
    agent, platform, provider, ran, _ = await setup(replies)
    await platform.post(platform.channel("dm", is_direct=True), ALICE, "delete /etc")
    await platform.wait_approvals(1)
    platform.click(0, ALICE, approve=False)
    await agent.wait_idle()
    assert ran == []
    assert [m.text for m in platform.sent] == ["On it.", "(cancelled: delete was not run)"]
    assert len(provider.requests) == 1


async def test_no_answer_in_time_counts_as_cancel(setup: Setup) -> None:
    replies = [asks(ToolCall("c1", "delete", {"path": "/x"}))]
    agent, platform, _, ran, _ = await setup(replies, approval_timeout=0.05)
    await platform.post(platform.channel("dm", is_direct=True), ALICE, "delete /x")
    await agent.wait_idle()
    assert ran == []
    assert platform.sent[-1].text == "(cancelled: delete was not run)"


async def test_deny_policy_hides_the_tool(setup: Setup) -> None:
    agent, platform, provider, _, _ = await setup(
        ["hi"], tool_policies={"delete": {"policy": "deny"}}
    )
    await platform.post(platform.channel("dm", is_direct=True), ALICE, "hello")
    await agent.wait_idle()
    assert "delete" not in {t.name for t in provider.requests[0].tools}


async def test_tool_log_goes_back_into_later_contexts(setup: Setup) -> None:
    replies = [asks(ToolCall("c1", "lookup", {"word": "tea"})), "Tea is a drink.", "Yes."]
    agent, platform, provider, _, log = await setup(replies)
    dm = platform.channel("dm", is_direct=True)
    await platform.post(dm, ALICE, "what is tea?")
    await agent.wait_idle()
    (record,) = log.for_channel(dm.key, None)
    saved = json.loads(log.path_for(dm.key, record.time).read_text().splitlines()[0])
    assert saved["result"]["content"] == "tea means something"
    await platform.post(dm, ALICE, "sure?")
    await agent.wait_idle()
    later = provider.requests[-1].messages
    assert [m.role for m in later] == ["user", "assistant", "user", "assistant", "user"]
    assert later[0].plain_text == "Alice: what is tea?"
    # Native tool mode: the past call comes back as a native tool turn, never as
    # <function_calls> text in the bot's words (which a small model would imitate).
    (used,) = later[1].parts
    assert isinstance(used, ToolUsePart)
    assert used.call.name == "lookup"
    result = later[2].parts[0]
    assert isinstance(result, ToolResultPart)
    assert result.result.content == "tea means something"
    assert later[3].plain_text == "Tea is a drink."
    assert all("<function_calls>" not in m.plain_text for m in later)
    assert all(".Salon>" not in m.plain_text for m in later)  # the dot message stays invisible


async def test_past_tool_results_are_cut_to_a_size_in_later_contexts(setup: Setup) -> None:
    """The seed's 200 characters of a tool result in history: whole for the answer that
    made the call, in the log and in the trace; cut in the contexts after."""
    replies = [asks(ToolCall("c1", "lookup", {"word": "tea"})), "Tea is a drink.", "Yes."]
    agent, platform, provider, _, log = await setup(replies, tool_result_context_chars=8)
    dm = platform.channel("dm", is_direct=True)
    await platform.post(dm, ALICE, "what is tea?")
    await agent.wait_idle()
    answered = provider.requests[1].messages[-1].parts[0]
    assert isinstance(answered, ToolResultPart)
    assert answered.result.content == "tea means something"
    (record,) = log.for_channel(dm.key, None)
    assert record.result.content == "tea means something"
    await platform.post(dm, ALICE, "sure?")
    await agent.wait_idle()
    result = provider.requests[-1].messages[2].parts[0]
    assert isinstance(result, ToolResultPart)
    assert result.result.content == "tea mean… [11 more characters not shown]"


async def test_text_protocol_parses_calls_and_continues_the_turn(setup: Setup) -> None:
    written = 'Let me look.\n<function_calls>\n<invoke name="lookup">\n<parameter name="word">jazz</parameter>\n</invoke>\n'
    agent, platform, provider, ran, _ = await setup([written, "Jazz is music."], tool_mode="text")
    await platform.post(platform.channel("dm", is_direct=True), ALICE, "jazz?")
    await agent.wait_idle()
    assert ran == ["lookup jazz"]
    assert [m.text for m in platform.sent] == ["Let me look.", "Jazz is music."]
    first, second = provider.requests
    assert first.tools == ()
    assert "</function_calls>" in first.stop
    assert "<tools>" in first.messages[0].parts[0].text  # type: ignore[union-attr]
    continued = second.messages[-1]
    assert continued.role == "assistant"
    assert "<stdout>jazz means something</stdout>" in continued.plain_text


async def test_a_pinned_mode_change_changes_how_tools_are_offered(setup: Setup) -> None:
    agent, platform, provider, _, _ = await setup(["plain"], default_tool_policy="allow")
    room = platform.channel("room")
    me = platform.self_participant
    await platform.post(room, ALICE, "@Salon hi", mentions=[me])
    await agent.wait_idle()
    assert {t.name for t in provider.requests[0].tools} >= {"lookup"}  # native in chat mode
    platform.pin(platform.add(room, ALICE, ".config\n---\nmode: prefill"))
    await platform.post(room, ALICE, "@Salon again", mentions=[me])
    await agent.wait_idle()
    prefill = provider.requests[1]
    assert prefill.tools == ()  # prefill speaks the text protocol instead
    assert "lookup" in prefill.messages[0].plain_text
    assert "</function_calls>" in prefill.stop


async def test_a_secret_a_tool_returns_is_redacted_in_the_log_the_model_and_the_channel(
    setup: Setup,
) -> None:
    replies = [asks(ToolCall("c1", "leak", {})), "done"]
    agent, platform, provider, _, log = await setup(replies, redactor=Redactor(frozenset({SECRET})))
    dm = platform.channel("dm", is_direct=True)
    await platform.post(dm, ALICE, "what is the token?")
    await agent.wait_idle()
    (record,) = log.for_channel(dm.key, None)
    written = log.path_for(dm.key, record.time).read_text()
    assert SECRET not in written
    assert "the token is ***" in written
    (result,) = provider.requests[1].messages[-1].parts
    assert isinstance(result, ToolResultPart)
    assert result.result.content == "the token is ***"
    assert all(SECRET not in text for text in platform.tool_logs)


async def test_a_past_call_keeps_the_id_the_loop_sent_it_under(setup: Setup) -> None:
    """The loop's follow-up and every later request name a call alike: the prefix the
    follow-up wrote to the prompt cache is read again by the next activation."""
    replies = [asks(ToolCall("call_1", "lookup", {"word": "salon"})), "A room.", "Yes."]
    agent, platform, provider, _, _ = await setup(replies)
    dm = platform.channel("dm", is_direct=True)
    await platform.post(dm, ALICE, "what is a salon?")
    await agent.wait_idle()
    await platform.post(dm, ALICE, "and a foyer?")
    await agent.wait_idle()
    _, follow_up, later = provider.requests

    def named(request: Any) -> list[str]:
        return [
            part.call.id if isinstance(part, ToolUsePart) else part.result.call_id
            for message in request.messages
            for part in message.parts
            if isinstance(part, ToolUsePart | ToolResultPart)
        ]

    assert named(follow_up) == named(later)
    assert named(later)[0] != "call_1"  # the vendor's own ids may repeat after a restart
    assert later.messages[: len(follow_up.messages)] == follow_up.messages


async def ask_in_turn(agent: Agent, platform: MemoryPlatform, *questions: str) -> None:
    """Alice asks each question in a DM once the answer to the last one is done."""
    dm = platform.channel("dm", is_direct=True)
    for question in questions:
        await platform.post(dm, ALICE, question)
        await agent.wait_idle()


async def test_words_before_a_call_go_back_once_where_the_loop_sent_them(setup: Setup) -> None:
    """Words the model wrote before its call stay in the room, and every later request
    carries them on the call's turn as the loop's follow-up did (not again as a message)."""
    said = asks(ToolCall("call_1", "lookup", {"word": "salon"}), text="Let me look that up.")
    agent, platform, provider, _, _ = await setup([said, "A room.", "Yes."])
    await ask_in_turn(agent, platform, "what is a salon?", "and a foyer?")
    assert [m.text for m in platform.sent] == ["Let me look that up.", "A room.", "Yes."]
    _, follow_up, later = provider.requests
    assert later.messages[: len(follow_up.messages)] == follow_up.messages
    assert sum(m.plain_text.count("Let me look that up.") for m in later.messages) == 1


@pytest.mark.parametrize("mode", ["text", "prefill"])
async def test_words_before_a_text_protocol_call_go_back_once_as_the_loop_wrote_them(
    setup: Setup, mode: str
) -> None:
    written = 'Let me look.\n<function_calls>\n<invoke name="lookup">\n<parameter name="word">jazz</parameter>\n</invoke>\n'
    config = {"tool_mode": "text"} if mode == "text" else {"mode": "prefill"}
    agent, platform, provider, _, _ = await setup([written, "Jazz is music.", "Yes."], **config)
    await ask_in_turn(agent, platform, "jazz?", "and blues?")
    assert [m.text for m in platform.sent] == ["Let me look.", "Jazz is music.", "Yes."]
    _, follow_up, later = provider.requests
    *before, continued = follow_up.messages
    assert later.messages[: len(before)] == tuple(before)
    assert later.messages[len(before)].plain_text.startswith(continued.plain_text)
    assert sum(m.plain_text.count("Let me look.") for m in later.messages) == 1
