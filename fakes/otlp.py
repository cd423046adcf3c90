"""A loopback OTLP/HTTP receiver: what a collector (Jaeger, Tempo, the OTel Collector) takes.

It accepts ``POST /v1/traces`` and ``POST /v1/metrics`` with protobuf bodies (gzip or not),
decodes them with ``opentelemetry-proto`` (the wire format's own definitions, not the SDK's
in-memory exporter) and keeps what arrived. ``mode`` makes it misbehave as a collector
can: ``"error"`` answers 500, ``"hang"`` reads the request and never answers (until
stopped).
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
from dataclasses import dataclass, field
from typing import Any, Literal

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

__all__ = ["OtlpReceiver", "ReceivedSpan"]


@dataclass
class ReceivedSpan:
    name: str
    trace_id: str  # hex
    span_id: str
    parent_span_id: str  # "" for a root
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    status_code: int  # 0 unset, 1 ok, 2 error
    resource: dict[str, Any] = field(default_factory=dict)
    scope: str = ""
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (name, attributes)


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return tuple(_value(v) for v in any_value.array_value.values)
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in any_value.kvlist_value.values}
    return getattr(any_value, kind) if kind else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in pairs}


class OtlpReceiver:
    def __init__(self) -> None:
        self.mode: Literal["ok", "error", "hang"] = "ok"
        self.spans: list[ReceivedSpan] = []
        self.metrics: list[Any] = []  # ExportMetricsServiceRequest messages
        self.requests = 0
        self.arrived = asyncio.Event()
        self._stopping = asyncio.Event()
        self._server: asyncio.Server | None = None
        self.port = 0

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> OtlpReceiver:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)

    async def wait_for(self, predicate: Any, seconds: float = 10.0) -> None:
        """Wait until ``predicate(self)`` holds (checked after every request)."""
        async with asyncio.timeout(seconds):
            while not predicate(self):
                self.arrived.clear()
                await self.arrived.wait()

    def metric_points(self, name: str) -> list[Any]:
        """The data points of the metric ``name`` in the last export that had it. The SDK
        exports cumulative sums: each export holds the totals so far, not an increment."""
        points: list[Any] = []
        for request in reversed(self.metrics):
            if points:
                break
            for resource in request.resource_metrics:
                for scope in resource.scope_metrics:
                    for metric in scope.metrics:
                        if metric.name == name:
                            points += list(metric.histogram.data_points)
        return points

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:  # the exporter keeps its connection alive
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                path = lines[0].split(" ")[1]
                headers = {
                    k.strip().lower(): v.strip()
                    for k, _, v in (line.partition(":") for line in lines[1:] if line)
                }
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                if headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                self.requests += 1
                self.arrived.set()
                if self.mode == "hang":
                    await self._stopping.wait()
                    return
                status, payload = self._take(path, body)
                writer.write(
                    f"HTTP/1.1 {status} X\r\nContent-Type: application/x-protobuf\r\n"
                    f"Content-Length: {len(payload)}\r\n\r\n".encode()
                    + payload
                )
                await writer.drain()
                self.arrived.set()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    def _take(self, path: str, body: bytes) -> tuple[int, bytes]:
        if self.mode == "error":
            return 500, b""
        if path == "/v1/traces":
            request = ExportTraceServiceRequest.FromString(body)
            for resource in request.resource_spans:
                shared = _attributes(resource.resource.attributes)
                for scope in resource.scope_spans:
                    for span in scope.spans:
                        self.spans.append(
                            ReceivedSpan(
                                name=span.name,
                                trace_id=span.trace_id.hex(),
                                span_id=span.span_id.hex(),
                                parent_span_id=span.parent_span_id.hex(),
                                kind=span.kind,
                                start_ns=span.start_time_unix_nano,
                                end_ns=span.end_time_unix_nano,
                                attributes=_attributes(span.attributes),
                                status_code=span.status.code,
                                resource=shared,
                                scope=scope.scope.name,
                                events=[(e.name, _attributes(e.attributes)) for e in span.events],
                            )
                        )
            return 200, ExportTraceServiceResponse().SerializeToString()
        if path == "/v1/metrics":
            self.metrics.append(ExportMetricsServiceRequest.FromString(body))
            return 200, ExportMetricsServiceResponse().SerializeToString()
        return 404, b""
