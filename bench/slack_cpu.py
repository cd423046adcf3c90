"""A bot process on the Slack fake: CPU per activation (issue 29).

``salon run`` (one bot, the real slack_bolt / slack_sdk in Socket Mode and the openai SDK)
against the loopback Slack fake and LLM server, in a process of its own, as
``discord_cpu`` runs it: a 400-message channel, 200 activations after 20 of warm-up, each
a message mentioning the bot, the model answering at once. ``slack_activation_cpu_ms``: the
bot's CPU time per activation, to set beside ``discord_activation_cpu_ms``.
"""

from __future__ import annotations

import asyncio
import compileall
import os
import sys
import tempfile
from pathlib import Path

from bench.discord_cpu import ACTIVATIONS, ANSWER, HISTORY, ROOT, WARMUP, _cpu_seconds
from bench.figures import Figure
from fakes.llm_server import LLMServer, Scripted
from fakes.slack_server import APP_TOKEN, BOT_TOKEN, SlackServer

CHANNEL = "C0GENERAL"

CONFIG = """\
name: Bench
provider: llm
providers:
  llm: {{type: openai, model: m, base_url: "{base}/v1", api_key_env: BENCH_LLM_KEY}}
platforms:
  slack: {{api_base_url: "{slack}"}}
data_dir: {data}
"""


async def _bot(tmp: Path, server: SlackServer, llm: LLMServer) -> asyncio.subprocess.Process:
    (tmp / "bots").mkdir(exist_ok=True)
    config = CONFIG.format(base=llm.base_url, slack=server.base_url, data=tmp / "data")
    (tmp / "bots" / "bench.yaml").write_text(config)
    env = {
        **os.environ,
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_APP_TOKEN": APP_TOKEN,
        "BENCH_LLM_KEY": "k-bench",
    }
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "salon",
        "run",
        str(tmp),
        "--bot",
        "bench",
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=(tmp / "bot.err").open("wb"),
    )


async def run() -> list[Figure]:
    compileall.compile_dir(ROOT / "src", quiet=1)
    server, llm = SlackServer(), LLMServer()
    await server.start()
    await llm.start()
    llm.default = Scripted(text=ANSWER)
    people = [server.user(n) for n in ("Alice", "Bob", "Carol")]
    for i in range(HISTORY):
        await server.post(CHANNEL, people[i % 3], f"message number {i}, with a few words in it")
    with tempfile.TemporaryDirectory() as name:
        proc = await _bot(Path(name), server, llm)
        try:
            await server.connected(within=60)
            start = 0.0
            for i in range(WARMUP + ACTIVATIONS):
                if i == WARMUP:
                    start = _cpu_seconds(proc.pid)
                text = f"<@{server.bot.id}> and then {i}?"
                await server.post(CHANNEL, people[i % 3], text)
                await server.wait_bot_messages(CHANNEL, i + 1, within=30)
            per_activation = (_cpu_seconds(proc.pid) - start) / ACTIVATIONS * 1000
        finally:
            proc.terminate()
            await asyncio.wait_for(proc.wait(), 30)
            await llm.stop()
            await server.stop()
    return [Figure("slack_activation_cpu_ms", per_activation, "ms")]
