"""The agent loop on the memory platform with scripted providers."""

from __future__ import annotations

from fakes.providers import GatedProvider
from salon.errors import PlatformError, ProviderError
from salon.llm import FakeProvider, FakeReply
from salon.model import Participant
from tests.agent.conftest import StartAgent

ALICE = Participant("alice", "Alice")
BOB_BOT = Participant("bob", "Bob", is_bot=True)


async def test_mention_gets_an_answer_with_the_room_as_context(start_agent: StartAgent) -> None:
    provider = FakeProvider(["Hi Alice!"])
    _agent, platform = await start_agent(provider, system_prompt="You are Salon.")
    room = platform.channel()
    platform.add(room, ALICE, "earlier words")
    await platform.post(room, ALICE, "hello @Salon", mentions=[platform.self_participant])
    sent = await platform.wait_sent(1)
    assert [m.text for m in sent] == ["Hi Alice!"]
    request = provider.requests[0]
    assert request.system == "You are Salon."
    assert request.messages[-1].plain_text == "Alice: earlier words\nAlice: hello @Salon"
    assert platform.typing_log == [("start", room.key), ("stop", room.key)]


async def test_unaddressed_message_is_ignored(start_agent: StartAgent) -> None:
    provider = FakeProvider()
    agent, platform = await start_agent(provider)
    await platform.post(platform.channel(), ALICE, "just chatting")
    await agent.wait_idle()
    assert provider.requests == []
    assert platform.sent == []


async def test_direct_message_reply_and_name_activate(start_agent: StartAgent) -> None:
    provider = FakeProvider()
    agent, platform = await start_agent(provider, reply_on_name=True)
    dm = platform.channel("dm", is_direct=True)
    await platform.post(dm, ALICE, "hi")
    await agent.wait_idle()
    room = platform.channel()
    bot_message = platform.add(room, platform.self_participant, "I said something")
    await platform.post(room, ALICE, "reply", reply_to=bot_message)
    await agent.wait_idle()
    await platform.post(room, ALICE, "what does salon think?")
    await agent.wait_idle()
    assert len(provider.requests) == 3


async def test_other_bots_are_ignored_unless_allowed(start_agent: StartAgent) -> None:
    provider = FakeProvider()
    agent, platform = await start_agent(provider)
    dm = platform.channel("dm", is_direct=True)
    await platform.post(dm, BOB_BOT, "hello other bot")
    await agent.wait_idle()
    assert provider.requests == []

    provider2 = FakeProvider()
    agent2, platform2 = await start_agent(provider2, allow_bot_interactions=True)
    await platform2.post(platform2.channel("dm", is_direct=True), BOB_BOT, "hello other bot")
    await agent2.wait_idle()
    assert len(provider2.requests) == 1


async def test_dot_messages_are_invisible(start_agent: StartAgent) -> None:
    provider = FakeProvider()
    agent, platform = await start_agent(provider)
    dm = platform.channel("dm", is_direct=True)
    platform.add(dm, ALICE, ".secret note for humans")
    await platform.post(dm, ALICE, ".this does not activate")
    await agent.wait_idle()
    assert provider.requests == []
    await platform.post(dm, ALICE, "visible")
    await agent.wait_idle()
    assert provider.requests[0].messages[-1].plain_text == "Alice: visible"


async def test_streamed_paragraphs_are_sent_as_they_complete(start_agent: StartAgent) -> None:
    provider = FakeProvider([FakeReply(("First para", "graph.\n\nSecond ", "one.\n\nThird."))])
    _agent, platform = await start_agent(provider)
    await platform.post(platform.channel("dm", is_direct=True), ALICE, "talk")
    sent = await platform.wait_sent(3)
    assert [m.text for m in sent] == ["First paragraph.", "Second one.", "Third."]


async def test_failure_is_reported_and_the_loop_keeps_running(start_agent: StartAgent) -> None:
    error = ProviderError("upstream: HTTP 500: boom", status=500)
    provider = FakeProvider([FakeReply(error=error), "recovered"])
    _agent, platform = await start_agent(provider)
    dm = platform.channel("dm", is_direct=True)
    await platform.post(dm, ALICE, "first")
    sent = await platform.wait_sent(1)
    assert sent[0].text == "⚠️ Salon could not answer: upstream: HTTP 500: boom"
    await platform.post(dm, ALICE, "second")
    sent = await platform.wait_sent(2)
    assert sent[1].text == "recovered"


