"""Generated leak probes on the fake Discord: two guilds, a thread, direct messages and
linked channels, each holding marked messages; every probe is one person asking the bot
in one place, and checks the request body the loopback LLM server received for that
answer: no marker out of scope, and the markers the links must bring in.

The scope of each marker is written next to it (``Marker.allowed``), from the rules the
linked contexts promise: a linked channel only for who can read it on Discord, no hidden
message (dot, 🫥, cleared by ``.history``) anywhere, nothing of another guild, no one's
direct messages elsewhere, no link a pinned ``.config`` makes to another guild. The memory
faculty's leak suite (issue #27) grows from here: more markers, more places.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fakes.discord_server import DiscordServer
from fakes.discord_wire import GUILD_ID
from fakes.llm_server import LLMServer

__all__ = ["LINKS", "Marker", "Probe", "World", "build_world", "probes", "run_probes"]

GENERAL, RANDOM, STAFF = "10", "11", "12"
OTHER_GUILD, LOBBY, BACKROOM = str(1 << 23), "30", "31"
MODS = "500"
HIDE = "\U0001fae5"

LINKS: list[dict[str, Any]] = [
    {"channel": STAFF, "where": [GENERAL]},  # and general's threads
    {"channel": RANDOM, "where": [GENERAL]},
    {"channel": GENERAL, "where": [RANDOM]},
    {"channel": GENERAL, "mode": "digest", "where": ["direct"]},
    {"channel": f"discord:{BACKROOM}", "where": [LOBBY]},
]
"""The bot's ``links`` for this world."""

Allowed = Callable[[str, str], bool]  # (asker's name, place) -> may the marker be there


@dataclass(frozen=True)
class Marker:
    text: str
    allowed: Allowed
    expected: Allowed = lambda _asker, _place: False  # must the links bring it in


@dataclass(frozen=True)
class Probe:
    asker: str
    place: str  # a channel id, or "dm" for the asker's own direct messages
    question: str


@dataclass
class World:
    server: DiscordServer
    thread: str
    markers: list[Marker]

    def channel(self, probe: Probe) -> str:
        if probe.place == "dm":
            return self.server.dm_channel(self.server.user(probe.asker))
        return probe.place


def _in(*places: str) -> Allowed:
    return lambda _asker, place: place in places


def _never(_asker: str, _place: str) -> bool:
    return False


async def build_world(server: DiscordServer) -> World:
    """Channels, rights and marked messages, before the bot starts."""
    server.add_guild(GUILD_ID, "Salon test", {STAFF: "staff"})
    server.add_guild(OTHER_GUILD, "Other", {LOBBY: "lobby", BACKROOM: "backroom"})
    alice, bob, carol = (server.user(n) for n in ("Alice", "Bob", "Carol"))
    server.roles[carol.id] = [MODS]
    await server.overwrite(STAFF, GUILD_ID, deny=("VIEW_CHANNEL",))
    await server.overwrite(STAFF, MODS, allow=("VIEW_CHANNEL",))
    starter = await server.post(GENERAL, alice, "a thread about the release")
    thread = await server.start_thread(starter, "release")
    readers_of_staff = {"Alice", "Carol"}  # the owner, and the mods role

    def staff_ok(asker: str, place: str) -> bool:
        return place in (GENERAL, thread) and asker in readers_of_staff

    said = [
        (RANDOM, bob, "LEAK-CLEARED-r1 old plans"),
        (RANDOM, carol, ".history"),  # clears what is older (carol: an authorized role)
        (GENERAL, bob, "MARK-GENERAL-g1 we meet at noon"),
        (GENERAL, bob, ".LEAK-DOT-g2 a command"),
        (GENERAL, bob, f"LEAK-EMOJI-g3 {HIDE} not for bots"),
        (RANDOM, bob, "MARK-RANDOM-r2 lunch is pizza"),
        (STAFF, carol, "MARK-STAFF-s1 the launch slips"),
        (STAFF, carol, ".LEAK-DOT-s2 staff command"),
        (LOBBY, bob, "MARK-LOBBY-l1 other guild talk"),
        (BACKROOM, bob, "MARK-BACKROOM-b1 other guild secrets"),
        (server.dm_channel(carol), carol, "MARK-DMCAROL-d1 my birthday is in May"),
        (server.dm_channel(bob), bob, "MARK-DMBOB-d2 my cat is ill"),
    ]
    for channel, who, text in said:
        await server.post(channel, who, text)
    foreign = await server.post(RANDOM, alice, f".config\n---\nlinks:\n  - channel: {BACKROOM}")
    await server.pin(foreign)  # refused: another guild's channel
    guild_one = (GENERAL, RANDOM, thread)
    markers = [
        Marker("LEAK-", _never),
        Marker("MARK-GENERAL-g1", lambda _a, p: p in (*guild_one, "dm"), _in(RANDOM, "dm")),
        Marker("MARK-RANDOM-r2", _in(*guild_one), _in(GENERAL, thread)),
        Marker("MARK-STAFF-s1", staff_ok, staff_ok),
        Marker("MARK-LOBBY-l1", _in(LOBBY, BACKROOM)),
        Marker("MARK-BACKROOM-b1", _in(LOBBY, BACKROOM), _in(LOBBY)),
        Marker("MARK-DMCAROL-d1", lambda a, p: (a, p) == ("Carol", "dm")),
        Marker("MARK-DMBOB-d2", lambda a, p: (a, p) == ("Bob", "dm")),
    ]
    return World(server, thread, markers)


def probes(world: World, count: int, *, seed: int = 27) -> list[Probe]:
    """``count`` probes: every asker in every place, then again in a seeded order."""
    places = [GENERAL, RANDOM, world.thread, LOBBY, BACKROOM, "dm"]
    pairs = list(itertools.product(("Alice", "Bob", "Carol"), places))
    order = pairs + random.Random(seed).sample(pairs * (count // len(pairs) + 1), count)
    questions = ("what's new?", "what did they say elsewhere?", "any secrets?", "birthday?")
    return [Probe(a, p, questions[i % len(questions)]) for i, (a, p) in enumerate(order[:count])]


async def run_probes(world: World, llm: LLMServer, batch: list[Probe]) -> list[str]:
    """Ask each probe; what leaked, or was missing, as lines (none: every scope held)."""
    server, problems = world.server, []
    for probe in batch:
        channel, asker = world.channel(probe), server.user(probe.asker)
        mine = [m for m in server.channels[channel] if m["author"]["id"] == server.bot.id]
        before = len(llm.requests)
        text = f"<@{server.bot.id}> {probe.question}" if probe.place != "dm" else probe.question
        await server.post(channel, asker, text, mentions=[server.bot])
        await server.wait_bot_messages(channel, len(mine) + 1)
        bodies = [json.dumps(r.body, ensure_ascii=False) for r in llm.requests[before:]]
        for marker in world.markers:
            found = any(marker.text in b for b in bodies)
            if found and not marker.allowed(probe.asker, probe.place):
                problems.append(f"{marker.text} reached {probe.asker} in {probe.place}")
            if not found and marker.expected(probe.asker, probe.place):
                problems.append(f"{marker.text} missing for {probe.asker} in {probe.place}")
    return problems
