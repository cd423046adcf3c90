"""Fault and load suites, shortened from `python -m bench` (see docs/BENCHMARKS.md)."""

from __future__ import annotations

import pytest
from bench import kill9, load


async def test_no_event_is_dropped_under_load() -> None:
    result = await load.measure(channels=50, rate=400.0, seconds=2.0)
    assert result["dropped"] == 0


@pytest.mark.timeout(240)
async def test_kill9_never_loses_a_line_that_was_shown() -> None:
    result = await kill9.measure(rounds=8, seed=3)
    assert result["shown"] > 0
    assert result["lost"] == 0
