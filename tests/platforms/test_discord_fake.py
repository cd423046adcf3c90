"""The fake Discord itself keeps to Discord's documented behaviour (raw HTTP and gateway)."""

from __future__ import annotations

import json
import math
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from fakes.discord_server import DiscordServer, FakeUser
from tests.platforms.conftest import GENERAL

AUTH = {"Authorization": "Bot token-123"}
PRESENCES = 1 << 8
DISCORD_EPOCH = 1_420_070_400  # seconds: 2015-01-01T00:00:00Z


class Gateway:
    """A bare gateway client: identifies, then reads dispatches."""

    def __init__(self, socket: aiohttp.ClientWebSocketResponse) -> None:
        self.socket = socket

    async def identify(self, intents: int = 0) -> dict[str, Any]:
        await self.next_frame()  # HELLO
        identify = {"token": "token-123", "intents": intents, "properties": {}}
        await self.socket.send_json({"op": 2, "d": identify})
        await self.event("READY")
        return await self.event("GUILD_CREATE")

    async def next_frame(self) -> dict[str, Any]:
        frame: dict[str, Any] = await self.socket.receive_json(timeout=5)
        return frame

    async def event(self, name: str) -> dict[str, Any]:
        while True:
            frame = await self.next_frame()
            if frame.get("t") == name:
                data: dict[str, Any] = frame["d"]
                return data


@pytest.fixture
async def http(fake_discord: DiscordServer) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(base_url=fake_discord.api + "/", headers=AUTH) as session:
        yield session


@pytest.fixture
async def gateway(fake_discord: DiscordServer) -> AsyncIterator[Gateway]:
    async with aiohttp.ClientSession() as session, session.ws_connect(fake_discord.gateway) as ws:
        yield Gateway(ws)


async def test_only_gateway_messages_carry_the_author_as_a_member(
    fake_discord: DiscordServer, http: aiohttp.ClientSession, gateway: Gateway
) -> None:
    await gateway.identify()
    carol = fake_discord.user("Carol")
    alice = fake_discord.user("Alice")
    await fake_discord.post(GENERAL, carol, f"<@{alice.id}> hi", mentions=[alice])
    event = await gateway.event("MESSAGE_CREATE")
    assert event["guild_id"] == "1"
    assert event["member"]["nick"] == "Caz"
    assert "user" not in event["member"]
    assert event["mentions"][0]["member"]["roles"] == []
    async with http.get(f"channels/{GENERAL}/messages") as response:
        (fetched,) = await response.json()
    assert "member" not in fetched
    assert "guild_id" not in fetched
    assert "member" not in fetched["mentions"][0]
    assert fetched["author"] == {
        "id": carol.id,
        "username": "carol",
        "global_name": "Carol",
        "discriminator": "0",
        "avatar": None,
        "public_flags": 0,
    }


async def test_guild_create_lists_only_the_bot_without_the_presences_intent(
    fake_discord: DiscordServer, gateway: Gateway
) -> None:
    guild = await gateway.identify()
    assert [m["user"]["id"] for m in guild["members"]] == [fake_discord.bot.id]
    assert guild["member_count"] == 1 + len(fake_discord.people)


async def test_a_member_lookup_finds_nick_and_roles_until_they_leave(
    fake_discord: DiscordServer, http: aiohttp.ClientSession
) -> None:
    carol = fake_discord.user("Carol")
    fake_discord.roles[carol.id] = ["500"]
    async with http.get(f"guilds/1/members/{carol.id}") as response:
        member = await response.json()
    assert (member["nick"], member["roles"], member["user"]["id"]) == ("Caz", ["500"], carol.id)
    fake_discord.leave(carol)
    async with http.get(f"guilds/1/members/{carol.id}") as response:
        assert response.status == 404
        assert await response.json() == {"message": "Unknown Member", "code": 10007}


async def test_a_429_comes_with_discords_headers_and_body(
    fake_discord: DiscordServer, http: aiohttp.ClientSession
) -> None:
    fake_discord.rate_limit("POST", "/messages", retry_after=1.5)
    async with http.post(f"channels/{GENERAL}/messages", json={"content": "hi"}) as response:
        assert response.status == 429
        headers, body = response.headers, await response.json()
    assert body == {"message": "You are being rate limited.", "retry_after": 1.5, "global": False}
    assert headers["Retry-After"] == str(math.ceil(1.5))
    assert headers["X-RateLimit-Remaining"] == "0"
    assert headers["X-RateLimit-Scope"] == "user"
    assert float(headers["X-RateLimit-Reset-After"]) == 1.5
    assert headers["Via"] == "1.1 google"
    for name in ("X-RateLimit-Limit", "X-RateLimit-Reset", "X-RateLimit-Bucket"):
        assert name in headers
    async with http.post(f"channels/{GENERAL}/messages", json={"content": "hi"}) as response:
        assert response.status == 200
        assert int(response.headers["X-RateLimit-Remaining"]) < fake_discord.bucket_limit


