"""The export as a bot process has it: built from the config, in the heartbeat and
/metrics, and a pushed event's trace context kept through the inbox."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest

from salon.app import BotApp
from salon.config import Secrets
from salon.otel.export import OtelExport
from salon.store.sql import SQLStore, sqlite_url
from salon.web.events import _traceparent
from salon.web.health import _Snapshot
from tests.conftest import bot_config

PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


async def test_a_bot_with_an_otel_section_exports_and_reports_its_drops(tmp_path: Path) -> None:
    otel = {"endpoint": "http://127.0.0.1:9", "headers_env": {"Authorization": "OTEL_AUTH"}}
    config = bot_config(data_dir=str(tmp_path / "data"), otel=otel)
    app = BotApp(key="bot", config=config, root=tmp_path, secrets=Secrets({"OTEL_AUTH": "k"}))
    async with app:
        assert isinstance(app.otel, OtelExport)
        assert app.traces.sink is app.otel
        app.otel.dropped = 7
        task = app.upkeep.health().tasks["otel export"]
        assert task["dropped"] == 7
        assert task["running"] is True
    assert not app.otel._worker.is_alive()  # stopped with the bot


def test_a_bot_without_one_has_no_export(tmp_path: Path) -> None:
    app = BotApp(key="bot", config=bot_config(), root=tmp_path, secrets=Secrets({}))
    assert app.otel is None
    assert app.traces.sink is None


def test_metrics_count_the_spans_a_bot_dropped() -> None:
    bots = [{"bot": "muse", "state": "up", "tasks": {"otel export": {"dropped": 12}}}]
    totals: dict[str, list[object]] = {"outcomes": [], "latency": [], "tools": [], "errors": []}
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot(totals, bots))
    assert 'salon_otel_spans_dropped_total{bot="muse"} 12.0' in generate_latest(registry).decode()


def test_only_a_valid_traceparent_is_kept() -> None:
    assert _traceparent(PARENT) == PARENT
    assert _traceparent(PARENT.upper()) == PARENT
    for broken in (
        "",
        "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # unknown version
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  # zero trace id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  # zero span id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
        "00-xyz-00f067aa0ba902b7-01",
    ):
        assert _traceparent(broken) == ""


async def test_a_pushed_event_keeps_its_trace_context_in_the_inbox(tmp_path: Path) -> None:
    store = SQLStore(sqlite_url(tmp_path / "salon.db"))
    await store.open()
    try:
        await store.inbox.enqueue_event("bot", "memory:room", "deployed", "CI", traceparent=PARENT)
        await store.inbox.enqueue_event("bot", "memory:room", "again", "CI")
        first, second = await store.inbox.take_events("bot", "me")
    finally:
        await store.close()
    assert (first.traceparent, second.traceparent) == (PARENT, "")