async def test_send_failure_does_not_kill_the_loop(start_agent: StartAgent) -> None:
    provider = FakeProvider(["lost", "delivered"])
    agent, platform = await start_agent(provider)
    platform.fail_sends = [PlatformError("no permission"), PlatformError("still none")]
    dm = platform.channel("dm", is_direct=True)
    await platform.post(dm, ALICE, "one")
    await agent.wait_idle()
    assert platform.sent == []
    await platform.post(dm, ALICE, "two")
    sent = await platform.wait_sent(1)
    assert sent[0].text == "delivered"


async def test_one_channel_never_overlaps_and_keeps_order(start_agent: StartAgent) -> None:
    provider = GatedProvider()
    agent, platform = await start_agent(provider)
    dm = platform.channel("dm", is_direct=True)
    await platform.post(dm, ALICE, "one")
    await provider.wait_started(1)
    await platform.post(dm, ALICE, "two")
    await platform.post(dm, ALICE, "three")  # joins the activation waiting behind "one"
    provider.gates[0].set()
    await provider.wait_started(2)
    second = [m.plain_text for m in provider.requests[1].messages]
    assert second == ["Alice: one\nAlice: two\nAlice: three", "answer 1"]
    provider.gates[1].set()
    await agent.wait_idle()
    assert provider.max_running == 1
    assert len(provider.requests) == 2
    assert [m.text for m in platform.sent] == ["answer 1", "answer 2"]


async def test_channels_run_concurrently_up_to_the_limit(start_agent: StartAgent) -> None:
    provider = GatedProvider()
    agent, platform = await start_agent(provider, max_concurrent_activations=2)
    for name in ("a", "b", "c"):
        await platform.post(platform.channel(name, is_direct=True), ALICE, "hi")
    await provider.wait_started(2)
    assert provider.running == 2
    provider.gates[0].set()
    await provider.wait_started(3)
    for gate in provider.gates:
        gate.set()
    await agent.wait_idle()
    assert provider.max_running == 2


async def test_limit_of_one_is_strictly_serial(start_agent: StartAgent) -> None:
    provider = GatedProvider()
    agent, platform = await start_agent(provider, max_concurrent_activations=1)
    for name in ("a", "b", "c"):
        await platform.post(platform.channel(name, is_direct=True), ALICE, "hi")
    for i in range(3):
        await provider.wait_started(i + 1)
        assert provider.running == 1
        provider.gates[i].set()
    await agent.wait_idle()
    assert provider.max_running == 1
    assert [m.channel.id for m in platform.sent] == ["a", "b", "c"]


async def test_usage_is_recorded_per_activation(start_agent: StartAgent, store) -> None:  # type: ignore[no-untyped-def]
    provider = FakeProvider(["hi"])
    agent, platform = await start_agent(provider)
    await platform.post(platform.channel("dm", is_direct=True), ALICE, "hello")
    await agent.wait_idle()
    totals = await store.channels.usage_totals("salon")
    assert (totals.input_tokens, totals.output_tokens) == (10, 5)


async def test_a_slow_config_lookup_in_one_channel_does_not_hold_up_the_others(
    start_agent: StartAgent,
) -> None:
    """Judging a message needs its channel's config (pins on Discord: a REST call the first
    time). Two channels' messages in one batch are judged side by side: the slow channel's
    lookup here finishes only once the other channel's has begun."""
    import asyncio

    from salon.platforms.memory import MemoryPlatform

    provider = FakeProvider(default="ok")
    agent, platform = await start_agent(provider)
    other_asked = asyncio.Event()
    plain_pinned = MemoryPlatform.pinned

    async def pinned(channel):  # type: ignore[no-untyped-def]
        if channel.id == "slow":
            await asyncio.wait_for(other_asked.wait(), 5)
        else:
            other_asked.set()
        return await plain_pinned(platform, channel)

    platform.pinned = pinned  # type: ignore[method-assign]
    slow, fast = platform.channel("slow", is_direct=True), platform.channel("fast", is_direct=True)
    await platform.post(slow, ALICE, "first")  # both wait in the queue: one batch
    await platform.post(fast, ALICE, "second")
    await agent.wait_idle()
    assert sorted(m.channel.id for m in platform.sent) == ["fast", "slow"]