async def test_flags_are_kept_and_content_is_limited(
    fake_discord: DiscordServer, http: aiohttp.ClientSession
) -> None:
    async with http.post(
        f"channels/{GENERAL}/messages", json={"content": "quiet", "flags": (1 << 12) | (1 << 6)}
    ) as response:
        sent = await response.json()
    assert sent["flags"] == 1 << 12  # EPHEMERAL cannot be set on a channel message
    path = f"channels/{GENERAL}/messages/{sent['id']}"
    async with http.patch(path, json={"content": "still quiet"}) as response:
        assert (await response.json())["flags"] == 1 << 12
    async with http.post(f"channels/{GENERAL}/messages", json={"content": "x" * 2001}) as response:
        assert response.status == 400
        assert (await response.json())["code"] == 50035


async def test_refusals_carry_discords_codes(
    fake_discord: DiscordServer, http: aiohttp.ClientSession
) -> None:
    fake_discord.deny(GENERAL, "SEND_MESSAGES")
    async with http.post(f"channels/{GENERAL}/messages", json={"content": "hi"}) as response:
        assert (response.status, await response.json()) == (
            403,
            {"message": "Missing Permissions", "code": 50013},
        )
    fake_discord.deny(GENERAL, "READ_MESSAGE_HISTORY")
    async with http.get(f"channels/{GENERAL}/messages") as response:
        assert (response.status, await response.json()) == (200, [])  # no error, no messages
    fake_discord.deny(GENERAL, "VIEW_CHANNEL")
    async with http.get(f"channels/{GENERAL}/messages") as response:
        assert (response.status, await response.json()) == (
            403,
            {"message": "Missing Access", "code": 50001},
        )


async def test_a_reply_to_a_deleted_message_is_refused_unless_it_may_be_plain(
    fake_discord: DiscordServer, http: aiohttp.ClientSession
) -> None:
    """Discord's answer to a reference that no longer exists: 400 Invalid Form Body,
    "message_reference: Unknown message"; with fail_if_not_exists false, a plain post."""
    gone = await fake_discord.post(GENERAL, fake_discord.user("Alice"), "soon gone")
    await fake_discord.delete(gone)
    reference = {"message_id": gone["id"], "channel_id": GENERAL}
    body = {"content": "hi", "message_reference": reference}
    async with http.post(f"channels/{GENERAL}/messages", json=body) as response:
        unknown = {"code": "MESSAGE_REFERENCE_UNKNOWN_MESSAGE", "message": "Unknown message"}
        assert (response.status, await response.json()) == (
            400,
            {
                "message": "Invalid Form Body",
                "code": 50035,
                "errors": {"message_reference": {"_errors": [unknown]}},
            },
        )
    body["message_reference"] = {**reference, "fail_if_not_exists": False}
    async with http.post(f"channels/{GENERAL}/messages", json=body) as response:
        posted = await response.json()
    assert response.status == 200
    assert posted["content"] == "hi"
    assert "message_reference" not in posted
    assert posted["type"] == 0


async def test_an_interaction_is_answered_once_and_an_update_keeps_the_flags(
    fake_discord: DiscordServer, http: aiohttp.ClientSession, gateway: Gateway
) -> None:
    await gateway.identify()
    body = {"content": "Allow?", "flags": 1 << 12, "components": [{"type": 1, "components": []}]}
    async with http.post(f"channels/{GENERAL}/messages", json=body) as response:
        prompt = await response.json()
    await fake_discord.click(prompt, fake_discord.user("Alice"), "salon:approve")
    clicked = await gateway.event("INTERACTION_CREATE")
    assert clicked["member"]["user"]["id"] == fake_discord.user("Alice").id
    callback = f"interactions/{clicked['id']}/{clicked['token']}/callback"
    update = {"type": 7, "data": {"content": "Allow?\nApproved by Alice.", "components": []}}
    async with http.post(callback, json=update, params={"with_response": "1"}) as response:
        answer = await response.json()
    assert answer["resource"]["message"]["flags"] == 1 << 12
    assert answer["resource"]["message"]["content"] == "Allow?\nApproved by Alice."
    async with http.post(callback, json=update) as response:
        assert (await response.json())["code"] == 40060  # already acknowledged


