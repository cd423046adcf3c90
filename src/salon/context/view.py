"""A channel's history as the last activations saw it, kept up to date step by step.

Between two activations a channel's recent history mostly slides: a few messages arrive
at its end and as many leave its start. ``ChannelView`` keeps what every activation
needs from that history (which messages are visible, where each one is, their running
text size, whether a ``.history`` link is among them) and updates it for what changed,
so reading the room costs what arrived, not the window's size. Anything it cannot read
as a slide (an edit, a deletion, another depth, a config change) is built again whole.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Generic, Protocol, TypeVar

from salon.config.views import Visibility, WindowSettings
from salon.context.builder import HELD_MESSAGE_BYTES
from salon.context.selection import is_visible, select_context, truncated
from salon.model import Message

__all__ = [
    "CACHE_BYTES",
    "ByChannel",
    "ChannelView",
    "PlainIndex",
    "VisibleIndex",
    "channel_views",
]

_VIEWS_HOLD = 200_000  # messages all channels' views may hold on to between them
# The estimated memory all channels' views (or render memos) may hold on to between them:
# sized for a small VPS (a few such caches, at most 64 MiB each); 1 000 channels of 100
# short messages weigh about 15 MiB in views and 30 MiB in chat memos.
CACHE_BYTES = 64 * 1024 * 1024
_LOOK_BACK = 256  # new messages looked through for the previous newest one
# Dropped entries kept before the lists are copied down: more than this and an eighth of
# them. A view holds little more than its window (what slid out is no longer the platform's
# to keep), at the cost of copying each entry about eight times per message slid.
_COMPACT = 64


class VisibleIndex(Protocol):
    """Positions and text sizes in a list of visible messages (what ``roll`` asks)."""

    def position(self, message_id: str) -> int | None: ...

    def chars_from(self, start: int) -> int:
        """The text size of the visible messages from ``start`` to the newest."""
        ...


class PlainIndex:
    """The index of a plain list, built once."""

    def __init__(self, visible: Sequence[Message]) -> None:
        self._visible = visible
        self._at = {m.id: i for i, m in enumerate(visible)}

    def position(self, message_id: str) -> int | None:
        return self._at.get(message_id)

    def chars_from(self, start: int) -> int:
        return sum(len(m.text) for m in self._visible[start:])


class ChannelView:
    def __init__(self) -> None:
        self._key: tuple[object, ...] | None = None
        self._history: tuple[Message, ...] = ()
        self._shown: list[bool] = []  # per message of _history: visible
        self._links = 0  # .history messages in _history
        self._all: list[Message] = []  # visible messages, the first `_first` dropped
        self._first = 0
        self._sizes = [0]  # _sizes[i]: text size of _all[:i]
        self._at: dict[str, int] = {}  # message id -> index in _all

    @property
    def has_history_links(self) -> bool:
        return self._links > 0

    @property
    def visible(self) -> list[Message]:
        return self._all[self._first :]

    @property
    def count(self) -> int:
        """How many messages ``visible`` holds."""
        return len(self._all) - self._first

    @property
    def size(self) -> int:
        """How many messages the view holds on to (for the bound on all views): the history
        it was given, and those that slid out of it but are kept until the next compaction
        (the visible ones are in both lists, and count once)."""
        return len(self._history) + self._first

    @property
    def nbytes(self) -> int:
        """An estimate of the memory it holds on to: its messages and their texts (the
        visible ones' running size; hidden messages count without their text)."""
        return self.size * HELD_MESSAGE_BYTES + self._sizes[-1]

    def update(self, history: Sequence[Message], rules: Visibility) -> None:
        """Take the channel's history as it is now (oldest first)."""
        now = tuple(history)
        key = (rules.ignore_dot_messages, rules.hiding_reactions)
        slide = self._slide(now) if key == self._key else None
        if slide is None:
            self._rebuild(now, rules)
        else:
            self._advance(now, *slide, rules)
        self._key, self._history = key, now
        if self._first > _COMPACT and self._first * 8 > len(self._all):
            self._compact()

    def position(self, message_id: str) -> int | None:
        at = self._at.get(message_id)
        return None if at is None or at < self._first else at - self._first

    def chars_from(self, start: int) -> int:
        return self._sizes[-1] - self._sizes[self._first + start]

    def select(self, window: WindowSettings, monitored_at: datetime | None = None) -> list[Message]:
        """What ``select_context`` picks from the visible messages, from the running sizes."""
        if monitored_at is not None or window.recency_window_age is not None:
            return select_context(self.visible, window, monitored_at=monitored_at, visible=True)
        end = len(self._all)
        if end == self._first:
            return []
        least = self._sizes[end] - window.recency_window_characters
        by_size = bisect.bisect_left(self._sizes, least, self._first, end + 1)
        start = max(by_size, end - window.recency_window_messages, self._first)
        if start >= end:  # the newest alone is over the budget: it is cut, not dropped
            return [truncated(self._all[-1], window.recency_window_characters)]
        return self._all[start:end]

    def _slide(self, now: tuple[Message, ...]) -> tuple[int, int] | None:
        """(messages gone from the start, messages new at the end), when ``now`` is the
        last history slid along; None when it is anything else."""
        old = self._history
        if not old or not now:
            return None
        last = old[-1]
        for new in range(min(_LOOK_BACK, len(now))):
            if now[-1 - new] is last:
                kept = len(now) - new
                gone = len(old) - kept
                if gone >= 0 and now[:kept] == old[gone:]:  # compared by identity
                    return gone, new
                return None
        return None

    def _advance(self, now: tuple[Message, ...], gone: int, new: int, rules: Visibility) -> None:
        old = self._history
        self._first += sum(self._shown[:gone])
        self._links -= sum(1 for m in old[:gone] if m.text.startswith(".history"))
        added = now[len(now) - new :]
        shown = [is_visible(m, rules) for m in added]
        self._shown = self._shown[gone:] + shown
        self._links += sum(1 for m in added if m.text.startswith(".history"))
        for message, visible in zip(added, shown, strict=True):
            if visible:
                self._append(message)

    def _rebuild(self, now: tuple[Message, ...], rules: Visibility) -> None:
        self._shown = [is_visible(m, rules) for m in now]
        self._links = sum(1 for m in now if m.text.startswith(".history"))
        self._all, self._first, self._sizes, self._at = [], 0, [0], {}
        for message, visible in zip(now, self._shown, strict=True):
            if visible:
                self._append(message)

    def _append(self, message: Message) -> None:
        self._at[message.id] = len(self._all)
        self._all.append(message)
        self._sizes.append(self._sizes[-1] + len(message.text))

    def _compact(self) -> None:
        first, base = self._first, self._sizes[self._first]
        for message in self._all[:first]:
            if self._at.get(message.id, first) < first:
                del self._at[message.id]
        self._all = self._all[first:]
        self._sizes = [size - base for size in self._sizes[first:]]
        self._at = {key: at - first for key, at in self._at.items()}
        self._first = 0


class HasSize(Protocol):
    @property
    def size(self) -> int:
        """How many messages it holds on to."""
        ...

    @property
    def nbytes(self) -> int:
        """An estimate of the memory it holds on to."""
        ...


S = TypeVar("S", bound=HasSize)


class ByChannel(Generic[S]):
    """One ``S`` per channel (a view, a render memo); the least recently used go once they
    hold more than ``limit`` messages or an estimated ``max_bytes`` between them (one gone
    is made again when needed)."""

    def __init__(self, make: Callable[[], S], limit: int, max_bytes: int = CACHE_BYTES) -> None:
        self._make = make
        self._limit = limit
        self._max_bytes = max_bytes
        self._items: OrderedDict[str, S] = OrderedDict()
        self._held = 0  # sizes as of each one's last use
        self.nbytes = 0  # estimates as of each one's last use

    def get(self, channel: str) -> S:
        item = self._items.pop(channel, None)
        if item is None:
            item = self._make()
        else:
            self._held -= item.size
            self.nbytes -= item.nbytes
        self._items[channel] = item
        return item

    def settle(self, item: S) -> None:
        """Count an item's new size after its use; trim the least recently used."""
        self._held += item.size
        self.nbytes += item.nbytes
        while len(self._items) > 1 and (self._held > self._limit or self.nbytes > self._max_bytes):
            _, gone = self._items.popitem(last=False)
            self._held -= gone.size
            self.nbytes -= gone.nbytes

    def __len__(self) -> int:
        return len(self._items)


def channel_views(limit: int = _VIEWS_HOLD) -> ByChannel[ChannelView]:
    """Views by channel, bounded by the messages they hold."""
    return ByChannel(ChannelView, limit)
