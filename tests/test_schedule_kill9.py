"""kill -9 between a schedule's answer on screen and its occurrence completed in the store:
the next process finds the answer under its key (the terminal: in the chat log, written
before the screen; Discord: as the message's nonce) and completes the occurrence instead
of answering it a second time."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.kill9 import chat
from fakes.discord_server import DiscordServer
from fakes.llm_server import LLMServer, Scripted
from salon.config.example import write_example
from salon.model import ChannelRef, Participant, Schedule
from salon.store.sql import SQLStore, sqlite_url

FIRST = "Assistant: Done: #1"
AGAIN = "Assistant: Again: #1"
WAIT = 30.0


async def lines(proc: asyncio.subprocess.Process) -> AsyncIterator[str]:
    assert proc.stdout is not None
    async for raw in proc.stdout:
        yield raw.decode(errors="replace").rstrip("\n")


def fire_status(db: Path) -> str | None:
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT status FROM schedule_fires").fetchone()
    return None if row is None else str(row[0])


async def until_done(db: Path) -> None:
    """Poll the store until the occurrence is completed: the condition is in another
    process's database, so there is no event to wait on."""
    async with asyncio.timeout(WAIT):
        while fire_status(db) != "done":  # noqa: ASYNC110 - see above
            await asyncio.sleep(0.05)


async def test_a_schedule_answer_shown_before_a_kill_is_not_answered_again(
    tmp_path: Path, llm_server: LLMServer
) -> None:
    root = tmp_path / "bots"
    write_example(root, model="m")
    with (root / "shared.yaml").open("a", encoding="utf-8") as shared:
        shared.write("process_lease: 1\n")  # a killed process's claims go in a second
    (root / "data").mkdir()
    db = root / "data" / "salon.db"
    store = SQLStore(sqlite_url(db))
    await store.open()
    due = datetime.now(UTC) + timedelta(seconds=1)
    who = Participant("user", "you")
    channel = ChannelRef("terminal", "local")
    await store.schedules.create_schedule(
        Schedule(0, "assistant", channel, "task", "UTC", at=due, created_by=who, next_due=due)
    )
    await store.close()

    resume = asyncio.Event()  # the answer's second paragraph never comes: killed before
    llm_server.queue(
        Scripted(chunks=["Done: #1\n\n", "More."], pause_before_chunk=1, resume=resume)
    )
    llm_server.default.text = "Again: #1"  # what a second answer would say
    proc = await chat(root, llm_server)
    try:
        async with asyncio.timeout(WAIT):
            async for line in lines(proc):
                if line == FIRST:
                    break
    finally:
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    assert fire_status(db) == "claimed"  # shown, not completed: the window of the issue

    again = await chat(root, llm_server)
    try:
        await until_done(db)
    finally:
        assert again.stdin is not None
        again.stdin.close()  # end of input: the bot finishes and exits
        shown = [line async for line in lines(again)]
        await asyncio.wait_for(again.wait(), WAIT)
        resume.set()
    assert AGAIN not in shown
    assert FIRST not in shown


async def test_on_discord_a_schedule_answer_shown_before_a_kill_is_not_answered_again(
    tmp_path: Path, llm_server: LLMServer
) -> None:
    """The same with ``salon run`` on the fake Discord (other processes: nothing patched):
    the first message went out with the occurrence's nonce, and the next process's note
    under that nonce brings the message back instead of posting."""
    fake = DiscordServer()
    await fake.start()
    root = tmp_path / "config"
    (root / "bots").mkdir(parents=True)
    (root / "bots" / "assistant.yaml").write_text(
        f"""\
name: Assistant
providers:
  test: {{type: openai, model: m, base_url: "{llm_server.base_url}/v1", api_key_env: TEST_KEY,
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
    db = root / "data" / "salon.db"
    env = {**os.environ, "DISCORD_TOKEN": "token-123", "TEST_KEY": "k"}
    resume = asyncio.Event()
    llm_server.queue(
        Scripted(chunks=["Done: #1\n\n", "More."], pause_before_chunk=1, resume=resume)
    )
    llm_server.default.text = "Again: #1"

    async def bot() -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            sys.executable, "-m", "salon", "run", str(root), "--bot", "assistant",
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL, env=env,
        )  # fmt: skip

    try:
        proc = await bot()
        try:
            await fake.wait_calls("PUT /applications/100/commands", 1, within=WAIT)  # ready
            store = SQLStore(sqlite_url(db))
            await store.open()
            due = datetime.now(UTC)
            channel = ChannelRef("discord", "10")
            who = Participant("alice", "Alice")
            await store.schedules.create_schedule(
                Schedule(
                    0, "assistant", channel, "task", "UTC", at=due, created_by=who, next_due=due
                )
            )
            await store.close()
            await fake.wait_bot_messages("10", 1, within=WAIT)  # noticed within a second
        finally:
            proc.send_signal(signal.SIGKILL)
            await proc.wait()
        assert fire_status(db) == "claimed"

        again = await bot()
        try:
            await until_done(db)
        finally:
            again.send_signal(signal.SIGTERM)
            await asyncio.wait_for(again.wait(), WAIT)
            resume.set()
        said = [m["content"] for m in fake.channels["10"] if m["author"]["id"] == fake.bot.id]
    finally:
        await fake.stop()
    assert said == ["Done: #1"]