async def test_webhook_messages_have_no_member_and_execute_answers_204(
    fake_discord: DiscordServer, http: aiohttp.ClientSession, gateway: Gateway
) -> None:
    await gateway.identify()
    async with http.post(f"channels/{GENERAL}/webhooks", json={"name": "Salon"}) as response:
        hook = await response.json()
    assert hook["application_id"] == fake_discord.bot.id
    async with http.post(f"webhooks/{hook['id']}/{hook['token']}", json={"content": ".x"}) as r:
        assert r.status == 204
    event = await gateway.event("MESSAGE_CREATE")
    assert event["webhook_id"] == hook["id"]
    assert "member" not in event
    async with http.post(f"webhooks/{hook['id']}/wrong", json={"content": ".x"}) as response:
        assert (await response.json())["code"] == 10015


async def test_pinning_and_joining_post_system_messages(
    fake_discord: DiscordServer, http: aiohttp.ClientSession
) -> None:
    alice = fake_discord.user("Alice")
    words = await fake_discord.post(GENERAL, alice, "keep this")
    await fake_discord.pin(words)
    await fake_discord.join(FakeUser("203", "Dave"))
    async with http.get(f"channels/{GENERAL}/messages") as response:
        newest_first = await response.json()
    assert [(m["type"], m["content"]) for m in newest_first] == [(7, ""), (6, ""), (0, "keep this")]
    assert newest_first[1]["message_reference"]["message_id"] == words["id"]


def _upload(payload: dict[str, Any], *files: tuple[str, str, bytes]) -> aiohttp.FormData:
    """A multipart body as Discord's "Uploading Files" describes it."""
    form = aiohttp.FormData()
    form.add_field("payload_json", json.dumps(payload), content_type="application/json")
    for name, filename, data in files:
        form.add_field(name, data, filename=filename, content_type="application/octet-stream")
    return form


async def test_uploads_are_files_n_parts_named_by_the_attachments_list(
    http: aiohttp.ClientSession,
) -> None:
    payload = {
        "content": "look",
        "embeds": [{"title": "a", "image": {"url": "attachment://castle.png"}}],
        "attachments": [{"id": 0, "filename": "castle.png", "description": "a castle"}],
    }
    form = _upload(payload, ("files[0]", "upload.png", b"\x89PNG"))
    async with http.post(f"channels/{GENERAL}/messages", data=form) as response:
        message = await response.json()
    (attachment,) = message["attachments"]
    assert (attachment["filename"], attachment["description"]) == ("castle.png", "a castle")
    assert attachment["content_type"] == "image/png"  # sniffed, as Discord does
    assert message["embeds"][0]["image"]["url"] == attachment["url"]
    refused = [
        _upload({"content": "x"}, ("file", "a.png", b"1")),  # not files[n]
        _upload({"content": "x"}, ("files[0]", "a.png", b"1"), ("files[0]", "b.png", b"2")),
        _upload({"content": "x", "attachments": [{"id": 1}]}, ("files[0]", "a.png", b"1")),
        _upload(
            {"embeds": [{"image": {"url": "attachment://b.png"}}]}, ("files[0]", "a.png", b"1")
        ),
    ]
    for form in refused:
        async with http.post(f"channels/{GENERAL}/messages", data=form) as response:
            assert (response.status, (await response.json())["code"]) == (400, 50035)


async def test_an_edit_keeps_only_the_attachments_it_lists(
    http: aiohttp.ClientSession,
) -> None:
    form = _upload({"content": "two"}, ("files[0]", "a.png", b"1"), ("files[1]", "b.png", b"2"))
    async with http.post(f"channels/{GENERAL}/messages", data=form) as response:
        message = await response.json()
    first = message["attachments"][0]["id"]
    edit = _upload({"attachments": [{"id": first}, {"id": 0}]}, ("files[0]", "c.gif", b"3"))
    async with http.patch(f"channels/{GENERAL}/messages/{message['id']}", data=edit) as response:
        edited = await response.json()
    assert [a["filename"] for a in edited["attachments"]] == ["a.png", "c.gif"]


