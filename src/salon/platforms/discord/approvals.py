"""Asking on Discord whether a tool may run: Approve / Cancel buttons on a silent message.

Only the requester or a member of an authorized role (by name or id) may press them (under
``ask_admin``: see ``ApprovalRequest``; the operator is the application's owner); a prompt
nobody answered in time loses its buttons, so nobody presses them later.
"""

from __future__ import annotations

import itertools
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
from salon.platforms.prompts import NO_LONGER_OPEN, Answerer, OpenPrompt, PromptBook, PromptView

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
        self.bot_name = bot_name
        self._authorized_roles = frozenset(authorized_roles)
        self._channels = channels
        self._people = people
        self._retrying = retrying
        self._operator = operator
        self._book: PromptBook[str] = PromptBook()
        self._ids = itertools.count(1)

    async def ask(self, channel: ChannelRef, request: ApprovalRequest) -> ApprovalDecision:
        return await self._book.ask(channel, request, _Buttons(self, f"p{next(self._ids)}"))

    async def post(self, channel: ChannelRef, text: str, view: ButtonPrompt) -> discord.Message:
        """The prompt: a silent message with its buttons."""
        target = await self._channels.get(channel)
        nonce = new_nonce()
        with translated(f"ask for approval in {where(target)}", needs=SEND):
            return await self._retrying(
                lambda: target.send(text, view=view, silent=True, nonce=nonce)
            )

    async def press(self, key: str, interaction: discord.Interaction, approve: bool) -> None:
        """A button pressed: the answer taken (the prompt says by whom and loses its
        buttons), or who pressed told privately why not."""
        prompt = self._book.prompt(key)
        if prompt is None:
            await interaction.response.send_message(NO_LONGER_OPEN, ephemeral=True)
            return
        person = self._people.person(interaction.user, interaction.guild)
        roles = self._authorized_roles | frozenset(prompt.request.authorized_roles)
        who = Answerer(
            person.name,
            requester=person.id == prompt.request.requester.id,
            in_role=bool(roles & set(person.roles)),
            operator=self._operator(interaction.user),
        )
        said = self._book.answer(prompt, who, approve=approve)
        if said is not None:
            await interaction.response.send_message(said, ephemeral=True)
            return
        asked = interaction.message.content if interaction.message else ""
        content = f"{asked}\n{prompt.closing}".strip()
        await interaction.response.edit_message(content=content, view=None)

    async def wait_open(self, count: int = 1) -> None:
        """Wait until ``count`` prompts are open and clickable."""
        await self._book.wait_open(count)


class _Buttons(PromptView[str]):
    """One prompt's buttons; an unanswered prompt loses them, so nobody presses them later."""

    def __init__(self, approvals: Approvals, key: str) -> None:
        self._approvals = approvals
        self._key = key
        self._asked: discord.Message | None = None
        self._view: ButtonPrompt | None = None
        self._text = ""

    async def show(self, channel: ChannelRef, request: ApprovalRequest) -> str:
        async def press(interaction: discord.Interaction, approve: bool) -> None:
            await self._approvals.press(self._key, interaction, approve)

        # The book times the question out; the view's own timeout only ends its listening.
        self._view = ButtonPrompt(press=press, timeout=request.timeout + 1)
        self._text = f"{self._approvals.bot_name} wants to run {request.description}. Allow?"
        self._asked = await self._approvals.post(channel, self._text, self._view)
        return self._key

    async def close(self, key: str, prompt: OpenPrompt, decision: ApprovalDecision) -> None:
        if self._view is not None:
            self._view.stop()
        if decision.answer is not Approval.TIMEOUT or self._asked is None:
            return  # an answer edited the prompt as it was given
        try:
            await self._asked.edit(content=f"{self._text}\n{prompt.closing}", view=None)
        except (discord.DiscordException, *NETWORK_ERRORS) as exc:
            logger.warning("Discord: could not close an unanswered approval prompt: %s", exc)
