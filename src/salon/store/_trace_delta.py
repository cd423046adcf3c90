"""A trace's requests stored as a reference to the previous trace of its channel plus what
changed.

A channel's requests grow at the end between cache breaks: each one repeats the hundreds of
messages of the one before. Encoding, redacting and compressing all of them at every
activation cost several times the activation itself. So a bot's trace of a channel is
stored whole now and then (a *keyframe*), and the traces after it form its *group*: each
stores, for each call whose messages start with those of a call of the group's previous
trace, ``{"$prefix": [call, count], "tail": [...]}`` in place of the messages, and
``{"$same": call}`` in place of its ``tools`` and ``system`` when they equal that call's
(the same tool schemas at every activation were most of a referring trace); the row's
``base_id`` names the keyframe. Reading takes the group's rows up to the trace (one query,
at most ``_EVERY`` small rows) and puts each one's prefix back in order: the same request,
key for key, as was sent.

Retention deletes a group only whole (``salon.store._traces``), so no stored trace ever
refers to a pruned one.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from salon.trace import Trace

__all__ = ["MARK", "Keyframes", "resolve"]

MARK = "$prefix"
SAME = "$same"
_KEPT = ("tools", "system")  # a request's parts that rarely change within a group
_EVERY = 32  # traces in a group: what reading one trace may cost
_MAX_AGE = 600.0  # seconds a keyframe is referred to (well within any retention age)
_CHANNELS = 256  # channels whose keyframe is remembered


@dataclass(slots=True)
class _Group:
    trace_id: int  # the keyframe's
    written_at: float
    requests: list[dict[str, Any]]  # each call's request in the group's newest trace
    used: int = 0


def _messages(request: dict[str, Any]) -> list[Any] | None:
    messages = request.get("messages")
    return messages if isinstance(messages, list) and messages else None


def _shared(base: list[Any], messages: list[Any]) -> int:
    """How many leading messages the two lists share (the same turn objects, mostly)."""
    common = min(len(base), len(messages))
    if base[:common] == messages[:common]:  # the usual case, compared in C (identity first)
        return common
    count = 0
    for old, new in zip(base, messages, strict=False):
        if old is not new and old != new:
            break
        count += 1
    return count


class Keyframes:
    """The open group of each recently traced channel, in one writing process."""

    def __init__(self, max_channels: int = _CHANNELS) -> None:
        self._by_channel: OrderedDict[tuple[str, str], _Group] = OrderedDict()
        self._max = max_channels

    def delta(self, trace: Trace) -> tuple[int, list[dict[str, Any]]] | None:
        """The keyframe's id and the calls' requests with the previous trace's prefixes
        referred to; None when the trace is better stored whole."""
        frame = self._by_channel.get((trace.bot, trace.channel))
        if frame is None or frame.used >= _EVERY or time.time() - frame.written_at > _MAX_AGE:
            return None
        requests: list[dict[str, Any]] = []
        shared = total = 0
        for call in trace.calls:
            request, messages = call.request, _messages(call.request)
            best, count = 0, 0
            for index, sent in enumerate(frame.requests):
                base = _messages(sent)
                found = _shared(base, messages) if base and messages else 0
                if found > count:
                    best, count = index, found
            if messages is None or not count:
                requests.append(request)
                continue
            total += len(messages)
            shared += count
            referred = dict(request)  # the same keys in the same order
            referred["messages"] = {MARK: [best, count], "tail": messages[count:]}
            for key in _KEPT:
                if _same(request.get(key), frame.requests[best].get(key)):
                    referred[key] = {SAME: best}
            requests.append(referred)
        if (
            not total or shared * 2 <= total
        ):  # mostly new (a roll, a new model): a fresh keyframe pays
            return None
        return frame.trace_id, requests

    def wrote(self, trace: Trace, trace_id: int, base_id: int | None) -> None:
        """Note a stored trace: the next one refers to it, or a whole one opens a group."""
        key = (trace.bot, trace.channel)
        frame = self._by_channel.get(key)
        requests = [call.request for call in trace.calls]
        if base_id is not None and frame is not None:
            frame.used += 1
            frame.requests = requests
            return
        if not any(map(_messages, requests)):  # failed before its call: nothing to refer to
            return
        self._by_channel[key] = _Group(trace_id, time.time(), requests)
        self._by_channel.move_to_end(key)
        while len(self._by_channel) > self._max:
            self._by_channel.popitem(last=False)

    def forget(self, keyframes: Iterable[int] | None = None) -> None:
        """Groups that were pruned (or rolled back) take no more traces; all, by default."""
        if keyframes is None:
            self._by_channel.clear()
            return
        gone = set(keyframes)
        for key in [k for k, f in self._by_channel.items() if f.trace_id in gone]:
            del self._by_channel[key]


def _same(value: Any, base: Any) -> bool:
    """Whether a request's part is its base call's (the same object, mostly; else equal)."""
    return bool(value) and (value is base or value == base)


def resolve(body: dict[str, Any], base: dict[str, Any] | None) -> None:
    """Put the previous trace's messages (``base``, resolved) back into ``body``'s
    requests, in place. Without it (retention cannot take it first, but a database may be
    edited by hand), the tail alone is shown and the body says so."""
    for call in body.get("calls", []):
        request = call.get("request")
        referred = request.get("messages") if isinstance(request, dict) else None
        if not isinstance(referred, dict) or MARK not in referred:
            continue
        assert isinstance(request, dict)
        gone = _put_back_kept(request, base)
        index, count = referred[MARK]
        prefix: list[Any] = []
        if base is not None:
            prefix = base["calls"][index]["request"]["messages"][:count]
        else:
            also = f" (and its {' and '.join(gone)})" if gone else ""
            body["incomplete"] = f"the first {count} messages of each request{also} were pruned"
        request["messages"] = prefix + referred["tail"]


def _put_back_kept(request: dict[str, Any], base: dict[str, Any] | None) -> list[str]:
    """The request's referred parts from ``base``; those it cannot put back (None now)."""
    gone = []
    for key in _KEPT:
        referred = request.get(key)
        if not isinstance(referred, dict) or SAME not in referred:
            continue
        if base is None:
            request[key] = None
            gone.append(key)
        else:
            request[key] = base["calls"][referred[SAME]]["request"][key]
    return gone
