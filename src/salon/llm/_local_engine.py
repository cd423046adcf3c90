"""One GGUF model per process, run by llama-cpp-python on worker threads.

A llama.cpp context holds one conversation's state and is not safe to share between
threads, so generations take turns under a lock; the requests waiting for it are bounded.
Each generation runs on a thread of its own and hands its chunks to the event loop; it
checks between tokens whether its caller has gone, and stops there.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncGenerator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from salon.errors import ProviderError

__all__ = ["Engine", "EngineKey", "Generation", "acquire_engine", "release_engine"]

logger = logging.getLogger(__name__)

Load = Callable[[], Any]


@dataclass(frozen=True, slots=True)
class EngineKey:
    """What makes two providers share one loaded model: the file and how it is loaded."""

    model_path: str
    context_length: int
    threads: int | None


@dataclass
class Generation:
    """One request for the model: ``chat`` (messages through the chat template) or raw
    completion of ``prompt``; ``cancel`` is set when the caller stops listening."""

    chat: bool
    kwargs: dict[str, Any]
    # Run on the worker with the loaded model before generating (fits the prompt to it).
    prepare: Callable[[Any, dict[str, Any]], dict[str, Any]] | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    finished: threading.Event = field(default_factory=threading.Event)
    chunks: int = 0  # chunks generated, counted as they come
    context_tokens: int = 0  # tokens in the model's context when it stopped
    reused_tokens: int = 0  # leading tokens the previous request left evaluated


class _End:
    """Marks the end of a generation's chunks."""


class Engine:
    """A model loaded on first use; generations one at a time, at most ``queue_size``
    waiting behind the one running."""

    def __init__(self, key: EngineKey, load: Load, *, name: str = "local") -> None:
        self.key = key
        self.name = name
        self._load = load
        self._model: Any = None
        self._turn = threading.Lock()  # held by the generation using the model
        self._count = threading.Condition()  # guards _in_flight; notified when one leaves
        self._in_flight = 0
        self.generated = 0  # chunks generated over the engine's life
        self.users = 0  # providers holding this engine (see acquire_engine)

    def admit(self, queue_size: int) -> None:
        """Count one more request in, or refuse it when ``queue_size`` already wait."""
        with self._count:
            if self._in_flight > queue_size:
                raise ProviderError(
                    f"{self.name}: the local model is busy ({queue_size} requests waiting)",
                    provider=self.name,
                )
            self._in_flight += 1
            self._count.notify_all()

    def _leave(self) -> None:
        with self._count:
            self._in_flight -= 1
            self._count.notify_all()

    def wait_in_flight(self, count: int, timeout: float) -> bool:
        """Block until ``count`` requests run or wait (0: idle); False on timeout."""
        with self._count:
            return self._count.wait_for(lambda: self._in_flight == count, timeout)

    def model(self) -> Any:
        """The loaded model (loading it on first use); call only holding the turn."""
        if self._model is None:
            self._model = self._load()
        return self._model

    async def run(self, job: Generation, queue_size: int) -> AsyncGenerator[Any, None]:
        """Chunks of ``job`` as the model makes them; the model stops at its next token
        when this iterator is closed or its task cancelled. Refused (a retryable
        ProviderError) when ``queue_size`` requests already wait."""
        self.admit(queue_size)
        loop = asyncio.get_running_loop()
        # Bounded by the job: at most max_tokens chunks, one failure, one end.
        chunks: asyncio.Queue[Any] = asyncio.Queue()

        def emit(item: Any) -> None:
            try:
                loop.call_soon_threadsafe(chunks.put_nowait, item)
            except RuntimeError:  # the loop is closed: nobody listens any more
                job.cancel.set()

        worker = threading.Thread(
            target=self._work, args=(job, emit), name="salon-local-model", daemon=True
        )
        worker.start()
        try:
            while True:
                item = await chunks.get()
                if isinstance(item, _End):
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            job.cancel.set()

    def _work(self, job: Generation, emit: Callable[[Any], None]) -> None:
        try:
            with self._turn:
                if not job.cancel.is_set():
                    self._generate(job, emit)
        except Exception as exc:  # the thread's boundary: the caller gets it as its error
            logger.debug("local generation failed", exc_info=True)
            emit(exc)
        finally:
            self._leave()
            job.finished.set()
            emit(_End())

    def _generate(self, job: Generation, emit: Callable[[Any], None]) -> None:
        model = self.model()
        before = _context(model)
        kwargs = job.prepare(model, job.kwargs) if job.prepare is not None else job.kwargs
        method = model.create_chat_completion if job.chat else model.create_completion
        stream: Iterator[dict[str, Any]] = method(**kwargs, stream=True)
        try:
            for chunk in stream:
                if job.cancel.is_set():
                    return
                job.chunks += 1
                self.generated += 1
                emit(chunk)
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
            after = _context(model)
            job.context_tokens = len(after)
            job.reused_tokens = _common_prefix(before, after)

    def close(self) -> None:
        """Free the model (waiting for a generation still running to stop)."""
        with self._turn:
            model, self._model = self._model, None
            if model is not None and hasattr(model, "close"):
                model.close()


def _context(model: Any) -> list[int]:
    """The tokens the model holds evaluated (llama-cpp-python reuses their longest common
    prefix with the next prompt)."""
    held = getattr(model, "input_ids", None)
    count = int(getattr(model, "n_tokens", 0))
    return [int(t) for t in held[:count]] if held is not None else []


def _common_prefix(a: list[int], b: list[int]) -> int:
    count = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        count += 1
    return count


class _Engines:
    """The process's loaded models: one per key, kept while a provider uses it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._engines: dict[EngineKey, Engine] = {}

    def acquire(self, key: EngineKey, load: Load, name: str) -> Engine:
        with self._lock:
            engine = self._engines.get(key)
            if engine is None:
                engine = self._engines[key] = Engine(key, load, name=name)
            engine.users += 1
            return engine

    def release(self, engine: Engine) -> bool:
        """One user fewer; True when it was the last (the caller then closes it)."""
        with self._lock:
            engine.users -= 1
            if engine.users > 0:
                return False
            if self._engines.get(engine.key) is engine:
                del self._engines[engine.key]
            return True


# One model per process, shared by every channel and provider that names the same file:
# the point of the registry is that it is process-wide.
_ENGINES = _Engines()


def acquire_engine(key: EngineKey, load: Load, name: str) -> Engine:
    return _ENGINES.acquire(key, load, name)


async def release_engine(engine: Engine) -> None:
    if _ENGINES.release(engine):
        await asyncio.to_thread(engine.close)
