"""The prompt book: approval prompts open on one platform, kept the same way by every
adapter that asks in its own channels (Discord, Slack, Matrix, IRC).

Each adapter shows a prompt its own way (buttons, reactions, a question in text) through a
``PromptView``, and reads answers its own way (a button pressed, a reaction, a line), then
hands each one to ``PromptBook.answer`` as an ``Answerer``. The book keeps what is the same
everywhere: which prompts are open (by the adapter's key: an event id, a channel), the
future each waits on, the timeout, who may answer (``ApprovalRequest.may_answer``: the
requester, an authorized role, the operator) and the line that closes a prompt.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from salon.model import Approval, ApprovalDecision, ApprovalRequest, ChannelRef

__all__ = ["NO_LONGER_OPEN", "Answerer", "OpenPrompt", "PromptBook", "PromptView"]

K = TypeVar("K")

NO_LONGER_OPEN = "This question is no longer open."


@dataclass(frozen=True, slots=True)
class Answerer:
    """Who answers a prompt, as the platform tells: their name (in the decision), whether
    they are the requester, hold an authorized role, or are the operator (whatever that
    means there)."""

    name: str
    requester: bool
    in_role: bool = False
    operator: bool = False


@dataclass(slots=True)
class OpenPrompt:
    """A prompt shown and waiting: where it was asked, what, and its answer to come."""

    channel: ChannelRef
    request: ApprovalRequest
    answer: asyncio.Future[ApprovalDecision] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )

    @property
    def decided(self) -> bool:
        return self.answer.done()

    @property
    def closing(self) -> str:
        """The line that closes the prompt, once decided: by whom, or that nobody did."""
        decision = self.answer.result()
        return {
            Approval.APPROVED: f"Approved by {decision.by}.",
            Approval.CANCELLED: f"Cancelled by {decision.by}.",
        }.get(decision.answer, "No answer in time.")


class PromptView(ABC, Generic[K]):
    """One platform's way of showing a prompt, for one ``PromptBook.ask``. The book calls
    ``show``, opens the prompt under the key it returns, calls ``opened``, waits (the
    timeout counts from then) and calls ``close`` (not when the ask is cancelled)."""

    @abstractmethod
    async def show(self, channel: ChannelRef, request: ApprovalRequest) -> K:
        """Post the prompt; the key its answers come under."""

    async def opened(self, key: K, prompt: OpenPrompt) -> None:
        """What follows once answers are taken (buttons to press, the rest of a long
        request); nothing by default."""

    async def close(self, key: K, prompt: OpenPrompt, decision: ApprovalDecision) -> None:
        """Mark the prompt answered or expired (``OpenPrompt.closing``); nothing by
        default."""


class PromptBook(Generic[K]):
    """The open approval prompts of one platform, by key."""

    def __init__(self) -> None:
        self._open: dict[K, OpenPrompt] = {}
        self._changed = asyncio.Condition()

    @property
    def open(self) -> int:
        """Prompts shown and waiting for an answer."""
        return len(self._open)

    def prompt(self, key: K) -> OpenPrompt | None:
        """The prompt open under ``key``, None when there is none or it is decided."""
        found = self._open.get(key)
        return None if found is None or found.decided else found

    async def ask(
        self, channel: ChannelRef, request: ApprovalRequest, view: PromptView[K]
    ) -> ApprovalDecision:
        """Show the prompt and wait for its answer: no answer within ``request.timeout``
        seconds is ``Approval.TIMEOUT``."""
        key = await view.show(channel, request)
        prompt = OpenPrompt(channel, request)
        async with self._changed:
            self._open[key] = prompt
            self._changed.notify_all()
        try:
            await view.opened(key, prompt)
            async with asyncio.timeout(request.timeout):
                decision = await asyncio.shield(prompt.answer)
        except TimeoutError:
            if not prompt.decided:
                prompt.answer.set_result(ApprovalDecision(Approval.TIMEOUT))
            decision = prompt.answer.result()
        finally:
            if self._open.get(key) is prompt:
                del self._open[key]
            prompt.answer.cancel()  # an ask given up: a late answer finds it decided
        await view.close(key, prompt, decision)
        return decision

    def answer(self, prompt: OpenPrompt, who: Answerer, *, approve: bool) -> str | None:
        """Take ``who``'s answer (approve, or cancel). None when it decided the prompt;
        else the line for them, the prompt left as it was: it is no longer open, or they
        may not answer it (``ApprovalRequest.refusal``)."""
        if prompt.decided:
            return NO_LONGER_OPEN
        request = prompt.request
        allowed = request.may_answer(
            requester=who.requester, in_role=who.in_role, operator=who.operator, approve=approve
        )
        if not allowed:
            return request.refusal()
        answer = Approval.APPROVED if approve else Approval.CANCELLED
        prompt.answer.set_result(ApprovalDecision(answer, by=who.name))
        return None

    async def wait_open(self, count: int = 1) -> None:
        """Wait until ``count`` prompts are open."""
        async with self._changed:
            await self._changed.wait_for(lambda: len(self._open) >= count)
