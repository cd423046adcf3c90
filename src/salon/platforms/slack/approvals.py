"""Asking on Slack whether a tool may run: a note with Approve / Cancel buttons (Block
Kit). Only the requester or an authorized person (``authorized_roles`` lists Slack user
ids or names) may press them (under ``ask_admin``: see ``ApprovalRequest``; Slack tells a
bot of no operator, so there approval takes an authorized person); anyone else is told so
privately. An answered or expired prompt loses its buttons."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from salon.errors import PlatformError
from salon.model import Approval, ApprovalDecision, ApprovalRequest, ChannelRef, Participant
from salon.platforms.slack.sending import Sender
from salon.platforms.slack.text import escape

__all__ = ["APPROVE", "CANCEL", "Approvals"]

logger = logging.getLogger(__name__)

APPROVE, CANCEL = "salon_approve", "salon_cancel"
Answer = Callable[[str], Awaitable[None]]  # a private line to who pressed


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
        text = f"{self._bot_name} wants to run {request.description}. Allow?"
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
            decision = await asyncio.wait_for(asyncio.shield(prompt.answer), request.timeout)
        except TimeoutError:
            decision = ApprovalDecision(Approval.TIMEOUT)
        finally:
            self._prompts.pop(prompt_id, None)
        await self._close(channel, asked.id, text, decision)
        return decision

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
        section = {"type": "section", "text": {"type": "mrkdwn", "text": escape(line)}}
        try:
            await self._sender.update(channel, ts, line, blocks=[section])
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
        {"type": "section", "text": {"type": "mrkdwn", "text": escape(text)}},
        {
            "type": "actions",
            "block_id": f"salon_{prompt_id}",
            "elements": [button("Approve", APPROVE, "primary"), button("Cancel", CANCEL, "danger")],
        },
    ]
