"""`salon web` and `salon run` serving the web server, as real processes."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx2

from salon.cli import main
from tests.web.conftest import ENVIRON, TRIGGER_TOKEN

SECRET = "sk-live-W3bPr0c355"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def until(check: Callable[[], Awaitable[bool]], seconds: float = 20) -> None:
    """Ask again until ``check`` holds (another process decides when), for ``seconds``."""
    for _ in range(int(seconds * 10)):
        if await check():
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"not so within {seconds} s")


async def read_until(stream: asyncio.StreamReader, pattern: str, seen: list[str]) -> re.Match[str]:
    async with asyncio.timeout(30):
        while True:
            raw = await stream.readline()
            assert raw, f"stream ended before {pattern!r}; saw: {seen}"
            seen.append(raw.decode())
            if found := re.search(pattern, seen[-1]):
                return found


def fleet(tmp_path: Path, port: int) -> Path:
    root = tmp_path / "fleet"
    main(["init", str(root), "--bot", "ann", "--provider", "openai"])
    shared = root / "shared.yaml"
    extra = f"restart_backoff_initial: 60\nweb: {{port: {port}}}\n"
    shared.write_text(shared.read_text() + extra)
    return root


async def test_run_serves_health_which_turns_503_when_a_bot_is_killed(tmp_path: Path) -> None:
    port = free_port()
    root = fleet(tmp_path, port)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "salon", "run", str(root),
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **ENVIRON, "OPENAI_API_KEY": SECRET},
    )  # fmt: skip
    assert proc.stderr is not None
    seen: list[str] = []
    try:
        await read_until(proc.stderr, rf"web server on http://127.0.0.1:{port}", seen)
        async with httpx2.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as client:

            async def healthy() -> bool:
                return (await client.get("/health")).status_code == 200

            await until(healthy)
            (bot,) = (await client.get("/health")).json()["bots"]
            os.kill(bot["pid"], signal.SIGKILL)

            async def down() -> bool:
                return (await client.get("/health")).status_code == 503

            await until(down, seconds=5)
            answer = (await client.get("/health")).json()
            assert answer["down"] == ["ann"]
            assert answer["bots"][0]["state"] == "gone"
    finally:
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(15):
            rest = await proc.stderr.read()
            code = await proc.wait()
    assert code == 0, [*seen, rest.decode()]
    assert SECRET not in "".join(seen) + rest.decode()


async def test_web_alone_serves_triggers_until_it_is_stopped(tmp_path: Path) -> None:
    port = free_port()
    root = fleet(tmp_path, 8787)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "salon", "web", str(root), "--port", str(port),
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **ENVIRON, "OPENAI_API_KEY": SECRET},
    )  # fmt: skip
    assert proc.stderr is not None
    seen: list[str] = []
    try:
        await read_until(proc.stderr, rf"web server on http://127.0.0.1:{port}", seen)
        async with httpx2.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as client:
            health = await client.get("/health")
            assert health.status_code == 503
            assert health.json()["bots"][0]["state"] == "no heartbeat"
            event = {"channel": "terminal:local", "text": "deploy done"}
            headers = {"Authorization": f"Bearer {TRIGGER_TOKEN}"}
            posted = await client.post("/bots/ann/events", json=event, headers=headers)
            # salon init's bot is on no platform salon run starts: nothing would take it.
            assert posted.status_code == 422, posted.text
            assert "runs: no platform" in posted.json()["error"]
    finally:
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(15):
            rest = await proc.stderr.read()
            code = await proc.wait()
    assert code == 0, [*seen, rest.decode()]


async def test_web_says_in_one_line_when_its_port_is_taken(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        root = fleet(tmp_path, 8787)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "salon", "web", str(root), "--port", str(port),
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, **ENVIRON, "OPENAI_API_KEY": SECRET},
        )  # fmt: skip
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 2
    assert f"error: the web server cannot listen on 127.0.0.1:{port}" in err.decode()
    assert "Traceback" not in err.decode()
