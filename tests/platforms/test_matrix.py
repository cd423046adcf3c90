"""Matrix against a real Synapse on 127.0.0.1 (fakes/synapse.py), with mautrix's client as
the people (alice, who made the room, and bob, with no power) and the bot in one room."""

from __future__ import annotations

import asyncio
import io
import itertools
import json
import os
import random
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import PIL.Image
import pytest
from mautrix.api import HTTPAPI, Method

from fakes.llm_server import LLMServer
from fakes.providers import GatedProvider
from fakes.synapse import Account, Synapse, synapse_available
from salon.app import BotApp
from salon.config import Secrets
from salon.llm import FakeProvider, FakeReply
from salon.llm.base import ImagePart
from salon.model import (
    Attachment,
    ChannelRef,
    Participant,
    Schedule,
    ScheduledEvent,
    ToolCall,
)
from salon.platforms.base import Capability
from salon.platforms.matrix import ENCRYPTED_REFUSAL, MatrixPlatform
from salon.platforms.matrix.api import Homeserver, q
from tests.conftest import ServeApp, bot_config
from tests.platforms.test_approvals import danger_server
from tests.tools.conftest import in_process

JSON = dict[str, Any]
_WAIT = 30.0
_names = itertools.count()


@pytest.fixture(scope="module")
def synapse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synapse]:
    synapse_available()
    server = Synapse(tmp_path_factory.mktemp("synapse"))
    server.start()
    yield server
    server.stop()


class Person:
    """Someone on the homeserver, through mautrix's HTTP client; ``wait`` long-polls their
    own /sync for an event (no sleeping)."""

    def __init__(self, synapse: Synapse, account: Account) -> None:
        self.id = account.user_id
        self.api = HTTPAPI(synapse.url, token=account.access_token)
        self._since: str | None = None
        self._events: list[JSON] = []

    async def call(self, method: str, path: str, content: JSON | None = None, **query: str) -> JSON:
        answer = await self.api.request(Method(method), path, content, query_params=query)
        return answer if isinstance(answer, dict) else {}

    async def send(self, room: str, content: JSON, kind: str = "m.room.message") -> str:
        txn = f"t{next(_names)}"
        path = f"/_matrix/client/v3/rooms/{q(room)}/send/{kind}/{txn}"
        return str((await self.call("PUT", path, content))["event_id"])

    async def say(self, room: str, text: str, **extra: Any) -> str:
        return await self.send(room, {"msgtype": "m.text", "body": text, **extra})

    async def wait(self, room: str, match: Callable[[JSON], bool]) -> JSON:
        async with asyncio.timeout(_WAIT):
            while True:
                for event in self._events:
                    if match(event):
                        self._events.remove(event)
                        return event
                query = {"timeout": "5000"} | ({"since": self._since} if self._since else {})
                answer = await self.call("GET", "/_matrix/client/v3/sync", **query)
                self._since = answer["next_batch"]
                joined = answer.get("rooms", {}).get("join", {}).get(room, {})
                self._events.extend(joined.get("timeline", {}).get("events", []))
                self._events.extend(joined.get("ephemeral", {}).get("events", []))

    async def close(self) -> None:
        await self.api.session.close()


def from_bot(bot: str, *, notice: bool | None = None) -> Callable[[JSON], bool]:
    def match(event: JSON) -> bool:
        if event.get("sender") != bot or event.get("type") != "m.room.message":
            return False
        kind = event["content"].get("msgtype")
        return notice is None or (kind == "m.notice") == notice

    return match


