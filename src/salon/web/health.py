"""``GET /health`` and ``GET /metrics``: what the bots' heartbeats and traces in the store say.

Health: a bot is up when its last heartbeat is fresh (bots beat every two seconds; a beat
older than ``STALE_SECONDS`` means the process is gone), stopped when its last beat says
so (``updated_at`` 0), gone when it beat from this machine and its process no longer exists
(killed, so no last beat: seen at once rather than after ``STALE_SECONDS``), and missing
when a configured bot never beat. Any bot not up makes
the answer 503.

Metrics: one registry per scrape, fed by a collector from a snapshot of the store (so the
numbers are the fleet's, whichever process wrote them; no multiprocess files).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response

from salon.store._traces import LATENCY_BUCKETS
from salon.trace import BotHealth
from salon.web.cache_alarm import AlarmMetrics, judged_channels
from salon.web.context import Web

__all__ = ["STALE_SECONDS", "bot_states", "health", "metrics"]

STALE_SECONDS = 10.0


def _gone(report: BotHealth) -> bool:
    """The bot ran on this machine and its process is no more (killed: no last beat)."""
    if report.host != socket.gethostname() or report.pid <= 0:
        return False
    try:
        os.kill(report.pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # someone else's process: it exists
        return False
    return False


def _state(report: BotHealth | None, now: float) -> str:
    if report is None:
        return "no heartbeat"
    if report.updated_at == 0:
        return "stopped"
    if now - report.updated_at > STALE_SECONDS:
        return "stale"
    if _gone(report):
        return "gone"
    return "up"


def _bot(name: str, report: BotHealth | None, now: float) -> dict[str, Any]:
    shown: dict[str, Any] = {"bot": name, "state": _state(report, now)}
    if report is not None:
        shown |= {
            "pid": report.pid,
            "host": report.host,
            "last_beat_age": round(now - report.updated_at, 1) if report.updated_at else None,
            "platforms": report.platforms,
            "last_event_at": report.last_event_at,
            "last_answer_at": report.last_answer_at,
            "queue_depth": report.queue_depth,
            "tasks": report.tasks,
            "reload_error": report.reload_error,
        }
    return shown


def bot_states(
    reports: Sequence[BotHealth], expected: set[str], now: float
) -> list[dict[str, Any]]:
    """Each configured or reporting bot, with its state: up, stale, gone, stopped, no heartbeat."""
    by_name = {r.bot: r for r in reports}
    return [_bot(n, by_name.get(n), now) for n in sorted(expected | set(by_name))]


async def health(request: Request) -> Response:
    web: Web = request.app.state.web
    configs = await web.fleet.current()
    bots = bot_states(await web.store.health.health_reports(), set(configs.bots), web.now())
    down = [b["bot"] for b in bots if b["state"] != "up"]
    body = {"status": "down" if down else "ok", "down": down, "bots": bots}
    return web.json(body, 503 if down else 200)


class _Snapshot(Collector):
    """The store's totals as metric families (collected once, for one scrape)."""

    def __init__(self, totals: dict[str, Any], bots: list[dict[str, Any]]) -> None:
        self.totals = totals
        self.bots = bots

    def collect(self) -> Iterator[Metric]:
        yield from self._activity()
        yield from self._latency()
        yield from self._vitals()

    def _activity(self) -> Iterator[Metric]:
        activations = CounterMetricFamily(
            "salon_activations", "Activations by outcome", labels=["bot", "outcome"]
        )
        tokens = CounterMetricFamily(
            "salon_tokens", "Tokens billed, by kind", labels=["bot", "kind"]
        )
        cost = CounterMetricFamily("salon_cost_usd", "Cost in US dollars", labels=["bot"])
        share = GaugeMetricFamily(
            "salon_cache_read_share", "Share of prompt tokens read from the cache", labels=["bot"]
        )
        wasted = CounterMetricFamily(
            "salon_cache_write_wasted_tokens",
            "Cache write tokens the channel's next call left unread (an estimate)",
            labels=["bot"],
        )
        per_bot: dict[str, list[float]] = {}
        for bot, outcome, count, *totals in self.totals["outcomes"]:
            activations.add_metric([bot, outcome], float(count))
            sums = per_bot.setdefault(bot, [0.0] * 6)
            for i, value in enumerate(totals):
                sums[i] += float(value or 0)
        for bot, (tin, tout, tread, twrite, dollars, unread) in sorted(per_bot.items()):
            wasted.add_metric([bot], unread)
            for kind, value in (("input", tin), ("output", tout)):
                tokens.add_metric([bot, kind], value)
            tokens.add_metric([bot, "cache_read"], tread)
            tokens.add_metric([bot, "cache_write"], twrite)
            cost.add_metric([bot], dollars)
            prompt = tin + tread + twrite
            share.add_metric([bot], tread / prompt if prompt else 0.0)
        errors = CounterMetricFamily(
            "salon_errors", "Failed activations by kind", labels=["bot", "kind"]
        )
        for bot, kind, count in self.totals["errors"]:
            errors.add_metric([bot, kind], float(count))
        tools = CounterMetricFamily(
            "salon_tool_calls", "Tool calls by tool and outcome", labels=["bot", "tool", "outcome"]
        )
        for bot, tool, outcome, count in self.totals["tools"]:
            tools.add_metric([bot, tool, outcome], float(count))
        yield from (activations, tokens, cost, share, wasted, errors, tools)

    def _latency(self) -> Iterator[Metric]:
        latency = HistogramMetricFamily(
            "salon_first_token_seconds", "Time to the first token of an answer", labels=["bot"]
        )
        for bot, *counts in self.totals["latency"]:
            *cumulative, total, total_ms = counts
            buckets = [
                (str(b), float(c or 0)) for b, c in zip(LATENCY_BUCKETS, cumulative, strict=True)
            ]
            buckets.append(("+Inf", float(total or 0)))
            latency.add_metric([bot], buckets, float(total_ms or 0) / 1000)
        yield latency

    def _vitals(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "salon_bot_up", "1 when the bot's heartbeat is fresh", labels=["bot"]
        )
        depth = GaugeMetricFamily(
            "salon_queue_depth", "Events waiting in the bot's queue", labels=["bot"]
        )
        connected = GaugeMetricFamily(
            "salon_platform_connected",
            "1 when the platform is connected",
            labels=["bot", "platform"],
        )
        dropped = CounterMetricFamily(
            "salon_otel_spans_dropped",
            "Spans the OpenTelemetry export dropped (queue full or collector failing)",
            labels=["bot"],
        )
        for bot in self.bots:
            up.add_metric([bot["bot"]], 1.0 if bot["state"] == "up" else 0.0)
            depth.add_metric([bot["bot"]], float(bot.get("queue_depth") or 0))
            for platform, on in sorted((bot.get("platforms") or {}).items()):
                connected.add_metric([bot["bot"], platform], 1.0 if on else 0.0)
            export = (bot.get("tasks") or {}).get("otel export")
            if export is not None:
                dropped.add_metric([bot["bot"]], float(export.get("dropped") or 0))
        yield from (up, depth, connected, dropped)


async def metrics(request: Request) -> Response:
    web: Web = request.app.state.web
    configs = await web.fleet.current()
    bots = bot_states(await web.store.health.health_reports(), set(configs.bots), web.now())
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot(await web.store.traces.trace_metrics(), bots))
    registry.register(AlarmMetrics(await judged_channels(web)))
    return Response(
        generate_latest(registry),
        media_type="text/plain; version=0.0.4; charset=utf-8",
        headers={"Cache-Control": "no-store"},
    )
