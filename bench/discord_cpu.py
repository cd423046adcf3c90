"""Bot processes on the Discord fake: CPU per activation, memory, start-up, against the floor.

``salon run`` (one bot, the real discord.py and openai SDK) against the project's loopback
Discord fake and LLM server, in a process of its own so that its CPU and memory are its
own. A 400-message channel; each activation replies to the bot's previous answer; the
model answers at once. In the same run, each on a fake of its own and taking turns with it
activation by activation: the same bot sending requests through the SDK's ``create`` (the
request path before #17), and the floor (``bench.floor_bot``: a plain discord.py bot
keeping the room's last 400 messages, aiohttp to the same server, no config, store, traces
or tools).

``discord_activation_cpu_ms``: the bot's CPU time per activation over 200 activations
after 20 of warm-up; ``discord_activation_cpu_sdk_create_ms`` the same through ``create``.
``bot_rss_mib``: resident memory after them. ``bot_startup_cpu_s``: CPU time from the
process's start to its first ready (slash commands registered); the provider is built
after ready, so ``bot_first_answer_cpu_s`` (CPU time from the start to the first answer
sent) shows the whole cost of a start. Against the floor: ``floor_cpu_ratio`` (CPU per
activation), ``floor_rss_ratio`` (peak resident memory) and ``startup_cpu_vs_floor_ratio``
(CPU to ready and one second more, where Salon finishes starting).
"""

from __future__ import annotations

import asyncio
import compileall
import contextlib
import os
import signal
import sys
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from bench.figures import Figure
from fakes.discord_server import DiscordServer
from fakes.llm_server import LLMServer, Scripted

ROOT = Path(__file__).resolve().parent.parent
HISTORY = 400
WARMUP = 20
ACTIVATIONS = 200
CHANNEL = "10"
SETTLE = 1.0  # seconds after ready that count as start-up
# An arm named ``salon-without-PART+PART`` is Salon with those parts taken out, to measure
# what each costs (``bench.floor_parts``): ``traces`` (a setting), ``typing`` and ``stream``
# (replaced in the bot process, ``bench._bot_process``).
WITHOUT = "salon-without-"
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