class Room:
    def __init__(self, synapse: Synapse, tmp_path: Path, serve_app: ServeApp) -> None:
        self.synapse = synapse
        self.tmp_path = tmp_path
        self.serve_app = serve_app
        n = next(_names)
        self.bot_account = synapse.register(f"salon{n}")
        self.alice = Person(synapse, synapse.register(f"alice{n}"))
        self.bob = Person(synapse, synapse.register(f"bob{n}"))
        self.bot = self.bot_account.user_id
        self.id = ""
        self.platform: MatrixPlatform | None = None
        self.secrets = {"BOT_TOKEN": self.bot_account.access_token}

    async def create(self, *, encrypted: bool = False) -> None:
        initial = (
            [
                {
                    "type": "m.room.encryption",
                    "state_key": "",
                    "content": {"algorithm": "m.megolm.v1.aes-sha2"},
                }
            ]
            if encrypted
            else []
        )
        answer = await self.alice.call(
            "POST",
            "/_matrix/client/v3/createRoom",
            {"preset": "public_chat", "invite": [self.bot], "initial_state": initial},
        )
        self.id = answer["room_id"]
        await self.bob.call("POST", f"/_matrix/client/v3/join/{q(self.id)}", {})

    async def power(self, user: str, level: int) -> None:
        path = f"/_matrix/client/v3/rooms/{q(self.id)}/state/m.room.power_levels/"
        levels = await self.alice.call("GET", path)
        levels.setdefault("users", {})[user] = level
        await self.alice.call("PUT", path, levels)

    async def start(
        self,
        provider: Any,
        extra_servers: Any = (),
        bot: dict[str, Any] | None = None,
        **matrix: Any,
    ) -> BotApp:
        settings = {
            "homeserver": self.synapse.url,
            "user_id": self.bot,
            "access_token_env": "BOT_TOKEN",
            "rooms": [self.id],
            "sync_timeout": 1.0,
            **matrix,
        }
        config = bot_config(
            data_dir=str(self.tmp_path / "data"),
            platforms={"matrix": settings},
            builtin_tools=False,
            **(bot or {}),
        )
        app = BotApp(
            key="salon",
            config=config,
            root=self.tmp_path,
            secrets=Secrets(self.secrets),
            provider=provider,
            extra_servers=extra_servers,
        )
        (platform,) = app.unattended_platforms()
        assert isinstance(platform, MatrixPlatform)
        self.platform = platform
        await self.serve_app(app, [platform])
        await asyncio.wait_for(platform.wait_synced(), _WAIT)
        return app

    async def ask(self, person: Person, text: str, **extra: Any) -> JSON:
        """``person`` mentions the bot; the bot's answer."""
        await person.say(self.id, f"{self.bot} {text}", **extra)
        return await self.alice.wait(self.id, from_bot(self.bot, notice=False))


@pytest.fixture
async def room(synapse: Synapse, tmp_path: Path, serve_app: ServeApp) -> AsyncIterator[Room]:
    made = Room(synapse, tmp_path, serve_app)
    await made.create()
    yield made
    await made.alice.close()
    await made.bob.close()


def seen(provider: FakeProvider, index: int = -1) -> str:
    return "\n".join(m.plain_text for m in provider.requests[index].messages)


async def test_a_mention_is_answered_and_the_answer_notifies_nobody_else(room: Room) -> None:
    provider = FakeProvider(["Hello, Alice."])
    await room.start(provider)
    answer = await room.ask(room.alice, "hi there")
    assert answer["content"]["body"] == "Hello, Alice."
    assert answer["content"]["m.mentions"] == {"user_ids": []}  # never @room
    assert "hi there" in seen(provider)


async def test_the_bot_types_while_it_writes_and_answers_to_its_display_name(
    room: Room,
) -> None:
    path = f"/_matrix/client/v3/profile/{q(room.bot)}/displayname"
    bot = HTTPAPI(room.synapse.url, token=room.bot_account.access_token)
    await bot.request(Method.PUT, path, {"displayname": "Professor Owl"})
    await bot.session.close()
    provider = GatedProvider()
    await room.start(provider)
    await room.alice.say(room.id, "professor owl, are you awake?")
    await provider.wait_started(1, within=_WAIT)
    typing = await room.alice.wait(
        room.id, lambda e: e.get("type") == "m.typing" and room.bot in e["content"]["user_ids"]
    )
    assert typing["content"]["user_ids"] == [room.bot]
    provider.gates[0].set()
    answer = await room.alice.wait(room.id, from_bot(room.bot, notice=False))
    assert answer["content"]["body"] == "answer 1"
    stopped = await room.alice.wait(
        room.id, lambda e: e.get("type") == "m.typing" and not e["content"]["user_ids"]
    )
    assert stopped["content"]["user_ids"] == []


