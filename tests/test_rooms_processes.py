"""Three bots of one deployment, each its own ``salon run --bot`` process, sharing one
PostgreSQL database, in a monitored channel of the fake Discord: a line nobody addressed
is answered once, whichever process gets there first; a bot killed (SIGKILL) while it holds
a turn leaves a claim that expires (``room.claim_ttl``), and another bot answers the line.
The lines are from a real room (#ubuntu, irc-disentanglement corpus, Kummerfeld et al.
2019, CC BY 4.0)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fakes.databases import Database
from fakes.discord_server import DiscordServer, FakeUser
from fakes.llm_server import LLMServer, Recorded, Scripted
from salon.store.sql import SQLStore
from tests.platforms.test_discord_several_bots import room_lines

GENERAL = "10"
BOTS = {"salon": "Salon", "muse": "Muse", "sage": "Sage"}
VICTIM = "muse"
WAIT = 60.0


class Model:
    """Answers every bot as itself (its key in the API key); once ``hold`` is set, the
    victim's answers stall before their first word: a turn it holds, never finished."""

    def __init__(self) -> None:
        self.hold = asyncio.Event()
        self.victim_stalled = asyncio.Event()
        self._never = asyncio.Event()

    def __call__(self, request: Recorded) -> Scripted:
        headers = {k.lower(): v for k, v in request.headers.items()}
        bot = headers.get("authorization", "").rpartition("k-")[2]
        if self.hold.is_set() and bot == VICTIM:
            self.victim_stalled.set()
            return Scripted(text="never", pause_before_chunk=0, resume=self._never)
        return Scripted(text=f"{BOTS.get(bot, bot)} speaking.")


def configure(root: Path, fake: DiscordServer, llm: LLMServer, database: Database) -> None:
    (root / "bots").mkdir(parents=True)
    for key, name in BOTS.items():
        (root / "bots" / f"{key}.yaml").write_text(
            f"""\
name: {name}
providers:
  test: {{type: openai, model: m, base_url: "{llm.base_url}/v1", api_key_env: TEST_KEY,
          retries: 0}}
provider: test
database_url: {database.url}
database_password_env: SALON_TEST_DATABASE_PASSWORD
room: {{stagger: 0.05, claim_ttl: 2}}
platforms:
  discord:
    token_env: DISCORD_TOKEN
    api_base_url: {fake.api}
    gateway_url: {fake.gateway}
    monitored_channels: ["{GENERAL}"]
""",
            encoding="utf-8",
        )


def users(fake: DiscordServer) -> dict[str, FakeUser]:
    """Each bot's user on the fake (the first is its own bot user)."""
    found = {"salon": fake.bot}
    for key, name in BOTS.items():
        if key != "salon":
            found[key] = FakeUser(str(400 + len(found)), name, bot=True)
            fake.tokens[f"token-{key}"] = found[key]
            fake.people.append(found[key])
    return found


@asynccontextmanager
async def room(tmp_path: Path, database: Database) -> AsyncIterator[Room]:
    fake = DiscordServer()
    await fake.start()
    try:
        async with LLMServer() as llm:
            model = Model()
            llm.respond = model
            root = tmp_path / "config"
            configure(root, fake, llm, database)
            started = Room(fake, model, users(fake), await database.open_store())
            try:
                for key in BOTS:
                    await started.run(root, key, database)
                yield started
            finally:
                await started.stop()
    finally:
        await fake.stop()


