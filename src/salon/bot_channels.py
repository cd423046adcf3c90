"""A bot's channels as its platforms reach them: for the built-in tools, who is in one,
its history, who may read it and where a schedule may post; for the scheduler, whether
this process serves one; at a start, the notice of approvals a stopped process left open."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from salon.config import BotConfig
from salon.errors import PlatformError, ToolError
from salon.model import Approval, ChannelRef, Message, Participant, Schedule
from salon.platforms import registry
from salon.platforms.base import Platform, readable_through
from salon.tools.builtin import OPERATOR
from salon.tools.chatlog import log_only

__all__ = ["BotChannels"]

logger = logging.getLogger(__name__)


class StaleApprovals(Protocol):
    """The store's approvals part (``SQLStore.approvals``) as a start uses it."""

    async def stale_approvals(self, bot: str) -> list[tuple[int, str, str]]: ...

    async def close_approval(self, approval_id: int, status: Approval) -> None: ...


@dataclass
class BotChannels:
    """``platforms``: those the bot runs on now (empty under ``salon tools call``);
    ``config`` gives the bot's config now (reloads apply)."""

    platforms: Mapping[str, Platform]
    config: Callable[[], BotConfig]

    async def users_of(self, channel_key: str) -> Sequence[str]:
        channel = ChannelRef.from_key(channel_key)
        platform = self.platforms.get(channel.platform)
        return [] if platform is None else await platform.current_users(channel)

    async def history_of(self, channel: ChannelRef, limit: int) -> Sequence[Message]:
        """A channel as its platform keeps it (Discord), for the chat-log tools (who may read
        which: ``readable_through``); a refusal (a missing permission) is the tool's error."""
        platform = self.platforms.get(channel.platform)
        if platform is None:  # salon tools call --channel on a platform not connected
            return await log_only(channel, limit)
        try:
            return await platform.history(channel, limit=limit)
        except PlatformError as exc:
            raise ToolError(str(exc)) from exc

    async def readable(self, person: Participant, channel: ChannelRef) -> bool:
        return await readable_through(self.platforms, person, channel)

    def schedule_target(self, source: str, target: str, requester: Participant) -> str | None:
        """Where a schedule may post: a channel of a platform this bot is on (as that
        platform's adapter allows); another channel than the one it is set in only for the
        operator (``salon chat``, ``salon tools call``) and people holding one of
        ``authorized_roles``."""
        config = self.config()
        on = {*registry.names_on(config), *self.platforms}
        if problem := registry.target_problem(config, on, target, source):
            return problem
        if target == source or requester.id == OPERATOR or registry.operated(source):
            return None
        roles = set(config.authorized_roles)
        if roles and not roles.isdisjoint(requester.roles):
            return None
        return (
            "a schedule can only post in the channel it is set in; posting elsewhere needs "
            "one of the authorized roles"
        )

    async def serves(self, schedule: Schedule) -> bool:
        """Whether this process fires ``schedule``: its platform's process for its channel
        (a sharded platform's process fires those of its own shards)."""
        platform = self.platforms.get(schedule.channel.platform)
        return platform is None or await platform.serves(schedule.channel)

    async def close_stale_approvals(self, approvals: StaleApprovals, bot: str) -> None:
        """Approvals left open by a process that crashed or stopped are closed, and the
        channel is told; those of living processes stay theirs to answer."""
        for approval_id, channel_key, tool in await approvals.stale_approvals(bot):
            await approvals.close_approval(approval_id, Approval.CLOSED)
            channel = ChannelRef.from_key(channel_key)
            platform = self.platforms.get(channel.platform)
            if platform is None:
                continue
            text = (
                f"(the approval asked for {tool} was still open when {self.config().name} "
                "restarted; it is closed and the tool was not run: ask again if needed)"
            )
            try:
                await platform.send(channel, text)
            except Exception:
                logger.exception("could not tell %s about the closed approval", channel_key)