async def images_the_model_got(room: Room, png: bytes, name: str) -> list[bytes | None]:
    """Alice uploads ``png``, posts it and asks about it; the images the model got."""
    upload = await room.alice.api.request(
        Method.POST,
        "/_matrix/media/v3/upload",
        io.BytesIO(png),  # aiohttp: raw bytes, when large, would hold up the loop
        headers={"Content-Type": "image/png"},
        query_params={"filename": name},
    )
    provider = FakeProvider()
    await room.start(provider)
    image = {"mimetype": "image/png", "size": len(png)}
    await room.alice.send(
        room.id,
        {"msgtype": "m.image", "body": name, "url": upload["content_uri"], "info": image},
    )
    await room.ask(room.alice, "what is in the picture?")
    parts = [p for m in provider.requests[-1].messages for p in m.parts]
    return [p.data for p in parts if isinstance(p, ImagePart)]


async def test_an_image_reaches_the_model_through_authenticated_media(room: Room) -> None:
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
    assert await images_the_model_got(room, png, "cat.png") == [png]


async def test_a_large_image_reaches_the_model_whole(room: Room) -> None:
    """A file the homeserver sends in many reads (here 1.5 MB) is read to its end."""
    png = b"\x89PNG\r\n\x1a\n" + random.Random(7).randbytes(1_500_000)
    sent = await images_the_model_got(room, png, "big.png")
    assert [len(data or b"") for data in sent] == [len(png)]
    assert sent == [png]


def _png(width: int, height: int) -> bytes:
    image = PIL.Image.new("RGB", (width, height), (200, 30, 30))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


async def test_a_tool_image_is_uploaded_and_sent_as_an_image_after_the_text(
    room: Room, tmp_path: Path
) -> None:
    await room.start(FakeProvider())
    assert room.platform is not None
    png = _png(3, 2)
    saved = tmp_path / "saved.png"
    saved.write_bytes(png)
    files = [
        Attachment("sprite.png", "image/png", len(png), data=png, label="sprite, south"),
        Attachment("saved.png", "image/png", len(png), path=str(saved)),
        Attachment("notes.txt", "text/plain", 5, url="https://files.example/notes.txt"),
    ]
    await room.platform.send(ChannelRef("matrix", room.id), "Here it is.", files=files)
    text = await room.alice.wait(room.id, from_bot(room.bot))
    assert text["content"]["body"] == "Here it is.\n[notes.txt: https://files.example/notes.txt]"
    for name in ("sprite, south", "saved.png"):
        image = await room.alice.wait(room.id, from_bot(room.bot))
        content = image["content"]
        assert (content["msgtype"], content["body"]) == ("m.image", name)
        info = {"mimetype": "image/png", "size": len(png), "w": 3, "h": 2}
        assert content["info"] == info
        server, media = content["url"].removeprefix("mxc://").split("/")
        got = await room.alice.api.session.get(
            room.alice.api.base_url.with_path(
                f"/_matrix/client/v1/media/download/{server}/{media}"
            ),
            headers={"Authorization": f"Bearer {room.alice.api.token}"},
        )
        assert got.status == 200
        assert await got.read() == png


async def test_an_image_over_the_upload_limit_stays_a_link(room: Room) -> None:
    await room.start(FakeProvider())
    assert room.platform is not None
    limit = (await room.alice.call("GET", "/_matrix/client/v1/media/config"))["m.upload.size"]
    data = b"\x89PNG" + bytes(limit)
    big = Attachment(
        "huge.png", "image/png", len(data), url="https://files.example/huge.png", data=data
    )
    await room.platform.send(ChannelRef("matrix", room.id), "Big.", files=[big])
    text = await room.alice.wait(room.id, from_bot(room.bot))
    assert text["content"]["body"] == "Big.\n[huge.png: https://files.example/huge.png]"


async def test_a_reply_to_the_bot_is_answered_as_a_reply_chain(room: Room) -> None:
    provider = FakeProvider(["The capital is Paris.", "About 2 million people."])
    await room.start(provider)
    first = await room.ask(room.alice, "capital of France?")
    reply = {"m.relates_to": {"m.in_reply_to": {"event_id": first["event_id"]}}}
    await room.alice.say(room.id, "how many live there?", **reply)  # no mention: a reply
    second = await room.alice.wait(room.id, from_bot(room.bot, notice=False))
    assert second["content"]["body"] == "About 2 million people."
    assert "The capital is Paris." in seen(provider)


