"""Several bots in one room (``room:``, salon.agent.pipeline.turns).

``room_answers_per_unaddressed_max``: three bots of one deployment (one SQLite store) in a
monitored channel of the fake Discord, each with its speak gate on (always yes), 200 lines
nobody addressed, taken in order from a real room (#ubuntu, irc-disentanglement, dev split:
Kummerfeld et al., ACL 2019, CC BY 4.0): the most answers any line got (target 1).
``room_addressed_answered``: then 30 lines each mentioning one of the bots: the share the
mentioned bot answered, alone (target 1.0). ``room_gate_calls_per_message``: the speak-gate
calls the 200 lines cost, per line (each bot's gate is its own call: 3.0); the ``_shared``
figures the same with ``room.shared_decision`` (one call a line, target 1.0).
``room_claim_overhead_ms``: what taking a turn adds to an activation, p50 over 400 turns
(reading who is in the room, then the claim), on SQLite; ``room_claim_overhead_ms_pg`` the
same on PostgreSQL when ``SALON_TEST_DATABASE_URL`` names a server (scripts/with-postgres).
"""

from __future__ import annotations

import asyncio
import os
import re
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from bench.figures import Figure, percentile
from fakes.discord_server import DiscordServer, FakeUser
from salon.app import BotApp
from salon.config import Secrets
from salon.llm import FakeProvider
from salon.llm.base import LLMRequest, StreamEvent, TextDelta
from salon.model import ChannelMark, ChannelRef
from salon.platforms.discord import DiscordPlatform
from salon.store.sql import SQLStore, sqlite_url
from tests.conftest import bot_config

ROOM = Path(__file__).parents[2] / "shared/data/irc-disentanglement/dev/2005-06-27_12.raw.txt"
_LINE = re.compile(r"^\[\d\d:\d\d\] <([^>]+)> (.+)$")
UNADDRESSED, ADDRESSED, TURNS = 200, 30, 400
GENERAL = "10"
_NAMES = ("Salon", "Muse", "Sage")
BOTS = {
    "salon": ("token-123", "Salon"),
    "muse": ("token-muse", "Muse"),
    "sage": ("token-sage", "Sage"),
}


class _Bot(FakeProvider):
    """Answers as its bot; says yes to every speak-gate question, counting them."""

    def __init__(self, name: str) -> None:
        super().__init__(default=f"{name} speaking.")
        self.gates = 0
        self.turn = 0

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        system = request.system or ""
        if "reply next" in system or "should speak next" in system:
            self.gates += 1
            self.requests.append(request)
            self.turn += 1  # the room's decision: each bot in turn
            yield TextDelta("yes" if "reply next" in system else _NAMES[self.turn % 3])
            return
        async for event in super().stream(request):
            yield event


def _lines(count: int) -> list[str]:
    found = []
    for raw in ROOM.read_text(encoding="utf-8", errors="replace").splitlines():
        line = _LINE.match(raw)
        if line and "@" not in line[2]:
            found.append(line[2])
        if len(found) == count:
            break
    return found


async def run() -> list[Figure]:
    if not ROOM.exists():
        return []
    figures = await _three_bots(shared=False)
    shared = await _three_bots(shared=True)
    figures += [
        Figure(f.name + "_shared", f.value, f.unit, f.target, f.direction)
        for f in shared
        if f.name != "room_addressed_answered"
    ]
    figures.append(Figure("room_claim_overhead_ms", await _claims(None), "ms", target=2.0))
    if os.environ.get("SALON_TEST_DATABASE_URL"):
        from bench.postgres import fresh_database

        async with fresh_database() as (url, password):
            pg = await _claims((url, password))
        figures.append(Figure("room_claim_overhead_ms_pg", pg, "ms", target=2.0))
    return figures


async def _three_bots(*, shared: bool) -> list[Figure]:
    fake = DiscordServer()
    await fake.start()
    apps: dict[str, tuple[BotApp, _Bot]] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for key, (token, name) in BOTS.items():
                apps[key] = await _start(fake, Path(tmp), key, token, name, shared=shared)
            try:
                return await _measure(fake, apps)
            finally:
                for key, (app, _) in apps.items():
                    await _stop(key, app)
    finally:
        await fake.stop()


