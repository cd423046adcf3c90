"""What reaches the channel, and what comes back to the model: broken streams, Salon's own
notes, labels the model writes, empty answers, secrets, and rolling for every provider."""

from __future__ import annotations

from salon.config import Redactor
from salon.errors import ProviderError
from salon.llm import FakeProvider, FakeReply, ProviderTraits
from salon.model import Participant, Tag
from tests.agent.conftest import StartAgent

ALICE = Participant("alice", "Alice")
RESET = ProviderError("test: the connection broke during the answer", retryable=True)


async def test_a_stream_without_a_finish_reason_is_asked_again_when_nothing_was_shown(
    start_agent: StartAgent,
) -> None:
    truncated = FakeReply(("The first half of a par",), stop=None)
    provider = FakeProvider([truncated, "The whole answer."])
    agent, platform = await start_agent(provider)
    await platform.post(platform.channel("dm", is_direct=True), ALICE, "hello")
    await agent.wait_idle()
    assert [m.text for m in platform.sent] == ["The whole answer."]
    assert len(provider.requests) == 2


async def test_a_stream_broken_after_a_shown_paragraph_is_marked_as_cut_off(
    start_agent: StartAgent,
) -> None:
    broken = FakeReply(("First paragraph.\n\n", "Second para"), error=RESET, error_after=1)
    provider = FakeProvider([broken, "next answer"])
    agent, platform = await start_agent(provider)
    dm = platform.channel("dm", is_direct=True)
    await platform.post(dm, ALICE, "hello")
    await agent.wait_idle()
    first, cut = platform.sent
    assert first.text == "First paragraph."
    assert cut.text.startswith("(the answer was cut off: ")
    assert Tag.NOTE in cut.tags
    assert len(provider.requests) == 1  # what was shown is not asked for twice


async def test_a_stream_that_never_finishes_ends_in_a_clear_error_not_silence(
    start_agent: StartAgent,
) -> None:
    truncated = FakeReply((), stop=None)
    provider = FakeProvider([truncated, truncated, truncated])
    agent, platform = await start_agent(provider)
    await platform.post(platform.channel("dm", is_direct=True), ALICE, "hello")
    await agent.wait_idle()
    (told,) = platform.sent
    assert "ended before the model finished" in told.text
    assert Tag.NOTE in told.tags


async def test_salons_own_notes_never_come_back_as_the_bots_words(
    start_agent: StartAgent,
) -> None:
    error = ProviderError("test: HTTP 500: boom", status=500, retryable=False)
    provider = FakeProvider([FakeReply(error=error), "fine"])
    agent, platform = await start_agent(provider)
    dm = platform.channel("dm", is_direct=True)
    await platform.post(dm, ALICE, "first")
    await agent.wait_idle()
    assert platform.sent[0].text.startswith("⚠️ Salon could not answer")
    await platform.post(dm, ALICE, "second")
    await agent.wait_idle()
    seen = [m.plain_text for m in provider.requests[-1].messages]
    assert seen == ["Alice: first\nAlice: second"]


async def test_a_label_the_model_writes_before_its_answer_is_dropped(
    start_agent: StartAgent,
) -> None:
    provider = FakeProvider(
        [
            FakeReply(
                (
                    "Sal",
                    "on: Hi Alice!",
                )
            ),
            "Assistant: Hello.",
        ]
    )
    agent, platform = await start_agent(provider)
    dm = platform.channel("dm", is_direct=True)
    await platform.post(dm, ALICE, "hi")
    await agent.wait_idle()
    await platform.post(dm, ALICE, "hi again")
    await agent.wait_idle()
    assert [m.text for m in platform.sent] == ["Hi Alice!", "Hello."]


async def test_an_empty_answer_is_said_to_be_empty(start_agent: StartAgent) -> None:
    provider = FakeProvider([FakeReply(("  ",))])
    agent, platform = await start_agent(provider)
    await platform.post(platform.channel("dm", is_direct=True), ALICE, "hi")
    await agent.wait_idle()
    (note,) = platform.sent
    assert "nothing to say" in note.text
    assert Tag.NOTE in note.tags


async def test_a_secret_in_the_answer_is_redacted_before_it_is_posted(
    start_agent: StartAgent,
) -> None:
    provider = FakeProvider(["the key is sk-live-123456 ok"])
    agent, platform = await start_agent(provider, redactor=Redactor(frozenset({"sk-live-123456"})))
    await platform.post(platform.channel("dm", is_direct=True), ALICE, "what is the key?")
    await agent.wait_idle()
    assert [m.text for m in platform.sent] == ["the key is *** ok"]


async def test_every_provider_that_caches_a_prefix_gets_a_rolling_context(
    start_agent: StartAgent,
) -> None:
    caching = FakeProvider(["a"])
    agent, platform = await start_agent(caching)
    dm = platform.channel("dm", is_direct=True)
    await platform.post(dm, ALICE, "hi")
    await agent.wait_idle()
    assert await agent.store.rolling_state("salon", dm.key) is not None  # an OpenAI-type bot

    plain = FakeProvider(["b"])
    plain.traits = ProviderTraits(prefix_cache=False)
    agent, platform = await start_agent(plain)
    dm = platform.channel("dm2", is_direct=True)
    await platform.post(dm, ALICE, "hi")
    await agent.wait_idle()
    assert await agent.store.rolling_state("salon", dm.key) is None


async def test_the_failure_text_can_be_the_operators_own(start_agent: StartAgent) -> None:
    """The seed's ERROR_MESSAGE: one configured line instead of Salon's, the reason
    where it says ``{reason}``."""
    error = ProviderError("test: HTTP 500: boom", status=500, retryable=False)
    provider = FakeProvider([FakeReply(error=error), FakeReply(error=error)])
    agent, platform = await start_agent(provider, error_message="The spirits are silent.")
    dm = platform.channel("dm", is_direct=True)
    await platform.post(dm, ALICE, "first")
    await agent.wait_idle()
    assert [m.text for m in platform.sent] == ["The spirits are silent."]
    assert Tag.NOTE in platform.sent[0].tags
    agent.config = agent.config.model_copy(update={"error_message": "Oops ({reason})"})
    await platform.post(dm, ALICE, "second")
    await agent.wait_idle()
    assert platform.sent[-1].text == "Oops (test: HTTP 500: boom)"