async def test_with_reply_to_trigger_the_answer_is_a_reply_to_the_asker(room: Room) -> None:
    provider = FakeProvider(["Paris."])
    await room.start(provider, bot={"reply_to_trigger": True})
    asked = await room.alice.say(room.id, f"{room.bot} capital of France?")
    answer = await room.alice.wait(room.id, from_bot(room.bot, notice=False))
    assert answer["content"]["body"] == "Paris."
    assert answer["content"]["m.relates_to"] == {"m.in_reply_to": {"event_id": asked}}


async def test_edits_and_redactions_show_in_the_next_context(room: Room) -> None:
    provider = FakeProvider()
    await room.start(provider)
    colour = await room.alice.say(room.id, "my colour is red")
    edit = {
        "msgtype": "m.text",
        "body": "* my colour is blue",
        "m.new_content": {"msgtype": "m.text", "body": "my colour is blue"},
        "m.relates_to": {"rel_type": "m.replace", "event_id": colour},
    }
    await room.alice.send(room.id, edit)
    secret = await room.bob.say(room.id, "the secret is 4711")
    await room.bob.call("PUT", f"/_matrix/client/v3/rooms/{q(room.id)}/redact/{q(secret)}/r1", {})
    await room.ask(room.alice, "what did we say?")
    context = seen(provider)
    assert "my colour is blue" in context
    assert "red" not in context
    assert "4711" not in context


async def test_a_pinned_config_is_applied(room: Room) -> None:
    provider = FakeProvider()
    await room.start(provider, monitored_rooms=[])
    pinned = await room.alice.say(room.id, ".config\n---\nsystem_prompt: speak like a pirate")
    path = f"/_matrix/client/v3/rooms/{q(room.id)}/state/m.room.pinned_events/"
    await room.alice.call("PUT", path, {"pinned": [pinned]})
    await room.ask(room.alice, "hello")
    assert provider.requests[-1].system == "speak like a pirate"


async def test_an_approval_by_reaction_refused_without_power_then_given(room: Room) -> None:
    ran: list[str] = []
    provider = FakeProvider(
        [FakeReply(calls=(ToolCall("c1", "wipe", {"target": "disk"}),)), "Wiped."]
    )
    await room.start(provider, [in_process(danger_server(ran), "danger")])
    await room.bob.say(room.id, f"{room.bot} wipe the disk")
    prompt = await room.alice.wait(
        room.id, lambda e: from_bot(room.bot, notice=True)(e) and "✅" in e["content"]["body"]
    )
    assert prompt["content"]["m.mentions"] == {}  # a note notifies nobody
    # bob asked, so bob may answer: carol (no power, not the requester) first.
    carol = Person(room.synapse, room.synapse.register(f"carol{next(_names)}"))
    await carol.call("POST", f"/_matrix/client/v3/join/{q(room.id)}", {})
    annotation = {"rel_type": "m.annotation", "event_id": prompt["event_id"], "key": "✅"}
    await carol.send(room.id, {"m.relates_to": annotation}, "m.reaction")
    refusal = await room.alice.wait(
        room.id, lambda e: from_bot(room.bot, notice=True)(e) and carol.id in e["content"]["body"]
    )
    assert "Only" in refusal["content"]["body"]
    assert ran == []
    await room.alice.send(room.id, {"m.relates_to": annotation}, "m.reaction")  # power 100
    done = await room.alice.wait(room.id, from_bot(room.bot, notice=False))
    assert done["content"]["body"] == "Wiped."
    assert ran == ["disk"]
    await carol.close()


async def test_a_thread_is_its_own_context(room: Room) -> None:
    provider = FakeProvider(["main answer", "thread answer"])
    await room.start(provider)
    await room.alice.say(room.id, "chatter in the main room")
    root = await room.alice.say(room.id, "a thread about cats")
    thread = {"rel_type": "m.thread", "event_id": root}
    await room.bob.say(room.id, "cats are great", **{"m.relates_to": thread})
    await room.bob.say(room.id, f"{room.bot} do you like cats?", **{"m.relates_to": thread})
    answer = await room.alice.wait(room.id, from_bot(room.bot, notice=False))
    assert answer["content"]["body"] == "main answer"
    assert answer["content"]["m.relates_to"]["rel_type"] == "m.thread"
    assert answer["content"]["m.relates_to"]["event_id"] == root
    context = seen(provider)
    assert "cats are great" in context
    assert "a thread about cats" in context
    assert "chatter in the main room" not in context


