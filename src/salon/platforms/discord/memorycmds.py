"""``/memory`` and ``/forget`` on Discord (``salon.platforms.notes``): offered to everyone,
since each shows and deletes only the caller's own notes; every answer is ephemeral."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import discord
from discord import app_commands

from salon.model import Participant
from salon.platforms.notes import DISCORD_WORDS, PeoplesMemory

__all__ = ["register_memory"]

logger = logging.getLogger(__name__)

Asker = Callable[[discord.Interaction], Participant]


def register_memory(
    tree: app_commands.CommandTree[Any], memory: PeoplesMemory, asker: Asker
) -> None:
    @tree.command(name="memory", description="What the bot keeps about you, and where from")
    @app_commands.describe(share="use notes about you outside DMs, where you are answered")
    async def memory_command(
        interaction: discord.Interaction, share: Literal["on", "off"] | None = None
    ) -> None:
        person = asker(interaction)
        if share is None:
            await _answer(interaction, memory.show(person, DISCORD_WORDS))
        else:
            await _answer(interaction, memory.share(person, share == "on"))

    @tree.command(name="forget", description="Delete one of your notes, or all of them")
    @app_commands.describe(
        note="the number /memory shows",
        everything="every note about you or from you",
        confirm="yes, delete them all",
    )
    @app_commands.rename(everything="all")
    async def forget_command(
        interaction: discord.Interaction,
        note: int | None = None,
        everything: bool | None = None,
        confirm: bool | None = None,
    ) -> None:
        person = asker(interaction)
        if everything:
            answer = memory.forget_all(person, DISCORD_WORDS, confirmed=bool(confirm))
        elif note is not None:
            answer = memory.forget(person, note, DISCORD_WORDS)
        else:
            answer = _usage()
        await _answer(interaction, answer)


async def _usage() -> str:
    return f"Say which: {DISCORD_WORDS.forget.format(id='N')}, or {DISCORD_WORDS.forget_all}."


async def _answer(interaction: discord.Interaction, answer: Awaitable[str]) -> None:
    """The answer, privately; a store that fails gets one line, the rest goes to the log."""
    try:
        text = await answer
    except Exception:  # the command's boundary
        logger.exception(
            "Discord: /%s failed", interaction.command.name if interaction.command else "?"
        )
        text = "That did not work; the reason is in Salon's log."
    await interaction.response.send_message(text[:1900], ephemeral=True)
