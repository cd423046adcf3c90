"""Approvals in text: the bot asks "may I run ...?" in the channel and the requester
answers yes or no. IRC has neither roles nor an operator, so only the requester can. A tool
server's question (``reply``) is answered the same way, by the requester's next line."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable

from salon.model import (
    Approval,
    ApprovalDecision,
    ApprovalRequest,
    ChannelRef,
    Message,
    Participant,
)
from salon.platforms.base import NO_ANSWERS, YES_ANSWERS
from salon.platforms.irc.recording import Recorder
from salon.platforms.prompts import Answerer, OpenPrompt, PromptBook, PromptView

__all__ = ["Approvals"]

_ADDRESSED = re.compile(r"^[^\s:]+:\s+(.+)$")

logger = logging.getLogger(__name__)


class _InText(PromptView[str]):
    """The question said in the channel once the prompt is open (under the channel's key):
    the answer may come while the line is still being sent."""

    def __init__(self, say: Callable[[ChannelRef, str], Awaitable[object]]) -> None:
        self._say = say

    async def show(self, channel: ChannelRef, request: ApprovalRequest) -> str:
        return channel.key

    async def opened(self, key: str, prompt: OpenPrompt) -> None:
        who = prompt.request.requester
        if not who.identity:
            logger.warning(
                "IRC: %s has no identity on record (set before identities were kept); "
                "the approval in %s goes by the nick alone",
                who.name,
                key,
            )
        question = f"{who.name}: may I run {prompt.request.description}? Answer yes or no."
        await self._say(prompt.channel, question)


class Approvals:
    def __init__(
        self, say: Callable[[ChannelRef, str], Awaitable[object]], recorder: Recorder
    ) -> None:
        """``say``: sends a note (the question) to a channel."""
        self._say = say
        self._recorder = recorder
        self._book: PromptBook[str] = PromptBook()
        self._replies: dict[str, tuple[Participant, asyncio.Future[Message]]] = {}

    async def ask(self, channel: ChannelRef, request: ApprovalRequest) -> ApprovalDecision:
        if request.by_others:  # IRC has neither roles nor an operator: nobody could approve
            text = (
                f"{request.requester.name}: {request.description} needs the approval of "
                "someone else with an authorized role, or of the bot's operator, and nobody "
                "can give it on IRC."
            )
            await self._say(channel, text)
            return ApprovalDecision(Approval.CANCELLED)
        return await self._book.ask(channel, request, _InText(self._say))

    async def reply(
        self, channel: ChannelRef, requester: Participant, question: str, within: float
    ) -> tuple[str, str] | None:
        """Ask ``requester`` ``question``; their next line in the channel (its text, their
        nick), or None when none came ``within`` seconds."""
        future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._replies[channel.key] = (requester, future)
        try:
            await self._say(channel, question)
            async with asyncio.timeout(max(within, 0.0)):
                message = await future
        except TimeoutError:
            return None
        finally:
            self._replies.pop(channel.key, None)
        addressed = _ADDRESSED.match(message.text.strip())  # "Salon: friday"
        text = addressed.group(1) if addressed else message.text.strip()
        return text, message.author.name

    async def answer(self, message: Message) -> bool:
        """Whether ``message`` answers the open question of its channel; the answer is
        logged as a note, so it never comes back to the model as conversation."""
        waiting = self._replies.get(message.channel.key)
        if (
            waiting is not None
            and not waiting[1].done()
            and _same_person(message.author, waiting[0])
        ):
            await self._recorder.record(message, "note")
            waiting[1].set_result(message)
            return True
        prompt = self._book.prompt(message.channel.key)
        if prompt is None:
            return False
        word = message.text.strip().lower().rstrip(".!")
        word = word.split(":", 1)[-1].strip() if ":" in word else word
        if word not in YES_ANSWERS | NO_ANSWERS:
            return False
        # IRC has no roles: only the person who asked may answer
        who = Answerer(message.author.name, _same_person(message.author, prompt.request.requester))
        if self._book.answer(prompt, who, approve=word in YES_ANSWERS) is not None:
            return False
        await self._recorder.record(message, "note")
        return True


def _same_person(author: Participant, requester: Participant) -> bool:
    """Identities where the requester has one (a nick can be taken by someone else);
    the nick for a requester recorded without."""
    if requester.identity:
        return author.identity == requester.identity
    return author.id == requester.id
