"""A reusable Approve / Cancel prompt with a check on who may answer."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import discord

from salon.model import Approval, ApprovalDecision

__all__ = ["ButtonPrompt"]


class ButtonPrompt(discord.ui.View):
    """Two buttons; ``answer`` resolves with approved, cancelled or timeout.

    ``may_answer(interaction)`` decides who may press them; anyone else is told so,
    privately, and the prompt stays open. ``name_of(interaction)`` is how the one who
    answered is named (in the decision and in the edited prompt).
    """

    def __init__(
        self,
        *,
        may_answer: Callable[[discord.Interaction], bool],
        name_of: Callable[[discord.Interaction], str],
        refusal: str,
        timeout: float,
        approve_label: str = "Approve",
        cancel_label: str = "Cancel",
    ) -> None:
        super().__init__(timeout=timeout)
        self.answer: asyncio.Future[ApprovalDecision] = asyncio.get_running_loop().create_future()
        self._may_answer = may_answer
        self._name_of = name_of
        self._refusal = refusal
        approve = discord.ui.Button[ButtonPrompt](
            label=approve_label, style=discord.ButtonStyle.success, custom_id="salon:approve"
        )
        cancel = discord.ui.Button[ButtonPrompt](
            label=cancel_label, style=discord.ButtonStyle.danger, custom_id="salon:cancel"
        )
        approve.callback = self._approved  # type: ignore[method-assign]
        cancel.callback = self._cancelled  # type: ignore[method-assign]
        self.add_item(approve)
        self.add_item(cancel)

    async def interaction_check(self, interaction: discord.Interaction) -> bool:
        if self._may_answer(interaction):
            return True
        await interaction.response.send_message(self._refusal, ephemeral=True)
        return False

    async def _approved(self, interaction: discord.Interaction) -> None:
        await self._close(interaction, Approval.APPROVED, "Approved")

    async def _cancelled(self, interaction: discord.Interaction) -> None:
        await self._close(interaction, Approval.CANCELLED, "Cancelled")

    async def _close(self, interaction: discord.Interaction, answer: Approval, word: str) -> None:
        who = self._name_of(interaction)
        if not self.answer.done():
            self.answer.set_result(ApprovalDecision(answer, by=who))
        asked = interaction.message.content if interaction.message else ""
        content = f"{asked}\n{word} by {who}.".strip()
        await interaction.response.edit_message(content=content, view=None)
        self.stop()

    async def on_timeout(self) -> None:
        if not self.answer.done():
            self.answer.set_result(ApprovalDecision(Approval.TIMEOUT))
