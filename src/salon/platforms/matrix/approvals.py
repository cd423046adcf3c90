"""Approvals by reaction: the bot asks in a notice and reacts ✅ and ❌ to it; the first of
those reactions from someone who may answer decides. Who may: the requester, or someone
whose power level in the room is at least ``approval_power_level`` (the "authorized role"
of Matrix); under ``ask_admin``, see ``ApprovalRequest``. Anyone else is told why not."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from salon.errors import PlatformError
from salon.model import ApprovalDecision, ApprovalRequest, ChannelRef
from salon.platforms.matrix.api import Homeserver
from salon.platforms.matrix.convert import relation, room_and_root
from salon.platforms.matrix.powers import level_of
from salon.platforms.prompts import Answerer, OpenPrompt, PromptBook, PromptView

__all__ = ["APPROVE", "CANCEL", "Approvals"]

logger = logging.getLogger(__name__)

APPROVE = "✅"
CANCEL = "❌"
JSON = dict[str, Any]
Note = Callable[[ChannelRef, str], Awaitable[str]]


class _ByReaction(PromptView[str]):
    """A notice (its event id is the key), then the two reactions to press."""

    def __init__(self, server: Homeserver, note: Note, text: str) -> None:
        self._server = server
        self._note = note
        self._text = text

    async def show(self, channel: ChannelRef, request: ApprovalRequest) -> str:
        return await self._note(channel, self._text)

    async def opened(self, key: str, prompt: OpenPrompt) -> None:
        room, _ = room_and_root(prompt.channel)
        for reaction in (APPROVE, CANCEL):
            with contextlib.suppress(PlatformError):  # a prompt works without them
                await self._server.send_event(room, "m.reaction", _annotation(key, reaction))


class Approvals:
    def __init__(
        self,
        server: Homeserver,
        *,
        bot_name: str,
        power_level: int,
        operators: frozenset[str],
        note: Note,
    ) -> None:
        """``note``: posts a notice and returns its event id."""
        self._server = server
        self._bot_name = bot_name
        self._power_level = power_level
        self._operators = operators
        self._note = note
        self._book: PromptBook[str] = PromptBook()  # by the prompt's event id

    async def ask(self, channel: ChannelRef, request: ApprovalRequest) -> ApprovalDecision:
        text = (
            f"{self._bot_name} wants to run {request.description}. "
            f"React {APPROVE} to allow or {CANCEL} to cancel."
        )
        return await self._book.ask(channel, request, _ByReaction(self._server, self._note, text))

    async def reaction(self, event: JSON, channel: ChannelRef) -> None:
        """A reaction seen in a room: an answer when it is on an open prompt."""
        relates = relation(event)
        prompt = self._book.prompt(str(relates.get("event_id", "")))
        key = relates.get("key")
        if prompt is None or key not in (APPROVE, CANCEL):
            return
        sender = str(event.get("sender", ""))
        room, _ = room_and_root(prompt.channel)  # the prompt's room, whatever the reaction's
        level = await self._level(room, sender)
        if prompt.decided:
            return
        who = Answerer(
            sender,
            requester=sender == prompt.request.requester.id,
            in_role=level >= self._power_level,
            operator=sender in self._operators,
        )
        refusal = self._book.answer(prompt, who, approve=key == APPROVE)
        if refusal is not None:
            logger.info("Matrix: %s may not answer an approval in %s", sender, room)
            with contextlib.suppress(PlatformError):
                await self._note(channel, f"{sender}: {refusal}")

    async def _level(self, room: str, user: str) -> int:
        """``user``'s power level in ``room`` (``powers.py``: the rule ``salon check``
        applies too); a creator not listed in ``users`` outranks every level."""
        try:
            levels = await self._server.state(room, "m.room.power_levels") or {}
        except PlatformError:
            return 0
        users = levels.get("users")
        listed = isinstance(users, dict) and users.get(user) is not None
        return level_of(levels, user, () if listed else await self._creators(room))

    async def _creators(self, room: str) -> frozenset[str]:
        try:
            return await self._server.creators(room)
        except PlatformError:
            return frozenset()


def _annotation(event_id: str, key: str) -> JSON:
    return {"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": key}}
