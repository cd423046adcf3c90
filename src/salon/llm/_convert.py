"""Vendor forms of chat messages, remembered by message object.

A channel's render reuses the turns that did not change since its last activation (the
same ``ChatMessage`` objects), so each turn is converted to a vendor's JSON once, not once
per activation. What this returns is shared between requests: never change it in place.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:  # salon.llm.base uses this module too
    from salon.llm.base import ChatMessage, LLMRequest

__all__ = ["ByRequest", "Converted"]

T = TypeVar("T")
_REMEMBERED = 50_000  # turns whose vendor form is kept, over all channels


class Converted(Generic[T]):
    def __init__(self, convert: Callable[[ChatMessage], T], limit: int = _REMEMBERED) -> None:
        self._convert = convert
        self._limit = limit
        # id -> (the message, its form): holding the message keeps its id from being reused
        self._done: OrderedDict[int, tuple[ChatMessage, T]] = OrderedDict()

    def __call__(self, message: ChatMessage) -> T:
        key = id(message)
        found = self._done.get(key)
        if found is not None and found[0] is message:
            self._done.move_to_end(key)
            return found[1]
        form = self._convert(message)
        self._done[key] = (message, form)
        if len(self._done) > self._limit:
            self._done.popitem(last=False)
        return form


_REQUESTS = 64  # requests whose body is kept: those in flight, and their traces after


class ByRequest(Generic[T]):
    """What was built for each of the last few requests, by request object: the body a
    provider sent is what the request's trace stores, without building it twice."""

    def __init__(self, build: Callable[[LLMRequest], T], limit: int = _REQUESTS) -> None:
        self._build = build
        self._limit = limit
        self._done: OrderedDict[int, tuple[LLMRequest, T]] = OrderedDict()

    def __call__(self, request: LLMRequest) -> T:
        key = id(request)
        found = self._done.get(key)
        if found is not None and found[0] is request:
            return found[1]
        built = self._build(request)
        self._done[key] = (request, built)
        if len(self._done) > self._limit:
            self._done.popitem(last=False)
        return built
