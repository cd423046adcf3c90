"""``salon run``: one process per bot (per shard group, for a sharded Discord bot),
restarted with backoff when it dies.

Stopping (SIGINT/SIGTERM) sends SIGTERM to every bot, waits ``stop_timeout`` seconds for
them to finish what they are saying, then kills what is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["BotProcessSpec", "Supervisor"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BotProcessSpec:
    name: str
    backoff_initial: float
    backoff_max: float
    shards: tuple[int, ...] = ()  # the Discord shards this process runs; () = as configured

    @property
    def label(self) -> str:
        if not self.shards:
            return self.name
        return f"{self.name} (shards {','.join(map(str, self.shards))})"

    def arguments(self) -> list[str]:
        shards = ["--shards", ",".join(map(str, self.shards))] if self.shards else []
        return ["--bot", self.name, *shards]


class Supervisor:
    def __init__(
        self, config_dir: Path, bots: Sequence[BotProcessSpec], *, stop_timeout: float = 5.0
    ) -> None:
        self.config_dir = config_dir
        self.bots = list(bots)
        self.stop_timeout = stop_timeout
        self.stopping = asyncio.Event()
        self._procs: dict[str, asyncio.subprocess.Process] = {}

    def install_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.stopping.set)

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tasks:
            for spec in self.bots:
                tasks.create_task(self._keep_running(spec), name=f"supervise-{spec.label}")
            await self.stopping.wait()
            await self._stop_all()

    async def _keep_running(self, spec: BotProcessSpec) -> None:
        delay = spec.backoff_initial
        while not self.stopping.is_set():
            started = time.monotonic()
            proc = await self._spawn(spec)
            if self.stopping.is_set():  # stop arrived while it was starting
                proc.terminate()
            code = await proc.wait()
            self._procs.pop(spec.label, None)
            if self.stopping.is_set():
                return
            if time.monotonic() - started > max(spec.backoff_max, 1.0):
                delay = spec.backoff_initial  # it ran a good while: start the backoff afresh
            logger.warning(
                "bot %s exited with code %s; restarting in %.1fs", spec.label, code, delay
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), delay)
            delay = min(max(delay * 2, 0.1), spec.backoff_max)

    async def _spawn(self, spec: BotProcessSpec) -> asyncio.subprocess.Process:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "salon", "run", str(self.config_dir), *spec.arguments()
        )
        self._procs[spec.label] = proc
        logger.info("bot %s started (pid %d)", spec.label, proc.pid)
        return proc

    async def _stop_all(self) -> None:
        procs = list(self._procs.items())
        for _, proc in procs:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
        for name, proc in procs:
            try:
                await asyncio.wait_for(proc.wait(), self.stop_timeout)
            except TimeoutError:
                logger.warning("bot %s did not stop in %.0fs; killing it", name, self.stop_timeout)
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        logger.info("all bots stopped")