def _memory_mib(pid: int, field: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


class Arm:
    """One bot process (``arm``: ``salon``, ``sdk`` for Salon with the SDK's ``create``,
    ``floor``, or ``before``: Salon from the ``src`` that ``BENCH_BEFORE_SRC`` names) on a
    Discord fake of its own with a 400-message channel, sharing the LLM server; CPU and
    memory read from ``/proc``."""

    def __init__(self, arm: str, llm: LLMServer, tmp: Path, errors: Path) -> None:
        self.arm, self.llm, self.tmp, self.errors = arm, llm, tmp, errors
        self.server = DiscordServer()
        self.proc: asyncio.subprocess.Process | None = None
        self.answer: dict[str, object] | None = None
        self.answers = 0
        self.startup = self.settled = self.first_answer = 0.0

    async def start(self) -> None:
        server = self.server
        await server.start()
        self.people = [server.user(n) for n in ("Alice", "Bob", "Carol")]
        for i in range(HISTORY):
            text = f"message number {i}, with a few words in it"
            await server.post(CHANNEL, self.people[i % 3], text)
        self.proc = await _bot(self.arm, self.tmp, server, self.llm, self.errors)
        await server.wait_calls(f"PUT /applications/{server.bot.id}/commands", 1, within=60)
        self.startup = self.cpu()
        await asyncio.sleep(SETTLE)  # what a bot does just after ready (Salon: its SDK)
        self.settled = self.cpu()

    def cpu(self) -> float:
        assert self.proc is not None
        return _cpu_seconds(self.proc.pid)

    def memory(self, field: str = "VmRSS") -> float:
        assert self.proc is not None
        return _memory_mib(self.proc.pid, field)

    async def activate(self) -> None:
        """One activation: a mention first, then replies to the bot's previous answer."""
        server, i = self.server, self.answers
        if self.answer is None:
            text = f"<@{server.bot.id}> what do you make of it?"
            await server.post(CHANNEL, self.people[0], text, mentions=[server.bot])
        else:
            await server.post(CHANNEL, self.people[i % 3], f"and then {i}?", reply_to=self.answer)
        self.answer = (await server.wait_bot_messages(CHANNEL, i + 1, within=30))[-1]
        self.answers += 1
        if i == 0:
            self.first_answer = self.cpu()

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()
            await asyncio.wait_for(self.proc.wait(), 30)
        await self.server.stop()


async def _bot(
    arm: str, tmp: Path, server: DiscordServer, llm: LLMServer, errors: Path
) -> asyncio.subprocess.Process:
    home = tmp / arm
    (home / "bots").mkdir(parents=True)
    without = arm.removeprefix(WITHOUT).split("+") if arm.startswith(WITHOUT) else []
    config = CONFIG.format(base=llm.base_url, data=home / "data")
    if "traces" in without:  # a setting of Salon's own
        config += "traces: {enabled: false}\n"
    (home / "bots" / "bench.yaml").write_text(config)
    env = {
        **os.environ,
        "DISCORD_TOKEN": "token-bench",
        "BENCH_LLM_KEY": "k-bench",
        "BENCH_DISCORD_API": server.api,
        "BENCH_DISCORD_GATEWAY": server.gateway,
        "BENCH_ARM": "salon" if arm == "before" or without else arm,
        "BENCH_WITHOUT": ",".join(without),
        "BENCH_ARM_NAME": arm,  # what its profile files are named after
        "FLOOR_LLM_URL": f"{llm.base_url}/v1",
        "FLOOR_LLM_KEY": "k-bench",
    }
    if arm == "before":  # Salon from another checkout's src, for before-and-after runs
        env["PYTHONPATH"] = os.pathsep.join([os.environ["BENCH_BEFORE_SRC"], str(ROOT)])
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench._bot_process",
        str(home),
        "bench",
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=(errors / f"{arm}.err").open("wb"),
    )


@dataclass(frozen=True)
class Reading:
    """One arm's figures: CPU s to ready and to ready + ``SETTLE``, CPU ms per activation,
    resident and peak resident MiB after the activations, CPU s to the first answer."""

    startup: float
    settled: float
    per_activation: float
    rss: float
    peak: float
    first_answer: float


async def session(
    arms: list[str],
    activations: int = ACTIVATIONS,
    *,
    on_steady: Callable[[list[Arm], bool], Awaitable[None]] | None = None,
    errors: Path | None = None,
) -> dict[str, Reading]:
    """The ``arms`` started one after another, then their activations taken in turns, one
    each: the machine's speed drifts within a run, and turns put every arm in the same
    moments. ``on_steady(arms, False)`` is called before the measured activations and
    ``(arms, True)`` after them; ``errors``: where the processes' stderr goes."""
    llm = LLMServer()
    await llm.start()
    llm.default = Scripted(text=ANSWER)
    bots: list[Arm] = []
    with tempfile.TemporaryDirectory() as name:
        try:
            for arm in arms:
                bots.append(bot := Arm(arm, llm, Path(name), errors or Path(name)))
                await bot.start()
            for _ in range(WARMUP):
                for bot in bots:
                    await bot.activate()
            if on_steady is not None:
                await on_steady(bots, False)
            start = {bot.arm: bot.cpu() for bot in bots}
            for _ in range(activations):
                for bot in bots:
                    await bot.activate()
            end = {bot.arm: bot.cpu() for bot in bots}
            if on_steady is not None:
                await on_steady(bots, True)
            return {
                bot.arm: Reading(
                    startup=bot.startup,
                    settled=bot.settled,
                    per_activation=(end[bot.arm] - start[bot.arm]) / activations * 1000,
                    rss=bot.memory(),
                    peak=bot.memory("VmHWM"),
                    first_answer=bot.first_answer,
                )
                for bot in bots
            }
        finally:
            for bot in bots:
                await bot.stop()
            await llm.stop()


