"""A bot without external MCP servers never loads the MCP SDK: its built-ins are native."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Runs in a fresh interpreter: the test process itself has imported mcp long ago.
SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys
    from pathlib import Path

    from salon.app import BotApp
    from salon.config import BotConfig, Secrets
    from salon.llm import FakeProvider, FakeReply, ToolResultPart
    from salon.model import Participant, ToolCall
    from salon.platforms.memory import MemoryPlatform

    async def main(root: Path) -> dict:
        config = BotConfig.model_validate({
            "name": "Salon", "provider": "test", "default_tool_policy": "allow",
            "data_dir": str(root / "data"),
            "providers": {"test": {"type": "openai", "model": "m", "backoff_initial": 0}},
        })
        calls = (
            ToolCall("t", "get_current_time", {"timezone": "Europe/Paris"}),
            ToolCall("r", "get_recent_messages", {"limit": 5}),
            ToolCall("s", "schedule_create", {"when": "not a time", "prompt": "x"}),
        )
        provider = FakeProvider([FakeReply(calls=calls), "done"])
        app = BotApp(key="salon", config=config, root=root, secrets=Secrets({}),
                     provider=provider)
        platform = MemoryPlatform(bot_name="Salon")
        dm = platform.channel("dm", is_direct=True)
        stop = asyncio.Event()
        async with app:
            serving = asyncio.create_task(app.serve(stop, [platform]))
            await asyncio.wait_for(platform.started.wait(), 10)
            await platform.post(dm, Participant("alice", "Alice"), "what time is it?")
            await platform.wait_sent(1)
            stop.set()
            await asyncio.wait_for(serving, 10)
        results = [
            {"content": p.result.content, "is_error": p.result.is_error}
            for p in provider.requests[1].messages[-1].parts
            if isinstance(p, ToolResultPart)
        ]
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("mcp", "mcp_types"))
        return {"results": results, "loaded": loaded}

    print(json.dumps(asyncio.run(main(Path(sys.argv[1])))))
    """
)


def test_a_bot_with_only_builtin_tools_runs_without_the_mcp_sdk(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["loaded"] == []
    now, recent, schedule = report["results"]
    assert not now["is_error"]
    assert "Europe/Paris" in now["content"]
    assert not recent["is_error"]
    assert schedule["is_error"]
    assert schedule["content"].startswith("Error executing tool schedule_create: ")
