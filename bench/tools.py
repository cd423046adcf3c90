"""tool_call_overhead_ratio: one trivial call through the ToolHub against the raw SDK.

Both talk to their own copy of the same stdio server (``bench.mcp_echo``); calls alternate
between the two so that machine noise falls on both alike. The hub adds schema validation,
policy-free dispatch and result conversion; the ratio of the p50s is the figure.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from mcp import Client, StdioServerParameters

from bench.figures import Figure, percentile
from salon.model import ToolCall
from salon.tools.hub import MessageHandler, ServerSpec, ToolHub

WARMUP = 50
RUNS = 1000
ROOT = Path(__file__).resolve().parents[1]


def _params() -> StdioServerParameters:
    args = ["-m", "bench.mcp_echo"]
    return StdioServerParameters(command=sys.executable, args=args, cwd=str(ROOT))


async def run() -> list[Figure]:
    def connect(on_message: MessageHandler) -> Client:
        return Client(_params(), message_handler=on_message, cache=None)

    hub_samples: list[float] = []
    raw_samples: list[float] = []
    async with ToolHub([ServerSpec("echo", connect)]) as hub, Client(_params(), cache=None) as raw:
        await raw.list_tools()  # the raw client validates results against listed schemas too
        call = ToolCall("b", "echo", {"text": "ping"})
        for i in range(WARMUP + RUNS):
            start = time.perf_counter_ns()
            result = await hub.call(call)
            middle = time.perf_counter_ns()
            await raw.session.call_tool("echo", {"text": "ping"})
            end = time.perf_counter_ns()
            assert result.content == "ping", result
            if i >= WARMUP:
                hub_samples.append((middle - start) / 1000)
                raw_samples.append((end - middle) / 1000)
    hub_p50 = percentile(hub_samples, 50)
    raw_p50 = percentile(raw_samples, 50)
    return [
        Figure("tool_call_hub_p50_us", hub_p50, "us"),
        Figure("tool_call_raw_sdk_p50_us", raw_p50, "us"),
        Figure("tool_call_overhead_ratio", hub_p50 / raw_p50, "x", target=1.2),
    ]
