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
IRC marks no bot and gives a line no id the bots share: there each bot says in the store
who it is (``Turns.arrive``), so a line one of them wrote is none of the others' turn and a
line that names one of them is that bot's; a line's turn is known by its author and text.

A turn is done when its answer ends. One a crash left claimed expires after
``room.claim_ttl``; a bot that yielded looks again then and takes it over.
"""

from __future__ import annotations

import asyncio
import hashlib
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
_UNMARKED = frozenset({"irc"})  # platforms that neither mark bots nor share message ids
_LAG = 5.0  # seconds one bot may see a line after another took its turn (IRC)


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

    async def save_self(self, bot: str, platform: str, participant_id: str, name: str) -> None: ...

    async def selves(self, platform: str) -> Mapping[str, str]: ...

    async def line_key(self, channel: str, digest: str, *, since: float) -> str: ...


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


def _nick_in(text: str, nick: str) -> bool:
    """IRC's addressing: the nick as a word of its own (nicks may hold []\\`^{}|-)."""
    edge = r"[\w\[\]\\`^{}|-]"
    return re.search(rf"(?<!{edge}){re.escape(nick)}(?!{edge})", text, re.IGNORECASE) is not None


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
        self._selves: dict[str, str] = {}  # platform -> who it said it is there

    async def arrive(self, platform: str, me: Participant) -> None:
        """Say in the store who this bot is on ``platform`` (again after a nick change),
        before it answers anything: where the platform does not mark bots (IRC), the
        others know its lines by it."""
        if platform in _UNMARKED and self._selves.get(platform) != me.id:
            await self.book.save_self(self.bot, platform, me.id, me.name)
            self._selves[platform] = me.id

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
        others = await self._others(activation.channel.platform, message, me)
        if others:
            return others
        channel = activation.channel.key
        key = await self._key(channel, message)
        answered = dict(await self.book.present(channel, since=time.time() - config.present_within))
        answered.setdefault(self.bot, 0.0)
        if config.shared_decision and ask is not None:
            if self.bot not in self._profiled:
                await self.book.save_profile(self.bot, me.name, config.description)
                self._profiled.add(self.bot)
            chosen = await self._decided(channel, key, config, answered, ask)
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
            channel, key, self.bot, slots=config.max_answers, ttl=config.claim_ttl
        )
        if slot is not None:
            return Taken(channel, key, slot)
        holders = await self.book.holders(channel, key)
        self._watch(activation, message, key, config)
        return [h.bot for h in holders] or ["another bot"]

    async def _others(self, platform: str, message: Message, me: Participant) -> list[str]:
        """The bots ``message`` asked instead (they answer it), or why it is no person's
        (a bot of the room wrote it, where the platform does not mark bots); [] if neither."""
        named = [p.name for p in message.mentions if p.is_bot and p.id != me.id]
        if named or platform not in _UNMARKED:
            return named
        selves = await self.book.selves(platform)
        if message.author.id in selves:
            return [f"nobody ({message.author.name}, a bot of this room, wrote it)"]
        return [n for i, n in selves.items() if i != me.id and _nick_in(message.text, n)]

    async def _key(self, channel: str, message: Message) -> str:
        """What the bots of the room call ``message`` in the store: its id, where the
        platform's ids are everyone's; on IRC, where each bot makes up its own, its author
        and text, numbered apart from a line alike said earlier."""
        if message.channel.platform not in _UNMARKED:
            return message.id
        said = f"{message.author.id}\n{message.text}".encode()
        digest = hashlib.sha256(said).hexdigest()[:32]
        since = message.created_at.timestamp() - _LAG
        return await self.book.line_key(channel, digest, since=since)

    async def _decided(
        self,
        channel: str,
        key: str,
        config: RoomConfig,
        present: Mapping[str, float],
        ask: Ask,
    ) -> str | None:
        """The room's decision about the message ``key``: made here by the first bot to
        get there (one call), read from the store by the others. None: no decision in time
        (the turn then goes by the room's order)."""
        if await self.book.decide(channel, key, self.bot, ttl=config.claim_ttl):
            # Every bot present is a candidate: one that has not said what it is for yet is
            # listed by its key (else a model naming it would leave the line unanswered).
            bots = dict(await self.book.profiles(sorted(present)))
            for bot in present:
                bots.setdefault(bot, (bot, ""))
            chosen = await ask(bots)
            await self.book.set_decision(channel, key, chosen or "")
            self.decided = self.bot
            return chosen or ""
        deadline = time.monotonic() + config.decision_wait
        while time.monotonic() < deadline:  # another process decides: its row tells
            found = await self.book.decision(channel, key)
            if found is not None:
                self.decided = found[0]
                return found[1]
            await asyncio.sleep(_DECISION_POLL)
        logger.warning("no room decision about %s in time; the room's order decides", key)
        return None

    async def finish(self, taken: Taken) -> None:
        try:
            await self.book.finish(taken.channel, taken.message_id, taken.slot)
        except Exception:  # the claim expires instead: another bot may answer again
            logger.exception("could not mark the turn at %s done", taken.message_id)

    def _watch(
        self, activation: Activation, message: Message, key: str, config: RoomConfig
    ) -> None:
        """When the claim expires undone (its holder crashed), the message comes back."""
        if len(self._watching) >= _WATCHING:
            return
        task = asyncio.create_task(self._look_again(activation, message, key, config))
        self._watching.add(task)
        task.add_done_callback(self._watching.discard)

    async def _look_again(
        self, activation: Activation, message: Message, key: str, config: RoomConfig
    ) -> None:
        await asyncio.sleep(config.claim_ttl + config.stagger)
        try:
            holders = await self.book.holders(activation.channel.key, key)
            if any(h.expired for h in holders):
                logger.info("the turn at %s was left unfinished; trying it again", message.id)
                await self._resubmit(MessageEvent(message, owed=True))
        except Exception:
            logger.exception("could not look again at the turn at %s", message.id)

    async def close(self) -> None:
        for task in list(self._watching):
            task.cancel()
        await asyncio.gather(*self._watching, return_exceptions=True)