async def test_mentions_notify_as_allowed_mentions_says(
    fake_discord: DiscordServer, http: aiohttp.ClientSession
) -> None:
    fake_discord.pings_allowed_everyone, fake_discord.pings_allowed_roles = True, {"500"}
    alice, bob = fake_discord.user("Alice"), fake_discord.user("Bob")
    content = f"@here <@&500> <@{alice.id}> <@{bob.id}>"

    async def post(path: str, allowed: dict[str, Any] | None) -> int:
        body: dict[str, Any] = {"content": content}
        if allowed is not None:
            body["allowed_mentions"] = allowed
        async with http.post(path, json=body) as response:
            return response.status

    messages = f"channels/{GENERAL}/messages"
    assert await post(messages, None) == 200  # a channel message parses everything
    assert await post(messages, {"parse": []}) == 200
    assert await post(messages, {"parse": ["everyone"], "users": [alice.id]}) == 200
    for invalid in ({"parse": ["users"], "users": [alice.id]}, {"parse": ["nobody"]}):
        async with http.post(messages, json={"content": content, "allowed_mentions": invalid}) as r:
            assert (r.status, (await r.json())["code"]) == (400, 50035)
    fake_discord.deny(GENERAL, "MENTION_EVERYONE")  # no @here, and the role is not mentionable
    assert await post(messages, None) == 200
    async with http.post(f"channels/{GENERAL}/webhooks", json={"name": "hook"}) as response:
        hook = await response.json()
    assert await post(f"webhooks/{hook['id']}/{hook['token']}", None) == 204
    people = frozenset({alice.id, bob.id})
    assert [(p.route, p.users, p.roles, p.everyone) for p in fake_discord.pings] == [
        ("message", people, frozenset({"500"}), True),
        ("message", frozenset(), frozenset(), False),
        ("message", frozenset({alice.id}), frozenset(), True),
        ("message", people, frozenset(), False),
        ("webhook", people, frozenset(), False),  # a webhook parses only users by default
    ]
    first = fake_discord.channels[GENERAL][0]
    assert (first["mention_everyone"], first["mention_roles"]) == (True, ["500"])


async def test_interaction_answers_parse_users_unless_told(
    fake_discord: DiscordServer, http: aiohttp.ClientSession
) -> None:
    fake_discord.pings_allowed_roles = {"500"}
    alice = fake_discord.user("Alice")
    await fake_discord.command(GENERAL, alice, "ask", question="hi")
    ((interaction_id, pending),) = fake_discord._interactions.items()
    content = f"@everyone <@&500> <@{alice.id}>"
    callback = f"interactions/{interaction_id}/{pending.token}/callback"
    async with http.post(callback, json={"type": 4, "data": {"content": content}}) as response:
        assert response.status == 204
    follow_up = f"webhooks/{fake_discord.bot.id}/{pending.token}"
    allowed = {"parse": [], "roles": ["500"]}
    async with http.post(follow_up, json={"content": content, "allowed_mentions": allowed}) as r:
        assert r.status == 200
    original = f"{follow_up}/messages/@original"
    async with http.patch(original, json={"content": content, "allowed_mentions": {}}) as r:
        assert r.status == 200
    assert [(p.route, p.users, p.roles, p.everyone) for p in fake_discord.pings] == [
        ("interaction", frozenset({alice.id}), frozenset(), False),
        ("follow-up", frozenset(), frozenset({"500"}), False),
        ("original", frozenset(), frozenset(), False),
    ]


async def test_a_429_can_come_without_via(
    fake_discord: DiscordServer, http: aiohttp.ClientSession
) -> None:
    fake_discord.rate_limit("POST", "/messages", retry_after=2.5, via=False)
    async with http.post(f"channels/{GENERAL}/messages", json={"content": "hi"}) as response:
        assert response.status == 429
        assert "Via" not in response.headers
        assert response.headers["Retry-After"] == "3"


async def test_a_reply_carries_the_message_it_answers_but_not_that_ones_own_reply(
    fake_discord: DiscordServer, gateway: Gateway
) -> None:
    # Discord resolves a reply's reference one level deep: the referenced message comes
    # with its own message_reference, never with its referenced_message (else every reply
    # in a long chain would carry the whole chain).
    await gateway.identify()
    alice, bob = fake_discord.user("Alice"), fake_discord.user("Bob")
    first = await fake_discord.post(GENERAL, alice, "first")
    second = await fake_discord.post(GENERAL, bob, "second", reply_to=first)
    await fake_discord.post(GENERAL, alice, "third", reply_to=second)
    for _ in range(3):
        event = await gateway.event("MESSAGE_CREATE")
    referenced = event["referenced_message"]
    assert referenced["id"] == second["id"]
    assert referenced["message_reference"]["message_id"] == first["id"]
    assert "referenced_message" not in referenced


async def test_ids_are_snowflakes_that_carry_the_time_they_were_made(
    fake_discord: DiscordServer,
) -> None:
    # Discord's ids are snowflakes: milliseconds since 2015-01-01 (the Discord epoch)
    # shifted left 22 bits, so a message's id tells when it was sent; discord.py's
    # Message.created_at is read from it. Ids still grow with each one made.
    before = time.time()
    first = await fake_discord.post(GENERAL, fake_discord.user("Alice"), "first")
    second = await fake_discord.post(GENERAL, fake_discord.user("Bob"), "second")
    after = time.time()
    made = [(int(m["id"]) >> 22) / 1000 + DISCORD_EPOCH for m in (first, second)]
    assert before - 0.002 <= made[0] <= made[1] <= after + 0.002
    assert int(first["id"]) < int(second["id"])
