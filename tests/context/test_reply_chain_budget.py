"""``reply_chain_budget: shared``: the reply chain and the window share the recency budgets,
the chain first (Bob Bot's ``REPLY_CHAIN_MAX_DEPTH`` and ``REPLY_CHAIN_MAX_TOKENS``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from salon.context.selection import chain_first
from salon.model import ChannelRef, Message, Participant

ROOM = ChannelRef("memory", "room")
ALICE = Participant("a", "Alice")
START = datetime(2026, 1, 1, tzinfo=UTC)


def _messages(*texts: str, first: int = 0) -> list[Message]:
    return [
        Message(str(first + i), ROOM, ALICE, text, START + timedelta(minutes=first + i))
        for i, text in enumerate(texts)
    ]


def _texts(messages: list[Message]) -> list[str]:
    return [m.text for m in messages]


def test_the_chain_fills_the_message_budget_before_the_channel() -> None:
    chain = _messages("root", "answer", first=0)  # outside the window
    window = _messages("c1", "c2", "c3", "asked", first=10)
    kept_chain, kept_window = chain_first(
        chain, window, in_chain=set(), keep="13", max_messages=4, max_chars=1000
    )
    assert _texts(kept_chain) == ["root", "answer"]
    assert _texts(kept_window) == ["c3", "asked"]  # the newest of the rest fill what is left


def test_the_chain_in_the_window_counts_first_too() -> None:
    window = _messages("replied", "c1", "c2", "c3", "asked", first=10)
    _, kept = chain_first([], window, in_chain={"10"}, keep="14", max_messages=3, max_chars=1000)
    assert _texts(kept) == ["replied", "c3", "asked"]


def test_the_chain_keeps_its_newest_within_the_characters() -> None:
    chain = _messages("x" * 50, "y" * 30, "z" * 30, first=0)
    window = _messages("c" * 10, "asked", first=10)
    kept_chain, kept_window = chain_first(
        chain, window, in_chain=set(), keep="11", max_messages=10, max_chars=70
    )
    assert _texts(kept_chain) == ["y" * 30, "z" * 30]  # 50 more would not fit
    assert _texts(kept_window) == ["asked"]  # 5 + 60 = 65: no room for 10 more


def test_the_message_that_asked_stays_whatever_the_chain_takes() -> None:
    chain = _messages("a" * 100, first=0)
    window = _messages("asked", first=10)
    kept_chain, kept_window = chain_first(
        chain, window, in_chain=set(), keep="10", max_messages=1, max_chars=100
    )
    assert _texts(kept_chain) == []
    assert _texts(kept_window) == ["asked"]


def test_without_a_chain_the_window_is_cut_to_the_budgets_alone() -> None:
    window = _messages("c1", "c2", "asked", first=10)
    _, kept = chain_first([], window, in_chain=set(), keep="12", max_messages=3, max_chars=1000)
    assert _texts(kept) == ["c1", "c2", "asked"]
