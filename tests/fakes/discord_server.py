"""A loopback fake of Discord's REST API and gateway that drives the real discord.py.

It follows Discord's documented behaviour, including what Discord leaves out, so the
adapter meets what it will meet in production:

- REST message objects (history, one message, pins, the answer to a send) carry no
  ``member`` and no ``guild_id``; only gateway MESSAGE_CREATE / MESSAGE_UPDATE of guild
  messages add the author's partial member (nick, roles, joined_at; no ``user``), and
  mentions there carry a partial member too. Webhook messages never have one.
- GUILD_CREATE lists only the bot's own member unless the client asked for the
  GUILD_PRESENCES intent; other members are found with GET /guilds/{g}/members/{u}
  (404 code 10007 Unknown Member for someone who left).
- People have a username, a global display name and may have a guild nickname; bots have
  a username and no global name.
- Pinning, joining, boosting and opening a thread post system messages (types 6, 7, 8,
  18, 21) as Discord does.
- Errors come as Discord sends them: 403 with code 50001 Missing Access or 50013 Missing
  Permissions, 404 with the Unknown … code, 429 with the X-RateLimit-* headers,
  Retry-After and a JSON body, and every answer carries the rate-limit headers of its
  route. The ``Via`` header is what discord.py uses to tell an API 429 from a Cloudflare
  ban, and Discord's API answers carry it.
- Message ``flags`` a client may set (SUPPRESS_NOTIFICATIONS …) are kept and echoed;
  an edit keeps the flags it does not name. A message over 2000 characters is refused.
- Interactions: callbacks of type 4, 5, 6, 7 and 9 (204, or the callback response with
  ``with_response``), follow-ups and edits of the original through the interaction
  webhook; executing a webhook returns 204 unless ``wait``.

Tests act as people with ``post``, ``edit``, ``delete``, ``react``, ``pin``, ``click``,
``command``, ``join``, ``leave`` and ``start_thread``; they read what the bot did in
``channels``, count REST calls in ``calls`` (and their order in ``log``), take rights
away with ``deny``, and script failures with ``fail_next`` and ``rate_limit``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import math
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import WSMsgType, web

__all__ = ["DiscordServer", "FakeUser"]

GUILD_ID = "1"
SYSTEM_CHANNEL = "10"
APP_FLAGS_MESSAGE_CONTENT = 1 << 18
INTENT_GUILD_PRESENCES = 1 << 8
MAX_CONTENT = 2000

# Message types (Discord's "Message Types" table).
DEFAULT, PINNED, USER_JOIN, BOOST = 0, 6, 7, 8
THREAD_CREATED, REPLY, COMMAND, THREAD_STARTER = 18, 19, 20, 21
# Message flags.
HAS_THREAD, EPHEMERAL, LOADING, SUPPRESS_NOTIFICATIONS = 1 << 5, 1 << 6, 1 << 7, 1 << 12
SETTABLE_FLAGS = (1 << 2) | SUPPRESS_NOTIFICATIONS | (1 << 13) | (1 << 15)  # on create
EDITABLE_FLAGS = (1 << 2) | (1 << 15)  # on edit; other bits stay as they were
INTERACTION_FLAGS = SETTABLE_FLAGS | EPHEMERAL

# Permissions a test can take from the bot in a channel (Discord's bit values).
PERMISSIONS = {
    "VIEW_CHANNEL": 1 << 10,
    "SEND_MESSAGES": 1 << 11,
    "MANAGE_MESSAGES": 1 << 13,
    "READ_MESSAGE_HISTORY": 1 << 16,
    "ADD_REACTIONS": 1 << 6,
    "MANAGE_WEBHOOKS": 1 << 29,
}

ERRORS = {  # JSON error codes and their messages, as Discord words them
    0: "General error",
    10003: "Unknown Channel",
    10007: "Unknown Member",
    10008: "Unknown Message",
    10013: "Unknown User",
    10015: "Unknown Webhook",
    10062: "Unknown interaction",
    40060: "Interaction has already been acknowledged.",
    50001: "Missing Access",
    50003: "Cannot execute action on a DM channel",
    50005: "Cannot edit a message authored by another user",
    50013: "Missing Permissions",
    50035: "Invalid Form Body",
    160002: "Cannot reply without permission to read message history",
}
_DEFAULT_CODE = {400: 50035, 403: 50013, 404: 10008}


@dataclass(frozen=True)
class FakeUser:
    """A Discord account. ``name`` is a person's global display name (a bot's username);
    ``nick`` their nickname in the guild."""

    id: str
    name: str
    bot: bool = False
    nick: str | None = None

    @property
    def username(self) -> str:
        return self.name if self.bot else self.name.lower()

    def payload(self) -> dict[str, Any]:
        user: dict[str, Any] = {
            "id": self.id,
            "username": self.username,
            "global_name": None if self.bot else self.name,
            "discriminator": "0001" if self.bot else "0",
            "avatar": None,
            "public_flags": 0,
        }
        if self.bot:
            user["bot"] = True  # optional in Discord's user object: absent for people
        return user


class _Refusal(Exception):
    def __init__(self, status: int, code: int) -> None:
        super().__init__(status, code)
        self.status, self.code = status, code


@dataclass
class _Failure:
    method: str
    fragment: str
    status: int
    times: int = 1
    after_effect: bool = False  # do the work, then answer with the error (a lost response)
    code: int | None = None
    exact: bool = False  # the whole path, not a part of it
    retry_after: float = 0.05
    scope: str = "user"


@dataclass
class _Interaction:
    token: str
    kind: int  # 2 application command, 3 message component
    channel_id: str
    message_id: str | None  # the message whose component was used
    responded: bool = False
    original: str | None = None  # id of the message the response created


@dataclass
class DiscordServer:
    bot: FakeUser = field(default_factory=lambda: FakeUser("100", "Salon", bot=True))
    people: list[FakeUser] = field(
        default_factory=lambda: [
            FakeUser("200", "Alice"),
            FakeUser("201", "Bob"),
            FakeUser("202", "Carol", nick="Caz"),
            FakeUser("300", "Robo", bot=True),
        ]
    )
    message_content_intent: bool = True
    port: int = 0
    tokens: dict[str, FakeUser] = field(default_factory=dict)  # more bots: token -> bot user
    bucket_limit: int = 1000  # requests per route bucket and window
    bucket_window: float = 1.0

    def __post_init__(self) -> None:
        self._ids = itertools.count(1000)
        self.channels: dict[str, list[dict[str, Any]]] = {"10": [], "11": []}
        self.channel_names = {"10": "general", "11": "random"}
        self.dm_channels: dict[str, str] = {}  # user id -> dm channel id
        self.calls: Counter[str] = Counter()
        self.log: list[str] = []  # every REST call in order, "METHOD /path"
        self.commands: list[dict[str, Any]] = []
        self.interaction_responses: list[dict[str, Any]] = []
        self.webhooks: list[dict[str, Any]] = []
        self.files: dict[str, bytes] = {}
        self.threads: dict[str, str] = {}  # thread id -> parent channel id
        self._thread_names: dict[str, str] = {}
        self._ephemeral: dict[str, dict[str, Any]] = {}  # seen by one person only
        self.webhook_posts: list[dict[str, Any]] = []
        self.roles: dict[str, list[str]] = {}  # user id -> role ids
        self.role_names: dict[str, str] = {"500": "mods"}  # the guild's roles
        self.nicks: dict[str, str] = {u.id: u.nick for u in [self.bot, *self.people] if u.nick}
        self.left: set[str] = set()  # people who left the guild
        self.denied: dict[str, int] = {}  # channel id -> permission bits the bot lacks
        self.intents = 0  # what the last IDENTIFY asked for
        self._failures: list[_Failure] = []
        self._nonces: dict[str, dict[str, Any]] = {}
        self._interactions: dict[str, _Interaction] = {}
        self._buckets: dict[str, str] = {}
        self._windows: dict[tuple[str, str], tuple[float, int]] = {}
        self._sockets: list[web.WebSocketResponse] = []
        self._seq = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self.identified = asyncio.Event()
        self.identifies = 0
        self.sent = asyncio.Condition()
        for extra in self.tokens.values():
            if extra not in self.people:
                self.people.append(extra)

    # -- lifecycle -------------------------------------------------------------------

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v10"

    @property
    def gateway(self) -> str:
        return f"ws://127.0.0.1:{self.port}/gateway"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/api/v10/{tail:.*}", self._rest)
        app.router.add_get("/gateway", self._gateway)
        app.router.add_get("/attachments/{file_id}/{name}", self._file)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    async def stop(self) -> None:
        for socket in list(self._sockets):
            with contextlib.suppress(Exception):
                await socket.close()
        if self._runner is not None:
            await self._runner.cleanup()

    # -- acting as people ------------------------------------------------------------

    def user(self, name: str) -> FakeUser:
        return next(u for u in [self.bot, *self.people] if u.name == name)

    def display_name(self, user: FakeUser) -> str:
        """How Discord shows ``user`` in the guild: nickname, global name, username."""
        return self.nicks.get(user.id) or user.name

    def dm_channel(self, user: FakeUser) -> str:
        if user.id not in self.dm_channels:
            channel_id = str(next(self._ids))
            self.dm_channels[user.id] = channel_id
            self.channels[channel_id] = []
        return self.dm_channels[user.id]

    async def post(
        self,
        channel_id: str,
        author: FakeUser,
        content: str,
        *,
        mentions: list[FakeUser] = (),  # type: ignore[assignment]
        reply_to: dict[str, Any] | None = None,
        files: list[tuple[str, str, bytes]] = (),  # type: ignore[assignment]
    ) -> dict[str, Any]:
        message = self._new_message(
            channel_id, author, content, mentions=list(mentions), reply_to=reply_to
        )
        for filename, content_type, data in files:
            message["attachments"].append(self._attachment(filename, content_type, data))
        return await self._publish(message)

    async def edit(self, message: dict[str, Any], content: str) -> None:
        message["content"] = content
        message["edited_timestamp"] = _now()
        await self.dispatch("MESSAGE_UPDATE", self._event_message(message))

    async def delete(self, message: dict[str, Any]) -> None:
        self.channels[message["channel_id"]].remove(message)
        payload = {"id": message["id"], "channel_id": message["channel_id"]}
        if self._in_guild(message["channel_id"]):
            payload["guild_id"] = GUILD_ID
        await self.dispatch("MESSAGE_DELETE", payload)

    async def pin(self, message: dict[str, Any], by: FakeUser | None = None) -> None:
        """Someone pins a message: the message changes (MESSAGE_UPDATE), Discord posts a
        "pinned a message" notice (type 6) and sends CHANNEL_PINS_UPDATE."""
        channel_id = message["channel_id"]
        message["pinned"] = True
        message["pinned_at"] = _now()
        await self.dispatch("MESSAGE_UPDATE", self._event_message(message))
        notice = self._new_message(channel_id, by or self.people[0], "", kind=PINNED)
        notice["message_reference"] = self._reference(channel_id, message["id"])
        await self._publish(notice)
        payload = {"channel_id": channel_id, "last_pin_timestamp": message["pinned_at"]}
        if self._in_guild(channel_id):
            payload["guild_id"] = GUILD_ID
        await self.dispatch("CHANNEL_PINS_UPDATE", payload)

    async def join(self, user: FakeUser) -> dict[str, Any]:
        """``user`` joins the guild: Discord welcomes them in the system channel (type 7)."""
        self.left.discard(user.id)
        if user not in self.people:
            self.people.append(user)
        return await self._publish(self._new_message(SYSTEM_CHANNEL, user, "", kind=USER_JOIN))

    async def boost(self, user: FakeUser) -> dict[str, Any]:
        """``user`` boosts the guild: a type 8 notice in the system channel."""
        return await self._publish(self._new_message(SYSTEM_CHANNEL, user, "", kind=BOOST))

    def leave(self, user: FakeUser) -> None:
        """``user`` leaves the guild (no event: GUILD_MEMBER_REMOVE needs GUILD_MEMBERS)."""
        self.left.add(user.id)

    def deny(self, channel_id: str, *permissions: str) -> None:
        """Take permissions (``PERMISSIONS`` names) from the bot in one channel."""
        for name in permissions:
            self.denied[channel_id] = self.denied.get(channel_id, 0) | PERMISSIONS[name]

    def link(self, message: dict[str, Any]) -> str:
        guild = GUILD_ID if self._in_guild(message["channel_id"]) else "@me"
        return f"https://discord.com/channels/{guild}/{message['channel_id']}/{message['id']}"

    async def react(self, message: dict[str, Any], user: FakeUser, emoji: str) -> None:
        message.setdefault("reactions", []).append(
            {"emoji": {"id": None, "name": emoji}, "count": 1, "me": user.id == self.bot.id}
        )
        payload = {
            "user_id": user.id,
            "channel_id": message["channel_id"],
            "message_id": message["id"],
            "emoji": {"id": None, "name": emoji},
            "type": 0,
            "burst": False,
        }
        if self._in_guild(message["channel_id"]):
            payload["guild_id"] = GUILD_ID
            payload["member"] = self._member(user)
        await self.dispatch("MESSAGE_REACTION_ADD", payload)

    async def click(self, message: dict[str, Any], user: FakeUser, custom_id: str) -> str:
        """Press a button of a bot message: an INTERACTION_CREATE like Discord sends."""
        data = {"custom_id": custom_id, "component_type": 2}
        payload = self._interaction(3, message["channel_id"], user, data)
        payload["message"] = message
        self._interactions[payload["id"]] = _Interaction(
            payload["token"], 3, message["channel_id"], message["id"]
        )
        await self.dispatch("INTERACTION_CREATE", payload)
        return str(payload["id"])

    async def command(self, channel_id: str, user: FakeUser, name: str, **options: object) -> None:
        """Someone runs a slash command: an INTERACTION_CREATE of type 2."""
        kinds = {str: 3, int: 4, bool: 5}
        data = {
            "id": str(next(self._ids)),
            "name": name,
            "type": 1,
            "options": [
                {"name": k, "type": kinds[type(v)], "value": v} for k, v in options.items()
            ],
        }
        payload = self._interaction(2, channel_id, user, data)
        payload["channel"] = self._channel_payload(channel_id)
        self._interactions[payload["id"]] = _Interaction(payload["token"], 2, channel_id, None)
        await self.dispatch("INTERACTION_CREATE", payload)

    async def start_thread(
        self, starter: dict[str, Any], name: str, by: FakeUser | None = None
    ) -> str:
        """Open a public thread on a message, as Discord does: the thread's id is the
        message's; the message gets HAS_THREAD; the thread opens with a starter notice
        (type 21); an older message also gets a "started a thread" notice (type 18) in
        the parent."""
        thread_id, parent = starter["id"], starter["channel_id"]
        creator = by or self.people[0]
        older = self.channels[parent][-1] is not starter
        self.channels[thread_id] = []
        self.threads[thread_id] = parent
        self._thread_names[thread_id] = name
        starter["flags"] |= HAS_THREAD
        starter["thread"] = self._channel_payload(thread_id)
        await self.dispatch("MESSAGE_UPDATE", self._event_message(starter))
        await self.dispatch(
            "THREAD_CREATE", self._channel_payload(thread_id) | {"newly_created": True}
        )
        opening = self._new_message(thread_id, creator, "", kind=THREAD_STARTER)
        opening["message_reference"] = self._reference(parent, starter["id"])
        opening["referenced_message"] = starter
        await self._publish(opening)
        if older:
            notice = self._new_message(parent, creator, name, kind=THREAD_CREATED)
            notice["message_reference"] = {"channel_id": thread_id, "guild_id": GUILD_ID}
            await self._publish(notice)
        return thread_id

    def fail_next(
        self,
        method: str,
        fragment: str,
        status: int = 500,
        times: int = 1,
        *,
        after_effect: bool = False,
        code: int | None = None,
        exact: bool = False,
    ) -> None:
        """The next ``times`` requests whose path contains ``fragment`` (is it, when
        ``exact``) fail with ``status``; a 403 carries ``code``, 50013 Missing Permissions
        unless told."""
        failure = _Failure(method, fragment, status, times, after_effect, code, exact=exact)
        self._failures.append(failure)

    def rate_limit(
        self,
        method: str,
        fragment: str,
        *,
        retry_after: float = 0.05,
        times: int = 1,
        scope: str = "user",
    ) -> None:
        """The next ``times`` matching requests get a 429 as Discord sends it; ``scope``
        ``user``, ``shared`` (a resource limit) or ``global``."""
        failure = _Failure(method, fragment, 429, times, retry_after=retry_after, scope=scope)
        self._failures.append(failure)

    async def wait_bot_messages(
        self, channel_id: str, count: int, within: float = 10, *, bot: FakeUser | None = None
    ) -> list[dict[str, Any]]:
        author_id = (bot or self.bot).id

        def mine() -> list[dict[str, Any]]:
            return [m for m in self.channels[channel_id] if m["author"]["id"] == author_id]

        async with asyncio.timeout(within), self.sent:
            await self.sent.wait_for(lambda: len(mine()) >= count)
        return mine()

    async def wait_interaction_responses(
        self, count: int, within: float = 10
    ) -> list[dict[str, Any]]:
        async with asyncio.timeout(within), self.sent:
            await self.sent.wait_for(lambda: len(self.interaction_responses) >= count)
        return list(self.interaction_responses)

    async def wait_calls(self, key: str, count: int, within: float = 10) -> None:
        """Wait until ``calls[key]`` (e.g. ``"POST /channels/10/typing"``) reaches ``count``."""
        async with asyncio.timeout(within), self.sent:
            await self.sent.wait_for(lambda: self.calls[key] >= count)

    async def drop_connections(self) -> None:
        """Close every gateway socket, as a network blip would."""
        for socket in list(self._sockets):
            await socket.close(code=4000)

    # -- payloads --------------------------------------------------------------------

    def _in_guild(self, channel_id: str) -> bool:
        return channel_id in self.channel_names or channel_id in self.threads

    def _member(self, user: FakeUser, *, with_user: bool = True) -> dict[str, Any]:
        """A guild member object; gateway message events carry it without ``user``."""
        member: dict[str, Any] = {
            "nick": self.nicks.get(user.id),
            "avatar": None,
            "roles": self.roles.get(user.id, []),
            "joined_at": "2026-01-01T00:00:00+00:00",
            "premium_since": None,
            "deaf": False,
            "mute": False,
            "flags": 0,
            "pending": False,
            "communication_disabled_until": None,
        }
        if with_user:
            member["user"] = user.payload()
        return member

    def _is_member(self, user_id: str) -> bool:
        known = {u.id for u in [self.bot, *self.people]}
        return user_id in known and user_id not in self.left

    def _new_message(
        self,
        channel_id: str,
        author: FakeUser,
        content: str,
        *,
        kind: int = DEFAULT,
        mentions: list[FakeUser] | None = None,
        reply_to: dict[str, Any] | None = None,
        flags: int = 0,
    ) -> dict[str, Any]:
        """A message object as the REST API returns it (no ``member``, no ``guild_id``)."""
        message: dict[str, Any] = {
            "id": str(next(self._ids)),
            "channel_id": channel_id,
            "author": author.payload(),
            "content": content,
            "timestamp": _now(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [u.payload() for u in mentions or []],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": False,
            "type": REPLY if reply_to is not None else kind,
            "flags": flags,
            "components": [],
        }
        if reply_to is not None:
            message["message_reference"] = self._reference(channel_id, reply_to["id"])
            message["referenced_message"] = reply_to
        return message

    def _reference(self, channel_id: str, message_id: str) -> dict[str, Any]:
        reference = {"type": 0, "message_id": message_id, "channel_id": channel_id}
        if self._in_guild(channel_id):
            reference["guild_id"] = GUILD_ID
        return reference

    def _attachment(self, filename: str, content_type: str, data: bytes) -> dict[str, Any]:
        file_id = str(next(self._ids))
        self.files[file_id] = data
        url = f"http://127.0.0.1:{self.port}/attachments/{file_id}/{filename}"
        return {
            "id": file_id,
            "filename": filename,
            "content_type": content_type,
            "size": len(data),
            "url": url,
            "proxy_url": url,
        }

    async def _publish(self, message: dict[str, Any]) -> dict[str, Any]:
        self.channels[message["channel_id"]].append(message)
        await self.dispatch("MESSAGE_CREATE", self._event_message(message))
        async with self.sent:
            self.sent.notify_all()
        return message

    def _readable(self, message: dict[str, Any]) -> dict[str, Any]:
        """Without the Message Content intent an app sees empty content, except in DMs,
        in its own messages and in messages that mention it."""
        if self.message_content_intent or not self._in_guild(message["channel_id"]):
            return message
        mentioned = any(u["id"] == self.bot.id for u in message["mentions"])
        if message["author"]["id"] == self.bot.id or mentioned:
            return message
        return message | {"content": "", "embeds": [], "attachments": [], "components": []}

    def _event_message(self, message: dict[str, Any]) -> dict[str, Any]:
        """A message as MESSAGE_CREATE / MESSAGE_UPDATE carry it: in a guild with
        ``guild_id``, the author's partial member (not for webhooks) and members on
        mentions."""
        event = dict(self._readable(message))
        channel_id = message["channel_id"]
        if not self._in_guild(channel_id):
            return event | {"channel_type": 1}
        event["guild_id"] = GUILD_ID
        event["channel_type"] = 11 if channel_id in self.threads else 0
        author = self._fake_user(message["author"]["id"])
        if "webhook_id" not in message and author is not None:
            event["member"] = self._member(author, with_user=False)
        event["mentions"] = [
            u | {"member": self._member(person, with_user=False)}
            if (person := self._fake_user(u["id"])) and self._is_member(person.id)
            else u
            for u in message["mentions"]
        ]
        return event

    def _fake_user(self, user_id: str) -> FakeUser | None:
        return next((u for u in [self.bot, *self.people] if u.id == user_id), None)

    def _interaction(
        self, kind: int, channel_id: str, user: FakeUser, data: dict[str, Any]
    ) -> dict[str, Any]:
        interaction_id = str(next(self._ids))
        payload: dict[str, Any] = {
            "id": interaction_id,
            "application_id": self.bot.id,
            "type": kind,
            "token": f"token-{interaction_id}",
            "version": 1,
            "channel_id": channel_id,
            "data": data,
            "attachment_size_limit": 26214400,
            "app_permissions": str(self._bot_permissions(channel_id)),
            "locale": "en-US",
            "entitlements": [],
            "authorizing_integration_owners": {"0": GUILD_ID},
            "context": 0 if self._in_guild(channel_id) else 1,
        }
        if self._in_guild(channel_id):
            payload["guild_id"] = GUILD_ID
            payload["member"] = self._member(user) | {"permissions": str((1 << 41) - 1)}
        else:
            payload["user"] = user.payload()
        return payload

    def _bot_permissions(self, channel_id: str) -> int:
        return ((1 << 41) - 1) & ~self.denied.get(channel_id, 0)

    def _overwrites(self, channel_id: str) -> list[dict[str, Any]]:
        denied = self.denied.get(channel_id, 0)
        if not denied:
            return []
        return [{"id": self.bot.id, "type": 1, "allow": "0", "deny": str(denied)}]

    def _channel_payload(self, channel_id: str) -> dict[str, Any]:
        if channel_id in self.threads:
            return {
                "id": channel_id,
                "type": 11,
                "guild_id": GUILD_ID,
                "parent_id": self.threads[channel_id],
                "name": self._thread_names.get(channel_id, f"thread {channel_id}"),
                "owner_id": self.people[0].id,
                "message_count": len(self.channels[channel_id]),
                "member_count": 1,
                "rate_limit_per_user": 0,
                "flags": 0,
                "thread_metadata": {
                    "archived": False,
                    "auto_archive_duration": 1440,
                    "archive_timestamp": "2026-01-01T00:00:00+00:00",
                    "locked": False,
                },
            }
        if channel_id in self.channel_names:
            return {
                "id": channel_id,
                "type": 0,
                "guild_id": GUILD_ID,
                "name": self.channel_names[channel_id],
                "position": list(self.channel_names).index(channel_id),
                "permission_overwrites": self._overwrites(channel_id),
                "nsfw": False,
                "parent_id": None,
            }
        user_id = next(u for u, c in self.dm_channels.items() if c == channel_id)
        user = next(u for u in self.people if u.id == user_id)
        return {"id": channel_id, "type": 1, "recipients": [user.payload()]}

    def _guild(self) -> dict[str, Any]:
        everyone = {
            "id": GUILD_ID,
            "name": "@everyone",
            "permissions": str((1 << 41) - 1),
            "position": 0,
            "color": 0,
            "hoist": False,
            "managed": False,
            "mentionable": False,
            "flags": 0,
        }
        roles = [
            {**everyone, "id": role_id, "name": name, "permissions": "0", "position": 1}
            for role_id, name in self.role_names.items()
        ]
        everybody = [u for u in [self.bot, *self.people] if self._is_member(u.id)]
        # Without GUILD_PRESENCES, GUILD_CREATE lists only the bot (and voice users).
        listed = everybody if self.intents & INTENT_GUILD_PRESENCES else [self.bot]
        return {
            "id": GUILD_ID,
            "name": "Salon test",
            "icon": None,
            "owner_id": self.people[0].id,
            "system_channel_id": SYSTEM_CHANNEL,
            "roles": [everyone, *roles],
            "channels": [self._channel_payload(c) for c in self.channel_names],
            "threads": [self._channel_payload(t) for t in self.threads],
            "members": [self._member(u) for u in listed],
            "member_count": len(everybody),
            "large": False,
            "unavailable": False,
            "features": [],
            "emojis": [],
            "stickers": [],
            "voice_states": [],
            "presences": [],
            "joined_at": "2026-01-01T00:00:00+00:00",
            "verification_level": 0,
            "default_message_notifications": 0,
            "explicit_content_filter": 0,
            "mfa_level": 0,
            "premium_tier": 0,
            "system_channel_flags": 0,
            "preferred_locale": "en-US",
            "nsfw_level": 0,
        }

    async def _file(self, request: web.Request) -> web.StreamResponse:
        self.calls["GET /attachments"] += 1
        data = self.files.get(request.match_info["file_id"])
        if data is None:
            return web.Response(status=404)
        return web.Response(body=data, headers={"Content-Type": "application/octet-stream"})

    # -- gateway ---------------------------------------------------------------------

    async def dispatch(self, event: str, data: dict[str, Any]) -> None:
        frame = json.dumps({"op": 0, "t": event, "s": next(self._seq), "d": data})
        for socket in list(self._sockets):
            with contextlib.suppress(ConnectionError, RuntimeError):
                await socket.send_str(frame)

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        await socket.send_json({"op": 10, "d": {"heartbeat_interval": 45000}})
        try:
            async for frame in socket:
                if frame.type != WSMsgType.TEXT:
                    break
                await self._gateway_frame(socket, json.loads(frame.data))
        finally:
            if socket in self._sockets:
                self._sockets.remove(socket)
        return socket

    async def _gateway_frame(self, socket: web.WebSocketResponse, frame: dict[str, Any]) -> None:
        op = frame.get("op")
        if op == 1:
            await socket.send_json({"op": 11})
        elif op == 2:
            self.identifies += 1
            self.intents = int(frame["d"].get("intents", 0))
            await self._ready(socket, self._acting(frame["d"].get("token", "")))
        elif op == 6:  # RESUME: refuse, so the client identifies afresh (a resume failure)
            await socket.send_json({"op": 9, "d": False})

    def _acting(self, token: str) -> FakeUser:
        """Which bot a token (gateway) or ``Authorization: Bot <token>`` (REST) belongs to."""
        return self.tokens.get(token.removeprefix("Bot ").strip(), self.bot)

    async def _ready(self, socket: web.WebSocketResponse, bot: FakeUser) -> None:
        flags = APP_FLAGS_MESSAGE_CONTENT if self.message_content_intent else 0
        ready = {
            "v": 10,
            "user": bot.payload(),
            "guilds": [{"id": GUILD_ID, "unavailable": True}],
            "session_id": f"session-{self.identifies}",
            "resume_gateway_url": self.gateway,
            "application": {"id": bot.id, "flags": flags},
            "shard": [0, 1],
            "private_channels": [],
            "relationships": [],
        }
        self._sockets.append(socket)
        await socket.send_json({"op": 0, "t": "READY", "s": next(self._seq), "d": ready})
        await socket.send_json(
            {"op": 0, "t": "GUILD_CREATE", "s": next(self._seq), "d": self._guild()}
        )
        self.identified.set()

    # -- REST: the frame ---------------------------------------------------------------

    async def _rest(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._answer(request)
        finally:
            async with self.sent:  # whoever waits on REST traffic looks again
                self.sent.notify_all()

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        path = "/" + request.match_info["tail"]
        key = f"{request.method} {path}"
        self.calls[key] += 1
        self.log.append(key)
        bucket = self._bucket(request.method, path)
        for failure in self._failures:
            matches = path == failure.fragment if failure.exact else failure.fragment in path
            if failure.times > 0 and failure.method == request.method and matches:
                failure.times -= 1
                if failure.after_effect:
                    await self._route_or_refuse(request, path)
                return self._failure_answer(failure, bucket)
        response = await self._route_or_refuse(request, path)
        response.headers.update(self._limit_headers(bucket))
        return response

    async def _route_or_refuse(self, request: web.Request, path: str) -> web.StreamResponse:
        try:
            return await self._route(request, path)
        except _Refusal as refusal:
            return _error(refusal.status, refusal.code)
        except (KeyError, StopIteration):
            return _json({"message": "404: Not Found", "code": 0}, 404)

    def _bucket(self, method: str, path: str) -> tuple[str, str]:
        """(bucket hash, top-level resource) of a route, as X-RateLimit-Bucket names it."""
        parts = path.strip("/").split("/")
        major = "/".join(parts[:2]) if parts[0] in {"channels", "guilds", "webhooks"} else ""
        shape = " ".join([method, *("{id}" if p.isdigit() else p for p in parts)])
        bucket = self._buckets.setdefault(shape, f"{len(self._buckets) + 1:08x}")
        return bucket, major

    def _limit_headers(self, bucket: tuple[str, str]) -> dict[str, str]:
        now = time.time()
        start, used = self._windows.get(bucket, (now, 0))
        if now - start >= self.bucket_window:
            start, used = now, 0
        used += 1
        self._windows[bucket] = (start, used)
        reset = start + self.bucket_window
        return {
            "X-RateLimit-Limit": str(self.bucket_limit),
            "X-RateLimit-Remaining": str(max(self.bucket_limit - used, 0)),
            "X-RateLimit-Reset": f"{reset:.3f}",
            "X-RateLimit-Reset-After": f"{max(reset - now, 0):.3f}",
            "X-RateLimit-Bucket": bucket[0],
        }

    def _failure_answer(self, failure: _Failure, bucket: tuple[str, str]) -> web.Response:
        if failure.status != 429:
            code = failure.code or _DEFAULT_CODE.get(failure.status, 0)
            response = _error(failure.status, code)
            response.headers.update(self._limit_headers(bucket))
            return response
        is_global = failure.scope == "global"
        wording = "The resource is" if failure.scope == "shared" else "You are"
        body = {
            "message": f"{wording} being rate limited.",
            "retry_after": failure.retry_after,
            "global": is_global,
        }
        headers = {
            "Retry-After": str(math.ceil(failure.retry_after)),
            "X-RateLimit-Scope": failure.scope,
        }
        if is_global:
            headers["X-RateLimit-Global"] = "true"
        else:
            reset = time.time() + failure.retry_after
            headers |= {
                "X-RateLimit-Limit": str(self.bucket_limit),
                "X-RateLimit-Remaining": "0",
                "X-RateLimit-Reset": f"{reset:.3f}",
                "X-RateLimit-Reset-After": f"{failure.retry_after:.3f}",
                "X-RateLimit-Bucket": bucket[0],
            }
        return _json(body, 429, headers)

    # -- REST: routes ------------------------------------------------------------------

    async def _route(self, request: web.Request, path: str) -> web.StreamResponse:
        method = request.method
        parts = path.strip("/").split("/")
        acting = self._acting(request.headers.get("Authorization", ""))
        if path == "/users/@me":
            return _json(acting.payload())
        if path == "/oauth2/applications/@me":
            return _json(self._application(acting))
        if path in {"/gateway/bot", "/gateway"}:
            limit = {"total": 1000, "remaining": 1000, "reset_after": 0, "max_concurrency": 1}
            return _json({"url": self.gateway, "shards": 1, "session_start_limit": limit})
        if parts[0] == "users" and parts[-1] == "channels" and method == "POST":
            body = await request.json()
            user = next(u for u in self.people if u.id == body["recipient_id"])
            channel_id = self.dm_channel(user)
            return _json({"id": channel_id, "type": 1, "recipients": [user.payload()]})
        if parts[0] == "applications" and "commands" in parts:
            return await self._commands(request)
        if parts[:2] == ["guilds", GUILD_ID] and len(parts) == 4 and parts[2] == "members":
            return self._guild_member(parts[3])
        if parts[0] == "interactions" and parts[-1] == "callback":
            return await self._callback(request, parts[1], parts[2], acting)
        if parts[0] == "webhooks":
            return await self._webhook_route(request, parts[1:], acting)
        if parts[0] == "channels":
            return await self._channel_route(request, parts[1], parts[2:], acting)
        return _json({"message": f"no fake for {method} {path}", "code": 0}, 404)

    def _application(self, acting: FakeUser) -> dict[str, Any]:
        return {
            "id": acting.id,
            "name": acting.name,
            "icon": None,
            "description": "",
            "bot_public": True,
            "bot_require_code_grant": False,
            "owner": self.people[0].payload(),
            "verify_key": "x",
            "flags": APP_FLAGS_MESSAGE_CONTENT if self.message_content_intent else 0,
            "team": None,
        }

    async def _commands(self, request: web.Request) -> web.Response:
        if request.method == "PUT":
            self.commands = await request.json()
        return _json(
            [
                {**c, "id": str(i + 1), "application_id": self.bot.id, "version": "1"}
                for i, c in enumerate(self.commands)
            ]
        )

    def _guild_member(self, user_id: str) -> web.Response:
        user = self._fake_user(user_id)
        if user is None:
            return _error(404, 10013)
        if not self._is_member(user_id):
            return _error(404, 10007)
        return _json(self._member(user))

    async def _channel_route(
        self, request: web.Request, channel_id: str, rest: list[str], acting: FakeUser
    ) -> web.StreamResponse:
        method = request.method
        if channel_id not in self.channels:
            return _error(404, 10003)
        self._check(channel_id, "VIEW_CHANNEL", code=50001)
        if not rest and method == "GET":
            return _json(self._channel_payload(channel_id))
        if rest == ["typing"]:
            self._check(channel_id, "SEND_MESSAGES")
            return web.Response(status=204)
        if rest == ["webhooks"]:
            return await self._channel_webhooks(request, channel_id, acting)
        if rest[:2] == ["messages", "pins"]:
            return await self._pins(request, channel_id, rest[2:])
        if rest == ["messages"] and method == "GET":
            return _json(self._history(channel_id, request.query))
        if rest == ["messages"] and method == "POST":
            return await self._create(request, channel_id, acting)
        if len(rest) == 2 and rest[0] == "messages":
            return await self._one_message(request, channel_id, rest[1], acting)
        if len(rest) >= 4 and rest[0] == "messages" and rest[2] == "reactions" and method == "PUT":
            self._check(channel_id, "ADD_REACTIONS")
            message = self._find(channel_id, rest[1])
            await self.react(message, acting, request.match_info["tail"].split("/")[5])
            return web.Response(status=204)
        raise KeyError(rest)

    def _check(self, channel_id: str, permission: str, code: int = 50013) -> None:
        if self.denied.get(channel_id, 0) & PERMISSIONS[permission]:
            raise _Refusal(403, code)

    def _find(self, channel_id: str, message_id: str) -> dict[str, Any]:
        found = next((m for m in self.channels[channel_id] if m["id"] == message_id), None)
        if found is None:
            raise _Refusal(404, 10008)
        return found

    async def _one_message(
        self, request: web.Request, channel_id: str, message_id: str, acting: FakeUser
    ) -> web.StreamResponse:
        message = self._find(channel_id, message_id)
        if request.method == "GET":
            self._check(channel_id, "READ_MESSAGE_HISTORY", code=50001)
            return _json(self._readable(message))
        if request.method == "DELETE":
            if message["author"]["id"] != acting.id:
                if not self._in_guild(channel_id):
                    raise _Refusal(403, 50003)
                self._check(channel_id, "MANAGE_MESSAGES")
            await self.delete(message)
            return web.Response(status=204)
        if request.method == "PATCH":
            if message["author"]["id"] != acting.id:
                raise _Refusal(403, 50005)
            self._apply_edit(message, await request.json())
            await self.dispatch("MESSAGE_UPDATE", self._event_message(message))
            return _json(message)
        raise KeyError(request.method)

    def _apply_edit(self, message: dict[str, Any], body: dict[str, Any]) -> None:
        """An edit changes what it names; flags only in their editable bits."""
        for key in ("content", "components", "embeds"):
            if body.get(key) is not None:
                message[key] = body[key]
        if body.get("flags") is not None:
            kept = message["flags"] & ~EDITABLE_FLAGS
            message["flags"] = kept | (int(body["flags"]) & EDITABLE_FLAGS)
        message["edited_timestamp"] = _now()

    async def _pins(self, request: web.Request, channel_id: str, rest: list[str]) -> web.Response:
        if rest:  # PUT / DELETE /channels/{c}/messages/pins/{m}
            message = self._find(channel_id, rest[0])
            if request.method == "PUT":
                await self.pin(message, by=self._acting(request.headers["Authorization"]))
            else:
                message["pinned"] = False
            return web.Response(status=204)
        if self.denied.get(channel_id, 0) & PERMISSIONS["READ_MESSAGE_HISTORY"]:
            return _json({"items": [], "has_more": False})  # no pins, and no error
        pinned = sorted(
            (m for m in self.channels[channel_id] if m["pinned"]),
            key=lambda m: m["pinned_at"],
            reverse=True,
        )
        if "before" in request.query:
            pinned = [m for m in pinned if m["pinned_at"] < request.query["before"]]
        limit = int(request.query.get("limit", 50))
        items = [{"pinned_at": m["pinned_at"], "message": self._readable(m)} for m in pinned]
        return _json({"items": items[:limit], "has_more": len(items) > limit})

    def _history(self, channel_id: str, query: Any) -> list[dict[str, Any]]:
        if self.denied.get(channel_id, 0) & PERMISSIONS["READ_MESSAGE_HISTORY"]:
            return []  # Discord returns no messages, not an error
        limit = min(int(query.get("limit", 50)), 100)
        newest_first = list(reversed(self.channels[channel_id]))
        if "before" in query:
            chosen = [m for m in newest_first if int(m["id"]) < int(query["before"])][:limit]
        elif "after" in query:
            chosen = [m for m in newest_first if int(m["id"]) > int(query["after"])][-limit:]
        elif "around" in query:
            pivot = int(query["around"])
            newer = [m for m in newest_first if int(m["id"]) >= pivot][-(limit - limit // 2) :]
            chosen = newer + [m for m in newest_first if int(m["id"]) < pivot][: limit // 2]
        else:
            chosen = newest_first[:limit]
        return [self._readable(m) for m in chosen]

    async def _create(
        self, request: web.Request, channel_id: str, acting: FakeUser
    ) -> web.Response:
        self._check(channel_id, "SEND_MESSAGES")
        body, files = await _body_and_files(request)
        nonce = body.get("nonce")
        if nonce and body.get("enforce_nonce") and str(nonce) in self._nonces:
            return _json(self._nonces[str(nonce)])  # Discord's answer to a retried send
        content = body.get("content") or ""
        if len(content) > MAX_CONTENT:
            return _error(400, 50035)
        reference = body.get("message_reference")
        replied = self._replied(channel_id, reference) if reference else None
        flags = int(body.get("flags") or 0) & SETTABLE_FLAGS
        mentioned = [u for u in [self.bot, *self.people] if _mentions(content, u.id)]
        message = self._new_message(
            channel_id, acting, content, mentions=mentioned, reply_to=replied, flags=flags
        )
        if nonce is not None:
            message["nonce"] = nonce
            self._nonces[str(nonce)] = message
        message["components"] = body.get("components") or []
        message["attachments"] = [self._attachment(n, t, d) for n, t, d in files]
        return _json(await self._publish(message))

    def _replied(self, channel_id: str, reference: dict[str, Any]) -> dict[str, Any] | None:
        self._check(channel_id, "READ_MESSAGE_HISTORY", code=160002)
        found = next(
            (m for m in self.channels[channel_id] if m["id"] == str(reference["message_id"])),
            None,
        )
        if found is None or found["type"] not in (DEFAULT, REPLY, COMMAND):
            if reference.get("fail_if_not_exists", True):
                raise _Refusal(400, 50035)
            return None
        return found

    async def _channel_webhooks(
        self, request: web.Request, channel_id: str, acting: FakeUser
    ) -> web.Response:
        self._check(channel_id, "MANAGE_WEBHOOKS")
        if request.method == "POST":
            body = await request.json()
            hook_id = str(next(self._ids))
            hook = {
                "id": hook_id,
                "type": 1,
                "name": body["name"],
                "channel_id": channel_id,
                "guild_id": GUILD_ID,
                "user": acting.payload(),
                "token": f"hook-token-{hook_id}",
                "application_id": acting.id,
                "avatar": None,
            }
            self.webhooks.append(hook)
            return _json(hook)
        return _json([h for h in self.webhooks if h["channel_id"] == channel_id])

    async def _webhook_route(
        self, request: web.Request, rest: list[str], acting: FakeUser
    ) -> web.StreamResponse:
        hook_id, token = rest[0], rest[1]
        pending = next(
            (i for i in self._interactions.values() if i.token == token and hook_id == acting.id),
            None,
        )
        if pending is not None:
            return await self._interaction_webhook(request, pending, rest[2:], acting)
        hook = next((h for h in self.webhooks if h["id"] == hook_id), None)
        if hook is None or hook["token"] != token:
            return _error(404, 10015)
        if request.method != "POST" or len(rest) != 2:
            raise KeyError(rest)
        body, _files = await _body_and_files(request)
        self.webhook_posts.append(body)
        channel_id = request.query.get("thread_id") or hook["channel_id"]
        author = FakeUser(hook["id"], body.get("username") or hook["name"], bot=True)
        flags = int(body.get("flags") or 0) & SETTABLE_FLAGS
        message = self._new_message(channel_id, author, body.get("content", ""), flags=flags)
        message["webhook_id"] = hook["id"]
        message["application_id"] = hook["application_id"]
        await self._publish(message)
        if request.query.get("wait") in {"1", "true", "True"}:
            return _json(message)
        return web.Response(status=204)

    async def _callback(
        self, request: web.Request, interaction_id: str, token: str, acting: FakeUser
    ) -> web.StreamResponse:
        pending = self._interactions.get(interaction_id)
        if pending is None or pending.token != token:
            return _error(404, 10062)
        if pending.responded:
            return _error(400, 40060)
        pending.responded = True
        body, _files = await _body_and_files(request)
        self.interaction_responses.append(body)
        kind, data = int(body["type"]), body.get("data") or {}
        message: dict[str, Any] | None = None
        if kind in (4, 5):
            flags = int(data.get("flags") or 0) & INTERACTION_FLAGS
            flags |= LOADING if kind == 5 else 0
            message = await self._respond(pending, acting, data.get("content") or "", flags)
        elif kind == 7 and pending.message_id is not None:
            message = self._find(pending.channel_id, pending.message_id)
            self._apply_edit(message, data)
            await self.dispatch("MESSAGE_UPDATE", self._event_message(message))
        if request.query.get("with_response") not in {"1", "true", "True"}:
            return web.Response(status=204)
        callback: dict[str, Any] = {"id": interaction_id, "type": pending.kind}
        if message is not None:
            callback["response_message_id"] = message["id"]
            callback["response_message_loading"] = kind == 5
            callback["response_message_ephemeral"] = bool(message["flags"] & EPHEMERAL)
        answer: dict[str, Any] = {"interaction": callback}
        if message is not None and kind in (4, 7):
            answer["resource"] = {"type": kind, "message": message}
        return _json(answer)

    async def _respond(
        self, pending: _Interaction, acting: FakeUser, content: str, flags: int
    ) -> dict[str, Any]:
        """A message made by an interaction response or follow-up; an ephemeral one is
        seen only by who used the interaction, so it is in no channel and no event."""
        kind = COMMAND if pending.kind == 2 else DEFAULT
        message = self._new_message(pending.channel_id, acting, content, kind=kind, flags=flags)
        message["application_id"] = acting.id
        message["webhook_id"] = acting.id
        pending.original = pending.original or message["id"]
        if flags & EPHEMERAL:
            self._ephemeral[message["id"]] = message
            return message
        return await self._publish(message)

    async def _interaction_webhook(
        self, request: web.Request, pending: _Interaction, rest: list[str], acting: FakeUser
    ) -> web.StreamResponse:
        """Follow-ups (POST) and the original response (GET / PATCH …/messages/@original)."""
        if request.method == "POST" and not rest:
            body, _files = await _body_and_files(request)
            flags = int(body.get("flags") or 0) & INTERACTION_FLAGS
            return _json(await self._respond(pending, acting, body.get("content") or "", flags))
        if rest[:1] != ["messages"] or len(rest) != 2:
            raise KeyError(rest)
        message_id = pending.original if rest[1] == "@original" else rest[1]
        message = self._ephemeral.get(message_id or "") or self._find(
            pending.channel_id, message_id or ""
        )
        if request.method == "PATCH":
            self._apply_edit(message, await request.json())
            message["flags"] &= ~LOADING
            if message["id"] not in self._ephemeral:
                await self.dispatch("MESSAGE_UPDATE", self._event_message(message))
        return _json(message)


async def _body_and_files(request: web.Request) -> tuple[dict[str, Any], list[Any]]:
    """The JSON body, from ``payload_json`` when files come along (multipart)."""
    if not request.content_type.startswith("multipart/"):
        return await request.json(), []
    body: dict[str, Any] = {}
    files: list[tuple[str, str, bytes]] = []
    async for part in await request.multipart():
        if part.name == "payload_json":
            body = json.loads(await part.text())  # type: ignore[union-attr]
        elif part.filename:  # type: ignore[union-attr]
            data = await part.read()  # type: ignore[union-attr]
            kind = part.headers.get("Content-Type", "application/octet-stream")
            files.append((part.filename, kind, bytes(data)))  # type: ignore[union-attr]
    return body, files


def _mentions(content: str, user_id: str) -> bool:
    return f"<@{user_id}>" in content or f"<@!{user_id}>" in content


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _error(status: int, code: int) -> web.Response:
    return _json({"message": ERRORS.get(code, "General error"), "code": code}, status)


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    # discord.py checks for this exact content type before parsing a body as JSON, and
    # reads a 429 as Discord's (not a Cloudflare ban) only when ``Via`` is present.
    body = json.dumps(data).encode()
    extra = {"Content-Type": "application/json", "Via": "1.1 google", **(headers or {})}
    return web.Response(body=body, status=status, headers=extra)
