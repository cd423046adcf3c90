"""Fault and load suites, shortened from `python -m bench` (see docs/BENCHMARKS.md)."""

from __future__ import annotations

import pytest

from bench import catchup, faults, kill9, load


async def test_llm_faults_end_every_activation_in_an_answer_or_a_clear_error() -> None:
    result = await faults.measure(rounds=12, channels=6, rate=0.3, seed=7)
    assert result["faulted_requests"] >= 10  # the faults really happened
    assert result["silent"] == 0
    assert result["duplicates"] == 0
    assert result["answered"] > result["activations"] // 2


async def test_no_event_is_dropped_under_load() -> None:
    result = await load.measure(channels=50, rate=400.0, seconds=2.0)
    assert result["dropped"] == 0


@pytest.mark.timeout(240)
async def test_kill9_never_loses_a_line_that_was_shown() -> None:
    result = await kill9.measure(rounds=8, seed=3)
    assert result["shown"] > 0
    assert result["lost"] == 0


@pytest.mark.timeout(240)
async def test_kill9_never_loses_a_schedules_answer() -> None:
    result = await kill9.measure_schedules(count=25, every=0.2, seed=5)
    assert result["kills"] >= 3
    assert result["lost"] == 0


@pytest.mark.timeout(240)
async def test_catchup_gaps_lose_no_question_and_answer_each_once() -> None:
    kinds = ("kill9", "invalid_session", "disconnect")
    result = await catchup.measure_gaps(gaps=2, seed=3, kinds=kinds)
    assert sum(result.kinds.values()) == 2
    assert len(result.asked) >= 5 + 2  # the opening questions, and at least one a gap
    assert result.lost == {}
    assert result.duplicates == 0