class Room:
    def __init__(
        self, fake: DiscordServer, model: Model, bots: dict[str, FakeUser], store: SQLStore
    ) -> None:
        self.fake, self.model, self.bots, self.store = fake, model, bots, store
        self.procs: dict[str, asyncio.subprocess.Process] = {}

    async def run(self, root: Path, key: str, database: Database) -> None:
        env = {
            **os.environ,
            "DISCORD_TOKEN": "token-123" if key == "salon" else f"token-{key}",
            "TEST_KEY": f"k-{key}",
            "SALON_TEST_DATABASE_PASSWORD": database.password or "",
        }
        self.procs[key] = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "salon", "run", str(root), "--bot", key,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL, env=env,
        )  # fmt: skip
        ready = f"PUT /applications/{self.bots[key].id}/commands"
        await self.fake.wait_calls(ready, 1, within=WAIT)

    def answers(self, after: str = "0") -> list[str]:
        """Who wrote each bot message in the channel after the message ``after``."""
        names = {user.id: key for key, user in self.bots.items()}
        return [
            names[m["author"]["id"]]
            for m in self.fake.channels[GENERAL]
            if m["author"]["id"] in names and int(m["id"]) > int(after)
        ]

    async def traced(self, message_id: str, count: int) -> None:
        """Until ``count`` traces name ``message_id`` as their trigger (answered or passed).
        They are in another process's database: there is no event to wait on."""
        query = "SELECT count(*) FROM traces WHERE trigger_id = :id"
        async with asyncio.timeout(WAIT):
            while True:
                async with self.store.db.connect() as conn:
                    rows = await conn.fetch(query, {"id": message_id})
                if int(rows[0][0]) >= count:
                    return
                await asyncio.sleep(0.05)

    async def stalled_or_traced(self, message_id: str) -> bool:
        """Whether the victim took the line and stalled (True), or every bot is done with
        it (False)."""
        stalled = asyncio.ensure_future(self.model.victim_stalled.wait())
        traced = asyncio.ensure_future(self.traced(message_id, len(BOTS)))
        done, _ = await asyncio.wait([stalled, traced], return_when=asyncio.FIRST_COMPLETED)
        for task in (stalled, traced):
            task.cancel()
        await asyncio.gather(stalled, traced, return_exceptions=True)
        if traced in done:
            traced.result()  # a timeout is the test's failure
        return self.model.victim_stalled.is_set()

    async def say(self, text: str) -> dict[str, Any]:
        return await self.fake.post(GENERAL, self.fake.user("Alice"), text)

    async def stop(self) -> None:
        for proc in self.procs.values():
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            await asyncio.wait_for(proc.wait(), WAIT)
        await self.store.close()


async def test_three_processes_answer_each_unaddressed_line_once(
    pg_database: Database, tmp_path: Path
) -> None:
    async with room(tmp_path, pg_database) as bots:
        lines = room_lines(9)
        for number, line in enumerate(lines, 1):
            posted = await bots.say(line)
            await bots.traced(posted["id"], len(BOTS))  # every bot is done with it
            assert len(bots.answers()) == number, (line, bots.answers())
        assert set(bots.answers()) == set(BOTS)  # least recently spoken first: in turns


async def test_a_bot_killed_holding_a_turn_leaves_it_to_another(
    pg_database: Database, tmp_path: Path
) -> None:
    async with room(tmp_path, pg_database) as bots:
        bots.model.hold.set()
        held = None
        for line in room_lines(6):  # least recently spoken first: the victim's turn comes
            posted = await bots.say(line)
            if await bots.stalled_or_traced(posted["id"]):
                held = posted
                break
        assert held is not None
        victim = bots.procs[VICTIM]
        victim.send_signal(signal.SIGKILL)
        await victim.wait()
        async with asyncio.timeout(WAIT), bots.fake.sent:
            await bots.fake.sent.wait_for(lambda: bots.answers(held["id"]) != [])
        after = await bots.say("and now?")  # the held line's turns are over by its answer
        await bots.traced(after["id"], len(BOTS) - 1)
        said = bots.answers(held["id"])
        assert len(said) == 2, said
        assert VICTIM not in said
        (turn,) = await bots.store.rooms.holders(f"discord:{GENERAL}", held["id"])
        assert (turn.bot, turn.done) == (said[0], True)  # the victim's claim, taken over
