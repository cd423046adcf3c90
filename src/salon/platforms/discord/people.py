"""Discord's messages as Salon's, every person named as their guild shows them.

Discord's REST messages name their authors by user only; guild names and roles come from
``MemberCache``, so a person has one name and the same roles whichever way their message
was read. Discord's own notices (pins, joins, boosts, thread starts) are never read.

Some names are kept for their holders: the application owner's (username and global name
everywhere, their name in a guild once read there: every history read looks them up) and
those of members seen holding an authorized role. Anyone else going by one (a nickname,
a webhook's name) is marked ``borrowed``, and the context tells them apart by account id
whether or not the holder wrote in the window.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

import discord

from salon.model import Message, Participant, Tag, name_key
from salon.platforms.discord.convert import is_conversation, participant, to_message
from salon.platforms.discord.members import MemberCache

__all__ = ["People"]

Me = Callable[[], discord.ClientUser | None]
"""The bot's own Discord user, once a client has logged in."""
Owner = Callable[[], discord.abc.User | None]
"""Who owns the bot's application (a team's owner), once a client has read it."""


class People:
    """Who is who: the bot by its inner name, others by their guild face; and messages
    converted with them, tagged with what only the adapter knows (monitored, a note)."""

    def __init__(
        self,
        *,
        me: Me,
        bot_name: str,
        members: MemberCache,
        monitored: set[str],
        owner: Owner = lambda: None,
    ) -> None:
        """``monitored``: keys of the channels read whole; the set is shared and kept
        up to date by its owner."""
        self._me = me
        self._owner = owner
        self._bot_name = bot_name
        self._members = members
        self._monitored = monitored

    def myself(self) -> Participant:
        user = self._me()
        if user is None:
            return Participant("discord:self", self._bot_name, is_bot=True)
        return participant(user)

    def person(self, user: discord.abc.User, guild: discord.Guild | None) -> Participant:
        """``user`` as ``guild`` shows them (nickname, roles); this bot by its inner name,
        the name the model knows it by; marked ``borrowed`` under someone else's name."""
        me = self._me()
        if me is not None and user.id == me.id:
            return Participant(str(user.id), self._bot_name, is_bot=True)
        found = self._face(user, guild)
        return replace(found, borrowed=True) if self._borrows(found.name, user, guild) else found

    def _face(self, user: discord.abc.User, guild: discord.Guild | None) -> Participant:
        if guild is None:
            return participant(user)
        if isinstance(user, discord.Member) and user.guild.id == guild.id:
            self._members.remember(user)  # the gateway's word is the freshest
        face = self._members.face(guild.id, user.id)
        if face is None:  # not in the guild (any more), a webhook, or a failed lookup
            return participant(user)
        return Participant(str(user.id), face.name, is_bot=user.bot, roles=face.roles)

    def _borrows(self, name: str, user: discord.abc.User, guild: discord.Guild | None) -> bool:
        """Whether ``name`` is kept for someone other than ``user``: the owner's (their
        account's names anywhere, their guild name there) or, in a guild, that of a
        member seen holding an authorized role."""
        owner = self._owner()
        if owner is not None and owner.id != user.id:
            names = {name_key(n) for n in (owner.name, owner.global_name) if n}
            if name_key(name) in names:
                return True
        return guild is not None and bool(self._members.holders(guild.id, name) - {user.id})

    def convert(self, message: discord.Message) -> Message:
        guild = message.guild
        converted = to_message(message, person=lambda user: self.person(user, guild))
        tags = set(converted.tags)
        if converted.channel.key in self._monitored:
            tags.add(Tag.MONITORED)
        if self._is_note(message):
            tags.add(Tag.NOTE)
        return replace(converted, tags=frozenset(tags))

    def _is_note(self, message: discord.Message) -> bool:
        """Salon's own words are sent silent (SUPPRESS_NOTIFICATIONS); nothing else of
        this bot is. Another bot's silent messages are taken as its notes too (another
        Salon bot's failures, or its reasoning in a spoiler): no bot reads them."""
        if not message.flags.silent:
            return False
        me = self._me()
        return message.author.bot or (me is not None and message.author.id == me.id)

    async def converted(self, messages: Iterable[discord.Message]) -> list[Message]:
        """Fetched messages as Salon's, every person named as their guild shows them;
        Discord's notices (pins, joins, thread starts…) are left out."""
        kept = [m for m in messages if is_conversation(m)]
        for guild, user_ids in self._people(kept).items():
            await self._members.resolve(guild, user_ids)
        return [self.convert(m) for m in kept]

    def _people(self, messages: Sequence[discord.Message]) -> dict[discord.Guild, list[int]]:
        """Who wrote or is mentioned in ``messages``, per guild (webhooks are nobody), and
        the owner, whose guild name is theirs alone."""
        me_user, owner = self._me(), self._owner()
        me = me_user.id if me_user else None
        found: dict[discord.Guild, list[int]] = {}
        for message in messages:
            if message.guild is None:
                continue
            users = [*message.mentions, *([] if message.webhook_id else [message.author])]
            ids = [u.id for u in [*users, *([owner] if owner else [])] if u.id != me]
            found.setdefault(message.guild, []).extend(ids)
        return found
