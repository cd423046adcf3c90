"""The trace writer's cache alarm: one WARNING per episode, an event when it begins and ends."""

from __future__ import annotations

import logging

import pytest

from salon.agent.recording.alarm import CacheWatch
from salon.config.observability import CacheAlarmConfig
from salon.trace import CallTrace, Divergence, Trace

CONFIG = CacheAlarmConfig(answers=2, baseline_answers=3)


def answered(n: int, *, read: int) -> Trace:
    trace = Trace("salon", "memory", "memory:room", "room", float(n), float(n) + 1)
    trace.activation = f"act{n}"
    cause = Divergence(0, "m1", "config change") if not read else None
    call = CallTrace("answer", "p", "m", {}, float(n), input_tokens=100, cache_read_tokens=read)
    call.cache_write_tokens, call.divergence = 900 - read, cause
    trace.calls.append(call)
    return trace


def test_one_warning_per_episode_and_an_event_when_it_begins_and_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    watch = CacheWatch()
    reads = [900, 900, 900, 0, 0, 0, 900, 900]
    with caplog.at_level(logging.INFO, logger="salon.agent.recording.alarm"):
        events = [watch.observe(answered(n, read=r), CONFIG) for n, r in enumerate(reads)]
    states = [e[2]["salon.cache_alarm.state"] if e else None for e in events]
    assert states == [None, None, None, None, "began", None, "ended", None]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "config change" in warnings[0]
    assert "act3" in warnings[0]
    assert watch.active() == {}


def test_a_failed_activation_is_not_an_answer() -> None:
    watch = CacheWatch()
    for n in range(10):
        trace = answered(n, read=0)
        trace.outcome = "error"
        assert watch.observe(trace, CONFIG) is None
    assert watch.active() == {}
