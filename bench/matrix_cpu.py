"""A bot process on a real Synapse: CPU per activation.

``salon run`` (one bot, mautrix and the real openai SDK) against Synapse
(``fakes/synapse.py``) and the loopback LLM server, in a process of its own so that its CPU
is its own. A 200-message room; each activation is a person mentioning the bot, read from
the homeserver (``/messages``) as every activation on Matrix is; the model answers at once.

``matrix_activation_cpu_ms``: the bot's CPU time per activation over 50 activations after
5 of warm-up (no target: reported beside ``discord_activation_cpu_ms``).
"""

from __future__ import annotations

import asyncio
import compileall
import os
import sys
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import quote

from mautrix.api import HTTPAPI, Method

from bench.discord_cpu import _cpu_seconds
from bench.figures import Figure
from fakes.llm_server import LLMServer, Scripted
from fakes.synapse import Synapse

ROOT = Path(__file__).resolve().parent.parent
HISTORY = 200
WARMUP = 5
ACTIVATIONS = 50
ANSWER = "A short answer of one paragraph, as most chat replies are in a busy channel."

CONFIG = """\
name: Bench
provider: llm
providers:
  llm: {{type: openai, model: m, base_url: "{base}/v1", api_key_env: BENCH_LLM_KEY}}
platforms:
  matrix: {{homeserver: "{hs}", user_id: "{bot}", rooms: ["{room}"], sync_timeout: 5}}
data_dir: {data}
"""


class _Person:
    """Someone in the room, who waits on their own /sync for the bot's events."""

    def __init__(self, url: str, token: str) -> None:
        self.api = HTTPAPI(url, token=token)
        self.room = ""
        self._since: str | None = None
        self._txn = 0

    async def call(self, method: str, path: str, body: Any = None, **query: str) -> Any:
        return await self.api.request(Method(method), path, body, query_params=query)

    async def say(self, text: str) -> None:
        self._txn += 1
        path = f"/_matrix/client/v3/rooms/{quote(self.room, safe='')}/send/m.room.message"
        await self.call("PUT", f"{path}/b{self._txn}", {"msgtype": "m.text", "body": text})

    async def mark(self) -> None:
        """From now on: what ``wait_for`` looks at comes after this."""
        self._since = (await self.call("GET", "/_matrix/client/v3/sync", timeout="0"))["next_batch"]

    async def wait_for(self, sender: str, kind: str) -> None:
        async with asyncio.timeout(60):
            while True:
                query = {"timeout": "10000"} | ({"since": self._since} if self._since else {})
                answer = await self.call("GET", "/_matrix/client/v3/sync", **query)
                self._since = answer["next_batch"]
                room = answer.get("rooms", {}).get("join", {}).get(self.room, {})
                events = room.get("timeline", {}).get("events", [])
                if any(e["sender"] == sender and e["type"] == kind for e in events):
                    return


async def _session(directory: Path) -> float:
    synapse = Synapse(directory / "synapse")
    await asyncio.to_thread(synapse.start)
    llm = LLMServer()
    await llm.start()
    llm.default = Scripted(text=ANSWER)
    proc = None
    alice: _Person | None = None
    try:
        bot = synapse.register("bench")
        alice_account = synapse.register("alice")
        alice = _Person(synapse.url, alice_account.access_token)
        made = await alice.call("POST", "/_matrix/client/v3/createRoom", {"invite": [bot.user_id]})
        alice.room = made["room_id"]
        for i in range(HISTORY):
            await alice.say(f"message number {i}, with a few words in it")
        (directory / "bots").mkdir()
        (directory / "bots" / "bench.yaml").write_text(
            CONFIG.format(
                base=llm.base_url,
                hs=synapse.url,
                bot=bot.user_id,
                room=made["room_id"],
                data=directory / "data",
            )
        )
        await alice.mark()
        env = {**os.environ, "MATRIX_ACCESS_TOKEN": bot.access_token, "BENCH_LLM_KEY": "k"}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "salon", "run", str(directory), "--bot", "bench",
            cwd=ROOT, env=env, stdout=asyncio.subprocess.DEVNULL,
            stderr=(directory / "bot.err").open("wb"),
        )  # fmt: skip
        await alice.wait_for(bot.user_id, "m.room.member")  # joined
        start = 0.0
        for i in range(WARMUP + ACTIVATIONS):
            if i == WARMUP:
                start = _cpu_seconds(proc.pid)
            await alice.mark()
            await alice.say(f"{bot.user_id} what do you make of {i}?")
            await alice.wait_for(bot.user_id, "m.room.message")
        return (_cpu_seconds(proc.pid) - start) / ACTIVATIONS * 1000
    finally:
        if proc is not None:
            proc.terminate()
            await asyncio.wait_for(proc.wait(), 30)
        if alice is not None:
            await alice.api.session.close()
        await llm.stop()
        await asyncio.to_thread(synapse.stop)


async def run() -> list[Figure]:
    compileall.compile_dir(ROOT / "src", quiet=1)
    with tempfile.TemporaryDirectory() as name:
        cpu = await _session(Path(name))
    return [Figure("matrix_activation_cpu_ms", cpu, "ms")]
