"""Delivery across gaps (issue #40): nothing addressed to the bot is lost or answered twice.

``salon run`` (one bot, the real discord.py) as a process of its own on the loopback Discord
fake, its model the loopback LLM server. Each answer's first paragraph names the questions
it answers (``Answer to q7 q8.``): the fake model answers the questions of its request that
no answer in it names yet, or, with none left, the last one again (a second answer is seen).

``catchup_lost`` and ``catchup_duplicates``: ``GAPS`` gaps of kinds drawn at random
(seeded): a SIGTERM stop and a restart; a kill -9 and a restart; an invalidated gateway
session (RESUME answered with INVALID_SESSION, nothing replayed); a dropped connection
(close 1006 or 4000, the session still valid: RESUME replays the gap); and a kill -9 or a
SIGTERM while the model writes an answer (a slow stream: its first paragraph shown or not
yet; ``shutdown_grace`` is 1 s, so a stop cuts it). In each gap 1-3 questions mention the
bot in two channels or come as DMs; then the run waits until they are answered, ``WAIT``
seconds at most. Lost: never answered by the end; duplicates: answered more than once (the
closing line after a cut answer is not an answer). ``catchup_late`` counts questions
answered after their gap's wait. ``process_lease`` is 2 s, so a killed process's owed
answers are taken over at the next start. Before the first gap the bot answers once in each
place and its marks are written (a channel whose mark was never written is not read back).
``BENCH_CATCHUP_SEED`` draws other gaps (default 40); ``BENCH_CATCHUP_LOGS=DIR`` keeps the
bot's log and a transcript of every channel and model request there.

``catchup_startup_cpu_ratio``: CPU time of a bot process from its launch until it is idle
after ready, with 100 channels to read back (100 marks in the store, each channel with a few
messages and nothing new), over the same start with catch-up off (``catch_up: {max_age:
0}``); ``STARTS`` starts of each, taking turns; the median of each.
"""

from __future__ import annotations

import asyncio
import compileall
import contextlib
import os
import random
import re
import signal
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.figures import Figure
from fakes.discord_server import DiscordServer
from fakes.llm_server import LLMServer, Recorded, Scripted
from salon.model import ChannelMark, ChannelRef
from salon.store.sql import SQLStore, sqlite_url

ROOT = Path(__file__).resolve().parent.parent
GAPS = 30
KINDS = ("sigterm", "kill9", "invalid_session", "disconnect", "kill9_writing", "sigterm_writing")
WAIT = 20.0  # seconds a gap's questions get to be answered
LINGER = 3.0  # seconds a slow answer takes between its two paragraphs
CHANNELS = 100  # channels read back at start, for the CPU figure
STARTS = 5  # starts of each arm
BOT = "bench"
QUESTION = re.compile(r"\bq(\d+)\b")
ANSWER = re.compile(r"^Answer to ((?:q\d+ ?)+)\.")
PLACES = ("10", "10", "11", "dm")  # where a question is asked: two channels and DMs

CONFIG = """\
name: Bench
provider: llm
providers:
  llm: {{type: openai, model: m, base_url: "{base}/v1", api_key_env: BENCH_LLM_KEY}}
platforms:
  discord: {{token_env: DISCORD_TOKEN, api_base_url: "{api}", gateway_url: "{gateway}"}}
process_lease: 2
shutdown_grace: 1
"""


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _until(done: Callable[[], bool], within: float) -> bool:
    """Poll ``done`` (the condition is in another process or server) until true or timeout."""
    deadline = time.monotonic() + within
    while not done():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


def _marks(root: Path) -> int:
    """Channel marks in the bot's store (written by the bot's process)."""
    db = root / "data" / "salon.db"
    if not db.exists():
        return 0
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return int(conn.execute("SELECT count(*) FROM channel_marks").fetchone()[0])


