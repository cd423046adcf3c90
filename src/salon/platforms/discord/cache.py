"""Per-channel history kept exact by gateway events, so activations need no fetch.

A channel's entry is trusted only after a fetch filled it and while the gateway connection
it was kept by has not dropped: any disconnect may hide events, so every entry is then
dropped and fetched afresh on its next use. Channels and messages are both bounded.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from salon.model import Message

__all__ = ["HistoryCache"]


@dataclass
class _Channel:
    depth: int  # how many messages the filling fetch asked for
    messages: OrderedDict[str, Message] = field(default_factory=OrderedDict)


class HistoryCache:
    def __init__(self, *, max_channels: int) -> None:
        self._channels: OrderedDict[str, _Channel] = OrderedDict()
        self._max_channels = max_channels

    def get(self, channel_id: str, limit: int, *, everything: bool = False) -> list[Message] | None:
        """The newest ``limit`` messages (``everything``: all cached), or None when the
        cache cannot vouch for them."""
        entry = self._channels.get(channel_id)
        if entry is None or (entry.depth < limit and not everything):
            return None
        self._channels.move_to_end(channel_id)
        messages = list(entry.messages.values())
        return messages if everything else messages[-limit:]

    def fill(self, channel_id: str, messages: Sequence[Message], depth: int) -> None:
        entry = _Channel(depth, OrderedDict((m.id, m) for m in messages))
        self._channels[channel_id] = entry
        self._channels.move_to_end(channel_id)
        while len(self._channels) > self._max_channels:
            self._channels.popitem(last=False)

    def short(self, channel_id: str) -> tuple[str, int] | None:
        """For a tracked channel, (oldest cached id, messages known) so it can be topped
        up from below instead of fetched whole; None when the channel is not tracked."""
        entry = self._channels.get(channel_id)
        if entry is None or not entry.messages:
            return None
        return next(iter(entry.messages)), entry.depth

    def extend_older(self, channel_id: str, older: Sequence[Message], depth: int) -> None:
        """Put ``older`` (oldest first) below what is cached; the entry now vouches ``depth``."""
        entry = self._channels.get(channel_id)
        if entry is None:
            return
        merged = OrderedDict((m.id, m) for m in older if m.id not in entry.messages)
        merged.update(entry.messages)
        entry.messages = merged
        entry.depth = depth

    def added(self, message: Message) -> None:
        entry = self._channels.get(message.channel.id)
        if entry is None:
            return
        entry.messages[message.id] = message
        while len(entry.messages) > entry.depth:
            entry.messages.popitem(last=False)

    def edited(self, message: Message) -> None:
        entry = self._channels.get(message.channel.id)
        if entry is not None and message.id in entry.messages:
            old = entry.messages[message.id]
            # An edit event carries no reactions, and attachments' loaded bytes stay ours.
            files = (
                message.attachments if any(a.data for a in message.attachments) else old.attachments
            )
            entry.messages[message.id] = replace(
                message, reactions=old.reactions, attachments=files
            )

    def deleted(self, channel_id: str, message_ids: Iterable[str]) -> None:
        entry = self._channels.get(channel_id)
        if entry is None:
            return
        for message_id in message_ids:
            if entry.messages.pop(message_id, None) is not None:
                # One fewer message is known below the window; the fetch's margin covers
                # deletions until it runs out, then the channel is fetched afresh.
                entry.depth = max(entry.depth - 1, 0)

    def reacted(self, channel_id: str, message_id: str, emoji: str, *, added: bool) -> None:
        entry = self._channels.get(channel_id)
        if entry is None or message_id not in entry.messages:
            return
        message = entry.messages[message_id]
        reactions = list(message.reactions)
        if added:
            reactions.append(emoji)
        elif emoji in reactions:
            reactions.remove(emoji)
        entry.messages[message_id] = replace(message, reactions=tuple(reactions))

    def forget(self, channel_id: str | None = None) -> None:
        """Drop one channel, or (``None``) everything: the next read fetches afresh."""
        if channel_id is None:
            self._channels.clear()
        else:
            self._channels.pop(channel_id, None)
