"""Prefill mode end to end through the real anthropic SDK: caching markers stay put."""

from __future__ import annotations

from typing import Any

from fakes.llm_server import LLMServer, Scripted
from salon.model import Participant
from tests.agent.conftest import StartAgent
from tests.agent.test_with_real_sdk import real_provider

ALICE = Participant("alice", "Alice")
ANTHROPIC = {"test": {"type": "anthropic", "model": "m", "api_key_env": "TEST_KEY"}}


def breakpoint_text(body: dict[str, Any]) -> str:
    for message in body["messages"]:
        for block in message["content"]:
            if "cache_control" in block:
                return str(block["text"])
    raise AssertionError("no cache breakpoint in the request")


async def test_prefill_requests_keep_their_breakpoint(
    llm_server: LLMServer, start_agent: StartAgent
) -> None:
    llm_server.queue(Scripted(text=" Hello Alice."), Scripted(text=" Still here."))
    agent, platform = await start_agent(
        real_provider(llm_server, "anthropic"),
        mode="prefill",
        providers=ANTHROPIC,
        cache_breakpoint_offset=1,
        rolling_threshold=20,
    )
    dm = platform.channel("dm", is_direct=True)
    for i in range(5):
        platform.add(dm, ALICE, f"line {i}")
    await platform.post(dm, ALICE, "hi Salon")
    await platform.wait_sent(1)
    await platform.post(dm, ALICE, "again")
    await platform.wait_sent(2)
    first, second = (r.body for r in llm_server.requests)
    assert first["system"] == [
        {
            "type": "text",
            "text": "The system is in CLI simulation mode.",
            "cache_control": {"type": "ephemeral"},
        }
    ]
    assert first["messages"][0]["content"][0]["text"] == "<cmd>cat untitled.txt</cmd>"
    assert "\nAlice:" in first["stop_sequences"]
    assert breakpoint_text(first) == breakpoint_text(second)
    assert breakpoint_text(first).endswith("Alice: line 4")
    last_turn = "".join(b["text"] for b in second["messages"][-1]["content"])
    assert last_turn.endswith("Salon: Hello Alice.\n\nAlice: again\n\nSalon:")
    # The roll's breakpoint, the end of the previous request (read from the cache now) and
    # the newest message (written for the next activation).
    marked = [b["text"] for m in second["messages"] for b in m["content"] if "cache_control" in b]
    assert [t.rsplit("\n\n", 1)[-1] for t in marked] == [
        "Alice: line 4",
        "Alice: hi Salon",
        "Alice: again",
    ]
    first_marked = [
        b["text"] for m in first["messages"] for b in m["content"] if "cache_control" in b
    ]
    assert "".join(first_marked) == "".join(marked[:2])  # what the first request wrote
    state = await agent.store.rolling_state("salon", dm.key)
    assert state is not None
    assert state.breakpoint_id == "5"
