"""Several bots in one room: who answers a message that addressed none of them.

A message that mentions, replies to or names a bot is that bot's to answer, whatever the
others do. One that addressed none of them (a monitored channel, ``reply_on_random``, the
speak gate's yes) is answered by at most ``room.max_answers`` of the bots that share the
channel (the bots whose delivery marks show they read it within ``room.present_within``,
from the one store they share). Each bot that would answer it takes its place in the
room's order (``room.policy``: the bot whose last turn is oldest first, or the one with
the fewest turns today, or none), waits ``room.stagger`` seconds per place ahead of it,
then takes a slot of the message's turn in the store (``salon.store._rooms``): atomic, so
two processes never both get one. A bot that finds every slot taken yields, and its trace
says who answered. A message that mentions another bot is that bot's: the others pass.

A turn is done when its answer ends. One a crash left claimed expires after
``room.claim_ttl``; a bot that yielded looks again then and takes it over.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from salon.agent.activation import Activation
from salon.config import BotConfig
from salon.config.pipeline import RoomConfig
from salon.context import m_command
from salon.model import Event, Message, MessageEvent, Participant, Tag

__all__ = ["Taken", "TurnBook", "Turns", "unaddressed"]

logger = logging.getLogger(__name__)

_WATCHING = 256  # yielded turns watched for a crashed holder, at most
_DECISION_POLL = 0.05  # seconds between looks for the room's decision made elsewhere


class Standing(Protocol):
    @property
    def bot(self) -> str: ...
    @property
    def turns(self) -> int: ...
    @property
    def last(self) -> float: ...


class Holder(Protocol):
    @property
    def bot(self) -> str: ...
    @property
    def expired(self) -> bool: ...


class TurnBook(Protocol):
    """What the store keeps of rooms (``SQLStore.rooms``)."""

    async def present(self, channel: str, *, since: float) -> Mapping[str, float]: ...

    async def standings(self, channel: str) -> Sequence[Standing]: ...

    async def claim(
        self, channel: str, message_id: str, bot: str, *, slots: int, ttl: float
    ) -> int | None: ...

    async def finish(self, channel: str, message_id: str, slot: int) -> None: ...

    async def holders(self, channel: str, message_id: str) -> Sequence[Holder]: ...

    async def decide(self, channel: str, message_id: str, bot: str, *, ttl: float) -> bool: ...

    async def set_decision(self, channel: str, message_id: str, chosen: str) -> None: ...

    async def decision(self, channel: str, message_id: str) -> tuple[str, str] | None: ...

    async def save_profile(self, bot: str, name: str, description: str) -> None: ...

    async def profiles(self, bots: Sequence[str]) -> Mapping[str, tuple[str, str]]: ...


Ask = Callable[[Mapping[str, tuple[str, str]]], Awaitable[str | None]]
"""The room's one decision: given the bots present (key -> name, description), the key of
the bot that speaks next, or None for nobody."""


@dataclass(frozen=True, slots=True)
class Taken:
    """This bot's turn at ``message``: finish it when the answer ends."""

    channel: str
    message_id: str
    slot: int


def _names(text: str, name: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text, re.IGNORECASE) is not None


def unaddressed(activation: Activation, me: Participant, config: BotConfig) -> Message | None:
    """The newest trigger, when no trigger of the activation addressed the bot itself (a
    mention, a reply, its name, a DM, an /ask question, a schedule); else None."""
    if activation.channel.is_direct:
        return None
    messages = []
    for event in activation.triggers:
        if not isinstance(event, MessageEvent):
            return None  # a schedule is the bot's own
        message = event.message
        if Tag.ASKED in message.tags or message.mentions_id(me.id):
            return None
        if message.reply_to_author_id == me.id:
            return None
        if config.reply_on_name and any(_names(message.text, n) for n in (config.name, me.name)):
            return None
        messages.append(message)
    return messages[-1] if messages else None


def _order(answered: Mapping[str, float], standings: Sequence[Standing], policy: str) -> list[str]:
    """The room's order for the next turn, the same for every bot that computes it:
    ``least_recent`` by when each last answered in the channel, oldest first;
    ``most_recent`` (``m continue``) newest first; ``round_robin`` by turns taken."""
    if policy == "round_robin":
        turns = {s.bot: s.turns for s in standings}
        return sorted(answered, key=lambda b: (turns.get(b, 0), b))
    if policy == "most_recent":
        return sorted(answered, key=lambda b: (-answered[b], b))
    return sorted(answered, key=lambda b: (answered[b], b))


