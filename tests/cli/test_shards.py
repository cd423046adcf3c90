"""A sharded Discord bot: ``salon run`` starts one process per shard group, each connects
its shards to the fake Discord through ``api_base_url`` and ``gateway_url`` (nothing
patched: they are other processes), and each guild is answered once, by its own shard."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path

from fakes.databases import Database
from fakes.discord_server import DiscordServer, shard_of
from fakes.llm_server import LLMServer, Recorded, Scripted

SECOND_GUILD = str(1 << 22)  # (id >> 22) % 2 == 1: shard 1's guild; guild "1" is shard 0's
LOBBY = "20"


def configure(root: Path, fake: DiscordServer, llm: LLMServer, database: Database) -> None:
    (root / "bots").mkdir(parents=True)
    (root / "bots" / "assistant.yaml").write_text(
        f"""\
name: Assistant
providers:
  test: {{type: openai, model: m, base_url: "{llm.base_url}/v1", api_key_env: TEST_KEY,
          retries: 0}}
provider: test
database_url: {database.url}
database_password_env: SALON_TEST_DATABASE_PASSWORD
restart_backoff_initial: 0.1
platforms:
  discord:
    token_env: DISCORD_TOKEN
    api_base_url: {fake.api}
    gateway_url: {fake.gateway}
    shard_count: 2
    shards_per_process: 1
"""
    )


def answer_with_the_guild(request: Recorded) -> Scripted:
    """The answer names the channel the question came from: in which guild it was asked."""
    last = str(request.body["messages"][-1]["content"])
    return Scripted(text="heard: " + ("first" if "first guild" in last else "second"))


async def test_salon_run_starts_a_process_per_shard_and_each_guild_is_answered_once(
    pg_database: Database, tmp_path: Path
) -> None:
    fake = DiscordServer()
    fake.add_guild(SECOND_GUILD, "Second", {LOBBY: "lobby"})
    assert shard_of("1", 2) == 0
    assert shard_of(SECOND_GUILD, 2) == 1
    await fake.start()
    root = tmp_path / "config"
    async with LLMServer() as llm:
        llm.respond = answer_with_the_guild
        configure(root, fake, llm, pg_database)
        env = {
            **os.environ,
            "DISCORD_TOKEN": "token-123",
            "TEST_KEY": "k-test",
            "SALON_TEST_DATABASE_PASSWORD": pg_database.password or "",
        }
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "salon", "run", str(root),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, env=env,
        )  # fmt: skip
        try:
            # Each process syncs its slash commands once its shards are ready.
            await fake.wait_calls("PUT /applications/100/commands", 2, within=60)
            assert sorted(fake.shards_seen) == [(0, 2), (1, 2)]
            alice = fake.people[0]
            for channel, text in (("10", "in the first guild"), (LOBBY, "in the second")):
                await fake.post(channel, alice, f"<@{fake.bot.id}> {text}", mentions=[fake.bot])
            first = await fake.wait_bot_messages("10", 1, within=30)
            second = await fake.wait_bot_messages(LOBBY, 1, within=30)
            await llm_quiet(fake)
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = await asyncio.wait_for(proc.communicate(), 30)
            await fake.stop()
    assert [m["content"] for m in first] == ["heard: first"]
    assert [m["content"] for m in second] == ["heard: second"]
    assert len(llm.requests) == 2  # each question reached one process only
    assert proc.returncode == 0, err.decode()


async def llm_quiet(fake: DiscordServer) -> None:
    """A second answer, were one coming, would follow the first within a moment: give the
    other process that moment (a wait that must time out, not a sleep that syncs)."""
    with contextlib.suppress(TimeoutError):
        await fake.wait_bot_messages("10", 2, within=2)
    with contextlib.suppress(TimeoutError):
        await fake.wait_bot_messages(LOBBY, 2, within=1)