class Bot:
    """``salon run ROOT --bot bench`` as a process; its log is appended to ``log`` and
    watched for lines."""

    def __init__(self, root: Path, fake: DiscordServer, llm: LLMServer, log: Path) -> None:
        self.root, self.fake, self.llm, self.log = root, fake, llm, log
        self.proc: asyncio.subprocess.Process | None = None
        self.lines: list[str] = []
        self._reading: asyncio.Task[None] | None = None

    def configure(self, extra: str = "") -> None:
        (self.root / "bots").mkdir(parents=True, exist_ok=True)
        config = CONFIG.format(base=self.llm.base_url, api=self.fake.api, gateway=self.fake.gateway)
        (self.root / "bots" / f"{BOT}.yaml").write_text(config + extra)

    async def start(self) -> None:
        env = {**os.environ, "DISCORD_TOKEN": "token-bench", "BENCH_LLM_KEY": "k-bench"}
        self.lines = []
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "salon", "run", str(self.root), "--bot", BOT,
            cwd=ROOT, env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        self._reading = asyncio.create_task(self._read(self.proc))

    async def _read(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stderr is not None
        with self.log.open("a", encoding="utf-8") as log:
            log.write(f"---- pid {proc.pid}\n")
            async for raw in proc.stderr:
                line = raw.decode(errors="replace")
                log.write(line)
                self.lines.append(line)

    async def wait_line(self, text: str, within: float = WAIT) -> bool:
        return await _until(lambda: any(text in line for line in self.lines), within)

    def cpu(self) -> float:
        assert self.proc is not None
        return _cpu_seconds(self.proc.pid)

    async def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is None:
            return
        if self.proc.returncode is None:
            self.proc.send_signal(sig)
        await asyncio.wait_for(self.proc.wait(), WAIT)
        if self._reading is not None:
            await asyncio.wait_for(self._reading, WAIT)
        self.proc = None


@dataclass
class Rig:
    """The fake Discord, the model, the bot, and every question asked."""

    fake: DiscordServer
    llm: LLMServer
    bot: Bot
    rng: random.Random
    asked: dict[int, str] = field(default_factory=dict)  # question -> the gap kind it was in
    slow: set[int] = field(default_factory=set)  # questions whose first answer is slow
    written: set[int] = field(default_factory=set)  # slow questions whose answer began
    starts: int = 0

    def answer(self, request: Recorded) -> Scripted:
        """Answer the questions no answer in the request names yet (none: the last again)."""
        named: set[int] = set()
        opened: list[int] = []
        last: list[int] = []
        for turn in request.body.get("messages", []):
            found = [int(q) for q in QUESTION.findall(str(turn.get("content") or ""))]
            if turn.get("role") == "assistant":
                named.update(found)
            elif found:
                opened += found
                last = found
        todo = list(dict.fromkeys(q for q in opened if q not in named)) or last
        text = "Answer to " + " ".join(f"q{q}" for q in todo) + "."
        slow = [q for q in todo if q in self.slow and q not in self.written]
        if not slow:
            return Scripted(text=text)
        self.written.update(slow)
        resume = asyncio.Event()
        asyncio.get_running_loop().call_later(LINGER, resume.set)
        shown = self.rng.random() < 0.5  # the first paragraph out before the rest, or not
        chunks = [text + "\n\n", "More on that."]
        return Scripted(chunks=chunks, pause_before_chunk=1 if shown else 0, resume=resume)

    def answers(self) -> Counter[int]:
        """How many answers (first paragraphs) name each question, in every channel."""
        count: Counter[int] = Counter()
        for messages in self.fake.channels.values():
            for message in messages:
                found = ANSWER.match(message["content"])
                if message["author"]["id"] == self.fake.bot.id and found:
                    count.update(int(q) for q in QUESTION.findall(found[1]))
        return count

    def transcript(self, path: Path) -> None:
        """Every channel as the fake holds it, and what each model request saw."""
        with path.open("w", encoding="utf-8") as out:
            for channel, messages in self.fake.channels.items():
                out.write(f"# channel {channel}\n")
                for m in messages:
                    out.write(f"{m['id']} {m['timestamp']} {m['author']['username']}: ")
                    out.write(m["content"].replace("\n", " / ") + "\n")
            for n, request in enumerate(self.llm.requests):
                turns = [f"{t.get('role')}: {t.get('content')}" for t in request.body["messages"]]
                out.write(f"# request {n}\n" + "\n".join(turns) + "\n")

    async def ask(
        self, kind: str, *, slow: bool = False, place: str | None = None, by: int | None = None
    ) -> int:
        """A question mentioning the bot in ``place`` (a channel id or ``dm``; default: one
        of ``PLACES``), asked by the ``by``th person (default: one of three)."""
        question = len(self.asked) + 1
        self.asked[question] = kind
        if slow:
            self.slow.add(question)
        person = self.fake.people[self.rng.randrange(3) if by is None else by]
        where = place or self.rng.choice(PLACES)
        if where == "dm":
            await self.fake.post(self.fake.dm_channel(person), person, f"q{question} in a DM?")
        else:
            text = f"<@{self.fake.bot.id}> q{question}: what about it?"
            await self.fake.post(where, person, text, mentions=[self.fake.bot])
        return question

    async def opening(self) -> list[int]:
        """A question in each place: a channel is read back after a gap once the bot
        answered there, a DM once it was opened (a new DM in a gap is not found)."""
        places = [("10", None), ("11", None)] + [("dm", by) for by in range(3)]
        return [await self.ask("start", place=place, by=by) for place, by in places]

    async def answered(self, questions: list[int], within: float = WAIT) -> bool:
        return await _until(lambda: all(self.answers()[q] for q in questions), within)

    async def launch(self) -> None:
        await self.bot.start()
        self.starts += 1
        key = f"PUT /applications/{self.fake.bot.id}/commands"  # once per process: ready
        await self.fake.wait_calls(key, self.starts, within=WAIT)

    async def gap(self, kind: str) -> list[int]:
        """One gap of ``kind`` with 1-3 questions asked in it; the questions of the gap
        (with the one being answered when it began, for the ``_writing`` kinds)."""
        questions = []
        if kind.endswith("_writing"):
            questions.append(await self.ask(kind, slow=True))
            await _until(lambda: questions[0] in self.written, WAIT)
            await asyncio.sleep(self.rng.uniform(0.0, LINGER - 1.0))  # while it is written
        if kind.startswith(("sigterm", "kill9")):
            await self.bot.stop(signal.SIGKILL if kind.startswith("kill9") else signal.SIGTERM)
        else:
            self.fake.pause_gateway()
            if kind == "invalid_session":
                self.fake.invalidate_sessions()
            code = 4000 if kind == "invalid_session" else self.rng.choice((1006, 4000))
            await self.fake.drop_connections(code)
        for _ in range(self.rng.randint(1, 3)):
            questions.append(await self.ask(kind))
        await asyncio.sleep(self.rng.uniform(0.2, 2.0))  # the rest of the gap
        if kind.startswith(("sigterm", "kill9")):
            await self.launch()
        else:
            self.fake.open_gateway()
        return questions


@dataclass
class Gaps:
    """What a run of gaps left: every question (with its gap's kind), the answers each got,
    those answered only after their gap's wait, and the gaps by kind."""

    asked: dict[int, str]
    answers: Counter[int]
    late: set[int]
    kinds: Counter[str]

    @property
    def lost(self) -> dict[int, str]:
        return {q: kind for q, kind in self.asked.items() if not self.answers[q]}

    @property
    def duplicates(self) -> int:
        """Questions answered more than once."""
        return sum(1 for n in self.answers.values() if n > 1)

    def twice(self) -> dict[int, tuple[str, int]]:
        return {q: (self.asked[q], n) for q, n in self.answers.items() if n > 1}


async def measure_gaps(
    gaps: int = GAPS, seed: int = 40, *, kinds: Sequence[str] = KINDS, logs: Path | None = None
) -> Gaps:
    """``gaps`` gaps of kinds drawn from ``kinds``; ``logs``: where the bot's log and the
    run's transcript are kept (default: dropped)."""
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        fake, llm = DiscordServer(), LLMServer()
        await fake.start()
        await llm.start()
        bot = Bot(Path(tmp) / "config", fake, llm, (logs or Path(tmp)) / "catchup-bot.log")
        bot.configure()
        rig = Rig(fake, llm, bot, rng)
        llm.respond = rig.answer
        late: set[int] = set()
        drawn: Counter[str] = Counter()
        try:
            await rig.launch()
            await rig.answered(await rig.opening())
            # Written behind every 2 s: a kill before then leaves these channels unmarked,
            # and what is said there in the gap unread (see docs/BENCHMARKS.md).
            await _until(lambda: _marks(bot.root) >= 5, WAIT)
            for _ in range(gaps):
                kind = rng.choice(kinds)
                drawn[kind] += 1
                questions = await rig.gap(kind)
                if not await rig.answered(questions):
                    late.update(questions)
            await rig.answered(list(rig.asked))
            await asyncio.sleep(LINGER)  # a second answer still on its way shows too
        finally:
            await bot.stop()
            if logs is not None:
                rig.transcript(logs / "catchup-transcript.txt")
            await fake.stop()
            await llm.stop()
    answers = rig.answers()
    return Gaps(rig.asked, answers, {q for q in late if answers[q]}, drawn)


GUILD = 800_000_000_000_000_000  # the guild of the CHANNELS channels


async def _rooms(fake: DiscordServer) -> list[ChannelMark]:
    """``CHANNELS`` channels with three messages each; a mark at each one's last message,
    answered in an hour ago (so it is read back after a gap)."""
    rooms = {str(GUILD + 1 + i): f"room-{i}" for i in range(CHANNELS)}
    fake.add_guild(str(GUILD), "Many rooms", rooms)
    answered = time.time() - 3600
    marks = []
    for i, room in enumerate(rooms):
        for j in range(3):
            last = await fake.post(room, fake.people[(i + j) % 3], f"message {j} in room {i}")
        channel = ChannelRef("discord", room, rooms[room], guild_id=str(GUILD))
        stamp = time.time()
        marks.append(ChannelMark(channel, last["id"], stamp, answered))
    return marks


async def _seed(root: Path, marks: list[ChannelMark]) -> None:
    (root / "data").mkdir(parents=True, exist_ok=True)
    store = SQLStore(sqlite_url(root / "data" / "salon.db"))
    await store.open()
    try:
        await store.delivery.save_marks(BOT, marks)
    finally:
        await store.close()


async def _settled_cpu(bot: Bot, quiet: float = 0.5, within: float = 10.0) -> float:
    """The process's CPU time once it has not moved for ``quiet`` seconds."""
    deadline = time.monotonic() + within
    last, since = bot.cpu(), time.monotonic()
    while time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        now = bot.cpu()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            break
    return last


@dataclass
class Start:
    """One start's CPU seconds: at the ready line, and once idle after it."""

    ready: float
    settled: float


async def _start(bot: Bot, catching: bool) -> Start:
    """Launch, wait for ready (the catch-up's line, which must name all the channels; with
    catch-up off, the line that the bot is on Discord), read its CPU, stop it."""
    await bot.start()
    ready = f"{CHANNELS} channels read" if catching else f"bot {BOT} is on discord"
    if not await bot.wait_line(ready, 60):
        await bot.stop()
        raise RuntimeError(f"the bot did not log {ready!r}; its log: {bot.log}")
    at_ready = bot.cpu()
    settled = await _settled_cpu(bot)
    await bot.stop()
    return Start(at_ready, settled)


async def measure_startup(starts: int = STARTS, logs: Path | None = None) -> dict[str, Start]:
    """The median start of each arm (``on``: catch-up, ``off``: ``max_age: 0``), after one
    unmeasured start of each; the arms take turns."""
    compileall.compile_dir(ROOT / "src", quiet=1)  # as installed: bytecode compiled once
    with tempfile.TemporaryDirectory() as tmp:
        fake, llm = DiscordServer(), LLMServer()
        await fake.start()
        await llm.start()
        try:
            marks = await _rooms(fake)
            bots = {}
            for arm, extra in (("on", ""), ("off", "catch_up: {max_age: 0}\n")):
                log = (logs or Path(tmp)) / f"catchup-startup-{arm}.log"
                bots[arm] = bot = Bot(Path(tmp) / arm, fake, llm, log)
                bot.configure(extra)
                await _seed(bot.root, marks)
                await _start(bot, arm == "on")
            runs: dict[str, list[Start]] = {"on": [], "off": []}
            for _ in range(starts):
                for arm, bot in bots.items():
                    runs[arm].append(await _start(bot, arm == "on"))
        finally:
            await fake.stop()
            await llm.stop()
    return {
        arm: Start(
            statistics.median(s.ready for s in got), statistics.median(s.settled for s in got)
        )
        for arm, got in runs.items()
    }


def _logs() -> Path | None:
    """``BENCH_CATCHUP_LOGS=DIR`` keeps the bot processes' logs there."""
    kept = os.environ.get("BENCH_CATCHUP_LOGS")
    if kept:
        Path(kept).mkdir(parents=True, exist_ok=True)
    return Path(kept) if kept else None


async def gaps() -> list[Figure]:
    seed = int(os.environ.get("BENCH_CATCHUP_SEED", "40"))
    result = await measure_gaps(seed=seed, logs=_logs())
    for question, kind in result.lost.items():
        print(f"catchup: q{question} (asked in a {kind} gap) never answered", file=sys.stderr)
    for question, (kind, count) in result.twice().items():
        print(f"catchup: q{question} ({kind} gap) answered {count} times", file=sys.stderr)
    return [
        Figure("catchup_lost", len(result.lost), "questions", target=0),
        Figure("catchup_duplicates", result.duplicates, "questions", target=0),
        Figure("catchup_late", len(result.late), "questions"),
        Figure("catchup_questions", len(result.asked), "questions"),
        Figure("catchup_gaps", sum(result.kinds.values()), "gaps"),
    ]


async def startup_cpu() -> list[Figure]:
    got = await measure_startup(logs=_logs())
    on, off = got["on"], got["off"]
    return [
        Figure("catchup_startup_cpu_ratio", on.settled / off.settled, "x", target=1.2),
        Figure("catchup_startup_cpu_s", on.settled, "s"),
        Figure("catchup_off_startup_cpu_s", off.settled, "s"),
        Figure("catchup_ready_cpu_ratio", on.ready / off.ready, "x"),
    ]