async def test_a_100_kb_answer_arrives_whole_in_events_under_the_size_limit(room: Room) -> None:
    long = " ".join(f"word{i}" for i in range(15000))  # about 100 kB
    provider = FakeProvider([long])
    await room.start(provider)
    parts = [await room.ask(room.alice, "write a lot")]
    while sum(len(p["content"]["body"]) for p in parts) < len(long) - 100:
        parts.append(await room.alice.wait(room.id, from_bot(room.bot, notice=False)))
    assert all(len(json.dumps(p["content"]).encode()) < 65536 for p in parts)
    joined = " ".join(p["content"]["body"] for p in parts).split()
    assert joined == long.split()


async def test_a_restart_mid_conversation_keeps_the_conversation(room: Room) -> None:
    provider = FakeProvider(["Noted: 42."])
    await room.start(provider)
    await room.ask(room.alice, "remember the number 42")
    assert room.platform is not None
    await room.platform.stop()
    await room.alice.say(room.id, "said while it was away")
    provider2 = FakeProvider(["It was 42."])
    await room.start(provider2)
    answer = await room.ask(room.alice, "what was the number?")
    assert answer["content"]["body"] == "It was 42."
    context = seen(provider2)
    assert "Noted: 42." in context
    assert "said while it was away" in context
    assert len(provider2.requests) == 1  # nothing said while away was answered


async def test_an_encrypted_room_is_refused_in_one_line(
    synapse: Synapse, tmp_path: Path, serve_app: ServeApp, caplog: pytest.LogCaptureFixture
) -> None:
    secret_room = Room(synapse, tmp_path, serve_app)
    await secret_room.create(encrypted=True)
    await secret_room.start(FakeProvider())
    told = await secret_room.alice.wait(secret_room.id, from_bot(secret_room.bot, notice=True))
    assert told["content"]["body"] == ENCRYPTED_REFUSAL
    assert any("encrypted" in r.getMessage() for r in caplog.records)
    await secret_room.alice.close()
    await secret_room.bob.close()


async def test_dot_messages_are_left_out_and_m_continue_is_redacted(room: Room) -> None:
    provider = FakeProvider(["first", "continued"])
    await room.power(room.bot, 50)  # redacting others' events takes the redact level
    await room.start(provider, monitored_rooms=[room.id])
    await room.alice.say(room.id, ".a note for people only")
    await room.ask(room.alice, "go on")
    assert ".a note for people only" not in seen(provider)
    command = await room.alice.say(room.id, "m continue")
    answer = await room.alice.wait(room.id, from_bot(room.bot, notice=False))
    assert answer["content"]["body"] == "continued"
    redaction = await room.alice.wait(room.id, lambda e: e.get("type") == "m.room.redaction")
    assert redaction["redacts"] == command or redaction["content"].get("redacts") == command


async def test_invites_are_joined_only_from_allowed_people_and_a_kick_is_left(
    room: Room, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="salon.platforms.matrix")
    await room.start(FakeProvider(), invite_from_users=[room.alice.id])
    bot_member = f"/_matrix/client/v3/rooms/{{}}/state/m.room.member/{q(room.bot)}"
    for person, expected in ((room.alice, "join"), (room.bob, "leave")):
        made = await person.call("POST", "/_matrix/client/v3/createRoom", {"invite": [room.bot]})
        member = await person.wait(
            made["room_id"],
            lambda e: e.get("state_key") == room.bot and e["content"]["membership"] != "invite",
        )
        assert member["content"]["membership"] == expected, person.id
        state = await person.call("GET", bot_member.format(q(made["room_id"])))
        assert state["membership"] == expected
    await room.alice.call(
        "POST", f"/_matrix/client/v3/rooms/{q(room.id)}/kick", {"user_id": room.bot}
    )
    async with asyncio.timeout(_WAIT):
        while not any("forgetting it" in r.getMessage() for r in caplog.records):
            await room.alice.say(room.id, "still there?")  # each sync wakes the bot
            await room.alice.wait(room.id, lambda e: e["content"].get("body") == "still there?")


