"""Finding the discord.py channel behind a ``ChannelRef``, and whether this process hears it.

discord.py's cache comes first, then the DM channels seen (not always in its cache), then
a fetch. Channels belong to one client: ``clear`` when a new one connects.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import discord

from salon.config import DiscordConfig
from salon.errors import PlatformError
from salon.model import ChannelRef
from salon.platforms.discord.refusals import translated

__all__ = ["Channels"]

_SERVED_CHANNELS = 1024  # channels whose shard is remembered


class Channels:
    def __init__(self, config: DiscordConfig, client: Callable[[], discord.Client | None]) -> None:
        """``client``: the current client, None before the first connects."""
        self._config = config
        self._client = client
        self._seen: OrderedDict[int, Any] = OrderedDict()
        self._served: OrderedDict[str, bool] = OrderedDict()  # channel id -> this shard's

    @property
    def client(self) -> discord.Client:
        client = self._client()
        if client is None:
            raise PlatformError("Discord is not started")
        return client

    def clear(self) -> None:
        self._seen.clear()

    def remember(self, channel: object) -> None:
        """DM channels are not always in discord.py's cache: keep the ones we saw."""
        if isinstance(channel, discord.abc.Messageable) and hasattr(channel, "id"):
            self._seen[int(channel.id)] = channel
            self._seen.move_to_end(int(channel.id))
            while len(self._seen) > self._config.history_cache_channels:
                self._seen.popitem(last=False)

    async def get(self, channel: ChannelRef) -> discord.abc.Messageable:
        client = self.client
        found = client.get_channel(int(channel.id)) or self._seen.get(int(channel.id))
        if found is None:
            with translated(f"reach channel {channel.name or channel.id}", needs="View Channel"):
                found = await client.fetch_channel(int(channel.id))
        if not isinstance(found, discord.abc.Messageable):
            raise PlatformError(f"Discord channel {channel.id} takes no messages")
        return found

    async def serves(self, channel: ChannelRef) -> bool:
        """Whether this process acts in ``channel`` on its own (fires a schedule there):
        always without shards; with shards, when the channel's events come to this
        process, so that approvals and caches work there. A channel Discord no longer
        shows goes to shard 0's process, which tells why it failed."""
        if self._config.shard_count is None:
            return True
        client = self._client()
        if client is None or not client.is_ready():
            return False
        known = self._served.get(channel.id)
        if known is None:
            try:
                known = self.hears(await self.get(channel))
            except PlatformError:
                return 0 in self._config.local_shards()
            self._served[channel.id] = known
            while len(self._served) > _SERVED_CHANNELS:
                self._served.popitem(last=False)
        return known

    def hears(self, target: discord.abc.Messageable) -> bool:
        """Whether this client receives the channel's events, which keep the caches exact:
        with shards, only a guild on one of ours (a schedule may fire here for a channel of
        another shard's guild) and DMs on shard 0."""
        client = self.client
        if not isinstance(client, discord.AutoShardedClient):
            return True
        guild = getattr(target, "guild", None)
        if guild is not None:
            return client.get_guild(guild.id) is not None
        return 0 in (client.shard_ids or [])
