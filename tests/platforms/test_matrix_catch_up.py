"""Nothing addressed to the bot is lost on Matrix, against a real Synapse: the sync position
is kept in the store, so a mention made while the bot was stopped is answered once after
its start (and one older than ``catch_up.max_age`` is not); an answer a stop cut off is
closed with one line, never repeated whole; a rate limit longer than the bot waits is
tried again, never dropped; the encrypted-room refusal is said once per room, ever."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from fakes.synapse import Synapse
from salon.app import BotApp
from salon.config import Secrets
from salon.errors import PlatformError
from salon.llm import FakeProvider
from salon.llm.base import Provider
from salon.model import ChannelRef
from salon.platforms.matrix import ENCRYPTED_REFUSAL, MatrixPlatform
from salon.platforms.matrix.api import Homeserver, q
from tests.conftest import ServeApp, bot_config
from tests.platforms import test_matrix
from tests.platforms.test_discord_catch_up import Hanging
from tests.platforms.test_matrix import Person, Room, from_bot

synapse, tight_synapse, room = test_matrix.synapse, test_matrix.tight_synapse, test_matrix.room

JSON = dict[str, Any]
WAIT = 30.0


class Running:
    """A bot app on the room's homeserver, served until ``stop`` (the whole app: its
    lease ends and what it owed is left for the next start)."""

    def __init__(self, room: Room, provider: Provider, token: str, **config: Any) -> None:
        matrix = {
            "homeserver": room.synapse.url,
            "user_id": room.bot,
            "access_token_env": "BOT_TOKEN",
            "rooms": [room.id],
            "sync_timeout": 1.0,
            **config.pop("matrix", {}),
        }
        settings = bot_config(
            data_dir=str(room.tmp_path / "data"),
            platforms={"matrix": matrix},
            builtin_tools=False,
            **config,
        )
        self.app = BotApp(
            key="salon",
            config=settings,
            root=room.tmp_path,
            secrets=Secrets({"BOT_TOKEN": token}),
            provider=provider,
        )
        self.until = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.platform: MatrixPlatform | None = None

    async def start(self) -> MatrixPlatform:
        await self.app.__aenter__()
        return await self.serve()

    async def serve(self) -> MatrixPlatform:
        """The app opened already: serve it."""
        (platform,) = self.app.unattended_platforms()
        assert isinstance(platform, MatrixPlatform)
        self.platform = platform
        self.task = asyncio.create_task(self.app.serve(self.until, [platform]))
        await asyncio.wait_for(platform.wait_synced(), WAIT)
        return platform

    async def stop(self) -> None:
        self.until.set()
        assert self.task is not None
        await asyncio.wait_for(self.task, WAIT)
        await self.app.__aexit__(None, None, None)


async def new_device(room: Room) -> str:
    """A second access token of the bot's account (a new device). Synapse keeps a sync
    response for two minutes per device: a new device's first sync is never one of them,
    as after a stop longer than that."""
    localpart = room.bot.split(":", 1)[0].removeprefix("@")
    body = {
        "type": "m.login.password",
        "identifier": {"type": "m.id.user", "user": localpart},
        "password": room.bot_account.password,
    }
    answer = await room.alice.call("POST", "/_matrix/client/v3/login", body)
    return str(answer["access_token"])


async def bot_said(room: Room, person: Person) -> list[JSON]:
    """The bot's messages in the room, oldest first, as ``person`` reads them now."""
    path = f"/_matrix/client/v3/rooms/{q(room.id)}/messages"
    page = await person.call("GET", path, dir="b", limit="100")
    return [e for e in reversed(page["chunk"]) if from_bot(room.bot)(e)]


async def encrypted_room(person: Person, *, invite: str) -> str:
    encryption = {"algorithm": "m.megolm.v1.aes-sha2"}
    state = [{"type": "m.room.encryption", "state_key": "", "content": encryption}]
    body = {"preset": "private_chat", "invite": [invite], "initial_state": state}
    return str((await person.call("POST", "/_matrix/client/v3/createRoom", body))["room_id"])


def bodies(events: list[JSON]) -> list[str]:
    return [e["content"]["body"] for e in events]


async def test_a_mention_made_while_the_bot_was_stopped_is_answered_once(room: Room) -> None:
    first = Running(room, FakeProvider(["Hello Alice."]), room.bot_account.access_token)
    await first.start()
    await room.ask(room.alice, "hi")
    await first.app.agent.wait_idle()
    await first.stop()

    await room.alice.say(room.id, f"{room.bot} are you there?")  # nobody is listening
    await room.bob.say(room.id, "just chatting")

    provider = FakeProvider(["Yes, back now.", "Still here."])
    again = Running(room, provider, await new_device(room))
    await again.start()
    answer = await room.alice.wait(room.id, from_bot(room.bot, notice=False))
    assert answer["content"]["body"] == "Yes, back now."
    assert "are you there?" in provider.requests[0].messages[-1].plain_text
    later = await room.ask(room.alice, "and now?")
    assert later["content"]["body"] == "Still here."
    await again.app.agent.wait_idle()
    await again.stop()
    assert bodies(await bot_said(room, room.alice)) == [
        "Hello Alice.",
        "Yes, back now.",
        "Still here.",
    ]
    assert len(provider.requests) == 2


async def test_a_mention_older_than_the_window_is_context_after_a_restart(room: Room) -> None:
    first = Running(room, FakeProvider(["Hello."]), room.bot_account.access_token)
    await first.start()
    await room.ask(room.alice, "hi")
    await first.app.agent.wait_idle()
    await first.stop()

    await room.alice.say(room.id, f"{room.bot} long ago: anyone?")
    provider = FakeProvider(["Now answered."])
    window = {"max_age": 0.001}  # whatever was said while it was away is too old
    again = Running(room, provider, await new_device(room), catch_up=window)
    await again.start()
    answer = await room.ask(room.alice, "now?")
    assert answer["content"]["body"] == "Now answered."
    await again.stop()
    assert len(provider.requests) == 1
    assert "long ago: anyone?" in test_matrix.seen(provider)


