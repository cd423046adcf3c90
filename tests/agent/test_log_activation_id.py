"""Every log line of an activation carries its id (the seed's per-request correlation id),
and ``salon trace show`` names the same id, so a log line leads to its trace and back."""

from __future__ import annotations

import asyncio
import io
import logging
import re
from pathlib import Path

from salon import trace_cli
from salon.agent import Agent
from salon.agent.recording.traces import TraceWriter
from salon.config import Redactor, TracesConfig
from salon.errors import ProviderError
from salon.llm import FakeProvider, FakeReply
from salon.logsetup import configure_logging
from salon.model import Participant
from salon.platforms.memory import MemoryPlatform
from salon.store.sql import SQLStore
from salon.web.pages import trace_detail
from tests.conftest import bot_config

ALICE = Participant("alice", "Alice")


async def test_a_failed_activation_logs_its_id_and_the_trace_shows_the_same(
    store: SQLStore, tmp_path: Path
) -> None:
    logs = tmp_path / "logs"
    root = logging.getLogger()
    saved = list(root.handlers), root.level
    configure_logging(Redactor([]), log_dir=logs, stem="salon")
    platform = MemoryPlatform(bot_name="Salon")
    provider = FakeProvider([FakeReply(error=ProviderError("the model is down"))])
    traces = TraceWriter(store=store, settings=TracesConfig(), prices={})
    agent = Agent(
        bot="salon",
        config=bot_config(),
        provider=provider,
        platforms={platform.name: platform},
        store=store,
        traces=traces,
    )
    await platform.start(agent.submit)
    running = [asyncio.create_task(agent.run()), asyncio.create_task(traces.run())]
    try:
        await platform.post(platform.channel("dm", is_direct=True), ALICE, "hello")
        await agent.wait_idle()
        logging.getLogger("salon.test").info("outside any activation")
        async with asyncio.timeout(10):
            await traces.flush()
    finally:
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        for handler in list(root.handlers):
            root.removeHandler(handler)
            handler.close()
        for handler in saved[0]:
            root.addHandler(handler)
        root.setLevel(saved[1])
    (log,) = logs.glob("salon-*.log")
    lines = log.read_text(encoding="utf-8").splitlines()
    failed = next(line for line in lines if "activation in" in line and "failed" in line)
    found = re.search(r"\[act ([0-9a-f]{12})\]", failed)
    assert found is not None, failed
    outside = next(line for line in lines if "outside any activation" in line)
    assert "[act " not in outside
    out = io.StringIO()
    (summary,) = await store.traces.list_traces(bot="salon")
    assert await trace_cli.show(store.traces, str(summary.id), out=out) == 0
    assert f"activation {found[1]}" in out.getvalue()
    # and the id finds the trace
    again = io.StringIO()
    assert await trace_cli.show(store.traces, found[1], out=again) == 0
    assert f"trace #{summary.id}" in again.getvalue()
    # and the activity page's trace shows it
    found_trace = await store.traces.get_trace(summary.id)
    assert found_trace is not None
    assert f"<code>{found[1]}</code>" in trace_detail(*found_trace)
