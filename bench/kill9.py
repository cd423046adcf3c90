"""kill -9 while Salon writes: a line people saw must be in the store afterwards.

``kill9_lost_shown_lines``: ``salon chat`` as a real process answers a steady stream of
lines (a loopback model answering at once); it is killed with SIGKILL at a random moment,
many times over. Every answer it printed must be in the chat log afterwards.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sqlite3
import sys
import tempfile
from pathlib import Path

from tests.fakes.llm_server import LLMServer

from bench.figures import Figure
from salon.config.example import write_example

ROUNDS = 30
ANSWER = "Noted."


def bot_lines(db: Path) -> int:
    if not db.exists():
        return 0
    with sqlite3.connect(db) as conn:
        row = conn.execute(
            "SELECT count(*) FROM chat_log WHERE author_is_bot AND kind = 'message'"
        ).fetchone()
    return int(row[0])


async def _round(root: Path, server: LLMServer, rng: random.Random) -> int:
    """One run killed at a random moment; returns how many answers it showed."""
    env = {**os.environ, "OPENAI_BASE_URL": server.base_url + "/v1", "OPENAI_API_KEY": "k"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "salon",
        "chat",
        str(root),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=env,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    shown = 0
    deadline = asyncio.get_running_loop().time() + rng.uniform(1.5, 4.0)

    async def talk() -> None:
        n = 0
        while True:
            proc.stdin.write(f"line {n}\n".encode())  # type: ignore[union-attr]
            await proc.stdin.drain()  # type: ignore[union-attr]
            n += 1
            await asyncio.sleep(0.01)

    async def read() -> None:
        nonlocal shown
        async for raw in proc.stdout:  # type: ignore[union-attr]
            if raw.decode(errors="replace").rstrip("\n") == f"Assistant: {ANSWER}":
                shown += 1

    talking, reading = asyncio.ensure_future(talk()), asyncio.ensure_future(read())
    await asyncio.sleep(max(0.0, deadline - asyncio.get_running_loop().time()))
    proc.send_signal(signal.SIGKILL)
    await proc.wait()
    talking.cancel()
    await asyncio.gather(talking, return_exceptions=True)
    await asyncio.wait_for(reading, 10)  # what was printed before the kill is in the pipe
    return shown


async def measure(rounds: int = ROUNDS, seed: int = 9) -> dict[str, int]:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "bots"
        write_example(root, model="m")
        db = root / "data" / "salon.db"
        shown_total = lost = 0
        async with LLMServer() as server:
            server.default.text = ANSWER
            for _ in range(rounds):
                before = bot_lines(db)
                shown = await _round(root, server, rng)
                stored = bot_lines(db) - before
                shown_total += shown
                lost += max(0, shown - stored)
    return {"shown": shown_total, "lost": lost}


async def run() -> list[Figure]:
    result = await measure()
    return [
        Figure("kill9_lost_shown_lines", result["lost"], "lines", target=0),
        Figure("kill9_shown_lines", result["shown"], "lines"),
    ]
