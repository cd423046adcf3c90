"""What a bot answers to the commands its platforms offer: ``/schedules`` (Discord, the
terminal), ``/generate`` and ``/activity`` (Discord). The app makes one ``BotCommands``
and hands its answers to the adapters (``salon.platforms.adapter.Commands``)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from salon.agent.conversation.toolrunner import ToolRunner
from salon.config import BotConfig, Secrets
from salon.model import ChannelRef, Participant, ToolCall
from salon.platforms.adapter import Commands
from salon.platforms.base import Platform
from salon.tools.schedules import ScheduleStore

__all__ = ["GENERATE_TOOL", "BotCommands"]

GENERATE_TOOL = "generate_image"  # the comfyui integration's tool, run by /generate


@dataclass
class BotCommands:
    """``config`` gives the bot's config now (reloads apply); ``changed`` wakes the
    scheduler; ``runner`` is the agent's tool runner once it runs; ``generates``: the
    comfyui integration is configured, so ``/generate`` is offered."""

    bot: str
    schedules: ScheduleStore
    changed: Callable[[], None]
    config: Callable[[], BotConfig]
    secrets: Secrets
    platforms: Mapping[str, Platform]
    runner: Callable[[], ToolRunner | None]
    generates: bool

    def answers(self) -> Commands:
        """What the adapters are handed."""
        generate = self.generate if self.generates else None
        return Commands(schedules=self.schedules_of, generate=generate, activity=self.activity)

    async def schedules_of(
        self,
        channel: ChannelRef,
        words: str,
        *,
        requester: Participant | None = None,
        others: str = "",
    ) -> str:
        """``/schedules`` lists the channel's schedules; ``/schedules cancel N`` cancels one:
        with ``requester``, only one they set (``others``: who else may, for the refusal)."""
        parts = words.split()
        if len(parts) == 2 and parts[0] == "cancel" and parts[1].lstrip("#").isdigit():
            return await self._cancel(int(parts[1].lstrip("#")), requester, others)
        if parts:
            return "usage: /schedules, or /schedules cancel NUMBER"
        found = await self.schedules.find(self.bot, channel_key=channel.key)
        return "\n".join(s.describe() for s in found) or "no schedules here"

    async def _cancel(self, number: int, requester: Participant | None, others: str) -> str:
        if requester is not None:
            asked = {s.id: s for s in await self.schedules.find(self.bot)}.get(number)
            if asked is not None and asked.created_by.id != requester.id:
                who = f"they or {others}" if others else "they"
                by = asked.created_by.name
                return f"Schedule #{number} was set by {by}: only {who} can cancel it."
        if await self.schedules.cancel_schedule(self.bot, number):
            self.changed()
            return f"cancelled schedule #{number}"
        return f"no active schedule #{number}"

    async def generate(
        self, channel: ChannelRef, requester: Participant, arguments: dict[str, Any]
    ) -> str:
        """``/generate``: the image tool for ``requester`` in ``channel``, gated, shown
        and logged like the model's calls; returns one line on how it went."""
        platform = self.platforms.get(channel.platform)
        runner = self.runner()
        if platform is None or runner is None:
            return "Image generation is not available here."
        call = ToolCall(f"generate-{uuid.uuid4().hex[:12]}", GENERATE_TOOL, arguments)
        outcome = await runner.run(platform, channel, requester, [call], None)
        if outcome.cancelled is not None:
            return "Not generated: the approval was refused or timed out."
        (result,) = outcome.results
        if result.is_error:
            return f"Not generated: {result.content.splitlines()[0][:300]}"
        return "Done: the image is in the channel."

    def activity(self) -> str:
        """What ``/activity`` answers: a link to the web server's activity page that signs
        its holder in for ``web.link_minutes``, or what is missing for one."""
        web = self.config().web
        key = self.secrets.get(web.activity_key_env)
        if not web.public_url:
            return "The activity page has no public address: set web.public_url in the config."
        if not key:
            return f"The activity page is off: {web.activity_key_env} is not set for this bot."
        from salon.web.links import activity_link  # itsdangerous: off a bot's start

        link = activity_link(web.public_url, key, web.link_minutes)
        minutes = f"{web.link_minutes:g} minutes"
        return f"Activity page (the link works for {minutes}; keep it to yourself): {link}"