async def _start(
    fake: DiscordServer, root: Path, key: str, token: str, name: str, *, shared: bool
) -> tuple[BotApp, _Bot]:
    if key != "salon":
        user = FakeUser(str(400 + len(fake.tokens)), name, bot=True)
        fake.tokens[token] = user
        fake.people.append(user)
    config = bot_config(
        name=name,
        data_dir=str(root / f"data-{key}"),
        database_url=f"sqlite:///{root / 'shared.db'}",
        speak_gate={"enabled": True},
        room={"stagger": 0.05, "shared_decision": shared},
        platforms={
            "discord": {
                "token_env": "TOKEN",
                "api_base_url": fake.api,
                "gateway_url": fake.gateway,
                "monitored_channels": [GENERAL],
            }
        },
    )
    provider = _Bot(name)
    app = BotApp(
        key=key, config=config, root=root, secrets=Secrets({"TOKEN": token}), provider=provider
    )
    await app.__aenter__()
    (platform,) = app.unattended_platforms()
    assert isinstance(platform, DiscordPlatform)
    platform.guild_ready_timeout = 0.5
    stop = asyncio.Event()
    _SERVING[key] = (stop, asyncio.create_task(app.serve(stop, [platform])))
    await asyncio.wait_for(platform.ready.wait(), 20)
    return app, provider


_SERVING: dict[str, tuple[asyncio.Event, asyncio.Task[None]]] = {}


async def _stop(key: str, app: BotApp) -> None:
    stop, serving = _SERVING.pop(key)
    stop.set()
    await asyncio.wait_for(serving, 30)
    await app.__aexit__(None, None, None)


def _bot_messages(fake: DiscordServer) -> list[dict[str, Any]]:
    bots = {u.id for u in [fake.bot, *fake.people] if u.bot}
    return [m for m in fake.channels[GENERAL] if m["author"]["id"] in bots]


async def _settle(fake: DiscordServer, apps: dict[str, tuple[BotApp, _Bot]], count: int) -> None:
    """Until ``count`` bot messages are in and every bot is idle (a pile-on would add more)."""
    async with asyncio.timeout(30), fake.sent:
        await fake.sent.wait_for(lambda: len(_bot_messages(fake)) >= count)
    for app, _ in apps.values():
        await app.agent.wait_idle()


async def _measure(fake: DiscordServer, apps: dict[str, tuple[BotApp, _Bot]]) -> list[Figure]:
    alice = fake.user("Alice")
    answers: Counter[str] = Counter()
    for line in _lines(UNADDRESSED):
        before = len(_bot_messages(fake))
        posted = await fake.post(GENERAL, alice, line)
        await _settle(fake, apps, before + 1)
        answers[posted["id"]] = len(_bot_messages(fake)) - before
    gates = sum(provider.gates for _, provider in apps.values())
    users = {key: fake.tokens[token] for key, (token, _) in BOTS.items() if token in fake.tokens}
    users["salon"] = fake.bot
    right = 0
    for n in range(ADDRESSED):
        key = list(BOTS)[n % len(BOTS)]
        user = users[key]
        before = len(_bot_messages(fake))
        await fake.post(GENERAL, alice, f"<@{user.id}> and you?", mentions=[user])
        await _settle(fake, apps, before + 1)
        new = _bot_messages(fake)[before:]
        right += len(new) == 1 and new[0]["author"]["id"] == user.id
    return [
        Figure("room_answers_per_unaddressed_max", max(answers.values()), "answers", target=1),
        Figure("room_addressed_answered", right / ADDRESSED, "share", target=1.0, direction="min"),
        Figure("room_gate_calls_per_message", gates / UNADDRESSED, "calls"),
    ]


async def _claims(database: tuple[str, str | None] | None) -> float:
    """p50 milliseconds of a turn's store work: who is in the room, then the claim."""
    with tempfile.TemporaryDirectory() as tmp:
        if database is None:
            store = SQLStore(sqlite_url(Path(tmp) / "rooms.db"))
        else:
            store = SQLStore(database[0], password=database[1])
        await store.open()
        try:
            channel = ChannelRef("discord", GENERAL)
            marks = [ChannelMark(channel, "1", time.time()) for _ in range(1)]
            for bot in BOTS:
                await store.delivery.save_marks(bot, marks)
            took = []
            for n in range(TURNS):
                start = time.perf_counter()
                await store.rooms.present(channel.key, since=time.time() - 3600)
                await store.rooms.claim(channel.key, str(n), "salon", slots=1, ttl=120)
                took.append((time.perf_counter() - start) * 1000)
            return percentile(took, 50)
        finally:
            await store.close()