async def test_a_password_login_keeps_the_device_token_in_the_data_directory(
    room: Room, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("DEBUG")  # mautrix logs request bodies at DEBUG: never the password
    room.secrets = {"BOT_PASSWORD": room.bot_account.password}
    await room.start(FakeProvider(["hi"]), access_token_env=None, password_env="BOT_PASSWORD")
    session = room.tmp_path / "data" / "matrix-session.json"
    assert session.stat().st_mode & 0o777 == 0o600
    assert room.bot_account.password not in session.read_text()
    assert room.bot_account.password not in caplog.text
    assert room.platform is not None
    await room.platform.stop()
    room.secrets = {}  # no password now: the kept token logs in
    provider = FakeProvider(["back"])
    await room.start(provider, access_token_env=None, password_env="BOT_PASSWORD")
    answer = await room.ask(room.alice, "are you back?")
    assert answer["content"]["body"] == "back"
    await room.platform.stop()
    kept = session.read_text()
    session.write_text(kept.replace(json.loads(kept)["access_token"], "syt_revoked"))
    room.secrets = {"BOT_PASSWORD": room.bot_account.password}  # a token no longer known:
    provider = FakeProvider(["again"])  # the password logs in afresh
    await room.start(provider, access_token_env=None, password_env="BOT_PASSWORD")
    answer = await room.ask(room.alice, "and now?")
    assert answer["content"]["body"] == "again"
    assert "syt_revoked" not in session.read_text()


async def test_a_send_tried_again_with_its_transaction_id_is_one_event(room: Room) -> None:
    await room.start(FakeProvider())
    server = Homeserver(
        room.synapse.url, room.bot_account.access_token, rate_limit_wait_max=5, retries=0
    )
    try:
        content = {"msgtype": "m.text", "body": "once"}
        first = await server.send_event(room.id, "m.room.message", content, "txn-1")
        again = await server.send_event(room.id, "m.room.message", content, "txn-1")
    finally:
        await server.close()
    assert first == again


@pytest.fixture(scope="module")
def tight_synapse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synapse]:
    synapse_available()
    server = Synapse(tmp_path_factory.mktemp("synapse-tight"), relaxed=False)
    server.start()
    yield server
    server.stop()


async def test_rate_limits_are_waited_out_and_nothing_is_lost(
    tight_synapse: Synapse, tmp_path: Path, serve_app: ServeApp
) -> None:
    tight = Room(tight_synapse, tmp_path, serve_app)
    await tight.create()
    await tight.start(FakeProvider())
    assert tight.platform is not None
    channel = ChannelRef("matrix", tight.id)
    sent = [await tight.platform.send(channel, f"line {i}") for i in range(8)]
    bodies = []
    for _ in sent:
        event = await tight.alice.wait(tight.id, from_bot(tight.bot, notice=False))
        bodies.append(event["content"]["body"])
    assert bodies == [f"line {i}" for i in range(8)]
    await tight.alice.close()
    await tight.bob.close()


async def test_live_check_names_what_the_bots_power_level_keeps_it_from(room: Room) -> None:
    """``salon check --live``: a bot at the default level 0 in a room whose ``redact`` is
    50 is told it cannot redact; raised to 50, the room has nothing to say."""
    from salon.platforms.matrix.check import live_check

    config = bot_config(
        data_dir=str(room.tmp_path / "data"),
        platforms={
            "matrix": {
                "homeserver": room.synapse.url,
                "user_id": room.bot,
                "access_token_env": "BOT_TOKEN",
                "rooms": [room.id],
            }
        },
    )
    secrets = Secrets(room.secrets)
    lines, ok = await live_check(config, secrets, room.tmp_path / "data")
    (line,) = [line for line in lines if room.id in line]  # invited, not joined yet
    assert "not joined" in line
    assert ok, lines

    bot = Person(room.synapse, room.bot_account)
    await bot.call("POST", f"/_matrix/client/v3/join/{q(room.id)}", {})
    lines, ok = await live_check(config, secrets, room.tmp_path / "data")
    (line,) = [line for line in lines if room.id in line]
    assert line.startswith(f"live: matrix: {room.id}: the bot cannot redact")
    assert "redact needs 50, the bot has 0" in line
    assert not ok

    await room.power(room.bot, 50)
    lines, ok = await live_check(config, secrets, room.tmp_path / "data")
    assert [line for line in lines if room.id in line] == []
    assert ok, lines
    assert lines[-1].startswith(f"live: matrix: ok, {room.bot}")
    await bot.close()


