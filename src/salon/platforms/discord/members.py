"""Who wrote a message, as its guild shows them: display name and roles.

Discord's REST messages (history, pins, one message) carry the author's user object only;
the guild nickname and the roles come with gateway events alone, and discord.py caches no
members without the privileged intents. So names and roles are kept here per guild and
user: every member the gateway brings (messages, interactions, reactions) refreshes its
entry, discord.py's own cache is asked next, and on a miss the member is fetched once
(``GET /guilds/{guild}/members/{user}``). Someone no longer in the guild is remembered as
such. The cache is bounded: the least recently used entries go first.

The application's owner and members seen holding one of ``held_by`` (the authorized
roles) are also indexed by the name they go by, so that name stays theirs (``holders``)
after their entry has gone.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import aiohttp
import discord

from salon.model import name_key
from salon.platforms.discord.convert import role_names_and_ids

__all__ = ["Face", "MemberCache"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Face:
    """How a member appears in a guild."""

    name: str
    roles: tuple[str, ...]


_Key = tuple[int, int]  # (guild id, user id)


class MemberCache:
    def __init__(
        self,
        *,
        max_entries: int,
        held_by: Iterable[str] = (),
        owner: Callable[[], int | None] = lambda: None,
    ) -> None:
        """``owner``: the application owner's user id, once known."""
        self._entries: OrderedDict[_Key, Face | None] = OrderedDict()
        self._max_entries = max_entries
        self._held_by = frozenset(held_by)
        self._owner = owner
        self._held: OrderedDict[_Key, str] = OrderedDict()  # holder -> key of their name
        self._holders: dict[tuple[int, str], set[int]] = {}  # (guild, name key) -> holders
        self._failed: set[int] = set()  # guilds whose member lookups failed (logged once)

    def remember(self, member: discord.Member) -> None:
        """A member payload from the gateway or discord.py's cache: the freshest word."""
        self._put(
            (member.guild.id, member.id), Face(member.display_name, role_names_and_ids(member))
        )

    def face(self, guild_id: int, user_id: int) -> Face | None:
        """The member's face, or None when unknown or not (any more) in the guild."""
        key = (guild_id, user_id)
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
        return found

    def holders(self, guild_id: int, name: str) -> set[int]:
        """The owner and users seen holding one of ``held_by`` in the guild who go by
        ``name`` there (compared as the context compares names)."""
        return self._holders.get((guild_id, name_key(name)), set())

    def names(self, guild_id: int) -> dict[str, int]:
        """Display names (as written) to user ids of the guild's known members."""
        return {f.name: user for (g, user), f in self._entries.items() if g == guild_id and f}

    async def resolve(self, guild: discord.Guild, user_ids: Iterable[int]) -> None:
        """Make sure each of ``user_ids`` is known in ``guild`` (asking Discord on a miss)."""
        for user_id in dict.fromkeys(user_ids):
            if (guild.id, user_id) in self._entries:
                continue
            cached = guild.get_member(user_id)
            if cached is not None:
                self.remember(cached)
            else:
                await self._fetch(guild, user_id)

    async def _fetch(self, guild: discord.Guild, user_id: int) -> None:
        try:
            member = await guild.fetch_member(user_id)
        except discord.NotFound:  # left the guild, or never in it (a webhook, a system)
            self._put((guild.id, user_id), None)
        except (discord.HTTPException, aiohttp.ClientError, OSError, TimeoutError) as exc:
            # Not cached: the next read asks again. Meanwhile the global name stands in.
            if guild.id not in self._failed:
                self._failed.add(guild.id)
                logger.warning("Discord: cannot look up members of %s: %s", guild.name, exc)
        else:
            self.remember(member)

    def _put(self, key: _Key, face: Face | None) -> None:
        self._entries[key] = face
        self._entries.move_to_end(key)
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)
        self._hold(key, face)

    def _hold(self, key: _Key, face: Face | None) -> None:
        """Index ``key``'s name when they are the owner or hold one of ``held_by``; else
        forget it."""
        self._unhold(key)
        if face is None or (self._held_by.isdisjoint(face.roles) and key[1] != self._owner()):
            return
        self._held[key] = name = name_key(face.name)
        self._holders.setdefault((key[0], name), set()).add(key[1])
        while len(self._held) > self._max_entries:
            self._unhold(next(iter(self._held)))

    def _unhold(self, key: _Key) -> None:
        name = self._held.pop(key, None)
        if name is None:
            return
        holders = self._holders[key[0], name]
        holders.discard(key[1])
        if not holders:
            del self._holders[key[0], name]
