"""Asking on Slack whether a tool may run: a note with Approve / Cancel buttons (Block
Kit). Only the requester or an authorized person (``authorized_roles`` lists Slack user
ids or names) may press them (under ``ask_admin``: see ``ApprovalRequest``; Slack tells a
bot of no operator, so there approval takes an authorized person); anyone else is told so
privately. An answered or expired prompt loses its buttons.

Block Kit refuses a section of more than 3,000 characters (``invalid_blocks``): a request
longer than ``_PREVIEW`` shows its start on the prompt and the whole in the prompt's
thread (up to ``_WHOLE_PIECES`` messages)."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from salon.errors import PlatformError
from salon.model import Approval, ApprovalDecision, ApprovalRequest, ChannelRef, Participant
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


@dataclass
class _Prompt:
    request: ApprovalRequest
    roles: frozenset[str]
    answer: asyncio.Future[ApprovalDecision]


class Approvals:
    def __init__(self, *, bot_name: str, authorized_roles: Iterable[str], sender: Sender) -> None:
        self._bot_name = bot_name
        self._authorized = frozenset(authorized_roles)
        self._sender = sender
        self._prompts: dict[str, _Prompt] = {}
        self._ids = itertools.count(1)
        self._changed = asyncio.Condition()

    @property
    def open(self) -> int:
        return len(self._prompts)

    async def ask(self, channel: ChannelRef, request: ApprovalRequest) -> ApprovalDecision:
        prompt_id = f"p{next(self._ids)}"
        shown = fit(request.description, _PREVIEW)
        cut = shown != request.description
        if cut:
            shown = f"{shown.rstrip()}… (the whole request is in the thread)"
        text = f"{self._bot_name} wants to run {shown}. Allow?"
        prompt = _Prompt(
            request,
            self._authorized | frozenset(request.authorized_roles),
            asyncio.get_running_loop().create_future(),
        )
        asked = await self._sender.post(channel, text, note=True, blocks=_blocks(text, prompt_id))
        async with self._changed:
            self._prompts[prompt_id] = prompt
            self._changed.notify_all()
        try:
            if cut:
                await self._whole(channel, asked.id, request.description)
            decision = await asyncio.wait_for(asyncio.shield(prompt.answer), request.timeout)
        except TimeoutError:
            decision = ApprovalDecision(Approval.TIMEOUT)
        finally:
            self._prompts.pop(prompt_id, None)
        await self._close(channel, asked.id, text, decision)
        return decision

    async def _whole(self, channel: ChannelRef, ts: str, description: str) -> None:
        """The whole request, as notes in the prompt's thread (the thread the prompt is
        in, when it is in one); a failure leaves the prompt as it is."""
        channel_id, thread = thread_of(channel)
        where = channel
        if thread is None:
            where = replace(channel, id=f"{channel_id}-{ts}", parent_id=channel_id)
        limit = self._sender.max_chars * _WHOLE_PIECES
        text = f"The whole request: {description}"
        if len(text) > limit:
            left = len(text) - limit
            text = f"{text[:limit]}\n… ({left} more characters not shown)"
        try:
            await self._sender.send(where, text, note=True)
        except PlatformError as exc:
            logger.warning("Slack: could not show the whole of an approval request: %s", exc)

    async def pressed(self, who: Participant, action: dict[str, Any], tell: Answer) -> None:
        """A button of a prompt was pressed (acknowledged already by the listener)."""
        prompt = self._prompts.get(str(action.get("value", "")))
        if prompt is None or prompt.answer.done():
            await tell("This question is no longer open.")
            return
        approve = action.get("action_id") == APPROVE
        request = prompt.request
        allowed = request.may_answer(
            requester=who.id == request.requester.id,
            in_role=bool(prompt.roles & set(who.roles)),
            operator=False,
            approve=approve,
        )
        if not allowed:
            await tell(request.refusal())
            return
        answer = Approval.APPROVED if approve else Approval.CANCELLED
        prompt.answer.set_result(ApprovalDecision(answer, by=who.name))

    async def _close(
        self, channel: ChannelRef, ts: str, text: str, decision: ApprovalDecision
    ) -> None:
        said = {
            Approval.APPROVED: f"Approved by {decision.by}.",
            Approval.CANCELLED: f"Cancelled by {decision.by}.",
        }.get(decision.answer, "No answer in time.")
        line = f"{text}\n{said}"
        try:
            await self._sender.update(channel, ts, line, blocks=[_section(line)])
        except PlatformError as exc:
            logger.warning("Slack: could not close an approval prompt: %s", exc)

    async def wait_open(self, count: int = 1) -> None:
        async with self._changed:
            await self._changed.wait_for(lambda: len(self._prompts) >= count)


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
