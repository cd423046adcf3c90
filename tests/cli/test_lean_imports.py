"""A bot process loads what its config uses: with one OpenAI-type provider on Discord, no
vendor's SDK, web server, trace CLI or cron parser is imported by the time it is ready, and
an OpenAI-type provider needs no SDK at all: its streams go over aiohttp, which the Discord
adapter has loaded."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from fakes.discord_server import DiscordServer
from fakes.llm_server import LLMServer

# On SIGUSR1 the bot process prints the names of its loaded modules on one line.
SITECUSTOMIZE = """\
import signal, sys

def _dump(*_):
    sys.stdout.write("MODULES " + " ".join(sorted(sys.modules)) + "\\n")
    sys.stdout.flush()

signal.signal(signal.SIGUSR1, _dump)
"""

NEVER_BEFORE_READY = [
    "anthropic",
    "google.genai",
    "salon.trace_cli",
    "salon.web.app",
    "croniter",  # loads at a bot's first schedule
    "sqlalchemy",  # the store writes its SQL itself
    "opentelemetry",  # only with an otel: section
    "salon.otel.export",
    "pydantic.networks",  # the URL checks use pydantic-core's validator directly
    "itsdangerous",  # signs /activity links: loaded when one is asked for
    # the commands' own modules (salon check, salon tools) and the local model's engine
    "salon.config.check",
    "salon.llm.probe",
    "salon.tools_cli",
    "salon.llm.local",
]
WEB_SERVER = ["starlette", "uvicorn"]  # still loaded by the MCP SDK until it leaves this path


def _config(root: Path, fake: DiscordServer, llm: LLMServer) -> None:
    (root / "bots").mkdir(parents=True)
    (root / "bots" / "lean.yaml").write_text(
        f"""\
name: Lean
providers:
  llm: {{type: openai, model: m, base_url: "{llm.base_url}/v1", api_key_env: TEST_KEY}}
provider: llm
data_dir: {root / "data"}
platforms:
  discord: {{token_env: DISCORD_TOKEN, api_base_url: {fake.api}, gateway_url: {fake.gateway}}}
"""
    )


async def _modules_now(proc: asyncio.subprocess.Process) -> set[str]:
    assert proc.stdout is not None
    proc.send_signal(signal.SIGUSR1)
    async with asyncio.timeout(20):
        while not (line := await proc.stdout.readline()).startswith(b"MODULES "):
            assert line, "the bot process ended"
    return set(line.decode().split()[1:])


async def _modules_at_ready(tmp_path: Path, *, answered: bool = False) -> set[str]:
    """The modules of a ``salon run`` bot process at its first ready (``answered``: once
    it has answered a mention too)."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(SITECUSTOMIZE)
    fake = DiscordServer()
    await fake.start()
    async with LLMServer() as llm:
        _config(tmp_path / "config", fake, llm)
        env = {
            **os.environ,
            "DISCORD_TOKEN": "token-123",
            "TEST_KEY": "k-test",
            "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), *sys.path]),
        }
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "salon", "run", str(tmp_path / "config"), "--bot", "lean",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
        )  # fmt: skip
        try:
            # Slash commands are registered once the bot is ready.
            await fake.wait_calls(f"PUT /applications/{fake.bot.id}/commands", 1, within=60)
            if answered:
                alice = fake.user("Alice")
                await fake.post("10", alice, f"<@{fake.bot.id}> hi", mentions=[fake.bot])
                await fake.wait_bot_messages("10", 1, within=30)
            return await _modules_now(proc)
        finally:
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(proc.communicate(), 30)
            await fake.stop()


def _loaded(modules: set[str], names: list[str]) -> list[str]:
    return [n for n in names if any(m == n or m.startswith(n + ".") for m in modules)]


async def test_an_openai_bot_is_ready_without_other_sdks_or_the_trace_cli(tmp_path: Path) -> None:
    modules = await _modules_at_ready(tmp_path)
    assert "discord" in modules  # the listing is of the bot process, at ready
    assert _loaded(modules, NEVER_BEFORE_READY) == []


async def test_an_openai_bot_is_ready_without_the_web_server(tmp_path: Path) -> None:
    modules = await _modules_at_ready(tmp_path)
    assert _loaded(modules, WEB_SERVER) == []


async def test_an_openai_bot_answers_without_the_openai_sdk(tmp_path: Path) -> None:
    modules = await _modules_at_ready(tmp_path, answered=True)
    assert "salon.llm.openai_compat" in modules  # the provider was built and used
    assert _loaded(modules, ["openai", "httpx2", "httpcore2", "anyio"]) == []
