"""Vendor forms of chat messages (and request bodies), remembered by object.

A channel's render reuses the turns that did not change since its last activation (the
same ``ChatMessage`` objects), so each turn is converted to a vendor's JSON once, not once
per activation. What this returns is shared between requests: never change it in place.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = ["REQUESTS", "TURN_BYTES", "Converted"]

K = TypeVar("K")
T = TypeVar("T")
_REMEMBERED = 200_000  # turns whose vendor form is kept, over all channels (as many as the
# render memos hold: a smaller bound made every activation of 1 000 channels in turn miss)
TURN_BYTES = 128 * 1024 * 1024  # and their estimated memory (the weigh function's), per memo
REQUESTS = 64  # requests whose body is kept: those in flight, and their traces after


class Converted(Generic[K, T]):
    """``convert(key)`` remembered by key object, for the last ``limit`` keys: turns (their
    vendor form) or requests (the body a provider sent, which the trace stores). With
    ``weigh`` (an estimate of a key's and its form's memory), the least recently used also
    go once they weigh more than ``max_bytes`` together: a turn can be a long text or an
    image, and a count alone let the memo of a busy bot grow by hundreds of MiB.

    ``weak``: an entry goes as soon as its key is gone. A turn is reused only while a
    render memo holds it, so a turn no memo holds will never be asked for again; kept, such
    turns filled the memo up to its bound (200 000 turns, 200 MiB at 200 busy channels)."""

    def __init__(
        self,
        convert: Callable[[K], T],
        limit: int = _REMEMBERED,
        *,
        weigh: Callable[[K], int] | None = None,
        max_bytes: int = TURN_BYTES,
        weak: bool = False,
    ) -> None:
        self._convert = convert
        self._limit = limit
        self._weigh = weigh
        self._max_bytes = max_bytes
        self._weak = weak
        self.nbytes = 0  # the estimate of what is kept
        # id -> (the key, or a weak reference to it; its form; its weight). Holding the key
        # keeps its id from being reused; a weak reference is checked instead.
        self._done: OrderedDict[int, tuple[Any, T, int]] = OrderedDict()
        # Keys gone since the last call: taken out then, not from the collector's callback,
        # which may run in the middle of a change to ``_done``. One callback for all entries:
        # a closure per entry cost a turn more than its weak reference.
        self._gone: deque[weakref.KeyedRef[int, Any]] = deque()
        self._went = self._gone.append

    def __len__(self) -> int:
        return len(self._done)

    def __bool__(self) -> bool:  # a memo is a function: true even when empty
        return True

    def __call__(self, key: K) -> T:
        if self._gone:
            self._sweep()
        at = id(key)
        found = self._done.get(at)
        if found is not None and (found[0]() if self._weak else found[0]) is key:
            self._done.move_to_end(at)
            return found[1]
        form = self._convert(key)
        weight = self._weigh(key) if self._weigh is not None else 0
        if found is not None:  # an id reused by a new key: the old entry goes
            self.nbytes -= found[2]
        holder: Any = weakref.KeyedRef(key, self._went, at) if self._weak else key
        self._done[at] = (holder, form, weight)
        self.nbytes += weight
        while len(self._done) > 1 and (
            len(self._done) > self._limit or self.nbytes > self._max_bytes
        ):
            self.nbytes -= self._done.popitem(last=False)[1][2]
        return form

    def _sweep(self) -> None:
        while self._gone:
            ref = self._gone.popleft()
            found = self._done.get(ref.key)
            if found is not None and found[0] is ref:
                del self._done[ref.key]
                self.nbytes -= found[2]
