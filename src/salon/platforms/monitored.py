"""The channels a bot answers without a mention, for the adapters with ``/monitor`` and
``/unmonitor`` (Discord, Slack): those the commands set, kept in the store
(``MonitorStore``), and those the bot's config lists."""

from __future__ import annotations

from collections.abc import Iterable

from salon.platforms.base import MonitorStore

__all__ = ["Monitored"]


class Monitored:
    def __init__(self, store: MonitorStore, *, bot: str, bot_name: str) -> None:
        self._store = store
        self._bot = bot
        self._bot_name = bot_name
        self.keys: set[str] = set()  # channel keys; shared with who tags messages

    async def load(self, configured: Iterable[str]) -> None:
        """At a start: the store's channels, and the ``configured`` ones (channel keys)."""
        self.keys.clear()
        self.keys |= await self._store.monitored(self._bot)
        self.keys |= set(configured)

    async def change(self, key: str, *, on: bool, by: str) -> str:
        """``/monitor`` (``on``) or ``/unmonitor`` of the channel ``key`` by the person
        ``by`` (an id): the line that tells them what changed."""
        changed = await self._store.set_monitored(self._bot, key, on, by)
        if on:
            self.keys.add(key)
        else:
            self.keys.discard(key)
        state = "now reads every message here" if on else "now answers only when addressed here"
        return f"{self._bot_name} {state}{'' if changed else ' (no change)'}."
