"""OpenTelemetry export through the SDK's OTLP exporters, off the answer's path.

``OtelExport.export`` (called by the trace writer after an activation) turns the activation
into spans and metric points and queues the spans; a worker thread hands them to the OTLP
span exporter in batches. The queue is bounded (``queue_size``): past it the oldest spans
are dropped and counted, so a collector that is down, slow or failing never delays or
breaks an answer. Metrics go through the SDK's periodic reader.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

import salon
from salon.agent.recording.export import Finished
from salon.config.observability import OtelConfig
from salon.otel.spans import (
    DURATION_BUCKETS,
    GENAI_CONVENTIONS,
    TOKEN_BUCKETS,
    SpanRecord,
    call_points,
    is_sampled,
    spans_of,
)
from salon.tasks import TaskState

__all__ = ["OtelExport"]

logger = logging.getLogger(__name__)

_BATCH = 512
_SCHEDULE_SECONDS = 1.0  # how long spans wait for company before they are sent
_SCOPE = InstrumentationScope(
    "salon", salon.__version__, f"https://opentelemetry.io/schemas/{GENAI_CONVENTIONS}"
)


class OtelExport:
    """One bot's export. ``dropped`` counts spans that never left (queue full, or the
    exporter failed for their batch); ``exported`` those the collector took."""

    def __init__(
        self,
        config: OtelConfig,
        *,
        bot: str,
        provider_types: Mapping[str, str],
        headers: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
        redact: Callable[[str], str] = str,
    ) -> None:
        """``headers``: sent with every export (the values of ``headers_env``); ``env``:
        where the ``OTEL_*`` variables are read (the process environment by default)."""
        self.config = config
        self.traceparent = config.traceparent
        self._env = dict(os.environ if env is None else env)
        self._types = provider_types
        self._redact = redact
        self._ratio = _ratio(config, self._env)
        self.resource = _resource(config, bot, self._env)
        protocol = config.protocol or self._env.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        headers = dict(headers or {})
        self._spans_out = _span_exporter(config, protocol, headers)
        self._queue: deque[ReadableSpan] = deque()
        self._lock = threading.Condition()
        self._stopping = False
        self._sending = 0  # spans handed to the exporter and not yet answered
        self.dropped = 0
        self.exported = 0
        self.failures = 0
        self.last_error: str | None = None
        self._meters: MeterProvider | None = None
        if config.metrics:
            self._meters, self._tokens, self._duration = _meters(
                config, protocol, headers, self.resource
            )
        self._worker = threading.Thread(target=self._run, name="otel-export", daemon=True)
        self._worker.start()

    # -- TraceSink ------------------------------------------------------------------------

    def sampled(self, trace_id: int) -> bool:
        return is_sampled(trace_id, self._ratio)

    def export(self, done: Finished) -> None:
        """Queue one activation's spans and record its metric points; never blocks."""
        if self._meters is not None:
            self._record(done)
        trace_id = done.trace_id
        if trace_id and not done.sampled:
            return
        trace_id, records = spans_of(
            done,
            provider_types=self._types,
            capture_content=self.config.capture_content,
            redact=self._redact,
        )
        if not done.trace_id and not self.sampled(trace_id):
            return
        spans = [self._span(trace_id, r, done.parent_span_id) for r in records]
        with self._lock:
            room = self.config.queue_size - len(self._queue)
            if len(spans) > room:
                self.dropped += len(spans) - max(room, 0)
                if self.dropped == len(spans) - max(room, 0) or self.dropped % 1000 < len(spans):
                    logger.warning("OpenTelemetry export is behind: %d spans dropped", self.dropped)
                spans = spans[: max(room, 0)]
            self._queue.extend(spans)
            if len(self._queue) >= _BATCH:
                self._lock.notify()

    # -- the worker -----------------------------------------------------------------------

    def _run(self) -> None:
        """Send queued spans in batches until stopped (a failure is counted, never fatal)."""
        while True:
            with self._lock:
                if not self._queue and not self._stopping:
                    self._lock.wait(_SCHEDULE_SECONDS)
                batch = [self._queue.popleft() for _ in range(min(_BATCH, len(self._queue)))]
                stopping = self._stopping
                self._sending = len(batch)
            if batch:
                try:
                    self._send(batch)
                finally:
                    with self._lock:
                        self._sending = 0
            elif stopping:
                return

    def _send(self, batch: list[ReadableSpan]) -> None:
        try:
            result = self._spans_out.export(batch)
        except Exception as exc:  # the exporter's own failures are logged by it as well
            result = SpanExportResult.FAILURE
            self.last_error = type(exc).__name__
        if result is SpanExportResult.SUCCESS:
            self.exported += len(batch)
            return
        self.failures += 1
        self.dropped += len(batch)
        if self.failures == 1 or self.failures % 100 == 0:
            logger.warning(
                "OpenTelemetry export failed %d times; %d spans dropped so far",
                self.failures,
                self.dropped,
            )

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every queued span was sent (or dropped) and the metrics exported;
        False on timeout. Blocking: for tests and the end of a process."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                if not self._queue and not self._sending:
                    break
                self._lock.notify()  # send now, not at the next tick
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        if self._meters is not None:
            self._meters.force_flush(int(timeout * 1000))
        return True

    def shutdown(self, timeout: float = 5.0) -> None:
        with self._lock:
            self._stopping = True
            self._lock.notify()
        self._worker.join(timeout)
        self._spans_out.shutdown()
        if self._meters is not None:
            self._meters.shutdown(int(timeout * 1000))

    def task_state(self) -> TaskState:
        """The export as the heartbeat reports a supervised task, with its counts."""
        state = TaskState("otel export", running=self._worker.is_alive())
        state.last_error = self.last_error
        state.counts = {"dropped": self.dropped, "exported": self.exported}
        return state

    # -- conversion -----------------------------------------------------------------------

    def _record(self, done: Finished) -> None:
        for point in call_points(done.trace, self._types):
            for kind, count in (("input", point.input_tokens), ("output", point.output_tokens)):
                self._tokens.record(count, {**point.attributes, "gen_ai.token.type": kind})
            if point.seconds is not None:
                self._duration.record(point.seconds, point.attributes)

    def _span(self, trace_id: int, record: SpanRecord, remote_parent: int) -> ReadableSpan:
        flags = TraceFlags(TraceFlags.SAMPLED)
        context = SpanContext(trace_id, record.span_id, is_remote=False, trace_flags=flags)
        parent = None
        if record.parent_id:
            remote = record.parent_id == remote_parent
            parent = SpanContext(trace_id, record.parent_id, is_remote=remote, trace_flags=flags)
        status = Status(StatusCode.UNSET)
        attributes = dict(record.attributes)
        if record.error is not None:
            attributes["error.type"] = record.error
            status = Status(StatusCode.ERROR, record.error)
        kind = SpanKind.CLIENT if record.kind == "client" else SpanKind.INTERNAL
        return ReadableSpan(
            name=record.name,
            context=context,
            parent=parent,
            resource=self.resource,
            attributes=attributes,
            kind=kind,
            status=status,
            start_time=int(record.start * 1e9),
            end_time=int(max(record.end, record.start) * 1e9),
            events=[Event(name, dict(attrs), int(at * 1e9)) for name, at, attrs in record.events],
            instrumentation_scope=_SCOPE,
        )