async def run() -> list[Figure]:
    """The figures; with ``BENCH_BEFORE_SRC`` set, the same for Salon from that ``src``
    (``before_*``), taking turns in the same run."""
    # Salon's bytecode as an installed copy has it (scripts/install compiles it; a process
    # started with PYTHONDONTWRITEBYTECODE would otherwise compile every module each time).
    compileall.compile_dir(ROOT / "src", quiet=1)
    compileall.compile_dir(ROOT / "bench", quiet=1)
    before = os.environ.get("BENCH_BEFORE_SRC")
    if before:
        compileall.compile_dir(before, quiet=1)
    got = await session(["salon", "floor", "sdk", *(["before"] if before else [])])
    salon, floor, sdk = got["salon"], got["floor"], got["sdk"]
    figures = [
        Figure(
            "discord_activation_cpu_ms", salon.per_activation, "ms", target=sdk.per_activation / 2
        ),
        Figure("discord_activation_cpu_sdk_create_ms", sdk.per_activation, "ms"),
        Figure("bot_rss_mib", salon.rss, "MiB", target=90),
        Figure("bot_startup_cpu_s", salon.startup, "s", target=0.7),
        Figure("bot_first_answer_cpu_s", salon.first_answer, "s"),
        *_against_floor("", salon, floor),
        Figure("floor_activation_cpu_ms", floor.per_activation, "ms"),
        Figure("floor_rss_mib", floor.rss, "MiB"),
        Figure("floor_peak_rss_mib", floor.peak, "MiB"),
        Figure("floor_settled_startup_cpu_s", floor.settled, "s"),
        Figure("floor_startup_cpu_s", floor.startup, "s"),
        Figure("floor_first_answer_cpu_s", floor.first_answer, "s"),
    ]
    if before:
        old = got["before"]
        figures += [
            Figure("before_activation_cpu_ms", old.per_activation, "ms"),
            Figure("before_rss_mib", old.rss, "MiB"),
            Figure("before_startup_cpu_s", old.startup, "s"),
            Figure("before_first_answer_cpu_s", old.first_answer, "s"),
            *_against_floor("before_", old, floor),
        ]
    return figures


def _against_floor(prefix: str, salon: Reading, floor: Reading) -> list[Figure]:
    ratios = (prefix == "") or None  # targets on the code under test only
    return [
        Figure(
            f"{prefix}floor_cpu_ratio",
            salon.per_activation / floor.per_activation,
            "x",
            target=1.6 if ratios else None,
        ),
        Figure(
            f"{prefix}floor_rss_ratio",
            salon.peak / floor.peak,
            "x",
            target=1.45 if ratios else None,
        ),
        Figure(
            f"{prefix}startup_cpu_vs_floor_ratio",
            salon.settled / floor.settled,
            "x",
            target=2.0 if ratios else None,
        ),
        Figure(f"{prefix}bot_peak_rss_mib", salon.peak, "MiB"),
        Figure(f"{prefix}bot_settled_startup_cpu_s", salon.settled, "s"),
    ]


def signalled(written_file: Callable[[str], Path]) -> Callable[[list[Arm], bool], Awaitable[None]]:
    """A ``session`` hook for bots started with ``BENCH_PROFILE_STEADY`` or
    ``BENCH_LOOP_COUNT``: SIGUSR1 before the measured activations, SIGUSR2 after; each bot
    then writes ``written_file(arm)`` and signals SIGUSR1 back. Signals sent at once merge
    into one, so the files say who has written."""
    wake: asyncio.Queue[None] = asyncio.Queue()
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, wake.put_nowait, None)

    async def steady(bots: list[Arm], done: bool) -> None:
        for bot in bots:
            assert bot.proc is not None
            bot.proc.send_signal(signal.SIGUSR2 if done else signal.SIGUSR1)
        if not done:
            return
        for bot in bots:  # a message wakes each bot's loop to run its handler, which writes
            await bot.server.post(CHANNEL, bot.people[1], "(measured)")
        files = [written_file(bot.arm) for bot in bots]
        async with asyncio.timeout(120):
            while not all(file.exists() for file in files):
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.get(), 1.0)

    return steady
