"""One bot process for the Discord benchmarks: ``salon run DIR --bot NAME`` with
discord.py pointed at the loopback fake (``BENCH_DISCORD_API``, ``BENCH_DISCORD_GATEWAY``).

``BENCH_ARM`` says which bot: ``salon`` (the default) starts as the ``salon`` command does
(``salon.launch``); ``sdk`` is Salon sending requests through the SDK's
``chat.completions.create`` instead of its own body, the request path before it was
changed: the baseline that ``discord_activation_cpu_ms`` is compared with in the same run;
``floor`` is ``bench.floor_bot``, the least such a bot costs. ``BENCH_PROFILE=FILE``
writes a cProfile of the whole (Salon) process to FILE when it stops.
"""

from __future__ import annotations

import gc
import os
import sys
from typing import Any


def _point_discord_at_the_fake() -> None:
    import discord
    import yarl

    discord.http.Route.BASE = os.environ["BENCH_DISCORD_API"]
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(os.environ["BENCH_DISCORD_GATEWAY"])


def _use_the_sdk_create() -> None:
    from salon.llm import openai_compat

    def post(self: Any, path: str, kwargs: dict[str, Any], chunk: type) -> Any:
        if path == "/completions":
            return self._client.completions.create(**kwargs)
        return self._client.chat.completions.create(**kwargs)

    openai_compat.OpenAIProvider._post = post  # type: ignore[method-assign]


def main() -> int:
    arm = os.environ.get("BENCH_ARM", "salon")
    if arm == "floor":
        _point_discord_at_the_fake()
        from bench.floor_bot import main as floor

        return floor()
    gc.disable()  # as salon.launch does first: discord.py loads here, before it
    _point_discord_at_the_fake()
    if arm == "sdk":
        _use_the_sdk_create()
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
