"""/health, /metrics and POST /bots/<name>/events against a real uvicorn on loopback."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from dataclasses import asdict
from pathlib import Path

import httpx2
from prometheus_client.parser import text_string_to_metric_families

from salon.config import WebConfig
from salon.store.sql import SQLStore, sqlite_url
from salon.trace import BotHealth, CallTrace, ToolTrace, Trace
from tests.web.conftest import TRIGGER_TOKEN, Site, serving, write_fleet

AUTH = {"Authorization": f"Bearer {TRIGGER_TOKEN}"}


def beat(bot: str = "salon", *, age: float = 0.0, stopped: bool = False) -> BotHealth:
    now = time.time()
    return BotHealth(
        bot=bot,
        pid=4242,
        host="here",
        started_at=now - 60,
        updated_at=0.0 if stopped else now - age,
        platforms={"irc": not stopped},
        last_event_at=now - 5,
        last_answer_at=now - 4,
        queue_depth=2,
        tasks={"agent": {"running": True, "restarts": 0, "last_error": None}},
    )


async def test_health_is_200_while_every_bot_beats(site: Site) -> None:
    await site.store.health.beat(beat())
    response = await site.client.get("/health")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    (bot,) = body["bots"]
    assert bot["bot"] == "salon"
    assert bot["state"] == "up"
    assert bot["platforms"] == {"irc": True}
    assert bot["queue_depth"] == 2


async def test_health_is_503_naming_a_stale_bot(site: Site) -> None:
    await site.store.health.beat(beat(age=30))
    response = await site.client.get("/health")
    assert response.status_code == 503
    assert response.json()["down"] == ["salon"]
    assert response.json()["bots"][0]["state"] == "stale"


async def test_health_is_503_for_a_stopped_bot_and_a_bot_that_never_beat(site: Site) -> None:
    response = await site.client.get("/health")
    assert response.status_code == 503
    assert response.json()["bots"][0]["state"] == "no heartbeat"
    await site.store.health.beat(beat(stopped=True))
    response = await site.client.get("/health")
    assert response.status_code == 503
    assert response.json()["bots"][0]["state"] == "stopped"


def a_trace(outcome: str = "answered", first_token_ms: float = 700.0) -> Trace:
    now = time.time()
    call = CallTrace(
        kind="answer",
        provider="test",
        model="test-model",
        request={"messages": []},
        started_at=now,
        first_token_ms=first_token_ms,
        input_tokens=100,
        output_tokens=20,
        cache_read_tokens=300,
        cache_write_tokens=100,
        cost=0.002,
        cache_write_wasted_tokens=40,
    )
    tool = ToolTrace("c1", "weather", {"city": "Oslo"}, "cold", False, 12.0, "run")
    return Trace(
        bot="salon",
        platform="irc",
        channel="irc:#salon",
        channel_name="#salon",
        started_at=now,
        ended_at=now + 2,
        outcome=outcome,  # type: ignore[arg-type]
        error="boom" if outcome == "error" else None,
        error_kind="provider" if outcome == "error" else None,
        calls=[call],
        tools=[tool],
    )


async def test_metrics_parse_and_count_activations_tokens_cost_and_latency(site: Site) -> None:
    await site.store.health.beat(beat())
    await site.store.write_traces([a_trace(), a_trace(first_token_ms=3000), a_trace("error")])
    response = await site.client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }
    assert samples[("salon_activations_total", (("bot", "salon"), ("outcome", "answered")))] == 2
    assert samples[("salon_activations_total", (("bot", "salon"), ("outcome", "error")))] == 1
    assert samples[("salon_tokens_total", (("bot", "salon"), ("kind", "cache_read")))] == 900
    assert samples[("salon_cost_usd_total", (("bot", "salon"),))] == 0.006
    assert samples[("salon_cache_write_wasted_tokens_total", (("bot", "salon"),))] == 120
    assert samples[("salon_cache_read_share", (("bot", "salon"),))] == 0.6
    assert samples[("salon_errors_total", (("bot", "salon"), ("kind", "provider")))] == 1
    weather = (("bot", "salon"), ("outcome", "ok"), ("tool", "weather"))
    assert samples[("salon_tool_calls_total", weather)] == 3
    assert samples[("salon_first_token_seconds_bucket", (("bot", "salon"), ("le", "1.0")))] == 2
    assert samples[("salon_first_token_seconds_bucket", (("bot", "salon"), ("le", "+Inf")))] == 3
    assert samples[("salon_first_token_seconds_count", (("bot", "salon"),))] == 3
    assert samples[("salon_bot_up", (("bot", "salon"),))] == 1
    assert samples[("salon_platform_connected", (("bot", "salon"), ("platform", "irc")))] == 1


async def test_an_event_with_the_token_is_enqueued_for_the_bot(site: Site) -> None:
    body = {"channel": "irc:#Salon", "text": "deploy 42 finished", "author": "CI"}
    response = await site.client.post("/bots/salon/events", json=body, headers=AUTH)
    assert response.status_code == 202
    assert response.json()["channel"] == "irc:#salon"
    (event,) = await site.store.inbox.take_events("salon", "test")
    assert (event.channel, event.text, event.author) == ("irc:#salon", "deploy 42 finished", "CI")


async def nothing_enqueued(site: Site) -> bool:
    return await site.store.inbox.take_events("salon", "test") == []


async def test_an_event_without_the_token_gets_401_and_enqueues_nothing(site: Site) -> None:
    body = {"channel": "irc:#salon", "text": "hi"}
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TRIGGER_TOKEN}):
        response = await site.client.post("/bots/salon/events", json=body, headers=headers)
        assert response.status_code == 401
        assert response.json() == {"error": "missing or wrong bearer token"}
    assert await nothing_enqueued(site)


async def test_an_event_for_an_unknown_bot_gets_404(site: Site) -> None:
    body = {"channel": "irc:#salon", "text": "hi"}
    response = await site.client.post("/bots/nobody/events", json=body, headers=AUTH)
    assert response.status_code == 404
    assert "nobody" in response.json()["error"]
    assert await nothing_enqueued(site)


async def test_an_oversized_event_gets_413(site: Site) -> None:
    body = {"channel": "irc:#salon", "text": "x" * 20_000}
    response = await site.client.post("/bots/salon/events", json=body, headers=AUTH)
    assert response.status_code == 413
    assert "16384 bytes" in response.json()["error"]

    async def chunks():  # no Content-Length: the cap holds while reading
        for _ in range(40):
            yield b"x" * 1000

    response = await site.client.post("/bots/salon/events", content=chunks(), headers=AUTH)
    assert response.status_code == 413
    assert await nothing_enqueued(site)


async def test_a_malformed_event_gets_422_saying_what_is_wrong(site: Site) -> None:
    cases = [
        (b"not json", "not JSON"),
        (json.dumps(["a"]).encode(), "JSON object"),
        (json.dumps({"channel": "irc:#salon"}).encode(), "text must be"),
        (json.dumps({"channel": "irc:#salon", "text": "hi", "x": 1}).encode(), "unknown field"),
        (json.dumps({"channel": "#salon", "text": "hi"}).encode(), "write irc:#salon"),
        (json.dumps({"channel": "discord:1", "text": "hi"}).encode(), "no discord platform"),
    ]
    for raw, reason in cases:
        response = await site.client.post("/bots/salon/events", content=raw, headers=AUTH)
        assert response.status_code == 422, raw
        assert reason in response.json()["error"], raw
    assert await nothing_enqueued(site)


async def test_a_bot_whose_process_died_on_this_machine_is_gone_at_once(site: Site) -> None:
    dead = beat()
    dead = BotHealth(**{**asdict(dead), "host": socket.gethostname(), "pid": _dead_pid()})
    await site.store.health.beat(dead)
    response = await site.client.get("/health")
    assert response.status_code == 503
    assert response.json()["bots"][0]["state"] == "gone"


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


async def test_deeply_nested_json_gets_422_and_the_server_serves_on(tmp_path: Path) -> None:
    """Nesting past Python's recursion limit is bad input like any other, not a crash."""
    root = write_fleet(tmp_path)
    store = SQLStore(sqlite_url(tmp_path / "salon.db"))
    await store.open()
    settings = WebConfig(max_event_bytes=1_000_000)
    try:
        async with (
            serving(root, store, settings=settings) as (_, url),
            httpx2.AsyncClient(base_url=url, timeout=30) as client,
        ):
            for raw in (b"[" * 100_000, b'{"text": ' * 100_000):
                response = await client.post("/bots/salon/events", content=raw, headers=AUTH)
                assert response.status_code == 422
                (reason,) = response.json()["error"].splitlines()
                assert "nested" in reason
            body = {"channel": "irc:#salon", "text": "still here"}
            response = await client.post("/bots/salon/events", json=body, headers=AUTH)
            assert response.status_code == 202
    finally:
        await store.close()


