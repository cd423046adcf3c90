"""The ``otel:`` section (exporting traces and metrics to an OpenTelemetry collector) and
``traces.cache_alarm`` (telling when a channel's cache read share or cost turns bad)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from salon.config._common import Endpoint, _Strict

__all__ = ["CacheAlarmConfig", "OtelConfig"]


class OtelConfig(_Strict):
    """OpenTelemetry export (the ``otel`` extra). Unset keys fall back on the standard
    ``OTEL_*`` environment variables, as the OpenTelemetry SDK reads them
    (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_PROTOCOL``,
    ``OTEL_EXPORTER_OTLP_HEADERS``, ``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``,
    ``OTEL_TRACES_SAMPLER_ARG``)."""

    enabled: bool = True
    endpoint: Endpoint | None = Field(
        default=None,
        description="the collector's base URL (http/protobuf: /v1/traces and /v1/metrics "
        "are added), or host:port's URL for grpc",
    )
    protocol: Literal["http/protobuf", "grpc"] | None = Field(
        default=None, description="default: OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf"
    )
    headers_env: dict[str, str] = Field(
        default_factory=dict,
        description="HTTP header name -> environment variable holding its value (API keys)",
    )
    service_name: str | None = Field(
        default=None, description="default: OTEL_SERVICE_NAME, else salon-<bot>"
    )
    resource_attributes: dict[str, str] = Field(default_factory=dict)
    sampling_ratio: float | None = Field(
        default=None, ge=0, le=1, description="share of activations exported; default 1"
    )
    capture_content: bool = Field(
        default=False,
        description="put the messages, answers and tool arguments on spans (redacted)",
    )
    traceparent: bool = Field(
        default=True, description="send W3C traceparent on provider HTTP requests"
    )
    metrics: bool = Field(default=True, description="export the GenAI client metrics too")
    metrics_interval: float = Field(default=60.0, gt=0, description="seconds between exports")
    queue_size: int = Field(
        default=2048, ge=1, le=1_000_000, description="spans waiting for export; more are dropped"
    )
    export_timeout: float = Field(default=10.0, gt=0, description="seconds per export request")


class CacheAlarmConfig(_Strict):
    """Per channel, the last ``answers`` answers against the ``baseline_answers`` before
    them (salon.cache_alarm)."""

    enabled: bool = True
    read_share_drop: float = Field(
        default=0.2, gt=0, le=1, description="alarm when the cache read share falls by more"
    )
    cost_factor: float = Field(
        default=2.0, gt=1, description="alarm when the cost per answer grows by more times"
    )
    answers: int = Field(default=10, ge=1, le=1000, description="answers judged together")
    baseline_answers: int = Field(
        default=50, ge=1, le=10_000, description="answers before them, the channel's normal"
    )
