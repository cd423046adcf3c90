"""kill -9 on the fake Discord, with ``salon run`` (other processes: nothing patched): an
answer cut off after its first paragraph is closed with one line at the next start, never
repeated whole, and a mention made while the bot was dead is answered once."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from fakes.discord_server import DiscordServer
from fakes.llm_server import LLMServer, Scripted
from tests.platforms.conftest import ask

WAIT = 30.0
GENERAL = "10"


def bot_file(root: Path, llm: LLMServer, fake: DiscordServer) -> None:
    (root / "bots").mkdir(parents=True)
    (root / "bots" / "assistant.yaml").write_text(
        f"""\
name: Assistant
providers:
  test: {{type: openai, model: m, base_url: "{llm.base_url}/v1", api_key_env: TEST_KEY,
          retries: 0}}
provider: test
process_lease: 1
platforms:
  discord:
    token_env: DISCORD_TOKEN
    api_base_url: {fake.api}
    gateway_url: {fake.gateway}
""",
        encoding="utf-8",
    )


async def test_a_kill_mid_answer_closes_it_and_a_mention_made_while_dead_is_answered(
    tmp_path: Path, llm_server: LLMServer
) -> None:
    fake = DiscordServer()
    await fake.start()
    root = tmp_path / "config"
    bot_file(root, llm_server, fake)
    env = {**os.environ, "DISCORD_TOKEN": "token-123", "TEST_KEY": "k"}
    resume = asyncio.Event()
    llm_server.queue(
        Scripted(chunks=["Part one.\n\n", "Part two."], pause_before_chunk=1, resume=resume)
    )
    llm_server.default.text = "The answer to the second."
    alice = fake.user("Alice")

    async def bot() -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            sys.executable, "-m", "salon", "run", str(root), "--bot", "assistant",
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL, env=env,
        )  # fmt: skip

    try:
        proc = await bot()
        try:
            await fake.wait_calls("PUT /applications/100/commands", 1, within=WAIT)  # ready
            await ask(fake, GENERAL, alice, "a long question")
            await fake.wait_bot_messages(GENERAL, 1, within=WAIT)  # its first paragraph
        finally:
            proc.send_signal(signal.SIGKILL)
            await proc.wait()
        await ask(fake, GENERAL, alice, "and meanwhile?")  # the bot is dead

        again = await bot()
        try:
            await fake.wait_bot_messages(GENERAL, 3, within=WAIT)
        finally:
            again.send_signal(signal.SIGTERM)
            await asyncio.wait_for(again.wait(), WAIT)
            resume.set()
        said = [m["content"] for m in fake.channels[GENERAL] if m["author"]["id"] == fake.bot.id]
    finally:
        await fake.stop()
    assert said[0] == "Part one."
    assert sorted(said[1:]) == sorted(
        [
            "(Assistant restarted while writing this answer; it is cut off)",
            "The answer to the second.",
        ]
    )
