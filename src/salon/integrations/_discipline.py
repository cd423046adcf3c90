"""Per-API request discipline: one FIFO queue per integration, and a TTL cache.

A call first looks in the cache (read-only tools only), then waits for its turn in the
integration's queue (at most ``concurrency`` calls run at once, the rest wait in arrival
order, a bounded number of them for a bounded time), then runs under a timeout that counts
its own execution only. The timeout cancels the work, which closes the HTTP request.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from salon.config import IntegrationConfig
from salon.integrations._http import VendorError

__all__ = ["CallQueue", "Clock", "Discipline", "ResultCache", "cache_key"]

T = TypeVar("T")
Clock = Callable[[], float]


def _normalized(value: Any) -> Any:
    """Arguments that mean the same thing compare equal: case, spacing, key order."""
    if isinstance(value, str):
        return " ".join(value.split()).casefold()
    if isinstance(value, Mapping):
        return {str(k): _normalized(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_normalized(v) for v in value]
    return value


def cache_key(tool: str, arguments: Mapping[str, Any]) -> str:
    normal = json.dumps(_normalized(arguments), sort_keys=True, separators=(",", ":"))
    return f"{tool}:{normal}"


@dataclass(frozen=True, slots=True)
class _Entry:
    value: str
    size: int
    expires: float


class ResultCache:
    """Results by key for ``ttl`` seconds, at most ``max_entries`` and ``max_bytes``."""

    def __init__(
        self, ttl: float, max_entries: int, max_bytes: int, clock: Clock = time.monotonic
    ) -> None:
        self.ttl = ttl
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._clock = clock
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> str | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.expires <= self._clock():
            self._drop(key)
            return None
        self._entries.move_to_end(key)
        return entry.value

    def put(self, key: str, value: str) -> None:
        size = len(value.encode("utf-8"))
        if self.ttl <= 0 or size > self.max_bytes:
            return
        if key in self._entries:
            self._drop(key)
        self._entries[key] = _Entry(value, size, self._clock() + self.ttl)
        self._bytes += size
        while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
            self._drop(next(iter(self._entries)))  # least recently used first

    def _drop(self, key: str) -> None:
        entry = self._entries.pop(key)
        self._bytes -= entry.size


class CallQueue:
    """First come, first served: ``concurrency`` calls run, up to ``max_waiting`` wait."""

    def __init__(
        self, service: str, *, concurrency: int, max_waiting: int, wait_timeout: float
    ) -> None:
        self.service = service
        self._limit = concurrency
        self._max_waiting = max_waiting
        self._wait_timeout = wait_timeout
        self._running = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def running(self) -> int:
        return self._running

    @property
    def waiting(self) -> int:
        return sum(1 for w in self._waiters if not w.done())

    async def run(self, work: Callable[[], Awaitable[T]], seconds: float) -> T:
        """Wait for a turn, then run ``work`` for at most ``seconds`` (the wait not counted)."""
        await self._acquire()
        try:
            async with asyncio.timeout(seconds):
                return await work()
        except TimeoutError:
            raise VendorError(
                f"{self.service} did not finish within {seconds:g} seconds, so the request "
                "was cancelled; try again later or ask for less"
            ) from None
        finally:
            self._release()

    async def _acquire(self) -> None:
        if self._running < self._limit and not self.waiting:
            self._running += 1
            return
        if self.waiting >= self._max_waiting:
            raise self._busy()
        turn = asyncio.get_running_loop().create_future()
        self._waiters.append(turn)
        try:
            async with asyncio.timeout(self._wait_timeout):
                await turn
        except BaseException as exc:
            if turn.done() and not turn.cancelled():
                self._release()  # the turn arrived as we gave up: pass it on
            else:
                turn.cancel()
                self._waiters.remove(turn)
            if isinstance(exc, TimeoutError):
                raise self._busy() from None
            raise

    def _release(self) -> None:
        while self._waiters:
            turn = self._waiters.popleft()
            if not turn.done():
                turn.set_result(None)  # the running slot passes to the next in line
                return
        self._running -= 1

    def _busy(self) -> VendorError:
        return VendorError(f"{self.service} is busy with earlier requests; try again in a minute")


class Discipline:
    """The queue and the cache of one integration."""

    def __init__(self, service: str, config: IntegrationConfig, clock: Clock = time.monotonic):
        self.service = service
        self.timeout = config.timeout
        self.queue = CallQueue(
            service,
            concurrency=config.concurrency,
            max_waiting=config.queue_size,
            wait_timeout=config.queue_timeout,
        )
        self.cache = ResultCache(
            config.cache_ttl, config.cache_entries, config.cache_bytes, clock=clock
        )

    async def cached(
        self, tool: str, arguments: Mapping[str, Any], work: Callable[[], Awaitable[str]]
    ) -> str:
        """A read-only result: from the cache, or fetched in turn and then kept."""
        if self.cache.ttl <= 0:  # caching is off: no key to make
            return await self.queue.run(work, self.timeout)
        key = cache_key(tool, arguments)
        found = self.cache.get(key)
        if found is not None:
            return found

        async def fetch() -> str:
            again = self.cache.get(key)  # an identical call ahead of us may have filled it
            return again if again is not None else await work()

        value = await self.queue.run(fetch, self.timeout)
        self.cache.put(key, value)
        return value

    async def run(self, work: Callable[[], Awaitable[T]]) -> T:
        """A call with side effects: in turn, never cached."""
        return await self.queue.run(work, self.timeout)
