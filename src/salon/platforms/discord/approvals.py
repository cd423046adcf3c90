"""Asking on Discord whether a tool may run: Approve / Cancel buttons on a silent message.

Only the requester or a member of an authorized role (by name or id) may press them (under
``ask_admin``: see ``ApprovalRequest``; the operator is the application's owner); a prompt
nobody answered in time loses its buttons, so nobody presses them later.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

import discord

from salon.model import Approval, ApprovalDecision, ApprovalRequest, ChannelRef
from salon.platforms.discord.channels import Channels
from salon.platforms.discord.people import People
from salon.platforms.discord.permissions import SEND
from salon.platforms.discord.refusals import NETWORK_ERRORS, translated, where
from salon.platforms.discord.sending import new_nonce
from salon.platforms.discord.views import ButtonPrompt

__all__ = ["Approvals"]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")
Retrying = Callable[[Callable[[], Awaitable[_T]]], Awaitable[_T]]


class Approvals:
    def __init__(
        self,
        *,
        bot_name: str,
        authorized_roles: Iterable[str],
        channels: Channels,
        people: People,
        retrying: Retrying[discord.Message],
        operator: Callable[[discord.abc.User], bool],
    ) -> None:
        """``retrying``: how a prompt is posted (tried again as any post is); ``operator``:
        whether a user is the bot's operator (who may approve under ``ask_admin``)."""
        self._bot_name = bot_name
        self._authorized_roles = set(authorized_roles)
        self._channels = channels
        self._people = people
        self._retrying = retrying
        self._operator = operator
        self.open = 0  # prompts open and clickable
        self._changed = asyncio.Condition()

    async def ask(self, channel: ChannelRef, request: ApprovalRequest) -> ApprovalDecision:
        target = await self._channels.get(channel)
        roles = set(request.authorized_roles) | self._authorized_roles

        def may_answer(interaction: discord.Interaction) -> bool:
            who = self._people.person(interaction.user, interaction.guild)
            return request.may_answer(
                requester=who.id == request.requester.id,
                in_role=bool(roles & set(who.roles)),
                operator=self._operator(interaction.user),
                approve=dict(interaction.data or {}).get("custom_id") == "salon:approve",
            )

        prompt = ButtonPrompt(
            may_answer=may_answer,
            name_of=lambda interaction: (
                self._people.person(interaction.user, interaction.guild).name
            ),
            refusal=request.refusal(),
            timeout=request.timeout,
        )
        text = f"{self._bot_name} wants to run {request.description}. Allow?"
        nonce = new_nonce()
        with translated(f"ask for approval in {where(target)}", needs=SEND):
            asked = await self._retrying(
                lambda: target.send(text, view=prompt, silent=True, nonce=nonce)
            )
        async with self._changed:
            self.open += 1
            self._changed.notify_all()
        try:
            decision = await prompt.answer
        finally:
            self.open -= 1
        if decision.answer is Approval.TIMEOUT:
            await self._close_unanswered(asked, text)
        return decision

    async def _close_unanswered(self, asked: discord.Message, text: str) -> None:
        """Take the buttons off a prompt nobody answered, so nobody presses them later."""
        try:
            await asked.edit(content=f"{text}\nNo answer in time.", view=None)
        except (discord.DiscordException, *NETWORK_ERRORS) as exc:
            logger.warning("Discord: could not close an unanswered approval prompt: %s", exc)

    async def wait_open(self, count: int = 1) -> None:
        """Wait until ``count`` prompts are open and clickable."""
        async with self._changed:
            await self._changed.wait_for(lambda: self.open >= count)