async def test_salon_check_live_prints_the_rooms_problems(
    room: Room, llm_server: LLMServer
) -> None:
    """The command itself: a Matrix bot's rooms are checked after the providers."""
    bot = Person(room.synapse, room.bot_account)
    await bot.call("POST", f"/_matrix/client/v3/join/{q(room.id)}", {})
    await bot.close()
    root = room.tmp_path / "config"
    (root / "bots").mkdir(parents=True)
    (root / "shared.yaml").write_text(
        f"providers:\n  p: {{type: openai, base_url: '{llm_server.base_url}/v1', model: m, "
        "api_key_env: P_KEY, retries: 0}\nprovider: p\n"
    )
    (root / "bots" / "salon.yaml").write_text(
        f"platforms:\n  matrix:\n    homeserver: '{room.synapse.url}'\n"
        f"    user_id: '{room.bot}'\n    access_token_env: BOT_TOKEN\n"
    )
    llm_server.queue("ok")
    env = {**os.environ, "P_KEY": "k", "BOT_TOKEN": room.bot_account.access_token}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "salon",
        "check",
        str(root),
        "--live",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 1, err.decode()
    (line,) = [line for line in out.decode().splitlines() if room.id in line]
    assert "the bot cannot redact other people's messages (redact needs 50" in line
    assert room.bot_account.access_token not in out.decode() + err.decode()


async def test_a_direct_message_goes_to_the_persons_direct_room_made_once(room: Room) -> None:
    """What only one person may see (the link that connects their account): a room made
    with ``is_direct`` and an invite to them the first time, named in the bot's
    ``m.direct``, and the same room after."""
    await room.start(FakeProvider([]))
    platform = room.platform
    assert platform is not None
    assert platform.can(Capability.DIRECT_MESSAGES)
    alice = Participant(room.alice.id, "alice")
    await platform.send_direct(alice, "connect here:\nhttp://x/a")
    synced = await room.alice.call("GET", "/_matrix/client/v3/sync")
    ((dm, invite),) = synced["rooms"]["invite"].items()
    (mine,) = [
        e
        for e in invite["invite_state"]["events"]
        if e["type"] == "m.room.member" and e["state_key"] == room.alice.id
    ]
    assert mine["content"].get("is_direct") is True
    await room.alice.call("POST", f"/_matrix/client/v3/join/{q(dm)}", {})
    said = await room.alice.wait(dm, from_bot(room.bot))
    assert said["content"]["body"] == "connect here:\nhttp://x/a"
    await platform.send_direct(alice, "again")
    said = await room.alice.wait(dm, from_bot(room.bot))
    assert said["content"]["body"] == "again"
    bots = Person(room.synapse, room.bot_account)
    try:
        path = f"/_matrix/client/v3/user/{q(room.bot)}/account_data/m.direct"
        assert await bots.call("GET", path) == {room.alice.id: [dm]}
    finally:
        await bots.close()


async def _second_room(room: Room) -> str:
    """Another room of alice's the bot is invited to (bob is not in it)."""
    answer = await room.alice.call(
        "POST", "/_matrix/client/v3/createRoom", {"preset": "public_chat", "invite": [room.bot]}
    )
    return str(answer["room_id"])


