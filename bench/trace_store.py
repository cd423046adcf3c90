"""trace_store: the CPU of turning a trace into its stored body, encoder and compression.

Real traces: 300 activations of the ``activation_overhead`` bot (400 messages of history,
Salon's own tools offered) are captured as the store is handed them (a keyframe, then
traces referring to it), then each way of storing them is timed on the same bodies, best
of three, in CPU microseconds per trace: the JSON encoder (``json`` as before, msgspec as
now) and zlib's level (size against CPU). ``trace_store_us`` is what the store does today,
JSON, redaction and compression: run it on the code before through ``BENCH_BEFORE_SRC``.
"""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Callable
from typing import Any

import msgspec

from bench.activation import Rig, _config
from bench.figures import Figure
from salon.store import _traces
from salon.trace import Trace

ACTIVATIONS = 300
LEVELS = (1, 3, 6, 9)


async def _captured() -> list[tuple[Trace, Any, dict[str, Any]]]:
    """(trace, its reference to its keyframe, body as the store encodes it) for each
    activation."""
    found: list[tuple[Trace, Any, dict[str, Any]]] = []
    config = _config().model_copy(update={"builtin_tools": True})
    async with Rig(config, traces=True) as rig:
        part = rig.store.traces
        row = part._trace_row

        def spy(trace: Trace, delta: Any = None) -> dict[str, Any]:
            data = trace.body()
            if delta is not None:
                for call, request in zip(data["calls"], delta[1], strict=True):
                    call["request"] = request
            found.append((trace, delta, data))
            return row(trace, delta)

        part._trace_row = spy  # type: ignore[method-assign]
        for _ in range(ACTIVATIONS):
            await rig.activation()
    return found


def _cpu_us(work: Callable[[Any], Any], items: list[Any]) -> float:
    best = float("inf")
    for _ in range(3):
        began = time.process_time()
        for item in items:
            work(item)
        best = min(best, time.process_time() - began)
    return best / len(items) * 1e6


def _zlib(level: int) -> Callable[[bytes], bytes]:
    def pack(raw: bytes) -> bytes:  # as the store packs: a window no larger than the body
        window = min(15, max(9, len(raw).bit_length()))
        packer = zlib.compressobj(level, zlib.DEFLATED, window, max(1, window - 7))
        return packer.compress(raw) + packer.flush()

    return pack


async def run() -> list[Figure]:
    captured = await _captured()
    bodies = [data for _, _, data in captured]
    encoder = msgspec.json.Encoder(enc_hook=str)
    old = _cpu_us(lambda d: json.dumps(d, ensure_ascii=False, default=str).encode(), bodies)
    new = _cpu_us(encoder.encode, bodies)
    raw = [encoder.encode(d) for d in bodies]
    figures = [
        Figure("trace_store_json_us", old, "us"),
        Figure("trace_store_msgspec_us", new, "us"),
        Figure("trace_store_encoder_ratio", new / old, "x", target=0.5),
    ]
    for level in LEVELS:
        pack = _zlib(level)
        size = sum(len(pack(r)) for r in raw) / len(raw)
        figures.append(Figure(f"trace_store_zlib{level}_us", _cpu_us(pack, raw), "us"))
        figures.append(Figure(f"trace_store_zlib{level}_bytes", size, "B"))
    part = _traces.TracePart(lambda: None, redact=lambda text: text)  # type: ignore[arg-type,return-value]
    whole = _cpu_us(lambda tc: part._trace_row(*tc), [(t, d) for t, d, _ in captured])
    figures.append(Figure("trace_store_us", whole, "us"))
    return figures
