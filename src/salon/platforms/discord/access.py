"""Who may read a channel: a person's own rights there, as Discord computes them.

A linked channel (``salon.agent.links``) is shown to the person being answered only when
Discord would show it to them: in a guild, View Channel and Read Message History from
their roles and the channel's permission overwrites (discord.py's ``permissions_for``
follows Discord's documented order: @everyone, the member's roles, Administrator, the
@everyone overwrite, role overwrites, the member's overwrite, a timeout; a thread takes its
parent's); a private thread also takes Manage Threads, as thread membership is not
looked up; a direct message only its recipient. Anything that cannot be told (a channel
or member Discord does not show, a parent not cached) is unreadable.

The member (their roles) is fetched over REST and kept for ``_MEMBER_SECONDS``, as the bot
gets no member updates without the privileged members intent; the channel's overwrites
and the guild's roles are discord.py's, which the gateway keeps current.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict

import aiohttp
import discord

from salon.errors import PlatformError
from salon.model import ChannelRef, Participant
from salon.platforms.discord.channels import Channels
from salon.platforms.discord.convert import channel_ref

__all__ = ["Access"]

logger = logging.getLogger(__name__)

_MEMBER_SECONDS = 30.0  # a member's roles are asked again after this
_MEMBERS = 1024  # members kept


class Access:
    def __init__(self, channels: Channels) -> None:
        self._channels = channels
        self._members: OrderedDict[tuple[int, int], tuple[float, discord.Member | None]] = (
            OrderedDict()
        )

    async def find(self, channel_id: str) -> ChannelRef | None:
        if not channel_id.isdigit():
            return None
        try:
            target = await self._channels.get(ChannelRef("discord", channel_id))
        except PlatformError:
            return None
        return channel_ref(target)

    async def can_read(self, person: Participant, channel: ChannelRef) -> bool:
        if not person.id.isdigit():
            return False
        try:
            target = await self._channels.get(channel)
        except PlatformError:
            return False
        if isinstance(target, discord.DMChannel):
            return target.recipient is not None and target.recipient.id == int(person.id)
        guild = getattr(target, "guild", None)
        if guild is None or not isinstance(target, discord.abc.GuildChannel | discord.Thread):
            return False  # a group DM: no bot is in one
        member = await self._member(guild, int(person.id))
        if member is None:
            return False
        try:
            rights = target.permissions_for(member)
        except discord.ClientException:  # a thread whose parent is not cached
            return False
        if not (rights.view_channel and rights.read_message_history):
            return False
        if isinstance(target, discord.Thread) and target.is_private():
            return rights.manage_threads
        return True

    async def _member(self, guild: discord.Guild, user_id: int) -> discord.Member | None:
        key = (guild.id, user_id)
        kept = self._members.get(key)
        if kept is not None and time.monotonic() - kept[0] < _MEMBER_SECONDS:
            return kept[1]
        try:
            member: discord.Member | None = await guild.fetch_member(user_id)
        except discord.NotFound:  # not in the guild: reads none of it
            member = None
        except (discord.HTTPException, aiohttp.ClientError, OSError, TimeoutError) as exc:
            logger.warning("Discord: cannot look up member %s of %s: %s", user_id, guild.id, exc)
            return None  # not kept: asked again next time
        self._members[key] = (time.monotonic(), member)
        self._members.move_to_end(key)
        while len(self._members) > _MEMBERS:
            self._members.popitem(last=False)
        return member
