"""What every benchmark reports: named figures with a unit and, where one exists, a target."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import math
from dataclasses import asdict, dataclass
from typing import Literal

__all__ = ["Figure", "percentile", "settled_rss_mib"]


@dataclass(frozen=True)
class Figure:
    name: str
    value: float
    unit: str
    target: float | None = None
    direction: Literal["max", "min"] = "max"  # "max": value must stay at or under target

    @property
    def ok(self) -> bool:
        if self.target is None:
            return True
        return self.value <= self.target if self.direction == "max" else self.value >= self.target

    def target_text(self) -> str:
        if self.target is None:
            return "-"
        return f"{'<=' if self.direction == 'max' else '>='} {self.target:g}"

    def json(self) -> str:
        data = asdict(self)
        del data["direction"]
        data["target"] = self.target_text() if self.target is not None else None
        data["ok"] = self.ok
        return json.dumps(data)


def percentile(samples: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of non-empty samples."""
    ordered = sorted(samples)
    rank = max(math.ceil(q / 100 * len(ordered)), 1)
    return ordered[rank - 1]


def settled_rss_mib() -> float:
    """This process's resident memory once garbage is collected and malloc has handed its
    free pages back: unsettled, what earlier benchmarks in the process freed leaves during a
    measurement and reads as memory shrinking."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * 4096 / (1 << 20)
