"""Asking on Slack whether a tool may run: a note with Approve / Cancel buttons (Block
Kit). Only the requester or an authorized person (``authorized_roles`` lists Slack user
ids or names) may press them (under ``ask_admin``: see ``ApprovalRequest``; Slack tells a
bot of no operator, so there approval takes an authorized person); anyone else is told so
privately. An answered or expired prompt loses its buttons.

Block Kit refuses a section of more than 3,000 characters (``invalid_blocks``): a request
longer than ``_PREVIEW`` shows its start on the prompt and the whole in the prompt's
thread (up to ``_WHOLE_PIECES`` messages)."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from typing import Any

from salon.errors import PlatformError
from salon.model import ApprovalDecision, ApprovalRequest, ChannelRef, Participant
from salon.platforms.prompts import NO_LONGER_OPEN, Answerer, OpenPrompt, PromptBook, PromptView
from salon.platforms.slack.people import thread_of
from salon.platforms.slack.sending import Sender
from salon.platforms.slack.text import escape, fit

__all__ = ["APPROVE", "CANCEL", "Approvals"]

logger = logging.getLogger(__name__)

APPROVE, CANCEL = "salon_approve", "salon_cancel"
Answer = Callable[[str], Awaitable[None]]  # a private line to who pressed
_SECTION = 3000  # Block Kit: characters of a section's text, escaped, at most
_PREVIEW = 1500  # characters of a request the prompt shows, escaped: room for the rest
_WHOLE_PIECES = 10  # messages of the whole request in the thread, at most


class _Buttons(PromptView[str]):
    """The prompt with its buttons (their value is the key); closed with its line."""

    def __init__(self, bot_name: str, sender: Sender, prompt_id: str) -> None:
        self._bot_name = bot_name
        self._sender = sender
        self._id = prompt_id
        self._text = self._ts = ""
        self._cut = False

    async def show(self, channel: ChannelRef, request: ApprovalRequest) -> str:
        shown = fit(request.description, _PREVIEW)
        self._cut = shown != request.description
        if self._cut:
            shown = f"{shown.rstrip()}… (the whole request is in the thread)"
        self._text = f"{self._bot_name} wants to run {shown}. Allow?"
        blocks = _blocks(self._text, self._id)
        self._ts = (await self._sender.post(channel, self._text, note=True, blocks=blocks)).id
        return self._id

    async def opened(self, key: str, prompt: OpenPrompt) -> None:
        if self._cut:
            await self._whole(prompt.channel, prompt.request.description)

    async def _whole(self, channel: ChannelRef, description: str) -> None:
        """The whole request, as notes in the prompt's thread (the thread the prompt is
        in, when it is in one); a failure leaves the prompt as it is."""
        channel_id, thread = thread_of(channel)
        where = channel
        if thread is None:
            where = replace(channel, id=f"{channel_id}-{self._ts}", parent_id=channel_id)
        limit = self._sender.max_chars * _WHOLE_PIECES
        text = f"The whole request: {description}"
        if len(text) > limit:
            left = len(text) - limit
            text = f"{text[:limit]}\n… ({left} more characters not shown)"
        try:
            await self._sender.send(where, text, note=True)
        except PlatformError as exc:
            logger.warning("Slack: could not show the whole of an approval request: %s", exc)

    async def close(self, key: str, prompt: OpenPrompt, decision: ApprovalDecision) -> None:
        line = f"{self._text}\n{prompt.closing}"
        try:
            await self._sender.update(prompt.channel, self._ts, line, blocks=[_section(line)])
        except PlatformError as exc:
            logger.warning("Slack: could not close an approval prompt: %s", exc)


class Approvals:
    def __init__(self, *, bot_name: str, authorized_roles: Iterable[str], sender: Sender) -> None:
        self._bot_name = bot_name
        self._authorized = frozenset(authorized_roles)
        self._sender = sender
        self._book: PromptBook[str] = PromptBook()
        self._ids = itertools.count(1)

    async def ask(self, channel: ChannelRef, request: ApprovalRequest) -> ApprovalDecision:
        view = _Buttons(self._bot_name, self._sender, f"p{next(self._ids)}")
        return await self._book.ask(channel, request, view)

    async def pressed(self, who: Participant, action: dict[str, Any], tell: Answer) -> None:
        """A button of a prompt was pressed (acknowledged already by the listener)."""
        prompt = self._book.prompt(str(action.get("value", "")))
        if prompt is None:
            await tell(NO_LONGER_OPEN)
            return
        roles = self._authorized | frozenset(prompt.request.authorized_roles)
        answerer = Answerer(
            who.name,
            requester=who.id == prompt.request.requester.id,
            in_role=bool(roles & set(who.roles)),
        )  # Slack tells a bot of no operator
        said = self._book.answer(prompt, answerer, approve=action.get("action_id") == APPROVE)
        if said is not None:
            await tell(said)

    async def wait_open(self, count: int = 1) -> None:
        await self._book.wait_open(count)


def _blocks(text: str, prompt_id: str) -> list[dict[str, Any]]:
    def button(label: str, action: str, style: str) -> dict[str, Any]:
        shown = {"type": "plain_text", "text": label}
        return {
            "type": "button",
            "text": shown,
            "action_id": action,
            "value": prompt_id,
            "style": style,
        }

    return [
        _section(text),
        {
            "type": "actions",
            "block_id": f"salon_{prompt_id}",
            "elements": [button("Approve", APPROVE, "primary"), button("Cancel", CANCEL, "danger")],
        },
    ]


def _section(text: str) -> dict[str, Any]:
    """A mrkdwn section of ``text``, escaped and within Block Kit's bound."""
    return {"type": "section", "text": {"type": "mrkdwn", "text": escape(fit(text, _SECTION))}}
