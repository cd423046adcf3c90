"""The cache and cost alarm as the trace writer keeps it: each channel's last answers.

``CacheWatch.observe`` takes every finished activation (stored or not); an answered one
joins its channel's answers, and the channel is judged again (``salon.cache_alarm``). When
an alarm begins it logs one WARNING and returns the event to put on the activation's span;
when it ends, one INFO line and an event as well. Channels are bounded (the least recently
answered go first), and so are each channel's answers (a window and its baseline).
"""

from __future__ import annotations

import logging
from collections import OrderedDict, deque
from collections.abc import Mapping
from dataclasses import dataclass

from salon.cache_alarm import Alarm, Answer, judge
from salon.config.observability import CacheAlarmConfig
from salon.trace import Trace

__all__ = ["CacheWatch", "SpanEvent", "answer_of"]

logger = logging.getLogger(__name__)

_CHANNELS = 4096
_QUIET = ("new messages", "first call")  # no break: as the store's cache_break column says

# (name, epoch seconds, attributes): an event on the activation's root span.
SpanEvent = tuple[str, float, Mapping[str, str | float | bool]]


@dataclass(slots=True)
class _Channel:
    answers: deque[Answer]
    alarm: Alarm | None = None


def answer_of(trace: Trace) -> Answer | None:
    """The trace as the alarm counts it: an answered activation that sent a prompt."""
    if trace.outcome != "answered":
        return None
    totals = trace.totals()
    read = int(totals["cache_read_tokens"])
    prompt = int(totals["input_tokens"]) + read + int(totals["cache_write_tokens"])
    if not prompt:
        return None
    cause = next(
        (
            c.divergence.cause
            for c in trace.calls
            if c.divergence is not None and c.divergence.cause not in _QUIET
        ),
        None,
    )
    return Answer(read, prompt, float(totals["cost"]), cause, trace.started_at, trace.activation)


class CacheWatch:
    """Each recent channel's answers and whether its alarm is on."""

    def __init__(self, max_channels: int = _CHANNELS) -> None:
        self._channels: OrderedDict[str, _Channel] = OrderedDict()
        self._max = max_channels

    def active(self) -> dict[str, Alarm]:
        return {key: c.alarm for key, c in self._channels.items() if c.alarm is not None}

    def observe(self, trace: Trace, config: CacheAlarmConfig) -> SpanEvent | None:
        answer = answer_of(trace)
        if answer is None:
            return None
        channel = self._channel(trace.channel, config.answers + config.baseline_answers)
        channel.answers.append(answer)
        verdict, was = judge(channel.answers, config), channel.alarm
        alarm = channel.alarm = verdict if verdict is not None and verdict.on else None
        if alarm is not None and was is None:
            logger.warning(
                "cache alarm for %s in %s: %s; began at activation %s",
                trace.bot,
                trace.channel,
                alarm.describe(),
                alarm.first.ref or "(unknown)",
            )
            return _event("began", answer.at, alarm)
        if alarm is None and was is not None:
            logger.info("cache alarm over for %s in %s", trace.bot, trace.channel)
            return _event("ended", answer.at, was)
        return None

    def _channel(self, key: str, size: int) -> _Channel:
        channel = self._channels.get(key)
        if channel is None or channel.answers.maxlen != size:  # new, or resized by a reload
            kept, alarm = (channel.answers, channel.alarm) if channel else ((), None)
            channel = _Channel(deque(kept, maxlen=size), alarm)
            self._channels[key] = channel
        self._channels.move_to_end(key)
        while len(self._channels) > self._max:
            self._channels.popitem(last=False)
        return channel


def _event(state: str, at: float, alarm: Alarm) -> SpanEvent:
    return (
        "salon.cache_alarm",
        at,
        {
            "salon.cache_alarm.state": state,
            "salon.cache_alarm.read_share": alarm.read_share,
            "salon.cache_alarm.baseline_read_share": alarm.baseline_read_share,
            "salon.cache_alarm.cost_per_answer": alarm.cost_per_answer,
            "salon.cache_alarm.baseline_cost_per_answer": alarm.baseline_cost_per_answer,
            "salon.cache_alarm.cause": alarm.cause or "",
            "salon.cache_alarm.first_activation": alarm.first.ref,
        },
    )
