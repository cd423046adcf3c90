"""Nothing addressed to the bot is lost: catch-up after a gap, and answers owed across a stop.

Three records, kept in the store (``salon.store._delivery``):

- **Marks.** The newest message the bot was handed in each channel, and when it last
  answered there; kept in memory and written behind. After a gap (this process's start, a
  new gateway session after an invalidated one, a reconnect) the bot reads every channel
  where it could have been addressed (answered in within ``catch_up.recent_days``, direct,
  monitored) from its mark on (``Platform.messages_after``), bounded per channel and in
  all, and hands what it finds to the agent as if it had just arrived. The agent's own
  checks then answer what addresses it exactly once: a message handed over before is
  dropped, one an earlier process answered is dropped (its trace). Messages older than
  ``catch_up.max_age`` are left as context.
- **Owed answers.** When an activation is planned, the messages it answers are written
  (committed) with this process's name; when it ends they are deleted. A stop past
  ``shutdown_grace`` or a crash leaves them; the next start takes them over (once the
  process that owed them has no lease) and, for each: its answer's first message went out
  (``Platform.sent_before``, under the key ``salon.agent.answerkey`` gave it) → one line
  closes the cut answer; not shown and within the window → answered now; past the window
  → one line says it was not answered.
- **Cursors**: positions a platform keeps itself (Matrix's sync token).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC
from typing import Protocol

from salon.config import CatchUpConfig
from salon.model import ChannelMark, ChannelRef, Event, Message, MessageEvent, OwedAnswer, Tag
from salon.platforms.base import Platform

__all__ = ["Delivery", "DeliveryBook"]

logger = logging.getLogger(__name__)

_MARKS_KEPT = 10_000  # channels whose mark is held in memory
_FLUSH_EVERY = 2.0  # seconds between writes of the marks
_ALIVE_EVERY = 30.0  # seconds between "still here" records when nothing moves
_READ_TIMEOUT = 30.0  # one channel's read-back
_ALIVE = "alive"  # cursor: when this bot last wrote its marks (the start of a gap)
_RETRY_EVERY = 5.0  # seconds between looks at whether the store is back
_RETRIES_KEPT = 100  # questions kept to answer once the store is back


class DeliveryBook(Protocol):
    """What the store keeps for delivery (``SQLStore.delivery``)."""

    async def save_marks(self, bot: str, marks: Sequence[ChannelMark]) -> None: ...

    async def marks(
        self, bot: str, platform: str, *, answered_since: float, limit: int
    ) -> Sequence[ChannelMark]: ...

    async def owe(
        self, bot: str, messages: Sequence[Message], marks: Sequence[ChannelMark] = ()
    ) -> None: ...

    async def owe_key(self, bot: str, messages: Sequence[Message], key: str) -> None: ...

    async def settle(
        self, bot: str, messages: Sequence[Message], marks: Sequence[ChannelMark] = ()
    ) -> None: ...

    async def owed_ids(self, bot: str) -> set[str]: ...

    async def take_over(self, bot: str, platforms: Sequence[str]) -> Sequence[OwedAnswer]: ...

    async def cursor(self, bot: str, name: str) -> str | None: ...

    async def save_cursor(self, bot: str, name: str, value: str) -> None: ...


class Delivery:
    """One bot's marks, owed answers and catch-up. ``submit``: the agent's event sink."""

    def __init__(
        self,
        *,
        bot: str,
        bot_name: str,
        book: DeliveryBook,
        settings: CatchUpConfig,
        submit: Callable[[Event], Awaitable[None]],
        lease: float = 15.0,
    ) -> None:
        """``lease``: the processes' lease (``process_lease``): after a crash, what the
        dead process owed is taken over once it has run out."""
        self.bot = bot
        self.bot_name = bot_name
        self.book = book
        self.settings = settings
        self.lease = lease
        self._submit = submit
        # channel key -> (channel, last id, last time, answered time, monitored)
        self._marks: OrderedDict[str, tuple[ChannelRef, str, float, float, bool]] = OrderedDict()
        self._dirty: set[str] = set()
        self._written_at = 0.0
        self._since: float | None = None  # when the last process stopped (``begin``)
        self._catching: set[asyncio.Task[None]] = set()
        self.caught_up = 0  # messages handed to the agent by catch-up, since start
        self._counted = asyncio.Condition()
        self._resumed: set[str] = set()  # owed answers taken over: never read back again
        self._waiting: list[Message] = []  # asked while the store was away
        self._retrying: asyncio.Task[None] | None = None
        self.retry_every = _RETRY_EVERY

    # -- what the agent tells it ---------------------------------------------------------

    def seen(self, message: Message) -> None:
        """The agent took ``message`` (judged, and owed if it activates)."""
        key = message.channel.key
        known = self._marks.get(key)
        stamp = message.created_at.timestamp()
        if known is not None and known[2] > stamp:
            return  # an older message read back: the mark stays where it is
        answered = known[3] if known is not None else 0.0
        monitored = Tag.MONITORED in message.tags
        self._marks[key] = (message.channel, message.id, stamp, answered, monitored)
        self._marks.move_to_end(key)
        self._dirty.add(key)
        while len(self._marks) > _MARKS_KEPT:
            old, _ = self._marks.popitem(last=False)
            self._dirty.discard(old)

    def answering(self, channel: ChannelRef) -> None:
        """An activation answers in ``channel`` now: it is read back after a gap."""
        known = self._marks.get(channel.key)
        if known is None:
            return  # a schedule's channel with no message seen: nothing to read after
        self._marks[channel.key] = (*known[:3], time.time(), known[4])
        self._dirty.add(channel.key)

    async def owe(self, messages: Sequence[Message]) -> None:
        """These messages will be answered; until ``settle``, a crash leaves them owed.
        Their channels' marks are written with them: after a crash, what is said there
        next is read back from here (the marks of other channels are written behind).
        Nothing is written while catch-up is off (``catch_up.max_age: 0``)."""
        if not messages or self.settings.max_age <= 0:
            return
        now = time.time()
        keys = {m.channel.key for m in messages}
        for key in keys:
            if key in self._marks:
                self._marks[key] = (*self._marks[key][:3], now, self._marks[key][4])
        marks = [ChannelMark(*self._marks[k]) for k in keys if k in self._marks]
        try:
            await self.book.owe(self.bot, messages, marks)
        except Exception:  # answered all the same; a crash now would lose it
            logger.exception("could not record the answers owed in %s", messages[0].channel.key)

    async def owe_key(self, messages: Sequence[Message], key: str) -> None:
        if self.settings.max_age > 0:
            await self.book.owe_key(self.bot, messages, key)

    async def settle(self, messages: Sequence[Message]) -> None:
        """Their activation ended: no longer owed, and their channels' marks are written
        with that (a kill before the trace is stored must not read them back as new)."""
        if not messages or self.settings.max_age <= 0:
            return
        keys = {m.channel.key for m in messages}
        marks = [ChannelMark(*self._marks[k]) for k in keys if k in self._marks]
        try:
            await self.book.settle(self.bot, messages, marks)
        except Exception:  # answered again after a crash, never lost
            logger.exception("could not settle the answers owed in %s", messages[0].channel.key)

    def when_store_is_back(self, messages: Sequence[Message]) -> bool:
        """Questions that could not be answered because the store was away: answered once
        it is back, within ``catch_up.max_age``. False when none can be kept (catch-up off,
        or too many waiting): the caller says they will not be."""
        if self.settings.max_age <= 0 or len(self._waiting) + len(messages) > _RETRIES_KEPT:
            return False
        self._waiting += messages
        if self._retrying is None or self._retrying.done():
            self._retrying = asyncio.create_task(self._retry_when_back(), name="store-retry")
            self._catching.add(self._retrying)
            self._retrying.add_done_callback(self._catching.discard)
        return True

    async def _retry_when_back(self) -> None:
        while True:
            await asyncio.sleep(self.retry_every)
            try:
                await self.book.owed_ids(self.bot)
            except Exception as exc:
                logger.info(
                    "the store is still away (%s); %d questions wait", exc, len(self._waiting)
                )
                continue
            waiting, self._waiting = self._waiting, []
            oldest = time.time() - self.settings.max_age
            for message in waiting:
                if message.created_at.timestamp() < oldest:
                    logger.warning("%s waited past catch_up.max_age for the store", message.id)
                    continue
                logger.info("the store is back: answering %s", message.id)
                await self._submit(MessageEvent(message, gap=-1.0, owed=True))
            return

    # -- the marks, written behind -------------------------------------------------------

    async def run(self) -> None:
        """Write the marks every few seconds (supervised; cancelled at the stop)."""
        while True:
            await asyncio.sleep(_FLUSH_EVERY)
            await self.flush()

    async def flush(self) -> None:
        now = time.time()
        if not self._dirty and now - self._written_at < _ALIVE_EVERY:
            return
        dirty, self._dirty = self._dirty, set()
        marks = [ChannelMark(*self._marks[k]) for k in dirty if k in self._marks]
        try:
            await self.book.save_marks(self.bot, marks)
            await self.book.save_cursor(self.bot, _ALIVE, repr(now))
        except BaseException:
            self._dirty |= dirty  # written with the next ones
            raise
        self._written_at = now

    async def close(self) -> None:
        """The stop: catch-ups end, the marks are written."""
        for task in list(self._catching):
            task.cancel()
        await asyncio.gather(*self._catching, return_exceptions=True)
        try:
            await self.flush()
        except Exception:
            logger.exception("could not write where the bot stopped reading")

    # -- after a gap -----------------------------------------------------------------------

    async def begin(self) -> None:
        """Before this process writes a mark: when the last one stopped (the gap's start)."""
        self._since = await self._last_alive()

    async def at_start(self, platforms: Mapping[str, Platform]) -> None:
        """This process starts: take over what stopped processes owed, then read back
        every platform's channels from where the last process stopped. An owed answer
        goes in with its channel's read-back, so the two are one answer, not two."""
        if self.settings.max_age <= 0:
            return
        since = self._since
        try:  # owed answers are resumed, never read back as new
            self._resumed |= await self.book.owed_ids(self.bot)
        except Exception:
            logger.exception("could not read the answers owed from before the start")
        owed = await self._take_over(platforms, since)
        for platform in platforms.values():
            await self.catch_up(platform, since, owed=owed.get(platform.name, ()))
        # A process killed moments ago holds its lease a little longer: what it owed is
        # taken over once that has run out.
        await asyncio.sleep(self.lease)
        for platform_name, messages in (await self._take_over(platforms, since)).items():
            await self._hand_on(messages, 0.0, self._gap(since), set(), owed=True)
            logger.info("%s: %d owed answers taken over late", platform_name, len(messages))

    async def after_gap(self, platform: Platform, since: float | None) -> None:
        """A platform is back after a gap within this process (``Platform.on_gap``): read
        back in the background, so the platform's own event handling goes on."""
        if self.settings.max_age <= 0:
            return
        task = asyncio.create_task(self._catch_up_guarded(platform, since))
        self._catching.add(task)
        task.add_done_callback(self._catching.discard)

    async def _catch_up_guarded(self, platform: Platform, since: float | None) -> None:
        try:
            await self.flush()  # marks of this process first: the read starts from them
            await self.catch_up(platform, since)
        except Exception:
            logger.exception("%s: could not catch up after a gap", platform.name)

    async def catch_up(
        self, platform: Platform, since: float | None, owed: Sequence[Message] = ()
    ) -> None:
        """Read back ``platform``'s channels where the bot could have been addressed, from
        their marks; hand what is within the window to the agent, with ``owed`` (answers a
        stop cut off, taken over), oldest first and all at once: one batch, so a channel's
        owed question and what followed it are answered together."""
        now = time.time()
        gap = self._gap(since)
        recent = now - self.settings.recent_days * 86_400
        marks = await self.book.marks(
            self.bot, platform.name, answered_since=recent, limit=self.settings.max_channels
        )
        oldest = now - self.settings.max_age
        found: list[Message] = []
        read = 0
        for mark in marks:
            messages = await self._read(platform, mark)
            if messages is None:
                logger.info("%s cannot read back what it missed: no catch-up", platform.name)
                break
            read += 1
            found += messages
        if since is not None:  # mentions where the bot has no mark: the platform's search
            found += await self._search(platform, max(since, oldest))
        handed: set[str] = set()
        await self._hand_on(owed, 0.0, gap, handed, owed=True)
        await self._hand_on(sorted(found, key=lambda m: m.created_at), oldest, gap, handed)
        async with self._counted:
            self.caught_up += len(handed)
            self._counted.notify_all()
        gap_text = f"{gap:.0f} s" if gap >= 0 else "unknown length"
        logger.info(
            "%s: caught up after a gap of %s: %d channels read, %d messages handed on",
            platform.name,
            gap_text,
            read,
            len(handed),
        )

    @staticmethod
    def _gap(since: float | None) -> float:
        return max(0.0, time.time() - since) if since is not None else -1.0

    async def _hand_on(
        self,
        found: Sequence[Message],
        oldest: float,
        gap: float,
        handed: set[str],
        *,
        owed: bool = False,
    ) -> None:
        """To the agent's queue, with no wait between (one batch while the queue has room)."""
        for message in found:
            too_old = message.created_at.timestamp() < oldest
            if not owed and (too_old or message.id in self._resumed):
                continue  # too old to answer now, or owed: the history shows it
            if message.id not in handed:
                handed.add(message.id)
                await self._submit(MessageEvent(message, gap=gap, owed=owed))

    async def _search(self, platform: Platform, since: float) -> Sequence[Message]:
        try:
            async with asyncio.timeout(_READ_TIMEOUT):
                found = await platform.mentions_after(since, limit=self.settings.max_messages)
        except Exception as exc:
            logger.warning("%s: could not search for mentions after a gap: %s", platform.name, exc)
            return ()
        return found or ()

    async def wait_caught_up(self, count: int) -> None:
        """Until read-backs have handed ``count`` messages on (tests, benchmarks)."""
        async with self._counted:
            await self._counted.wait_for(lambda: self.caught_up >= count)

    async def _read(self, platform: Platform, mark: ChannelMark) -> Sequence[Message] | None:
        try:
            async with asyncio.timeout(_READ_TIMEOUT):
                return await platform.messages_after(
                    mark.channel, mark.last_id, limit=self.settings.max_messages
                )
        except Exception as exc:  # one channel's failure leaves the others
            logger.warning("could not read back %s after a gap: %s", mark.channel.key, exc)
            return ()

    async def _last_alive(self) -> float | None:
        try:
            value = await self.book.cursor(self.bot, _ALIVE)
        except Exception:
            logger.exception("could not read when the bot last ran")
            return None
        return float(value) if value else None

    # -- answers owed by stopped processes ---------------------------------------------------

    async def _take_over(
        self, platforms: Mapping[str, Platform], since: float | None
    ) -> dict[str, list[Message]]:
        """Owed answers of stopped processes, now this one's: those to answer again, per
        platform (the rest were closed or told here)."""
        again: dict[str, list[Message]] = {}
        try:
            owed = await self.book.take_over(self.bot, list(platforms))
        except Exception:
            logger.exception("could not read the answers owed from before the start")
            return again
        for item in owed:
            self._resumed.add(item.message.id)
            platform = platforms[item.message.channel.platform]
            try:
                if await self._resume(platform, item):
                    again.setdefault(platform.name, []).append(item.message)
            except Exception:
                logger.exception("could not resume the answer owed in %s", item.message.channel.key)
        return again

    async def _resume(self, platform: Platform, item: OwedAnswer) -> bool:
        """Whether ``item`` is to be answered again; a cut answer is closed, one past the
        window is said to be unanswered, here."""
        message = item.message
        who = message.author.name
        if item.answer_key is not None:
            note = f"({self.bot_name} restarted while answering {who}; answering now)"
            if await platform.sent_before(message.channel, item.answer_key, note=note):
                cut = f"({self.bot_name} restarted while writing this answer; it is cut off)"
                await platform.send(message.channel, cut, note=True)
                logger.info("the answer to %s was cut off by a stop; closed", message.id)
                await self.settle([message])
                return False
        age = time.time() - message.created_at.timestamp()
        if age <= self.settings.max_age:
            logger.info("answering %s, left unanswered by a stop", message.id)
            return True
        at = message.created_at.astimezone(UTC).strftime("%H:%M UTC")
        late = (
            f"({self.bot_name} was restarted and did not answer {who}'s message of {at}; "
            "ask again if it still matters)"
        )
        await platform.send(message.channel, late, note=True)
        logger.info("%s was left unanswered by a stop, past the window; said so", message.id)
        await self.settle([message])
        return False
