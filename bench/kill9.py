"""kill -9 while Salon works: nothing shown is lost, no schedule goes unanswered.

``kill9_lost_shown_lines``: ``salon chat`` as a real process answers a steady stream of
lines (a loopback model answering at once); it is killed with SIGKILL at a random moment,
many times over. Every answer it printed must be in the chat log afterwards.

``kill9_lost_schedule_answers``: one-shot schedules come due every fifth of a second while
``salon chat`` is killed and started again at random moments; the model's answer names the
schedules it was asked about, so the printed answers tell which were answered. After the
last (clean) run, every schedule must have been answered; ``kill9_duplicate_schedule_answers``
counts those answered twice (killed after the answer showed, before it was recorded: the
next process finds the answer's first line under its key in the chat log and does not
answer again). That window is milliseconds wide, so random kills seldom fall in it;
``kill9_lingering_duplicate_answers`` runs the same with answers of two paragraphs, the
second coming ``LINGER`` seconds after the first, which most kills fall into.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import re
import signal
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.figures import Figure
from fakes.llm_server import LLMServer, Recorded, Scripted
from salon.config.example import write_example
from salon.model import ChannelRef, Participant, Schedule
from salon.store.sql import SQLStore, sqlite_url

ROUNDS = 30
ANSWER = "Noted."
LINGER = 2.0  # seconds between an answer's two paragraphs, in the lingering run


def bot_lines(db: Path) -> int:
    if not db.exists():
        return 0
    with sqlite3.connect(db) as conn:
        row = conn.execute(
            "SELECT count(*) FROM chat_log WHERE author_is_bot AND kind = 'message'"
        ).fetchone()
    return int(row[0])


async def chat(root: Path, server: LLMServer) -> asyncio.subprocess.Process:
    """``salon chat`` over ``root`` in a process of its own, its model the loopback server."""
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


async def _round(root: Path, server: LLMServer, rng: random.Random) -> int:
    """One run killed at a random moment; returns how many answers it showed."""
    proc = await chat(root, server)
    assert proc.stdin is not None
    assert proc.stdout is not None
    shown = 0
    first = asyncio.Event()  # the random moment counts from the first answer on screen

    async def talk() -> None:
        n = 0
        while True:
            proc.stdin.write(f"line {n}\n".encode())  # type: ignore[union-attr]
            await proc.stdin.drain()  # type: ignore[union-attr]
            n += 1
            await asyncio.sleep(0.01)

    async def read() -> None:
        nonlocal shown
        async for raw in proc.stdout:  # type: ignore[union-attr]
            if raw.decode(errors="replace").rstrip("\n") == f"Assistant: {ANSWER}":
                shown += 1
                first.set()

    talking, reading = asyncio.ensure_future(talk()), asyncio.ensure_future(read())
    await asyncio.wait_for(first.wait(), 60)
    await asyncio.sleep(rng.uniform(0.0, 2.0))
    proc.send_signal(signal.SIGKILL)
    await proc.wait()
    talking.cancel()
    await asyncio.gather(talking, return_exceptions=True)
    await asyncio.wait_for(reading, 10)  # what was printed before the kill is in the pipe
    return shown


async def measure(rounds: int = ROUNDS, seed: int = 9) -> dict[str, int]:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "bots"
        write_example(root, model="m")
        db = root / "data" / "salon.db"
        shown_total = lost = 0
        async with LLMServer() as server:
            server.default.text = ANSWER
            for _ in range(rounds):
                before = bot_lines(db)
                shown = await _round(root, server, rng)
                stored = bot_lines(db) - before
                shown_total += shown
                lost += max(0, shown - stored)
    return {"shown": shown_total, "lost": lost}


_TASK = re.compile(r"\(scheduled task #(\d+),")
_DONE = re.compile(r"^Assistant: Done: ([#\d ]+)$")


def _done(request: Recorded) -> Scripted:
    """Name the schedules this request asks about (its last turn)."""
    last = request.body.get("messages", [{}])[-1].get("content") or ""
    ids = _TASK.findall(last if isinstance(last, str) else str(last))
    return Scripted(text="Done: " + " ".join(f"#{i}" for i in ids) if ids else "Nothing due.")


def _done_lingering(request: Recorded) -> Scripted:
    """As ``_done``, then a second paragraph ``LINGER`` seconds later."""
    first = _done(request).text
    resume = asyncio.Event()
    asyncio.get_running_loop().call_later(LINGER, resume.set)
    return Scripted(chunks=[first + "\n\n", "(done)"], pause_before_chunk=1, resume=resume)


async def _schedules(root: Path, count: int, every: float) -> None:
    store = SQLStore(sqlite_url(root / "data" / "salon.db"))
    await store.open()
    start = datetime.now(UTC) + timedelta(seconds=1)
    try:
        for n in range(count):
            due = start + timedelta(seconds=n * every)
            await store.schedules.create_schedule(
                Schedule(
                    0,
                    "assistant",
                    ChannelRef("terminal", "local"),
                    f"task {n}",
                    "UTC",
                    at=due,
                    created_by=Participant("user", "you"),
                    next_due=due,
                )
            )
    finally:
        await store.close()


async def _claims_settled(db: Path) -> None:
    """Until no occurrence is claimed and not completed (the bot writes the database from
    another process: polled)."""
    while True:
        with sqlite3.connect(db) as conn:
            (open_claims,) = conn.execute(
                "SELECT count(*) FROM schedule_fires WHERE status = 'claimed'"
            ).fetchone()
        if not open_claims:
            return
        await asyncio.sleep(0.1)


async def _schedule_round(
    root: Path,
    server: LLMServer,
    shown: Counter[int],
    seconds: float | None,
    count: int,
    *,
    after_answer: bool = False,
) -> None:
    """One run, killed after ``seconds`` (counted from its first answer on screen with
    ``after_answer``, if one comes within ten seconds; None: ends cleanly once all
    ``count`` schedules were answered and no claim is left open, or after a minute)."""
    proc = await chat(root, server)
    assert proc.stdout is not None
    assert proc.stdin is not None

    all_shown = asyncio.Event()
    answered = asyncio.Event()
    if len(shown) >= count:
        all_shown.set()

    async def read() -> None:
        async for raw in proc.stdout:  # type: ignore[union-attr]
            found = _DONE.match(raw.decode(errors="replace").rstrip("\n"))
            if found:
                shown.update(int(i) for i in found[1].replace("#", " ").split())
                answered.set()
                if len(shown) >= count:
                    all_shown.set()

    reading = asyncio.ensure_future(read())
    if seconds is None:
        with contextlib.suppress(TimeoutError):  # what is still missing then counts as lost
            await asyncio.wait_for(all_shown.wait(), 60)
            # Claims of killed processes are taken over once their leases run out: until
            # then an occurrence they showed may still be answered a second time.
            await asyncio.wait_for(_claims_settled(root / "data" / "salon.db"), 60)
        proc.stdin.close()  # end of input: answers in progress still come, then it exits
        await asyncio.wait_for(proc.wait(), 60)
    else:
        if after_answer:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(answered.wait(), 10)
        await asyncio.sleep(seconds)
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    await asyncio.wait_for(reading, 10)


async def measure_schedules(
    count: int = 60, every: float = 0.2, seed: int = 4, *, linger: bool = False
) -> dict[str, int]:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "bots"
        write_example(root, model="m")
        (root / "data").mkdir()
        async with LLMServer() as server:
            server.respond = _done_lingering if linger else _done
            await _schedules(root, count, every)
            shown: Counter[int] = Counter()
            last_due = time.monotonic() + 1 + count * every
            kills = 0
            while time.monotonic() < last_due + 1:
                if linger:  # a moment while an answer is on screen, its end still to come
                    wait = rng.uniform(0.0, LINGER)
                    await _schedule_round(root, server, shown, wait, count, after_answer=True)
                else:
                    await _schedule_round(root, server, shown, rng.uniform(0.8, 2.5), count)
                kills += 1
            await _schedule_round(root, server, shown, None, count)
    ids = set(range(1, count + 1))
    return {
        "lost": len(ids - set(shown)),
        "duplicates": sum(c - 1 for c in shown.values() if c > 1),
        "kills": kills,
    }


async def run() -> list[Figure]:
    result = await measure()
    schedules = await measure_schedules()
    lingering = await measure_schedules(linger=True)
    return [
        Figure("kill9_lost_shown_lines", result["lost"], "lines", target=0),
        Figure("kill9_shown_lines", result["shown"], "lines"),
        Figure("kill9_lost_schedule_answers", schedules["lost"], "schedules", target=0),
        Figure("kill9_duplicate_schedule_answers", schedules["duplicates"], "schedules", target=0),
        Figure("kill9_lingering_duplicate_answers", lingering["duplicates"], "schedules", target=0),
        Figure("kill9_lingering_lost_answers", lingering["lost"], "schedules", target=0),
        Figure("kill9_schedule_kills", schedules["kills"], "kills"),
    ]
