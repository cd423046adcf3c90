"""The activity page shows an activation's memory reads and writes (its ``remember``,
``recall`` and ``forget`` calls) as memory events, apart from its other tool calls."""

from __future__ import annotations

import re
import time

from salon.trace import ToolTrace
from tests.web.conftest import Site
from tests.web.data import sample_traces
from tests.web.test_activity import sign_in


def _tool(name: str, arguments: dict[str, object], result: str, error: bool = False) -> ToolTrace:
    return ToolTrace(f"c-{name}", name, arguments, result, error, 12.0, "run")


async def test_memory_reads_and_writes_are_shown_per_activation(site: Site) -> None:
    trace = sample_traces(time.time())[0]
    trace.tools = [
        _tool("recall", {"query": "tea"}, 'Notes (...):\nNote 3 (person, ...): "likes tea"'),
        _tool(
            "remember", {"text": "likes green tea", "scope": "person"}, "Kept as note 4 (person)."
        ),
        _tool("forget", {"note_id": 3}, "Forgot note 3."),
        _tool("remember", {"text": "x", "scope": "bot"}, "only the operator ...", error=True),
        _tool("wipe", {"target": "logs"}, "wiped logs"),
    ]
    (trace_id,) = await site.store.write_traces([trace])
    await sign_in(site)
    page = await site.client.get(f"/activity/traces/{trace_id}?fragment=1")
    assert page.status_code == 200
    memory = re.search(r'<div class="memory">(.*?)</div>', page.text, re.S)
    assert memory is not None
    events = re.findall(r"<li[^>]*>(.*?)</li>", memory[1], re.S)
    assert len(events) == 4  # wipe is no memory event
    assert events[0].startswith("read · recall")
    assert "tea" in events[0]
    assert events[1].startswith("write · remember (person)")
    assert "likes green tea" in events[1]
    assert events[2].startswith("write · forget note 3")
    assert "refused" in events[3]
    assert "Memory: 1 read, 3 writes" in page.text
