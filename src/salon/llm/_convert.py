"""Vendor forms of chat messages (and request bodies), remembered by object.

A channel's render reuses the turns that did not change since its last activation (the
same ``ChatMessage`` objects), so each turn is converted to a vendor's JSON once, not once
per activation. What this returns is shared between requests: never change it in place.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["REQUESTS", "Converted"]

K = TypeVar("K")
T = TypeVar("T")
_REMEMBERED = 200_000  # turns whose vendor form is kept, over all channels (as many as the
# render memos hold: a smaller bound made every activation of 1 000 channels in turn miss)
REQUESTS = 64  # requests whose body is kept: those in flight, and their traces after


class Converted(Generic[K, T]):
    """``convert(key)`` remembered by key object, for the last ``limit`` keys: turns (their
    vendor form) or requests (the body a provider sent, which the trace stores)."""

    def __init__(self, convert: Callable[[K], T], limit: int = _REMEMBERED) -> None:
        self._convert = convert
        self._limit = limit
        # id -> (the key, its form): holding the key keeps its id from being reused
        self._done: OrderedDict[int, tuple[K, T]] = OrderedDict()

    def __call__(self, key: K) -> T:
        at = id(key)
        found = self._done.get(at)
        if found is not None and found[0] is key:
            self._done.move_to_end(at)
            return found[1]
        form = self._convert(key)
        self._done[at] = (key, form)
        if len(self._done) > self._limit:
            self._done.popitem(last=False)
        return form