async def test_a_lone_surrogate_in_an_event_is_replaced_not_a_crash(site: Site) -> None:
    """JSON may escape a lone surrogate, which no encoder (nor the store) accepts."""
    raw = rb'{"channel": "irc:#salon", "text": "a\ud800b", "author": "C\udc00I"}'
    response = await site.client.post("/bots/salon/events", content=raw, headers=AUTH)
    assert response.status_code == 202
    (event,) = await site.store.inbox.take_events("salon", "test")
    assert (event.text, event.author) == ("a\ufffdb", "C\ufffdI")
    for raw in (rb'{"channel": "irc:#sal\ud800on", "text": "hi"}', rb'{"\ud800": 1}'):
        response = await site.client.post("/bots/salon/events", content=raw, headers=AUTH)
        assert response.status_code == 422
    assert "unknown field(s): \ufffd" in response.json()["error"]
    assert await nothing_enqueued(site)


async def test_an_event_for_a_platform_the_bot_does_not_run_is_refused(site: Site) -> None:
    """``salon run`` starts no terminal, and this bot is on IRC only: nothing would take it."""
    for channel in ("terminal:local", "discord:123456", "slack:C0123"):
        body = {"channel": channel, "text": "hi"}
        response = await site.client.post("/bots/salon/events", json=body, headers=AUTH)
        assert response.status_code == 422, channel
        (reason,) = response.json()["error"].splitlines()
        assert channel.partition(":")[0] in reason
        assert "irc" in reason  # what it does run
    assert await nothing_enqueued(site)


