"""integration_call_overhead_ratio and tool_cache_hit_p50_us: the weather integration.

Overhead: ``get_weather`` through the ToolHub (the integration's native tool set called
in-process: argument model, its request queue, result conversion) against the same HTTP
requests made directly with httpx2 (the client library the integration uses), JSON decoded,
on one kept connection pool. For comparison, the same tool set served as an MCP server
(``salon tools serve``'s wrapping) reached through the hub over the SDK's in-process client
and session (``integration_call_mcp_p50_us``: how every call went before the tools became
native). All talk to the same loopback Open-Meteo fake in the same run; calls alternate so
machine noise falls on all alike; the cache is off. The ratio of the p50s is the figure.

Cache hit: the same call with the cache on, after one miss: what a repeated lookup costs
through the hub, and the cache's own lookup inside the server (normalized key, TTL check).
"""

from __future__ import annotations

import logging
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2

from bench.figures import Figure, percentile
from fakes.vendors.open_meteo import OpenMeteoFake
from salon.config import BotConfig, Secrets
from salon.integrations import integration_specs
from salon.integrations._discipline import ResultCache, cache_key
from salon.model import ToolCall
from salon.tools.hub import MessageHandler, ServerSpec, ToolHub

WARMUP = 30
RUNS = 500
HITS = 2000
CALL = ToolCall("b", "get_weather", {"location": "Seattle"})


def _config(base_url: str, cache_ttl: float) -> BotConfig:
    return BotConfig.model_validate(
        {
            "name": "Bench",
            "provider": "p",
            "providers": {"p": {"type": "openai", "model": "m"}},
            "integrations": {"weather": {"base_url": base_url, "cache_ttl": cache_ttl}},
        }
    )


async def _hub(fake: OpenMeteoFake, root: Path, cache_ttl: float) -> ToolHub:
    specs = integration_specs(_config(fake.base_url, cache_ttl), Secrets({}), root=root)
    return ToolHub(specs)


async def _mcp_hub(fake: OpenMeteoFake, root: Path) -> ToolHub:
    """The same integration as an MCP server, in-process, through the SDK's client."""
    from mcp import Client

    from salon.tools.mcp_serve import to_mcp_server

    (native,) = integration_specs(_config(fake.base_url, 0), Secrets({}), root=root)
    assert native.tools is not None
    server = to_mcp_server(native.tools)

    def connect(on_message: MessageHandler) -> Client:
        return Client(server, message_handler=on_message, cache=None)

    return ToolHub([ServerSpec("weather", connect=connect, timeout=native.timeout)])


async def _direct(client: httpx2.AsyncClient, urls: list[str]) -> list[Any]:
    answers = []
    for url in urls:
        response = await client.get(url)
        response.raise_for_status()
        answers.append(response.json())
    return answers


async def _overhead(fake: OpenMeteoFake, root: Path) -> list[Figure]:
    samples: dict[str, list[float]] = {"hub": [], "mcp": [], "direct": []}
    async with (
        await _hub(fake, root, cache_ttl=0) as hub,
        await _mcp_hub(fake, root) as mcp_hub,
        httpx2.AsyncClient() as client,
    ):
        first = await hub.call(CALL)
        assert not first.is_error, first.content
        # The very requests the integration made, replayed as they were sent.
        urls = [str(httpx2.URL(fake.base_url + r.path, params=r.query)) for r in fake.requests]
        for i in range(WARMUP + RUNS):
            start = time.perf_counter_ns()
            result = await hub.call(CALL)
            native_end = time.perf_counter_ns()
            await _direct(client, urls)
            direct_end = time.perf_counter_ns()
            over_mcp = await mcp_hub.call(CALL)
            mcp_end = time.perf_counter_ns()
            assert not result.is_error, result.content
            assert over_mcp.content == result.content, over_mcp.content
            if i >= WARMUP:
                samples["hub"].append((native_end - start) / 1000)
                samples["direct"].append((direct_end - native_end) / 1000)
                samples["mcp"].append((mcp_end - direct_end) / 1000)
    hub_p50, direct_p50 = percentile(samples["hub"], 50), percentile(samples["direct"], 50)
    mcp_p50 = percentile(samples["mcp"], 50)
    return [
        Figure("integration_call_hub_p50_us", hub_p50, "us"),
        Figure("integration_call_direct_p50_us", direct_p50, "us"),
        Figure("integration_call_mcp_p50_us", mcp_p50, "us"),
        Figure("integration_call_overhead_ratio", hub_p50 / direct_p50, "x", target=1.2),
        Figure("integration_call_mcp_overhead_ratio", mcp_p50 / direct_p50, "x"),
    ]


async def _cache_hits(fake: OpenMeteoFake, root: Path) -> list[Figure]:
    samples: list[float] = []
    async with await _hub(fake, root, cache_ttl=1800) as hub:
        await hub.call(CALL)  # the miss that fills the cache
        asked = len(fake.requests)
        for i in range(WARMUP + HITS):
            start = time.perf_counter_ns()
            result = await hub.call(CALL)
            took = time.perf_counter_ns() - start
            assert not result.is_error, result.content
            if i >= WARMUP:
                samples.append(took / 1000)
        assert len(fake.requests) == asked, "a cache hit went to the vendor"
    return [
        Figure("tool_cache_hit_p50_us", percentile(samples, 50), "us", target=200),
        Figure("tool_cache_hit_p99_us", percentile(samples, 99), "us"),
        _lookup_figure(),
    ]


def _lookup_figure() -> Figure:
    """The cache's own part of a hit: key from the arguments, lookup, expiry check."""
    cache = ResultCache(ttl=1800, max_entries=256, max_bytes=2_000_000, clock=time.monotonic)
    arguments = {"location": " Seattle ", "units": None, "days": None}
    cache.put(cache_key("get_weather", arguments), "Now: 11.5 °C " * 40)
    samples = []
    for _ in range(HITS):
        start = time.perf_counter_ns()
        found = cache.get(cache_key("get_weather", arguments))
        samples.append((time.perf_counter_ns() - start) / 1000)
        assert found is not None
    return Figure("tool_cache_lookup_p50_us", percentile(samples, 50), "us")


def _quiet_logs() -> None:
    """Logging as ``salon run`` sets it (a console handler, httpx2 at WARNING), so neither
    side pays for a per-request log line that a running bot does not write."""
    if not logging.getLogger().handlers:  # before MCPServer's own basicConfig (Rich, INFO)
        logging.basicConfig(level=logging.WARNING)
    for noisy in ("httpx2", "httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


async def run() -> list[Figure]:
    _quiet_logs()
    with tempfile.TemporaryDirectory() as tmp:
        async with OpenMeteoFake() as fake:
            assert isinstance(fake, OpenMeteoFake)
            figures = await _overhead(fake, Path(tmp))
            figures += await _cache_hits(fake, Path(tmp))
    return figures
