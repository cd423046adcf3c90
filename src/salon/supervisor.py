"""``salon run``: one process per bot (per shard group, for a sharded Discord bot),
restarted with backoff when it dies.

Stopping (SIGINT/SIGTERM) sends SIGTERM to every bot, waits its ``shutdown_grace`` and
``stop_timeout`` seconds more for them to finish what they are saying, then kills what is
left. One bot can be stopped,
started and restarted too (the configurator's buttons, through ``salon.web_cli``): a bot
stopped that way stays stopped, not restarted, until it is started again.
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

__all__ = ["REFUSED_EXIT", "BotProcessSpec", "Supervisor"]

logger = logging.getLogger(__name__)

# A bot process's exit code when a platform refused what only the operator can change
# (sysexits' EX_CONFIG): it is not restarted, since every restart would be refused again.
REFUSED_EXIT = 78


@dataclass(frozen=True)
class BotProcessSpec:
    name: str
    backoff_initial: float
    backoff_max: float
    shards: tuple[int, ...] = ()  # the Discord shards this process runs; () = as configured
    shutdown_grace: float = 0.0  # seconds its answers in progress get at a stop

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
        self._held: set[str] = set()  # bots stopped on request: not restarted
        self._restarting: set[str] = set()  # labels stopped on request, to start at once
        self._changed = asyncio.Condition()

    def install_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.stopping.set)

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tasks:
            for spec in self.bots:
                tasks.create_task(self._keep_running(spec), name=f"supervise-{spec.label}")
            await self.stopping.wait()
            async with self._changed:
                self._changed.notify_all()  # held bots stop waiting to be started
            await self._stop_all()

    async def _keep_running(self, spec: BotProcessSpec) -> None:
        delay = spec.backoff_initial
        while not self.stopping.is_set():
            if spec.name in self._held:
                async with self._changed:
                    await self._changed.wait_for(
                        lambda: spec.name not in self._held or self.stopping.is_set()
                    )
                delay = spec.backoff_initial
                continue
            started = time.monotonic()
            proc = await self._spawn(spec)
            if self.stopping.is_set():  # stop arrived while it was starting
                proc.terminate()
            code = await proc.wait()
            self._procs.pop(spec.label, None)
            if self.stopping.is_set():
                return
            if spec.label in self._restarting or spec.name in self._held:
                self._restarting.discard(spec.label)
                logger.info("bot %s stopped (pid %d) on request", spec.label, proc.pid)
                continue
            if code == REFUSED_EXIT:
                logger.error(
                    "bot %s exited with code %s: not restarted (start it again once its "
                    "settings are fixed)",
                    spec.label,
                    code,
                )
                self._held.add(spec.name)
                continue
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

    # -- one bot, on request --------------------------------------------------------------

    def names(self) -> list[str]:
        return sorted({spec.name for spec in self.bots})

    def state(self, name: str) -> str:
        pids = [p.pid for label, p in self._procs.items() if self._named(label, name)]
        if name in self._held:
            return "stopped on request" + (" (stopping)" if pids else "")
        if pids:
            return f"running (pid {', '.join(map(str, pids))})"
        return "starting" if name in self.names() else "not run here"

    async def stop_bot(self, name: str) -> str:
        """Stop ``name`` (all its shard groups) and keep it stopped."""
        self._held.add(name)
        await self._end(name)
        return f"bot {name} stopped; it stays stopped until started"

    async def start_bot(self, name: str) -> str:
        if name not in self._held:
            return f"bot {name} is running already ({self.state(name)})"
        async with self._changed:
            self._held.discard(name)
            self._changed.notify_all()
        return f"bot {name} starting"

    async def restart_bot(self, name: str) -> str:
        if name in self._held:
            return await self.start_bot(name)
        self._restarting.update(lb for lb in self._procs if self._named(lb, name))
        await self._end(name)
        return f"bot {name} restarting"

    def _named(self, label: str, name: str) -> bool:
        return any(s.label == label and s.name == name for s in self.bots)

    async def _end(self, name: str) -> None:
        """SIGTERM to the bot's processes; killed after ``stop_timeout``."""
        procs = [(lb, p) for lb, p in list(self._procs.items()) if self._named(lb, name)]
        for _, proc in procs:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
        for label, proc in procs:
            await self._wait_or_kill(label, proc)

    async def _stop_all(self) -> None:
        procs = list(self._procs.items())
        for _, proc in procs:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
        for label, proc in procs:
            await self._wait_or_kill(label, proc)
        logger.info("all bots stopped")

    async def _wait_or_kill(self, label: str, proc: asyncio.subprocess.Process) -> None:
        """A bot gets its ``shutdown_grace`` and ``stop_timeout`` more; then it is killed
        (what it was answering is answered at its next start)."""
        grace = max((s.shutdown_grace for s in self.bots if s.label == label), default=0.0)
        limit = grace + self.stop_timeout
        try:
            await asyncio.wait_for(proc.wait(), limit)
        except TimeoutError:
            logger.warning("bot %s did not stop in %.0fs; killing it", label, limit)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
