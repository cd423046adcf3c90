"""What separates Salon from the floor, part by part (issue 30): ``discord_cpu``'s Salon and
floor arms beside Salon with parts taken out, all taking turns in one run.

- ``typing``: the typing indicator (one more REST call an activation; the floor sends none),
- ``traces``: the trace of each activation (``traces: {enabled: false}``),
- ``tracestore``: its storing only (each trace built and observed as ever, not stored),
- ``stream``: the answer streamed (server-sent events through the decoder) rather than
  asked for and read whole as the floor does,
- ``bare``: the three out together.

Each part's figure is Salon's CPU per activation minus the arm without it (ms); what the
bare arm still spends over the floor is the rest (the store, the rendered room, the config
and dispatch). The parts are not features to switch off: the arms only measure them.
``floor_parts_salon_loop_iterations`` and ``floor_parts_floor_loop_iterations``: the event
loop's iterations per activation of each (every one is a wake-up and a poll of the sockets).
"""

from __future__ import annotations

import compileall
import os
import tempfile
from pathlib import Path

from bench import discord_cpu
from bench.figures import Figure

PARTS = ("typing", "traces", "tracestore", "stream")
BARE = discord_cpu.WITHOUT + "typing+traces+stream"


async def run() -> list[Figure]:
    compileall.compile_dir(discord_cpu.ROOT / "src", quiet=1)
    compileall.compile_dir(discord_cpu.ROOT / "bench", quiet=1)
    arms = ["salon", "floor", *(discord_cpu.WITHOUT + part for part in PARTS), BARE]
    with tempfile.TemporaryDirectory() as name:
        out = Path(name)
        os.environ["BENCH_LOOP_COUNT"] = name
        try:
            got = await discord_cpu.session(
                arms, on_steady=discord_cpu.signalled(lambda arm: out / f"{arm}-loops.txt")
            )
        finally:
            del os.environ["BENCH_LOOP_COUNT"]
        loops = {arm: int((out / f"{arm}-loops.txt").read_text()) for arm in ("salon", "floor")}
    salon, floor, bare = got["salon"], got["floor"], got[BARE]
    figures = [
        Figure("floor_parts_salon_cpu_ms", salon.per_activation, "ms"),
        Figure("floor_parts_floor_cpu_ms", floor.per_activation, "ms"),
        Figure("floor_cpu_ratio", salon.per_activation / floor.per_activation, "x"),
    ]
    for part in PARTS:
        without = got[discord_cpu.WITHOUT + part]
        figures.append(
            Figure(
                f"floor_parts_{part}_cpu_ms", salon.per_activation - without.per_activation, "ms"
            )
        )
    figures += [
        Figure("floor_parts_salon_loop_iterations", loops["salon"] / discord_cpu.ACTIVATIONS, "n"),
        Figure("floor_parts_floor_loop_iterations", loops["floor"] / discord_cpu.ACTIVATIONS, "n"),
        Figure("floor_parts_bare_cpu_ms", bare.per_activation, "ms"),
        Figure("floor_parts_bare_cpu_ratio", bare.per_activation / floor.per_activation, "x"),
        Figure("floor_parts_bare_peak_rss_mib", bare.peak, "MiB"),
        Figure("floor_parts_salon_peak_rss_mib", salon.peak, "MiB"),
        Figure("floor_parts_floor_peak_rss_mib", floor.peak, "MiB"),
    ]
    return figures