async def test_a_linked_room_is_shown_only_to_those_joined_to_it_now(room: Room) -> None:
    """An operator's ``links:`` from room A to room B: alice (in both) sees B's messages
    in the linked block; bob (in A only) does not, until he joins B."""
    linked = await _second_room(room)
    await room.alice.say(linked, "the launch moves to Thursday")
    provider = FakeProvider(["for alice", "for bob", "for bob, now in B"])
    links = [{"channel": f"matrix:{linked}", "where": [room.id]}]
    await room.start(provider, bot={"links": links}, rooms=[room.id, linked])
    await room.ask(room.alice, "any news?")
    assert "the launch moves to Thursday" in seen(provider)
    await room.ask(room.bob, "any news?")
    assert "the launch moves to Thursday" not in seen(provider)
    await room.bob.call("POST", f"/_matrix/client/v3/join/{q(linked)}", {})
    await room.ask(room.bob, "and now?")  # his join, in the bot's sync, is seen at once
    assert "the launch moves to Thursday" in seen(provider)


async def test_find_channel_knows_the_rooms_the_bot_is_in_and_their_threads(room: Room) -> None:
    await room.start(FakeProvider())
    platform = room.platform
    assert platform is not None
    root = await room.alice.say(room.id, "a thread about owls")
    in_thread = {"m.relates_to": {"rel_type": "m.thread", "event_id": root}}
    await room.alice.say(room.id, "owls!", **in_thread)
    *_, as_message = await platform.history(ChannelRef("matrix", f"{room.id}/{root}"), limit=5)
    assert as_message.text == "owls!"
    assert await platform.find_channel(room.id) == ChannelRef("matrix", room.id, name=room.id)
    thread = await platform.find_channel(f"{room.id}/{root}")
    assert thread == as_message.channel
    assert thread is not None
    assert thread.parent_id == room.id
    assert thread.server_id is None  # a room has no server: a pinned .config links nothing
    elsewhere = await room.bob.call("POST", "/_matrix/client/v3/createRoom", {})
    for unknown in (
        "!nowhere:salon.test",
        elsewhere["room_id"],  # a room the bot is not in
        f"{room.id}/$nosuchevent",
        "#alias:salon.test",
        "@alice:salon.test",
        "",
    ):
        assert await platform.find_channel(unknown) is None, unknown


async def test_can_read_is_the_persons_own_membership_now(room: Room) -> None:
    await room.start(FakeProvider(["no"]))
    platform = room.platform
    assert platform is not None
    channel = ChannelRef("matrix", room.id)
    thread = ChannelRef("matrix", f"{room.id}/$root", parent_id=room.id)
    stranger = Participant("@stranger:salon.test", "stranger")
    assert await platform.can_read(Participant(room.alice.id, "alice"), channel)
    assert await platform.can_read(Participant(room.alice.id, "alice"), thread)
    assert not await platform.can_read(stranger, channel)
    elsewhere = await room.bob.call("POST", "/_matrix/client/v3/createRoom", {})
    bob = Participant(room.bob.id, "bob")
    assert not await platform.can_read(bob, ChannelRef("matrix", elsewhere["room_id"]))
    assert await platform.can_read(bob, channel)
    await room.bob.call("POST", f"/_matrix/client/v3/rooms/{q(room.id)}/leave", {})
    await room.ask(room.alice, "is bob here?")  # the bot's sync brought his leave before it
    assert not await platform.can_read(bob, channel)


async def test_a_schedule_in_a_thread_knows_its_room_and_shows_the_rooms_links(
    room: Room,
) -> None:
    """A schedule's channel is rebuilt from its stored key; the platform's lookup gives
    the thread its room, so a link that applies in the room applies in the thread."""
    linked = await _second_room(room)
    await room.alice.say(linked, "the launch moves to Thursday")
    root = await room.alice.say(room.id, "a thread for reminders")
    provider = FakeProvider(["reminded"])
    links = [{"channel": f"matrix:{linked}", "where": [room.id]}]
    app = await room.start(provider, bot={"links": links}, rooms=[room.id, linked])
    now = datetime.now(UTC)
    channel = ChannelRef.from_key(f"matrix:{room.id}/{root}")
    alice = Participant(room.alice.id, "alice")
    schedule = Schedule(1, "salon", channel, "remind us", "UTC", at=now, created_by=alice)
    await app.agent.submit(ScheduledEvent(schedule, now))
    answer = await room.alice.wait(room.id, from_bot(room.bot, notice=False))
    assert answer["content"]["body"] == "reminded"
    assert answer["content"]["m.relates_to"]["event_id"] == root
    assert "the launch moves to Thursday" in seen(provider)
