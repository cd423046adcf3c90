"""Supervision of long-lived tasks: a failure is logged and the task restarted with backoff.

Every task that should run as long as its bot does (the agent loop, the scheduler, the
chat-log writer, a platform's connection) runs through ``supervise``. It never ends on its
own: an exception is logged with its traceback and the task starts again after a delay
that doubles up to a cap (and starts over once a run lasted longer than the cap). Returning
is a failure too, for a task that should never end. ``TaskState`` records what happened,
for the health endpoint and for tests.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

__all__ = ["TaskState", "supervise"]

logger = logging.getLogger(__name__)


@dataclass
class TaskState:
    name: str
    running: bool = False
    restarts: int = 0
    last_error: str | None = None
    last_failure: float | None = None  # time.time() of the last failure
    counts: dict[str, int] = field(default_factory=dict)  # e.g. spans dropped, for health

    def failed(self, reason: str) -> None:
        self.running = False
        self.restarts += 1
        self.last_error = reason
        self.last_failure = time.time()


async def supervise(
    name: str,
    run: Callable[[], Awaitable[None]],
    *,
    state: TaskState | None = None,
    backoff_initial: float = 0.5,
    backoff_max: float = 30.0,
    finished: Callable[[], bool] | None = None,
) -> None:
    """Run ``run()`` until cancelled, restarting it after every failure. ``finished()``
    true when ``run()`` returns means it ended on purpose (its owner is stopping)."""
    state = state or TaskState(name)
    delay = backoff_initial
    while True:
        started = time.monotonic()
        state.running = True
        try:
            await run()
        except asyncio.CancelledError:
            state.running = False
            raise
        except Exception as exc:
            if time.monotonic() - started > backoff_max:
                delay = backoff_initial  # it ran a good while: start the backoff afresh
            logger.exception("%s failed; restarting in %.1fs", name, delay)
            state.failed(f"{type(exc).__name__}: {exc}")
        else:
            if finished is not None and finished():
                state.running = False
                return
            logger.error("%s stopped unexpectedly; restarting in %.1fs", name, delay)
            state.failed("it stopped")
        await asyncio.sleep(delay)
        delay = min(max(delay * 2, 0.01), backoff_max)
