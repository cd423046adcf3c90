"""One bot process for the Discord benchmarks: ``salon run DIR --bot NAME`` with
discord.py pointed at the loopback fake (``BENCH_DISCORD_API``, ``BENCH_DISCORD_GATEWAY``).

``BENCH_ARM`` says which bot: ``salon`` (the default) starts as the ``salon`` command does
(``salon.launch``); ``sdk`` is Salon sending requests through the SDK's
``chat.completions.create`` instead of its own body, the request path before it was
changed: the baseline that ``discord_activation_cpu_ms`` is compared with in the same run;
``floor`` is ``bench.floor_bot``, the least such a bot costs. ``BENCH_PROFILE=FILE``
writes a cProfile of the whole (Salon) process to FILE when it stops.
``BENCH_PROFILE_STEADY=DIR`` (``bench.floor_profile``): SIGUSR1 starts a cProfile of the
main thread's CPU time and SIGUSR2 stops it, writing it, the CPU of each thread in between
and (under ``PYTHONTRACEMALLOC``) the Python heap by package into DIR.
``BENCH_LOOP_COUNT=DIR`` (``bench.floor_parts``): the same signals count the event loop's
iterations in between, written to DIR/ARM-loops.txt.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any


def _point_discord_at_the_fake() -> None:
    import discord
    import yarl

    discord.http.Route.BASE = os.environ["BENCH_DISCORD_API"]
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(os.environ["BENCH_DISCORD_GATEWAY"])


def _use_the_sdk_create() -> None:
    """Requests through the openai SDK's ``create`` (its client made at the first)."""
    import openai

    from salon.llm import openai_compat
    from salon.llm._sdk import sdk_timeout, stream_sdk

    def post(self: Any, path: str, kwargs: dict[str, Any], decoder: Any) -> Any:
        client = self.__dict__.get("_sdk_client")
        if client is None:
            client = self._sdk_client = openai.AsyncOpenAI(
                api_key=os.environ["BENCH_LLM_KEY"],
                base_url=self._http.base_url,
                max_retries=0,
                timeout=sdk_timeout(self._config),
            )
        if path == "/completions":
            opening = client.completions.create(**kwargs)
        else:
            opening = client.chat.completions.create(**kwargs)
        return stream_sdk(self.name, openai, opening, decoder)

    openai_compat.OpenAIProvider._post = post  # type: ignore[method-assign]


def _without(parts: list[str]) -> None:
    """Salon with ``parts`` taken out, for ``bench.floor_parts`` to measure what each
    costs: ``typing`` (no typing indicator), ``stream`` (the answer asked for and read
    whole, as the floor does; what the decoder makes of it is unchanged) and
    ``tracestore`` (each trace built as ever, not stored). ``traces`` is a
    setting (``traces: {enabled: false}``), written into the arm's config."""
    if "typing" in parts:
        from collections.abc import AsyncIterator
        from contextlib import asynccontextmanager

        from salon.platforms.discord.showing import TypingIndicator

        @asynccontextmanager
        async def shown(self: Any, channel: Any) -> AsyncIterator[None]:
            yield

        TypingIndicator.shown = shown  # type: ignore[method-assign]
    if "stream" in parts:
        _unstreamed()
    if "tracestore" in parts:  # traces built (and observed) as ever, never stored
        from salon.store.sql import SQLStore

        async def write_traces(self: Any, batch: Any) -> list[int]:
            return []

        SQLStore.write_traces = write_traces  # type: ignore[method-assign]


def _unstreamed() -> None:
    import aiohttp

    from salon.llm import openai_compat
    from salon.llm._http_stream import Chunk, endpoint
    from salon.llm._sdk import sent_body

    sessions: list[aiohttp.ClientSession] = []

    async def post(self: Any, path: str, kwargs: dict[str, Any], decoder: Any) -> Any:
        body, headers = sent_body(kwargs)
        body = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
        if not sessions:
            sessions.append(aiohttp.ClientSession())
        headers = {"Authorization": f"Bearer {os.environ['BENCH_LLM_KEY']}", **headers}
        url = endpoint(self._http.base_url, path)
        async with sessions[0].post(url, json=body, headers=headers) as response:
            data = await response.json(loads=lambda t: json.loads(t, object_hook=Chunk))
        for choice in data.choices:
            choice["delta"] = choice.pop("message")
        for event in decoder.decode(data):
            yield event
        for event in decoder.finish():
            yield event

    openai_compat.OpenAIProvider._post = post  # type: ignore[method-assign]


