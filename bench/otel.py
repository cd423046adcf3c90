"""otel_overhead_ratio: activation overhead with OpenTelemetry export on over off.

Both arms trace every activation (as a bot does) and idle ``PAUSE`` between activations,
interleaved as ``trace_overhead`` is; the export arm also hands each finished activation
to ``OtelExport``, content off, sending to a loopback OTLP/HTTP receiver that decodes
every request. The receiver runs on its own thread and event loop, as a collector runs in
its own process: its work is not in the bot's loop. The export's own work (spans built by
the trace writer, sent by a worker thread) happens after each answer, so what the figure
shows is what it leaves behind on the next activation.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from bench.activation import PAUSE, Rig, _config, interleaved
from bench.figures import Figure, percentile
from salon.config.observability import OtelConfig

if TYPE_CHECKING:
    from fakes.otlp import OtlpReceiver


@contextmanager
def _receiver() -> Iterator[OtlpReceiver]:
    """An OTLP receiver serving on a thread of its own until the block ends."""
    from fakes.otlp import OtlpReceiver  # OpenTelemetry is loaded only by this bench

    ready = threading.Event()
    holder: list[OtlpReceiver] = []
    stop: list[asyncio.Event] = []

    async def serve() -> None:
        async with OtlpReceiver() as receiver:
            holder.append(receiver)
            stop.append(asyncio.Event())
            ready.set()
            await stop[0].wait()

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    if not ready.wait(10):
        raise RuntimeError("the OTLP receiver did not start")
    try:
        yield holder[0]
    finally:
        loop.call_soon_threadsafe(stop[0].set)
        thread.join(10)


async def run() -> list[Figure]:
    from salon.otel.export import OtelExport  # likewise

    with _receiver() as receiver:
        settings = OtelConfig(endpoint=receiver.endpoint, metrics_interval=5.0)
        export = OtelExport(settings, bot="bench", provider_types={"timed": "openai"}, env={})
        try:
            off, on = await interleaved(
                Rig(_config(), traces=True),
                Rig(_config(), traces=True, sink=export),
                pause=PAUSE,
            )
            await asyncio.to_thread(export.flush, 30)
        finally:
            await asyncio.to_thread(export.shutdown, 10)
        spans = len(receiver.spans)
    return [
        Figure("otel_overhead_ratio", percentile(on, 50) / percentile(off, 50), "x", target=1.05),
        Figure("activation_overhead_otel_p50_us", percentile(on, 50), "us"),
        Figure("otel_spans_received", float(spans), "spans"),
        Figure("otel_spans_dropped", float(export.dropped), "spans", target=0.0),
    ]
