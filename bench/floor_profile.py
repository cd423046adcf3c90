"""Where Salon's extra cost over the floor goes: ``python -m bench.floor_profile [DIR]``.

Runs ``discord_cpu``'s Salon and floor arms in turns (as the benchmark does) with each bot
process profiling its steady activations: a cProfile of the main thread's CPU time (by
package: a built-in function's time goes to the package of its caller), the CPU of each of
its threads, and (``--memory``) tracemalloc's Python heap by package after the activations;
``python -X importtime`` of its start, grouped by package.
Writes the reports into DIR (default ``profile/``) and prints a summary.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pstats
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench import discord_cpu


def _package(filename: str) -> str:
    parts = Path(filename).parts
    if "site-packages" in parts:
        return parts[parts.index("site-packages") + 1].split(".")[0]
    if "salon" in parts:
        return "salon." + parts[parts.index("salon") + 1].removesuffix(".py")
    if "bench" in parts:
        return "bench"
    if "python3.11" in parts:
        return "stdlib:" + parts[parts.index("python3.11") + 1].removesuffix(".py")
    return filename


def _cpu_by_package(profile: Path) -> list[tuple[str, float]]:
    """Main-thread CPU seconds of the profile by package."""
    stats: dict[Any, Any] = pstats.Stats(str(profile)).stats  # type: ignore[attr-defined]
    spent: dict[str, float] = defaultdict(float)
    for (filename, _, _), (_, _, own, _, callers) in stats.items():
        if filename != "~":
            spent[_package(filename)] += own
            continue
        for (caller, _, _), (_, _, share, _) in callers.items():
            spent[_package(caller) if caller != "~" else "builtins"] += share
    return sorted(spent.items(), key=lambda kv: -kv[1])


def _imports_by_package(err: Path) -> list[tuple[str, float]]:
    """Self time of each top-level package's imports (``-X importtime``), seconds."""
    spent: dict[str, float] = defaultdict(float)
    for line in err.read_text(errors="replace").splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)", line)
        if match:
            spent[match.group(2).split(".")[0]] += int(match.group(1)) / 1e6
    return sorted(spent.items(), key=lambda kv: -kv[1])


async def _profiled(out: Path, memory: bool, activations: int, arms: list[str]) -> None:
    os.environ["BENCH_PROFILE_STEADY"] = str(out)
    os.environ["PYTHONPROFILEIMPORTTIME"] = "1"
    if memory:
        os.environ["PYTHONTRACEMALLOC"] = "1"

    steady = discord_cpu.signalled(lambda arm: out / f"{arm}-steady.prof")

    readings = await discord_cpu.session(arms, activations, on_steady=steady, errors=out)
    for arm, reading in readings.items():
        print(arm, reading)
    for arm in readings:
        threads = (out / f"{arm}-threads.txt").read_text().strip().replace("\n", ", ")
        print(f"\n{arm}: CPU of its threads over the steady activations: {threads}")
        spent = _cpu_by_package(out / f"{arm}-steady.prof")
        total = sum(seconds for _, seconds in spent)
        print(f"{arm}: main thread CPU by package, profiled ({total:.2f} s):")
        for package, seconds in spent[:25]:
            print(f"  {package:24} {seconds:7.3f} s {100 * seconds / total:5.1f} %")
        if (out / f"{arm}-heap.txt").exists():
            print(f"{arm}: Python heap by package after the activations (tracemalloc)")
            print((out / f"{arm}-heap.txt").read_text())
    for arm in readings:
        print(f"\n{arm}: imports by package (self time, s; -X importtime)")
        for package, seconds in _imports_by_package(out / f"{arm}.err")[:25]:
            print(f"  {package:24} {seconds:.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.floor_profile")
    parser.add_argument("dir", nargs="?", default="profile")
    parser.add_argument("--memory", action="store_true", help="tracemalloc (slower activations)")
    parser.add_argument("--activations", type=int, default=discord_cpu.ACTIVATIONS)
    parser.add_argument(
        "--arm",
        action="append",
        help="an arm to profile (default: salon and floor; e.g. salon-without-typing+traces)",
    )
    args = parser.parse_args()
    out = Path(args.dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    asyncio.run(_profiled(out, args.memory, args.activations, args.arm or ["salon", "floor"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
