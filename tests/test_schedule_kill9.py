"""kill -9 between a schedule's answer on screen and its occurrence completed in the store:
the next process finds the answer under its key (the chat log, written before the screen)
and completes the occurrence instead of answering it a second time."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from salon.config.example import write_example
from salon.model import ChannelRef, Participant, Schedule
from salon.store.sqlite import SQLStore, sqlite_url
from tests.fakes.llm_server import LLMServer, Scripted

FIRST = "Assistant: Done: #1"
AGAIN = "Assistant: Again: #1"
WAIT = 30.0


async def chat(root: Path, server: LLMServer) -> asyncio.subprocess.Process:
    env = {**os.environ, "OPENAI_BASE_URL": server.base_url + "/v1", "OPENAI_API_KEY": "k"}
    return await asyncio.create_subprocess_exec(
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
    await store.create_schedule(
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