def _ratio(config: OtelConfig, env: Mapping[str, str]) -> float:
    """The sampling ratio: the config's, else ``OTEL_TRACES_SAMPLER_ARG`` when
    ``OTEL_TRACES_SAMPLER`` is a trace-id ratio sampler, else everything."""
    if config.sampling_ratio is not None:
        return config.sampling_ratio
    sampler = env.get("OTEL_TRACES_SAMPLER", "")
    if sampler in ("traceidratio", "parentbased_traceidratio"):
        try:
            return min(max(float(env.get("OTEL_TRACES_SAMPLER_ARG", "1")), 0.0), 1.0)
        except ValueError:
            return 1.0
    return 0.0 if sampler in ("always_off", "parentbased_always_off") else 1.0


def _resource(config: OtelConfig, bot: str, env: Mapping[str, str]) -> Resource:
    """The SDK's resource from the environment (``OTEL_RESOURCE_ATTRIBUTES``,
    ``OTEL_SERVICE_NAME``), with the config's keys over it."""
    ours: dict[str, Any] = {
        "service.version": salon.__version__,
        "gen_ai.agent.name": bot,
        **config.resource_attributes,
    }
    name = config.service_name or env.get("OTEL_SERVICE_NAME") or f"salon-{bot}"
    ours["service.name"] = name
    return Resource.create(ours)


def _endpoint(config: OtelConfig, protocol: str, signal: str) -> str | None:
    """The config's endpoint for ``signal`` (``traces``/``metrics``); None leaves it to the
    SDK, which reads ``OTEL_EXPORTER_OTLP_[SIGNAL_]ENDPOINT``."""
    if config.endpoint is None:
        return None
    base = config.endpoint.rstrip("/")
    return base if protocol == "grpc" else f"{base}/v1/{signal}"


def _span_exporter(config: OtelConfig, protocol: str, headers: dict[str, str]) -> SpanExporter:
    endpoint = _endpoint(config, protocol, "traces")
    timeout = config.export_timeout
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcSpans,
        )

        insecure = endpoint is not None and endpoint.startswith("http://")
        return GrpcSpans(
            endpoint=endpoint, headers=headers or None, timeout=timeout, insecure=insecure
        )
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpSpans,
    )

    return HttpSpans(endpoint=endpoint, headers=headers or None, timeout=timeout)


def _meters(
    config: OtelConfig, protocol: str, headers: dict[str, str], resource: Resource
) -> tuple[MeterProvider, Any, Any]:
    endpoint = _endpoint(config, protocol, "metrics")
    exporter: Any
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
            OTLPMetricExporter as GrpcMetrics,
        )

        insecure = endpoint is not None and endpoint.startswith("http://")
        exporter = GrpcMetrics(
            endpoint=endpoint,
            headers=headers or None,
            timeout=config.export_timeout,
            insecure=insecure,
        )
    else:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
            OTLPMetricExporter as HttpMetrics,
        )

        exporter = HttpMetrics(
            endpoint=endpoint, headers=headers or None, timeout=config.export_timeout
        )
    reader = PeriodicExportingMetricReader(
        exporter, export_interval_millis=config.metrics_interval * 1000
    )
    views = [
        View(
            instrument_name="gen_ai.client.token.usage",
            aggregation=ExplicitBucketHistogramAggregation(TOKEN_BUCKETS),
        ),
        View(
            instrument_name="gen_ai.client.operation.duration",
            aggregation=ExplicitBucketHistogramAggregation(DURATION_BUCKETS),
        ),
    ]
    provider = MeterProvider(resource=resource, metric_readers=[reader], views=views)
    meter = provider.get_meter("salon", salon.__version__)
    tokens = meter.create_histogram(
        "gen_ai.client.token.usage",
        unit="{token}",
        description="Input and output tokens used.",
    )
    duration = meter.create_histogram(
        "gen_ai.client.operation.duration", unit="s", description="GenAI operation duration."
    )
    return provider, tokens, duration
