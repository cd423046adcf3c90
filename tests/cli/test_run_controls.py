"""`salon run` with its web server: the configurator's stop, start and restart reach the
supervisor in that same process, and a bot stopped there stays stopped."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import sys
from pathlib import Path

import httpx2

from salon.cli import main
from salon.web.links import config_token
from tests.cli.test_processes import SECRET, alive, read_until

KEY = "act-K3y-run-controls-9"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def press(client: httpx2.AsyncClient, action: str) -> str:
    page = await client.get("/config/bots")
    token = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert token is not None
    answer = await client.post(
        "/config/bots/act", data={"bot": "ann", "action": action, "csrf": token[1]}
    )
    assert answer.status_code == 200, answer.text
    return answer.text


async def test_stop_start_and_restart_from_the_configurator(tmp_path: Path) -> None:
    root = tmp_path / "fleet"
    main(["init", str(root), "--bot", "ann", "--provider", "openai"])
    port = free_port()
    shared = root / "shared.yaml"
    shared.write_text(
        shared.read_text() + f"restart_backoff_initial: 0.05\nweb: {{port: {port}}}\n"
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "salon",
        "run",
        str(root),
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "OPENAI_API_KEY": SECRET, "SALON_ACTIVITY_KEY": KEY},
    )
    assert proc.stderr is not None
    seen: list[str] = []
    try:
        first = int((await read_until(proc.stderr, r"bot ann started \(pid (\d+)\)", seen))[1])
        await read_until(proc.stderr, r"bot ann running", seen)
        async with httpx2.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            signed = await client.get("/config", params={"token": config_token(KEY)})
            assert signed.status_code == 200
            assert f"running (pid {first})" in (await client.get("/config/bots")).text

            assert "bot ann stopped; it stays stopped" in await press(client, "stop")
            await read_until(proc.stderr, rf"bot ann stopped \(pid {first}\) on request", seen)
            assert not alive(first)
            assert "stopped on request" in (await client.get("/config/bots")).text

            mark = len(seen)
            assert "bot ann starting" in await press(client, "start")
            found = await read_until(proc.stderr, r"bot ann started \(pid (\d+)\)", seen)
            assert not any("started" in line for line in seen[mark:-1])  # none while stopped
            second = int(found[1])
            await read_until(proc.stderr, r"bot ann running", seen)

            assert "bot ann restarting" in await press(client, "restart")
            await read_until(proc.stderr, rf"bot ann stopped \(pid {second}\) on request", seen)
            third = int((await read_until(proc.stderr, r"bot ann started \(pid (\d+)\)", seen))[1])
            assert third != second
            await read_until(proc.stderr, r"bot ann running", seen)
    finally:
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(15):
            rest = await proc.stderr.read()
            code = await proc.wait()
    assert code == 0, [*seen, rest.decode()]
    assert not any("exited with code" in line for line in seen)  # asked for, not crashed
    assert SECRET not in "".join(seen) + rest.decode()
