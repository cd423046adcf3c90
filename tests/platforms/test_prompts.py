"""The prompt book every adapter keeps its approval prompts in."""

from __future__ import annotations

import asyncio
import contextlib

from salon.model import Approval, ApprovalDecision, ApprovalRequest, ChannelRef, Participant
from salon.platforms.prompts import (
    NO_LONGER_OPEN,
    Answerer,
    OpenPrompt,
    PromptBook,
    PromptView,
)

CHANNEL = ChannelRef("test", "room")
ALICE = Participant("u1", "alice")


class Board(PromptView[str]):
    """Shows a prompt as a line on a board; records how it was closed."""

    def __init__(self, key: str = "p1") -> None:
        self.key = key
        self.shown: list[str] = []
        self.closed: list[str] = []

    async def show(self, channel: ChannelRef, request: ApprovalRequest) -> str:
        self.shown.append(f"may I run {request.description}?")
        return self.key

    async def close(self, key: str, prompt: OpenPrompt, decision: ApprovalDecision) -> None:
        self.closed.append(prompt.closing)


def request(**overrides: object) -> ApprovalRequest:
    fields: dict[str, object] = {
        "tool": "wipe",
        "description": "wipe(disk)",
        "requester": ALICE,
        "authorized_roles": ("admin",),
        "timeout": 5.0,
    }
    return ApprovalRequest(**{**fields, **overrides})  # type: ignore[arg-type]


async def opened(book: PromptBook[str]) -> OpenPrompt:
    async with asyncio.timeout(5):
        await book.wait_open(1)
    prompt = book.prompt("p1")
    assert prompt is not None
    return prompt


async def test_a_prompt_nobody_answers_times_out_and_is_closed() -> None:
    book: PromptBook[str] = PromptBook()
    board = Board()
    decision = await book.ask(CHANNEL, request(timeout=0.05), board)
    assert decision == ApprovalDecision(Approval.TIMEOUT)
    assert board.closed == ["No answer in time."]
    assert book.open == 0
    assert book.prompt("p1") is None


async def test_an_answer_after_the_timeout_finds_the_prompt_closed() -> None:
    book: PromptBook[str] = PromptBook()
    kept: list[OpenPrompt] = []

    class Keeping(Board):
        async def opened(self, key: str, prompt: OpenPrompt) -> None:
            kept.append(prompt)

    await book.ask(CHANNEL, request(timeout=0.05), Keeping())
    (prompt,) = kept
    late = book.answer(prompt, Answerer("alice", requester=True), approve=True)
    assert late == NO_LONGER_OPEN


async def test_the_requester_answers() -> None:
    book: PromptBook[str] = PromptBook()
    board = Board()
    asking = asyncio.create_task(book.ask(CHANNEL, request(), board))
    prompt = await opened(book)
    assert book.answer(prompt, Answerer("alice", requester=True), approve=True) is None
    assert await asking == ApprovalDecision(Approval.APPROVED, by="alice")
    assert board.closed == ["Approved by alice."]
    assert book.open == 0


async def test_only_the_requester_or_an_authority_may_answer() -> None:
    book: PromptBook[str] = PromptBook()
    asking = asyncio.create_task(book.ask(CHANNEL, request(), Board()))
    prompt = await opened(book)
    stranger = Answerer("bob", requester=False)
    assert book.answer(prompt, stranger, approve=True) == "Only alice can answer this."
    assert not asking.done()
    assert book.open == 1
    admin = Answerer("carol", requester=False, in_role=True)
    assert book.answer(prompt, admin, approve=False) is None
    assert await asking == ApprovalDecision(Approval.CANCELLED, by="carol")


async def test_under_ask_admin_the_requester_only_cancels() -> None:
    book: PromptBook[str] = PromptBook()
    asking = asyncio.create_task(book.ask(CHANNEL, request(by_others=True), Board()))
    prompt = await opened(book)
    refused = book.answer(prompt, Answerer("alice", requester=True), approve=True)
    assert refused is not None
    assert "alice can cancel it" in refused
    operator = Answerer("op", requester=False, operator=True)
    assert book.answer(prompt, operator, approve=True) is None
    assert await asking == ApprovalDecision(Approval.APPROVED, by="op")


async def test_answers_are_taken_from_when_the_prompt_is_opened() -> None:
    """What follows the prompt (the question said, buttons added) runs with the prompt
    already open: an answer that comes meanwhile is taken."""
    book: PromptBook[str] = PromptBook()

    class Quick(Board):
        async def opened(self, key: str, prompt: OpenPrompt) -> None:
            found = book.prompt(key)
            assert found is prompt
            book.answer(prompt, Answerer("alice", requester=True), approve=False)

    decision = await book.ask(CHANNEL, request(), Quick())
    assert decision == ApprovalDecision(Approval.CANCELLED, by="alice")


async def test_an_ask_given_up_leaves_no_prompt_open() -> None:
    book: PromptBook[str] = PromptBook()
    board = Board()
    asking = asyncio.create_task(book.ask(CHANNEL, request(), board))
    prompt = await opened(book)
    asking.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await asking
    assert book.open == 0
    assert book.answer(prompt, Answerer("alice", requester=True), approve=True) == NO_LONGER_OPEN
    assert board.closed == []  # nobody is told the prompt closed: the ask was given up
