"""A reusable Approve / Cancel prompt: two buttons that hand each press on."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import discord

__all__ = ["ButtonPrompt", "Press"]

Press = Callable[[discord.Interaction, bool], Awaitable[None]]
"""A button pressed: the interaction, and whether it was Approve; it answers the interaction."""


class ButtonPrompt(discord.ui.View):
    """Two buttons; each press goes to ``press``, which decides whether it answers the
    prompt and responds to the interaction. ``timeout`` only ends the listening of a
    prompt whose ask was given up: the prompt book times the question out."""

    def __init__(
        self,
        *,
        press: Press,
        timeout: float,
        approve_label: str = "Approve",
        cancel_label: str = "Cancel",
    ) -> None:
        super().__init__(timeout=timeout)
        self._press = press
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

    async def _approved(self, interaction: discord.Interaction) -> None:
        await self._press(interaction, True)

    async def _cancelled(self, interaction: discord.Interaction) -> None:
        await self._press(interaction, False)