class _Steady:
    """The profile of the steady activations (see the module)."""

    def __init__(self, out: Path, arm: str) -> None:
        self.out, self.arm = out, arm
        self.profiler: Any = None
        self.threads: dict[int, float] = {}
        signal.signal(signal.SIGUSR1, self.start)
        signal.signal(signal.SIGUSR2, self.stop)

    @staticmethod
    def _thread_cpu() -> dict[int, float]:
        ticks = os.sysconf("SC_CLK_TCK")
        cpu = {}
        for task in Path("/proc/self/task").iterdir():
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            cpu[int(task.name)] = (int(fields[11]) + int(fields[12])) / ticks
        return cpu

    def start(self, *_: object) -> None:
        import cProfile
        import time

        self.threads = self._thread_cpu()
        self.profiler = cProfile.Profile(time.thread_time)  # the main thread's CPU, not idle
        self.profiler.enable()

    def stop(self, *_: object) -> None:
        import threading
        import tracemalloc

        self.profiler.disable()
        names = {t.native_id: t.name for t in threading.enumerate()}
        lines = [
            f"{names.get(tid, tid)}: {cpu - self.threads.get(tid, 0.0):.3f} s"
            for tid, cpu in sorted(self._thread_cpu().items())
        ]
        (self.out / f"{self.arm}-threads.txt").write_text("\n".join(lines) + "\n")
        if tracemalloc.is_tracing():
            (self.out / f"{self.arm}-heap.txt").write_text(_heap_by_package())
        # The profile comes last, whole (renamed): its file says all is written.
        partial = self.out / f"{self.arm}-steady.prof.part"
        self.profiler.dump_stats(partial)
        partial.replace(self.out / f"{self.arm}-steady.prof")
        os.kill(os.getppid(), signal.SIGUSR1)  # written


def _heap_by_package() -> str:
    import tracemalloc
    from collections import Counter

    sizes: Counter[str] = Counter()
    for stat in tracemalloc.take_snapshot().statistics("filename"):
        name = stat.traceback[0].filename
        parts = Path(name).parts
        if "site-packages" in parts:
            package = parts[parts.index("site-packages") + 1]
        elif "salon" in parts:
            package = "salon." + parts[parts.index("salon") + 1].removesuffix(".py")
        elif "python3.11" in parts:
            package = "stdlib:" + parts[parts.index("python3.11") + 1].removesuffix(".py")
        else:
            package = name
        sizes[package] += stat.size
    total = sum(sizes.values())
    lines = [f"total {total / 2**20:.1f} MiB"]
    lines += [f"{p:40} {n / 2**20:7.2f} MiB" for p, n in sizes.most_common(40)]
    return "\n".join(lines) + "\n"


class _Loops:
    """The event loop's iterations over the steady activations (see the module)."""

    def __init__(self, out: Path, arm: str) -> None:
        import asyncio.base_events

        self.out, self.arm = out, arm
        self.count = self.start = 0
        loop_class: Any = asyncio.base_events.BaseEventLoop
        run_once = loop_class._run_once

        def counted(loop: Any) -> None:
            self.count += 1
            run_once(loop)

        loop_class._run_once = counted
        signal.signal(signal.SIGUSR1, self.begin)
        signal.signal(signal.SIGUSR2, self.end)

    def begin(self, *_: object) -> None:
        self.start = self.count

    def end(self, *_: object) -> None:
        partial = self.out / f"{self.arm}-loops.txt.part"  # renamed whole: read when there
        partial.write_text(f"{self.count - self.start}\n")
        partial.replace(self.out / f"{self.arm}-loops.txt")
        os.kill(os.getppid(), signal.SIGUSR1)  # written


def main() -> int:
    arm = os.environ.get("BENCH_ARM", "salon")
    if steady := os.environ.get("BENCH_PROFILE_STEADY"):
        _Steady(Path(steady), os.environ.get("BENCH_ARM_NAME", arm))
    elif loops := os.environ.get("BENCH_LOOP_COUNT"):
        _Loops(Path(loops), os.environ.get("BENCH_ARM_NAME", arm))
    if arm == "floor":
        _point_discord_at_the_fake()
        from bench.floor_bot import main as floor

        return floor()
    gc.disable()  # as salon.launch does first: discord.py loads here, before it
    _point_discord_at_the_fake()
    if arm == "sdk":
        _use_the_sdk_create()
    if without := os.environ.get("BENCH_WITHOUT"):
        _without(without.split(","))
    from salon.launch import main as salon

    argv = ["run", sys.argv[1], "--bot", sys.argv[2]]
    profile = os.environ.get("BENCH_PROFILE")
    if not profile:
        return salon(argv)
    import cProfile

    profiler = cProfile.Profile()
    try:
        return profiler.runcall(salon, argv)
    finally:
        profiler.dump_stats(profile)


if __name__ == "__main__":
    raise SystemExit(main())