async def test_an_event_for_a_platform_the_bot_reports_running_is_taken(site: Site) -> None:
    await site.store.health.beat(BotHealth(**{**asdict(beat()), "platforms": {"terminal": True}}))
    body = {"channel": "terminal:local", "text": "from the terminal's bot"}
    response = await site.client.post("/bots/salon/events", json=body, headers=AUTH)
    assert response.status_code == 202


async def test_an_event_for_a_matrix_or_slack_bot_is_taken(site: Site) -> None:
    (site.root / "bots" / "chat.yaml").write_text(
        "name: Chat\nsystem_prompt: Hi.\nplatforms:\n"
        "  matrix: {homeserver: 'https://matrix.example', user_id: '@chat:matrix.example'}\n"
        "  slack: {}\n",
        encoding="utf-8",
    )
    for channel in ("matrix:!room:matrix.example", "slack:C0123"):
        body = {"channel": channel, "text": "hi"}
        response = await site.client.post("/bots/chat/events", json=body, headers=AUTH)
        assert response.status_code == 202, response.text
        assert response.json()["channel"] == channel


async def test_an_event_for_a_terminal_that_stopped_is_refused(site: Site) -> None:
    await site.store.health.beat(BotHealth(**{**asdict(beat()), "platforms": {"terminal": False}}))
    body = {"channel": "terminal:local", "text": "anyone?"}
    response = await site.client.post("/bots/salon/events", json=body, headers=AUTH)
    assert response.status_code == 422
    assert await nothing_enqueued(site)
