"""A bot process on the Discord fake: CPU per activation, memory, start-up.

``salon run`` (one bot, the real discord.py and openai SDK) against the project's loopback
Discord fake and LLM server, in a process of its own so that its CPU and memory are its
own. A 400-message channel; each activation replies to the bot's previous answer; the
model answers at once.

``discord_activation_cpu_ms``: the bot's CPU time per activation over 200 activations
after 20 of warm-up, and ``discord_activation_cpu_sdk_create_ms`` the same with requests
sent through the SDK's ``create`` (the request path before #17), measured in the same run.
``bot_rss_mib``: resident memory after them. ``bot_startup_cpu_s``: CPU time from the
process's start to its first ready (slash commands registered); the provider's SDK is
imported just after ready, so ``bot_first_answer_cpu_s`` (CPU time from the start to the
first answer sent) shows the whole cost of a start.
"""

from __future__ import annotations

import asyncio
import compileall
import os
import sys
import tempfile
from pathlib import Path

from bench.figures import Figure
from fakes.discord_server import DiscordServer
from fakes.llm_server import LLMServer, Scripted

ROOT = Path(__file__).resolve().parent.parent
HISTORY = 400
WARMUP = 20
ACTIVATIONS = 200
CHANNEL = "10"
ANSWER = "A short answer of one paragraph, as most chat replies are in a busy channel."

CONFIG = """\
name: Bench
provider: llm
providers:
  llm: {{type: openai, model: m, base_url: "{base}/v1", api_key_env: BENCH_LLM_KEY}}
platforms:
  discord: {{token_env: DISCORD_TOKEN}}
data_dir: {data}
"""


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def _bot(
    tmp: Path, server: DiscordServer, llm: LLMServer, create: bool
) -> asyncio.subprocess.Process:
    (tmp / "bots").mkdir(exist_ok=True)
    (tmp / "bots" / "bench.yaml").write_text(CONFIG.format(base=llm.base_url, data=tmp / "data"))
    env = {
        **os.environ,
        "DISCORD_TOKEN": "token-bench",
        "BENCH_LLM_KEY": "k-bench",
        "BENCH_DISCORD_API": server.api,
        "BENCH_DISCORD_GATEWAY": server.gateway,
        "BENCH_OPENAI_CREATE": "1" if create else "0",
    }
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench._bot_process",
        str(tmp),
        "bench",
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=(tmp / "bot.err").open("wb"),
    )


async def _session(create: bool) -> tuple[float, float, float, float]:
    """(startup CPU s, CPU ms per activation, RSS MiB, CPU s to the first answer) of one
    bot process."""
    server, llm = DiscordServer(), LLMServer()
    await server.start()
    await llm.start()
    llm.default = Scripted(text=ANSWER)
    people = [server.user(n) for n in ("Alice", "Bob", "Carol")]
    for i in range(HISTORY):
        await server.post(CHANNEL, people[i % 3], f"message number {i}, with a few words in it")
    with tempfile.TemporaryDirectory() as name:
        proc = await _bot(Path(name), server, llm, create)
        try:
            await server.wait_calls(f"PUT /applications/{server.bot.id}/commands", 1, within=60)
            startup = _cpu_seconds(proc.pid)
            answer = None
            first_answer = 0.0
            start = 0.0
            for i in range(WARMUP + ACTIVATIONS):
                if i == WARMUP:
                    start = _cpu_seconds(proc.pid)
                if answer is None:
                    text = f"<@{server.bot.id}> what do you make of it?"
                    await server.post(CHANNEL, people[0], text, mentions=[server.bot])
                else:
                    await server.post(CHANNEL, people[i % 3], f"and then {i}?", reply_to=answer)
                answer = (await server.wait_bot_messages(CHANNEL, i + 1, within=30))[-1]
                if i == 0:
                    first_answer = _cpu_seconds(proc.pid)
            per_activation = (_cpu_seconds(proc.pid) - start) / ACTIVATIONS * 1000
            rss = _rss_mib(proc.pid)
        finally:
            proc.terminate()
            await asyncio.wait_for(proc.wait(), 30)
            await llm.stop()
            await server.stop()
    return startup, per_activation, rss, first_answer


async def run() -> list[Figure]:
    # Salon's bytecode as an installed copy has it (scripts/install compiles it; a process
    # started with PYTHONDONTWRITEBYTECODE would otherwise compile every module each time).
    compileall.compile_dir(ROOT / "src", quiet=1)
    startup, cpu, rss, first_answer = await _session(create=False)
    _, cpu_create, _, _ = await _session(create=True)
    return [
        Figure("discord_activation_cpu_ms", cpu, "ms", target=cpu_create / 2),
        Figure("discord_activation_cpu_sdk_create_ms", cpu_create, "ms"),
        Figure("bot_rss_mib", rss, "MiB", target=90),
        Figure("bot_startup_cpu_s", startup, "s", target=0.7),
        Figure("bot_first_answer_cpu_s", first_answer, "s"),
    ]
