"""Supervised tasks: a failure is logged and the task starts again; a chosen end is quiet."""

from __future__ import annotations

import asyncio
import logging

import pytest

from salon.tasks import TaskState, supervise


async def test_a_failing_task_is_logged_and_restarted(caplog: pytest.LogCaptureFixture) -> None:
    runs: list[int] = []
    healthy = asyncio.Event()

    async def work() -> None:
        runs.append(len(runs))
        if len(runs) <= 2:
            raise RuntimeError(f"boom {len(runs)}")
        healthy.set()
        await asyncio.Event().wait()

    state = TaskState("worker")
    task = asyncio.create_task(supervise("worker", work, state=state, backoff_initial=0))
    await asyncio.wait_for(healthy.wait(), 5)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert state.restarts == 2
    assert state.last_error == "RuntimeError: boom 2"
    failures = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(failures) == 2
    assert all(r.exc_info for r in failures)  # the traceback goes to the log file


async def test_a_task_that_ends_while_its_owner_stops_is_not_a_failure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stopping = asyncio.Event()
    stopping.set()

    async def work() -> None:
        return None

    state = TaskState("connection")
    await asyncio.wait_for(supervise("connection", work, state=state, finished=stopping.is_set), 5)
    assert state.restarts == 0
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_a_task_that_ends_on_its_own_is_restarted(caplog: pytest.LogCaptureFixture) -> None:
    ended = asyncio.Event()
    calls = 0

    async def work() -> None:
        nonlocal calls
        calls += 1
        if calls == 2:
            ended.set()
            await asyncio.Event().wait()

    state = TaskState("loop")
    task = asyncio.create_task(supervise("loop", work, state=state, backoff_initial=0))
    await asyncio.wait_for(ended.wait(), 5)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert state.restarts == 1
    assert "stopped unexpectedly" in caplog.text
