"""Discord's slash commands: /monitor, /unmonitor, /ask, /generate, /schedules, /activity,
and /memory and /forget (``memorycmds.py``).

What changes the bot for everyone in a channel (/monitor, /unmonitor, cancelling another's
schedule) is offered by Discord to who may manage the channel, and Salon asks for one of
the bot's authorized roles as well when it has them. Every answer is private (ephemeral).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from typing import Any

import discord
from discord import app_commands

from salon.model import Event, Message, MessageEvent, Participant, Tag
from salon.platforms.adapter import ActivityLink, GenerateCommand, SchedulesCommand
from salon.platforms.base import MonitorStore
from salon.platforms.discord.cache import HistoryCache
from salon.platforms.discord.channels import Channels
from salon.platforms.discord.convert import channel_ref
from salon.platforms.discord.memorycmds import register_memory
from salon.platforms.discord.people import People
from salon.platforms.discord.refusals import NETWORK_ERRORS
from salon.platforms.monitored import Monitored
from salon.platforms.notes import PeoplesMemory

__all__ = ["ActivityLink", "Commands", "GenerateCommand", "MonitorStore", "SchedulesCommand"]

logger = logging.getLogger(__name__)


class Commands:
    def __init__(
        self,
        *,
        bot_name: str,
        monitored: Monitored,
        schedules: SchedulesCommand | None,
        generate: GenerateCommand | None,
        activity: ActivityLink | None,
        authorized_roles: Iterable[str],
        people: People,
        channels: Channels,
        cache: HistoryCache,
        deliver: Callable[[Event], Awaitable[None]],
        memory: PeoplesMemory | None = None,
    ) -> None:
        """``monitored``: the platform's monitored channels, changed here;
        ``generate``: what ``/generate`` runs (without it the command is not offered);
        ``deliver``: where an ``/ask`` question goes, as any message would; ``memory``:
        what ``/memory`` and ``/forget`` answer (without it they are not offered)."""
        self._bot_name = bot_name
        self._monitored = monitored
        self._schedules = schedules
        self._generate = generate
        self._activity = activity
        self._authorized_roles = set(authorized_roles)
        self._people = people
        self._channels = channels
        self._cache = cache
        self._deliver = deliver
        self._memory = memory

    def register(self, tree: app_commands.CommandTree[Any]) -> None:
        # What changes the bot for everyone in a channel is offered to those who may manage
        # it; server admins can give it to others in Discord's Integrations settings.
        @tree.command(name="monitor", description="Read and answer every message here")
        @app_commands.default_permissions(manage_channels=True)
        async def monitor(interaction: discord.Interaction) -> None:
            await self._set_monitor(interaction, on=True)

        @tree.command(name="unmonitor", description="Stop reading every message here")
        @app_commands.default_permissions(manage_channels=True)
        async def unmonitor(interaction: discord.Interaction) -> None:
            await self._set_monitor(interaction, on=False)

        @tree.command(name="ask", description="Ask the bot one question")
        async def ask(interaction: discord.Interaction, question: str) -> None:
            await self._ask(interaction, question)

        if self._generate is not None:
            self._register_generate(tree)
        if self._memory is not None:
            register_memory(tree, self._memory, self._asker)

        @tree.command(name="schedules", description="List this channel's schedules, or cancel one")
        async def schedules(interaction: discord.Interaction, cancel: int | None = None) -> None:
            channel = channel_ref(interaction.channel)
            if self._schedules is None:
                await interaction.response.send_message("Schedules are off.", ephemeral=True)
                return
            text = await self._schedules(
                channel,
                f"cancel {cancel}" if cancel else "",
                requester=None if self._steers(interaction) else self._asker(interaction),
                others="members with Manage Channels" + self._in_roles(),
            )
            await interaction.response.send_message(text[:1900], ephemeral=True)

        @tree.command(name="activity", description="A short-lived link to the activity page")
        async def activity(interaction: discord.Interaction) -> None:
            await interaction.response.send_message(
                self._activity_answer(interaction), ephemeral=True
            )

    def _asker(self, interaction: discord.Interaction) -> Participant:
        return self._people.person(interaction.user, interaction.guild)

    def _steers(self, interaction: discord.Interaction) -> bool:
        """Whether who used a command may change the bot for others (cancel anyone's
        schedule): in a server, a member with Manage Channels there who holds one of the
        authorized roles when the bot has them; in DMs, nobody."""
        if interaction.guild is None or not interaction.permissions.manage_channels:
            return False
        return not self._lacks_role(interaction)

    def _lacks_role(self, interaction: discord.Interaction) -> bool:
        """In a server, when the bot has authorized roles: whether the member holds none."""
        if interaction.guild is None or not self._authorized_roles:
            return False
        return not set(self._asker(interaction).roles) & self._authorized_roles

    def _in_roles(self) -> str:
        if not self._authorized_roles:
            return ""
        return f" in the authorized roles ({', '.join(sorted(self._authorized_roles))})"

    def _activity_answer(self, interaction: discord.Interaction) -> str:
        """Only members of an authorized role get a link (it opens every bot's traces)."""
        if self._activity is None:
            return "The activity page is not served for this bot."
        if not self._authorized_roles:
            return "No role may open the activity page: the bot's authorized_roles is empty."
        roles = set(self._people.person(interaction.user, interaction.guild).roles)
        if not roles & self._authorized_roles:
            return "Only members of the authorized roles can open the activity page."
        return self._activity()[:1900]

    def _register_generate(self, tree: app_commands.CommandTree[Any]) -> None:
        @tree.command(name="generate", description="Draw an image (ComfyUI)")
        @app_commands.describe(
            prompt="what to draw",
            width="pixels (default: the workflow's)",
            height="pixels (default: the workflow's)",
            seed="the same seed and prompt draw the same image",
        )
        async def generate(
            interaction: discord.Interaction,
            prompt: app_commands.Range[str, 1, 2000],
            width: app_commands.Range[int, 64, 8192] | None = None,
            height: app_commands.Range[int, 64, 8192] | None = None,
            seed: app_commands.Range[int, 0, 2**53] | None = None,
        ) -> None:
            wanted = {"prompt": prompt, "width": width, "height": height, "seed": seed}
            given = {k: v for k, v in wanted.items() if v is not None}
            await self._run_generate(interaction, given)

    async def _run_generate(
        self, interaction: discord.Interaction, arguments: dict[str, Any]
    ) -> None:
        """Answered at once (privately); the tool's approval, progress and image follow in
        the channel like any tool call's; the private answer then says how it went."""
        assert self._generate is not None
        await interaction.response.send_message(
            f"Generating: {arguments['prompt'][:1800]}", ephemeral=True
        )
        self._channels.remember(interaction.channel)
        channel = channel_ref(interaction.channel)
        who = self._people.person(interaction.user, interaction.guild)
        try:
            said = await self._generate(channel, who, arguments)
        except Exception:  # the command's boundary: one line to the person, the rest logged
            logger.exception("Discord: /generate failed in %s", channel.key)
            said = "The image could not be generated; the reason is in Salon's log."
        try:
            await interaction.edit_original_response(content=said[:1900])
        except (discord.DiscordException, *NETWORK_ERRORS) as exc:
            logger.warning("Discord: could not answer /generate: %s", exc)

    async def _set_monitor(self, interaction: discord.Interaction, *, on: bool) -> None:
        """Discord offers the command to who may manage the channel (or whom the server's
        admins chose); Salon asks for an authorized role as well, when the bot has them."""
        if self._lacks_role(interaction):
            roles = ", ".join(sorted(self._authorized_roles))
            await interaction.response.send_message(
                f"Only members of the authorized roles ({roles}) can change what "
                f"{self._bot_name} reads here.",
                ephemeral=True,
            )
            return
        key = channel_ref(interaction.channel).key
        said = await self._monitored.change(key, on=on, by=str(interaction.user.id))
        self._cache.forget(key.partition(":")[2])  # tags in the cache follow the new state
        await interaction.response.send_message(said, ephemeral=True)

    async def _ask(self, interaction: discord.Interaction, question: str) -> None:
        await interaction.response.send_message(f"Asking: {question[:1800]}", ephemeral=True)
        channel = channel_ref(interaction.channel)
        message = Message(
            id=f"ask-{interaction.id}",
            channel=channel,
            author=self._people.person(interaction.user, interaction.guild),
            text=question,
            created_at=interaction.created_at,
            mentions=(self._people.myself(),),
        )
        await self._deliver(MessageEvent(_tagged(message, Tag.ASKED)))


def _tagged(message: Message, tag: Tag) -> Message:
    return replace(message, tags=message.tags | {tag})