async def test_a_position_the_homeserver_does_not_know_is_a_fresh_start(room: Room) -> None:
    running = Running(room, FakeProvider(["Fresh."]), room.bot_account.access_token)
    await running.app.__aenter__()
    await running.app.store.delivery.save_cursor("salon", f"matrix.sync {room.bot}", "s_gone")
    await running.serve()
    answer = await room.ask(room.alice, "hello?")
    assert answer["content"]["body"] == "Fresh."
    await running.stop()


async def test_an_answer_a_stop_cut_off_after_it_showed_is_closed_not_repeated(
    room: Room,
) -> None:
    token = room.bot_account.access_token
    hanging = Hanging("The first paragraph.\n\n")
    first = Running(room, hanging, token, shutdown_grace=0.2)
    await first.start()
    await room.ask(room.alice, "a long question")
    await first.stop()  # the grace runs out: the answer is cut

    provider = FakeProvider(["Back."])
    again = Running(room, provider, token)
    await again.start()
    closing = await room.alice.wait(room.id, from_bot(room.bot, notice=True))
    assert "cut off" in closing["content"]["body"]
    await room.ask(room.alice, "are you back?")  # the next answer: nothing came between
    await again.app.agent.wait_idle()
    await again.stop()
    said = await bot_said(room, room.alice)
    assert bodies(said)[:2] == ["The first paragraph.", closing["content"]["body"]]
    assert len(said) == 3
    assert len(provider.requests) == 1  # the cut question was not asked again


async def test_sent_before_tells_a_keyed_message_from_the_note_sent_under_its_key(
    room: Room,
) -> None:
    running = Running(room, FakeProvider(), room.bot_account.access_token)
    platform = await running.start()
    channel = ChannelRef("matrix", room.id)
    await platform.send(channel, "The first paragraph.", key="k-shown")
    assert await platform.sent_before(channel, "k-shown", note="(restarted)") is True
    assert await platform.sent_before(channel, "k-never", note="(restarted; answering)") is False
    said = await bot_said(room, room.alice)
    assert bodies(said) == ["The first paragraph.", "(restarted; answering)"]
    assert said[1]["content"]["msgtype"] == "m.notice"
    assert await platform.sent_before(channel, "k-never", note="(restarted; answering)") is False
    assert len(await bot_said(room, room.alice)) == 2  # asked again: still one note
    await running.stop()


async def test_an_encrypted_room_is_refused_once_across_restarts(
    synapse: Synapse, tmp_path: Path, serve_app: ServeApp
) -> None:
    secret = Room(synapse, tmp_path, serve_app)
    await secret.create(encrypted=True)
    token = secret.bot_account.access_token
    allow = {"matrix": {"invite_from_users": [secret.alice.id]}}
    first = Running(secret, FakeProvider(), token, **allow)
    await first.start()
    told = await secret.alice.wait(secret.id, from_bot(secret.bot, notice=True))
    assert told["content"]["body"] == ENCRYPTED_REFUSAL
    await first.stop()

    again = Running(secret, FakeProvider(), token, **allow)
    await again.start()
    other = await encrypted_room(secret.alice, invite=secret.bot)  # made after the start
    other_told = await secret.alice.wait(other, from_bot(secret.bot, notice=True))
    assert other_told["content"]["body"] == ENCRYPTED_REFUSAL  # the first room was done
    await again.stop()
    assert len(await bot_said(secret, secret.alice)) == 1
    await secret.alice.close()
    await secret.bob.close()


async def test_a_rate_limit_longer_than_the_bot_waits_is_a_transient_refusal(
    tight_synapse: Synapse, tmp_path: Path, serve_app: ServeApp
) -> None:
    tight = Room(tight_synapse, tmp_path, serve_app)
    await tight.create()
    server = Homeserver(
        tight_synapse.url, tight.bot_account.access_token, rate_limit_wait_max=0, retries=0
    )
    await server.call("POST", f"/_matrix/client/v3/join/{q(tight.id)}", {})
    refused: PlatformError | None = None
    try:
        for i in range(10):
            content = {"msgtype": "m.text", "body": f"line {i}"}
            await server.send_event(tight.id, "m.room.message", content)
    except PlatformError as exc:
        refused = exc
    finally:
        await server.close()
    assert refused is not None
    assert refused.transient
    assert refused.retry_after is not None
    assert refused.retry_after > 0
    await tight.alice.close()
    await tight.bob.close()


async def test_an_answer_over_the_rate_limit_is_posted_whole_in_order(
    tight_synapse: Synapse, tmp_path: Path, serve_app: ServeApp
) -> None:
    tight = Room(tight_synapse, tmp_path, serve_app)
    await tight.create()
    paragraphs = [f"Paragraph {i}." for i in range(6)]
    provider = FakeProvider(["\n\n".join(paragraphs)])
    running = Running(
        tight, provider, tight.bot_account.access_token, matrix={"rate_limit_wait_max": 0}
    )
    await running.start()
    await tight.alice.say(tight.id, f"{tight.bot} tell me everything")
    got = [await tight.alice.wait(tight.id, from_bot(tight.bot)) for _ in paragraphs]
    await running.app.agent.wait_idle()
    await running.stop()
    assert bodies(got) == paragraphs
    await tight.alice.close()
    await tight.bob.close()