class Turns:
    def __init__(
        self, *, bot: str, book: TurnBook, resubmit: Callable[[Event], Awaitable[None]]
    ) -> None:
        """``resubmit``: how a yielded message comes back when its holder's claim expired."""
        self.bot = bot
        self.book = book
        self._resubmit = resubmit
        self._watching: set[asyncio.Task[None]] = set()
        self.decided = ""  # who made the last room decision this bot read (for its trace)
        self._profiled: set[str] = set()  # its name and description are in the store

    async def take(
        self,
        activation: Activation,
        message: Message,
        config: RoomConfig,
        me: Participant,
        ask: Ask | None = None,
    ) -> Taken | list[str]:
        """This bot's turn at ``message``, or the bots that took it instead (it yields).
        The turn is taken even by a bot that sees no other in the channel: another may be
        starting now, and the claim is what keeps two from answering."""
        named = [p.name for p in message.mentions if p.is_bot and p.id != me.id]
        if named:
            return named  # it asked another bot: that one answers
        channel = activation.channel.key
        answered = dict(await self.book.present(channel, since=time.time() - config.present_within))
        answered.setdefault(self.bot, 0.0)
        if config.shared_decision and ask is not None:
            if self.bot not in self._profiled:
                await self.book.save_profile(self.bot, me.name, config.description)
                self._profiled.add(self.bot)
            chosen = await self._decided(channel, message, config, answered, ask)
            if chosen is not None and chosen != self.bot:
                return [chosen or "nobody (the room's decision)"]
            if chosen == self.bot:
                answered = {self.bot: 0.0}  # chosen: first in the order, alone
        policy = "most_recent" if m_command(message.text) == "continue" else config.policy
        place = 0
        if policy != "first" and len(answered) > 1:
            standings = await self.book.standings(channel) if policy == "round_robin" else ()
            place = _order(answered, standings, policy).index(self.bot)
        if place and config.stagger:
            await asyncio.sleep(place * config.stagger)  # those ahead take it first
        slot = await self.book.claim(
            channel, message.id, self.bot, slots=config.max_answers, ttl=config.claim_ttl
        )
        if slot is not None:
            return Taken(channel, message.id, slot)
        holders = await self.book.holders(channel, message.id)
        self._watch(activation, message, config)
        return [h.bot for h in holders] or ["another bot"]

    async def _decided(
        self,
        channel: str,
        message: Message,
        config: RoomConfig,
        present: Mapping[str, float],
        ask: Ask,
    ) -> str | None:
        """The room's decision about ``message``: made here by the first bot to get there
        (one call), read from the store by the others. None: no decision in time (the
        turn then goes by the room's order)."""
        if await self.book.decide(channel, message.id, self.bot, ttl=config.claim_ttl):
            chosen = await ask(await self.book.profiles(sorted(present)))
            await self.book.set_decision(channel, message.id, chosen or "")
            self.decided = self.bot
            return chosen or ""
        deadline = time.monotonic() + config.decision_wait
        while time.monotonic() < deadline:  # another process decides: its row tells
            found = await self.book.decision(channel, message.id)
            if found is not None:
                self.decided = found[0]
                return found[1]
            await asyncio.sleep(_DECISION_POLL)
        logger.warning("no room decision about %s in time; the room's order decides", message.id)
        return None

    async def finish(self, taken: Taken) -> None:
        try:
            await self.book.finish(taken.channel, taken.message_id, taken.slot)
        except Exception:  # the claim expires instead: another bot may answer again
            logger.exception("could not mark the turn at %s done", taken.message_id)

    def _watch(self, activation: Activation, message: Message, config: RoomConfig) -> None:
        """When the claim expires undone (its holder crashed), the message comes back."""
        if len(self._watching) >= _WATCHING:
            return
        task = asyncio.create_task(self._look_again(activation, message, config))
        self._watching.add(task)
        task.add_done_callback(self._watching.discard)

    async def _look_again(
        self, activation: Activation, message: Message, config: RoomConfig
    ) -> None:
        await asyncio.sleep(config.claim_ttl + config.stagger)
        try:
            holders = await self.book.holders(activation.channel.key, message.id)
            if any(h.expired for h in holders):
                logger.info("the turn at %s was left unfinished; trying it again", message.id)
                await self._resubmit(MessageEvent(message, owed=True))
        except Exception:
            logger.exception("could not look again at the turn at %s", message.id)

    async def close(self) -> None:
        for task in list(self._watching):
            task.cancel()
        await asyncio.gather(*self._watching, return_exceptions=True)
