"""The cache diagnosis reuses the previous call's entries for the messages it shares:
the result must equal a diagnosis made from scratch, however the window moved."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

from salon.agent.recording.diagnosis import CacheDiagnosis, _fingerprint
from salon.llm import LLMRequest, ProviderTraits
from salon.model import ChannelRef, Message, Participant
from salon.trace import CallTrace

ROOM = ChannelRef("memory", "room")
PEOPLE = [Participant(f"u{i}", f"User {i}") for i in range(3)]


def chat(n: int, start: int = 0) -> list[Message]:
    when = datetime(2026, 11, 23, tzinfo=UTC)
    return [
        Message(f"m{i}", ROOM, PEOPLE[i % 3], f"message {i} says something", when)
        for i in range(start, start + n)
    ]


def call(messages: list[Message]) -> tuple[Any, Any]:
    request = LLMRequest(model="m", messages=(), system="be kind")
    scene = SimpleNamespace(
        messages=tuple(messages), breakpoints=(), config=None, memory="", linked="", preamble=""
    )
    return SimpleNamespace(scene=scene, calls=[]), SimpleNamespace(request=request)


def entries(previous: Any, messages: list[Message]) -> tuple[Any, ...]:
    seen = _fingerprint(*call(messages), previous)
    return seen.ids, seen.hashes, seen.sizes


def moved(before: list[Message], how: str) -> list[Message]:
    after = list(before)
    if how == "slid":  # the two oldest went, two new came
        after = after[2:] + chat(2, start=100)
    elif how == "slid and edited":
        after = after[2:] + chat(2, start=100)
        after[5] = replace(after[5], text="edited since")
    elif how == "edited":
        after[7] = replace(after[7], text="edited since, and longer than it was")
    elif how == "author renamed":
        after[3] = replace(after[3], author=Participant("u9", "Someone Else"))
    elif how == "rolled":  # cut back to its newest few
        after = after[-4:] + chat(1, start=200)
    elif how == "deleted":
        del after[4]
    elif how == "emptied":
        after = []
    return after


@pytest.mark.parametrize(
    "how",
    ["same", "slid", "slid and edited", "edited", "author renamed", "rolled", "deleted", "emptied"],
)
def test_entries_reused_from_the_previous_call_equal_entries_made_afresh(how: str) -> None:
    before = chat(20)
    previous = _fingerprint(*call(before), None)
    after = moved(before, how)
    assert entries(previous, after) == entries(None, after)


def test_the_diagnosis_holds_a_bounded_number_of_messages_across_channels() -> None:
    diagnosis = CacheDiagnosis(max_channels=100, max_messages=1000)
    for n in range(10):
        recorder, pending = call(chat(400, start=1000 * n))
        pending.provider = SimpleNamespace(traits=ProviderTraits())
        recorder.scene.cut = False
        diagnosis.observe(f"room{n}", recorder, pending, CallTrace("answer", "p", "m", {}, 0.0))
    assert diagnosis.messages_held <= 1000
    assert "room9" in diagnosis.channels  # the newest stays


def test_a_model_change_that_drops_earlier_thoughts_says_so() -> None:
    from salon.llm.base import ChatMessage, TextPart, ThinkingPart
    from salon.model import Thought

    diagnosis = CacheDiagnosis()
    messages = chat(5)
    thought = Thought("anthropic", "m", text="I should look", signature="c2ln")
    turns = (ChatMessage("assistant", (ThinkingPart(thought), TextPart("looked"))),)
    causes = []
    for model in ("m", "m", "other", "other"):
        recorder, pending = call(messages)
        pending.request = replace(pending.request, model=model, messages=turns)
        pending.provider = SimpleNamespace(traits=ProviderTraits())
        recorder.scene.cut = False
        traced = CallTrace("answer", "p", model, {}, 0.0)
        diagnosis.observe("room", recorder, pending, traced)
        causes.append(traced.divergence.cause if traced.divergence else None)
    # The new model cannot take the old one's thoughts: the provider leaves them out.
    assert causes == ["first call", "new messages", "thinking dropped", "new messages"]
    recorder, pending = call(messages)
    pending.request = replace(pending.request, model="third")  # nothing of the old model
    pending.provider = SimpleNamespace(traits=ProviderTraits())
    recorder.scene.cut = False
    traced = CallTrace("answer", "p", "third", {}, 0.0)
    diagnosis.observe("room", recorder, pending, traced)
    assert traced.divergence is not None
    assert traced.divergence.cause == "model change"
