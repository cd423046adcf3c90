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
  ban, and Discord's API answers carry it (``rate_limit(via=False)`` leaves it out, as a
  REST proxy in between may).
- Mentions are parsed as Discord documents ``allowed_mentions``: without the field a
  channel message notifies every user, role and @everyone/@here it names (roles only when
  mentionable or the sender has Mention Everyone), an interaction answer or a webhook only
  users; an invalid object (``parse: ["users"]`` beside a ``users`` list…) is a 400. Who
  each message made or edited through REST notifies is recorded in ``pings``.
- Message ``flags`` a client may set (SUPPRESS_NOTIFICATIONS …) are kept and echoed;
  an edit keeps the flags it does not name. A message over 2000 characters is refused.
- Members have permissions: the owner (the first person) all of them, others what
  @everyone (Discord's defaults for a new server: no Manage Channels, no Mention Everyone)
  and their roles allow, and in a channel its permission overwrites for @everyone, roles
  and members (``overwrite``; Discord's order, ``channel_permissions``; a thread takes its
  parent's); an interaction's ``member`` carries those as ``permissions``. A
  command registered with ``default_member_permissions`` is not offered to a member who
  lacks one of them (``command`` raises ``NotOffered``).
- Interactions: callbacks of type 4, 5, 6, 7 and 9 (204, or the callback response with
  ``with_response``); a modal (9) is refused (400, 50035) in answer to a modal's submission,
  with a title over 45 characters, or without 1 to 5 components; ``submit_modal`` sends one
  back filled in (type 5); follow-ups and edits of the original through the interaction
  webhook; executing a webhook returns 204 unless ``wait``.

- Privileged intents: with ``message_content_intent`` off (the Developer Portal's switch),
  an IDENTIFY asking for MESSAGE_CONTENT (1 << 15) is closed with 4014 Disallowed
  intent(s), as Discord does; the application's ``flags`` (GET /oauth2/applications/@me,
  READY) carry GATEWAY_MESSAGE_CONTENT_LIMITED when it is on.
- Sharding: GET /gateway/bot recommends ``recommended_shards``; an IDENTIFY may carry
  ``shard: [id, count]`` (an id outside 0 .. count - 1 is closed with 4010 Invalid Shard);
  READY and GUILD_CREATE name only the guilds of that shard, ``(guild_id >> 22) % count``,
  and a guild's events go only to its shard's connection, DMs only to shard 0. More guilds
  come with ``add_guild``.

Tests act as people with ``post``, ``edit``, ``delete``, ``react``, ``pin``, ``click``,
``command``, ``join``, ``leave`` and ``start_thread``; they read what the bot did in
``channels``, count REST calls in ``calls`` (and their order in ``log``), read who the
bot notified in ``pings``, take rights away with ``deny`` (the bot's) and ``overwrite``
(anyone's, in a channel), and script failures with
``fail_next`` and ``rate_limit``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import WSMsgType, web

from fakes.discord_rest import RestRoutes
from fakes.discord_wire import (
    ALL_PERMISSIONS,
    APP_FLAGS_MESSAGE_CONTENT,
    BOOST,
    DEFAULT,
    DEFAULT_CODE,
    GUILD_ID,
    HAS_THREAD,
    INTENT_GUILD_PRESENCES,
    INTENT_MESSAGE_CONTENT,
    MEMBER_PERMISSIONS,
    PERMISSIONS,
    PINNED,
    REPLY,
    SYSTEM_CHANNEL,
    THREAD_CREATED,
    THREAD_STARTER,
    USER_JOIN,
    Failure,
    FakeUser,
    NotOffered,
    PendingInteraction,
    Pinged,
    Refusal,
    error_response,
    json_response,
    now,
    pinged_by,
)

__all__ = ["DiscordServer", "FakeUser", "NotOffered", "shard_of"]


BOT_ROLE = "600"  # the bot's managed role


def shard_of(guild_id: str, shard_count: int) -> int:
    """The shard that gets a guild's events, by Discord's formula."""
    return (int(guild_id) >> 22) % shard_count


_DISCORD_EPOCH_MS = 1_420_070_400_000  # 2015-01-01T00:00:00Z


class _Snowflakes:
    """Ids as Discord makes them: milliseconds since the Discord epoch shifted left 22 bits
    (discord.py reads a message's ``created_at`` from its id), one more than the last when
    two fall in one millisecond. ``offset``: seconds added to the clock (a test's past)."""

    def __init__(self) -> None:
        self._last = 0
        self.offset = 0.0

    def __iter__(self) -> _Snowflakes:
        return self

    def __next__(self) -> int:
        now = (int((time.time() + self.offset) * 1000) - _DISCORD_EPOCH_MS) << 22
        self._last = max(now, self._last + 1)
        return self._last


_SESSION_BUFFER = 1000  # events a session keeps for a RESUME (Discord keeps a bounded backlog)


@dataclass
class _Session:
    """A gateway session: its own sequence numbers and the events sent in it, which a
    RESUME with the last sequence the client saw replays. Ended by INVALID_SESSION, by
    the client closing with 1000 or 1001, or by ``invalidate_sessions``."""

    id: str
    shard: tuple[int, int]
    socket: web.WebSocketResponse | None
    seq: int = 0
    sent: list[tuple[int, str]] = field(default_factory=list)
    valid: bool = True

    def frame(self, event: str, data: dict[str, Any]) -> str:
        self.seq += 1
        frame = json.dumps({"op": 0, "t": event, "s": self.seq, "d": data})
        self.sent.append((self.seq, frame))
        del self.sent[:-_SESSION_BUFFER]
        return frame


@dataclass
class DiscordServer(RestRoutes):
    bot: FakeUser = field(default_factory=lambda: FakeUser("100", "Salon", bot=True))
    people: list[FakeUser] = field(
        default_factory=lambda: [
            FakeUser("200", "Alice"),
            FakeUser("201", "Bob"),
            FakeUser("202", "Carol", nick="Caz"),
            FakeUser("300", "Robo", bot=True),
        ]
    )
    message_content_intent: bool = True  # the Developer Portal's switch (off: IDENTIFY gets 4014)
    port: int = 0
    tokens: dict[str, FakeUser] = field(default_factory=dict)  # more bots: token -> bot user
    bucket_limit: int = 1000  # requests per route bucket and window
    bucket_window: float = 1.0
    recommended_shards: int = 1  # what GET /gateway/bot recommends

    def __post_init__(self) -> None:
        self._ids = _Snowflakes()
        self.channels: dict[str, list[dict[str, Any]]] = {"10": [], "11": []}
        self.channel_names = {"10": "general", "11": "random"}
        self.guild_names: dict[str, str] = {GUILD_ID: "Salon test"}
        self.channel_guilds: dict[str, str] = {}  # channel id -> guild id (default GUILD_ID)
        self.shards_seen: list[tuple[int, int]] = []  # [shard id, count] of each IDENTIFY
        self.dm_channels: dict[str, str] = {}  # user id -> dm channel id
        # People who take no DMs from a server's members: Create DM answers, but a
        # message there is 403 with code 50007, as Discord refuses it.
        self.dms_closed: set[str] = set()
        self.calls: Counter[str] = Counter()
        self.log: list[str] = []  # every REST call in order, "METHOD /path"
        self.log_times: list[float] = []  # time.monotonic() of each call in ``log``
        self.commands: list[dict[str, Any]] = []
        self.interaction_responses: list[dict[str, Any]] = []
        self.modals: list[tuple[PendingInteraction, dict[str, Any]]] = []  # forms shown
        self.webhooks: list[dict[str, Any]] = []
        self.files: dict[str, bytes] = {}
        self.threads: dict[str, str] = {}  # thread id -> parent channel id
        self._thread_names: dict[str, str] = {}
        self._ephemeral: dict[str, dict[str, Any]] = {}  # seen by one person only
        self.webhook_posts: list[dict[str, Any]] = []
        self.roles: dict[str, list[str]] = {}  # user id -> role ids
        self.role_names: dict[str, str] = {"500": "mods"}  # the guild's roles
        self.role_permissions: dict[str, int] = {}  # role id -> permission bits (default 0)
        self.everyone_permissions = MEMBER_PERMISSIONS  # the @everyone role's
        self.mentionable_roles: set[str] = set()  # roles anyone may ping
        self.pings: list[Pinged] = []  # who each message made or edited through REST notifies
        self.pings_allowed_roles: set[str] = set()  # what a test lets the bot ping
        self.pings_allowed_everyone = False
        self.nicks: dict[str, str] = {u.id: u.nick for u in [self.bot, *self.people] if u.nick}
        self.left: set[str] = set()  # people who left the guild
        self.denied: dict[str, int] = {}  # channel id -> permission bits the bot lacks
        # channel id -> its permission overwrites for roles and members (Discord's objects)
        self.overwrites: dict[str, list[dict[str, Any]]] = {}
        self.intents = 0  # what the last IDENTIFY asked for
        self._failures: list[Failure] = []
        self._nonces: dict[str, dict[str, Any]] = {}
        self._interactions: dict[str, PendingInteraction] = {}
        self._buckets: dict[str, str] = {}
        self._windows: dict[tuple[str, str], tuple[float, int]] = {}
        self._sockets: list[web.WebSocketResponse] = []
        self._socket_shards: dict[int, tuple[int, int]] = {}  # id(socket) -> (shard, count)
        self.sessions: dict[str, _Session] = {}
        self.search_indexed = True  # False: Search Guild Messages answers 202, code 110000
        self.searches: list[dict[str, str]] = []  # the query of each search answered
        self.resumes = 0  # RESUMEs accepted (missed events replayed)
        self.resumes_refused = 0  # RESUMEs answered with INVALID_SESSION
        self._gateway_open = asyncio.Event()  # closed: new connections wait for it
        self._gateway_open.set()
        self._runner: web.AppRunner | None = None
        self.identified = asyncio.Event()
        self.resumed = asyncio.Event()  # set at each RESUME accepted
        self._identify_gates: dict[int, asyncio.Event] = {}  # shard -> until IDENTIFY goes on
        self.identify_held = asyncio.Event()  # set when a held shard's IDENTIFY arrived
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
        flags: int = 0,
    ) -> dict[str, Any]:
        """A message from someone else (``flags``: e.g. SUPPRESS_NOTIFICATIONS, 1 << 12)."""
        message = self._new_message(
            channel_id, author, content, mentions=list(mentions), reply_to=reply_to
        )
        message["flags"] = flags
        for filename, content_type, data in files:
            message["attachments"].append(self._attachment(filename, content_type, data))
        return await self._publish(message)

    async def redeliver(self, message: dict[str, Any]) -> None:
        """Dispatch a message's MESSAGE_CREATE once more, as the gateway may around a
        RESUME (events are at least once); nothing new is posted."""
        await self.dispatch("MESSAGE_CREATE", self._event_message(message))

    async def edit(self, message: dict[str, Any], content: str) -> None:
        message["content"] = content
        message["edited_timestamp"] = now()
        await self.dispatch("MESSAGE_UPDATE", self._event_message(message))

    async def delete(self, message: dict[str, Any]) -> None:
        self.channels[message["channel_id"]].remove(message)
        payload = {"id": message["id"], "channel_id": message["channel_id"]}
        if self._in_guild(message["channel_id"]):
            payload["guild_id"] = self.guild_of(message["channel_id"])
        await self.dispatch("MESSAGE_DELETE", payload)

    async def pin(self, message: dict[str, Any], by: FakeUser | None = None) -> None:
        """Someone pins a message: the message changes (MESSAGE_UPDATE), Discord posts a
        "pinned a message" notice (type 6) and sends CHANNEL_PINS_UPDATE."""
        channel_id = message["channel_id"]
        message["pinned"] = True
        message["pinned_at"] = now()
        await self.dispatch("MESSAGE_UPDATE", self._event_message(message))
        notice = self._new_message(channel_id, by or self.people[0], "", kind=PINNED)
        notice["message_reference"] = self._reference(channel_id, message["id"])
        await self._publish(notice)
        payload = {"channel_id": channel_id, "last_pin_timestamp": message["pinned_at"]}
        if self._in_guild(channel_id):
            payload["guild_id"] = self.guild_of(channel_id)
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

    async def overwrite(
        self,
        channel_id: str,
        target: str,
        *,
        allow: tuple[str, ...] = (),
        deny: tuple[str, ...] = (),
        member: bool = False,
    ) -> None:
        """Set a channel's permission overwrite for a role (the guild's id: @everyone) or,
        with ``member``, for one member; Discord then sends CHANNEL_UPDATE."""
        bits = {
            "allow": sum(PERMISSIONS[p] for p in allow),
            "deny": sum(PERMISSIONS[p] for p in deny),
        }
        entry = {"id": target, "type": 1 if member else 0} | {k: str(v) for k, v in bits.items()}
        kept = [o for o in self.overwrites.get(channel_id, []) if o["id"] != target]
        self.overwrites[channel_id] = [*kept, entry]
        await self.dispatch("CHANNEL_UPDATE", self._channel_payload(channel_id))

    def channel_permissions(self, user: FakeUser, channel_id: str) -> int:
        """A member's permissions in a channel as Discord computes them: the guild's
        (``member_permissions``; the owner and administrators have all), then the
        @everyone overwrite, the member's roles' overwrites (denies, then allows), the
        member's own overwrite; without View Channel, none. A thread is its parent's."""
        granted = self.member_permissions(user)
        if granted == ALL_PERMISSIONS:
            return granted
        parent = self.threads.get(channel_id, channel_id)
        overwrites = {o["id"]: o for o in self.overwrites.get(parent, [])}
        everyone = overwrites.get(self.guild_of(parent))
        if everyone is not None:
            granted = (granted & ~int(everyone["deny"])) | int(everyone["allow"])
        roles = [
            o
            for o in overwrites.values()
            if o["type"] == 0 and o["id"] in self.roles.get(user.id, [])
        ]
        granted &= ~sum(int(o["deny"]) for o in roles)
        granted |= sum(int(o["allow"]) for o in roles)
        own = overwrites.get(user.id)
        if own is not None and own["type"] == 1:
            granted = (granted & ~int(own["deny"])) | int(own["allow"])
        return granted if granted & PERMISSIONS["VIEW_CHANNEL"] else 0

    def link(self, message: dict[str, Any]) -> str:
        channel_id = message["channel_id"]
        guild = self.guild_of(channel_id) if self._in_guild(channel_id) else "@me"
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
            payload["guild_id"] = self.guild_of(message["channel_id"])
            payload["member"] = self._member(user)
        await self.dispatch("MESSAGE_REACTION_ADD", payload)

    async def click(self, message: dict[str, Any], user: FakeUser, custom_id: str) -> str:
        """Press a button of a bot message: an INTERACTION_CREATE like Discord sends."""
        data = {"custom_id": custom_id, "component_type": 2}
        payload = self._interaction(3, message["channel_id"], user, data)
        payload["message"] = message
        self._interactions[payload["id"]] = PendingInteraction(
            payload["token"], 3, message["channel_id"], message["id"]
        )
        await self.dispatch("INTERACTION_CREATE", payload)
        return str(payload["id"])

    async def submit_modal(self, index: int, user: FakeUser, values: dict[str, str]) -> str:
        """Submit the ``index``th modal shown (each text input by its custom_id, the ones
        not given as they were filled in): an INTERACTION_CREATE of type 5, its components
        partial as Discord sends them; on the message its button was on."""
        shown, modal = self.modals[index]
        rows = []
        for row in modal["components"]:
            typed = [
                {
                    "type": c["type"],
                    "id": c.get("id", 0),
                    "custom_id": c["custom_id"],
                    "value": values.get(c["custom_id"], c.get("value") or ""),
                }
                for c in row["components"]
            ]
            rows.append({"type": 1, "id": row.get("id", 0), "components": typed})
        data = {"custom_id": modal["custom_id"], "components": rows}
        payload = self._interaction(5, shown.channel_id, user, data)
        if shown.message_id is not None:
            payload["message"] = self._find(shown.channel_id, shown.message_id)
        self._interactions[payload["id"]] = PendingInteraction(
            payload["token"], 5, shown.channel_id, shown.message_id
        )
        await self.dispatch("INTERACTION_CREATE", payload)
        return str(payload["id"])

    async def command(self, channel_id: str, user: FakeUser, name: str, **options: object) -> None:
        """Someone runs a slash command: an INTERACTION_CREATE of type 2. In a guild,
        a command whose ``default_member_permissions`` the person lacks is not offered to
        them (``NotOffered``), as Discord hides it."""
        self._offered(name, channel_id, user)
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
        self._interactions[payload["id"]] = PendingInteraction(
            payload["token"], 2, channel_id, None
        )
        await self.dispatch("INTERACTION_CREATE", payload)

    def _offered(self, name: str, channel_id: str, user: FakeUser) -> None:
        registered = next((c for c in self.commands if c["name"] == name), None)
        needed = (registered or {}).get("default_member_permissions")
        if needed is None or not self._in_guild(channel_id):
            return
        has = self.member_permissions(user)
        if not has & PERMISSIONS["ADMINISTRATOR"] and has & int(needed) != int(needed):
            raise NotOffered(f"Discord does not offer /{name} to {user.name}")

    def member_permissions(self, user: FakeUser) -> int:
        """A member's permissions in the guild: the owner and administrators have all;
        anyone else what @everyone and their roles allow (the fake has no per-channel
        overwrites for people)."""
        if user.id == self.people[0].id:
            return ALL_PERMISSIONS  # the guild's owner
        granted = self.everyone_permissions
        for role in self.roles.get(user.id, []):
            granted |= self.role_permissions.get(role, 0)
        if user.id == self.bot.id or granted & PERMISSIONS["ADMINISTRATOR"]:
            return ALL_PERMISSIONS
        return granted

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
            notice["message_reference"] = {
                "channel_id": thread_id,
                "guild_id": self.guild_of(thread_id),
            }
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
        failure = Failure(method, fragment, status, times, after_effect, code, exact=exact)
        self._failures.append(failure)

    def rate_limit(
        self,
        method: str,
        fragment: str,
        *,
        retry_after: float = 0.05,
        times: int = 1,
        scope: str = "user",
        via: bool = True,
    ) -> None:
        """The next ``times`` matching requests get a 429 as Discord sends it; ``scope``
        ``user``, ``shared`` (a resource limit) or ``global``. Without ``via`` the answer
        lacks the ``Via`` header, as when a REST proxy in between drops it."""
        failure = Failure(
            method, fragment, 429, times, retry_after=retry_after, scope=scope, via=via
        )
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

    async def drop_connections(self, code: int = 4000, *, shard: int | None = None) -> None:
        """Close every gateway socket (or ``shard``'s only): 4000 as a network blip would
        (the session may be resumed); 1006 cuts the connection with no close frame at all;
        a code Discord documents as not to reconnect on (4004, 4010-4014) ends the client's
        session."""
        for socket in list(self._sockets):
            if shard is not None and self._socket_shards.get(id(socket), (0, 1))[0] != shard:
                continue
            if code == 1006:
                transport = socket._req.transport if socket._req is not None else None
                if transport is not None:
                    transport.abort()
                continue
            await socket.close(code=code)

    # -- payloads --------------------------------------------------------------------

    def add_guild(self, guild_id: str, name: str, channels: dict[str, str]) -> None:
        """Another guild the bot is in, with text channels (id -> name); it is sent to the
        shard that Discord's formula gives it: (guild_id >> 22) % shard count."""
        self.guild_names[guild_id] = name
        for channel_id, channel_name in channels.items():
            self.channels[channel_id] = []
            self.channel_names[channel_id] = channel_name
            self.channel_guilds[channel_id] = guild_id

    def guild_of(self, channel_id: str) -> str:
        parent = self.threads.get(channel_id, channel_id)
        return self.channel_guilds.get(parent, GUILD_ID)

    def _in_guild(self, channel_id: str) -> bool:
        return channel_id in self.channel_names or channel_id in self.threads

    def _member(self, user: FakeUser, *, with_user: bool = True) -> dict[str, Any]:
        """A guild member object; gateway message events carry it without ``user``."""
        member: dict[str, Any] = {
            "nick": self.nicks.get(user.id),
            "avatar": None,
            "roles": [BOT_ROLE] if user.id == self.bot.id else self.roles.get(user.id, []),
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
            "timestamp": self._now(),
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
            # One level deep, as Discord resolves it: not the answered message's own.
            message["referenced_message"] = {
                k: v for k, v in reply_to.items() if k != "referenced_message"
            }
        return message

    def _now(self) -> str:
        """The time on the fake's clock (``clock_offset`` from the real one)."""
        return datetime.fromtimestamp(time.time() + self._ids.offset, UTC).isoformat()

    @property
    def clock_offset(self) -> float:
        """Seconds the fake's clock is off the real one: messages posted now are stamped
        that long ago or ahead (ids too). Only forward moves keep ids growing."""
        return self._ids.offset

    @clock_offset.setter
    def clock_offset(self, seconds: float) -> None:
        self._ids.offset = seconds

    def _reference(self, channel_id: str, message_id: str) -> dict[str, Any]:
        reference = {"type": 0, "message_id": message_id, "channel_id": channel_id}
        if self._in_guild(channel_id):
            reference["guild_id"] = self.guild_of(channel_id)
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
        event["guild_id"] = self.guild_of(channel_id)
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

    def _mention(
        self,
        message: dict[str, Any],
        route: str,
        rules: dict[str, Any],
        replied: dict[str, Any] | None = None,
    ) -> None:
        """Work out who ``message`` notifies under ``rules`` (Discord's allowed mentions),
        set its ``mentions``, ``mention_roles`` and ``mention_everyone`` to that, and record
        it in ``pings``."""
        channel_id = message["channel_id"]
        in_guild = self._in_guild(channel_id)
        may_everyone = in_guild and bool(
            self._bot_permissions(channel_id) & PERMISSIONS["MENTION_EVERYONE"]
        )
        roles = {r for r in self.role_names if may_everyone or r in self.mentionable_roles}
        users, chosen_roles, everyone = pinged_by(
            message["content"],
            rules,
            users={u.id for u in [self.bot, *self.people]},
            roles=roles if in_guild else set(),
            everyone=may_everyone,
            replied=replied["author"]["id"] if replied is not None else None,
        )
        known = {u.id: u for u in [self.bot, *self.people]}
        message["mentions"] = [known[u].payload() for u in sorted(users)]
        message["mention_roles"] = sorted(chosen_roles)
        message["mention_everyone"] = everyone
        pinged = Pinged(route, message["id"], message["content"], users, chosen_roles, everyone)
        self.pings.append(pinged)

    def unexpected_pings(self) -> list[Pinged]:
        """Notifications of @everyone, @here or roles the test did not allow."""
        return [
            p
            for p in self.pings
            if (p.everyone and not self.pings_allowed_everyone)
            or p.roles - self.pings_allowed_roles
        ]

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
            "authorizing_integration_owners": {"0": self.guild_of(channel_id)},
            "context": 0 if self._in_guild(channel_id) else 1,
        }
        if self._in_guild(channel_id):
            payload["guild_id"] = self.guild_of(channel_id)
            permissions = self.channel_permissions(user, channel_id)  # with overwrites
            payload["member"] = self._member(user) | {"permissions": str(permissions)}
        else:
            payload["user"] = user.payload()
        return payload

    def _bot_permissions(self, channel_id: str) -> int:
        return ALL_PERMISSIONS & ~self.denied.get(channel_id, 0)

    def _overwrites(self, channel_id: str) -> list[dict[str, Any]]:
        overwrites = list(self.overwrites.get(channel_id, []))
        denied = self.denied.get(channel_id, 0)
        if denied:
            overwrites.append({"id": self.bot.id, "type": 1, "allow": "0", "deny": str(denied)})
        return overwrites

    def _channel_payload(self, channel_id: str) -> dict[str, Any]:
        if channel_id in self.threads:
            return {
                "id": channel_id,
                "type": 11,
                "guild_id": self.guild_of(channel_id),
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
                "guild_id": self.guild_of(channel_id),
                "name": self.channel_names[channel_id],
                "position": list(self.channel_names).index(channel_id),
                "permission_overwrites": self._overwrites(channel_id),
                "nsfw": False,
                "parent_id": None,
            }
        user_id = next(u for u, c in self.dm_channels.items() if c == channel_id)
        user = next(u for u in self.people if u.id == user_id)
        return {"id": channel_id, "type": 1, "recipients": [user.payload()]}

    def _guild(self, guild_id: str = GUILD_ID) -> dict[str, Any]:
        everyone = {
            "id": guild_id,
            "name": "@everyone",
            "permissions": str(self.everyone_permissions),
            "position": 0,
            "color": 0,
            "hoist": False,
            "managed": False,
            "mentionable": False,
            "flags": 0,
        }
        roles = [
            {
                **everyone,
                "id": role_id,
                "name": name,
                "permissions": str(self.role_permissions.get(role_id, 0)),
                "position": 1,
                "mentionable": role_id in self.mentionable_roles,
            }
            for role_id, name in self.role_names.items()
        ]
        # A bot gets a managed role with the permissions of its invite.
        bot_role = {**everyone, "id": BOT_ROLE, "name": self.bot.name, "managed": True}
        roles.append(bot_role | {"permissions": str(ALL_PERMISSIONS), "position": 1})
        everybody = [u for u in [self.bot, *self.people] if self._is_member(u.id)]
        # Without GUILD_PRESENCES, GUILD_CREATE lists only the bot (and voice users).
        listed = everybody if self.intents & INTENT_GUILD_PRESENCES else [self.bot]
        channels = [c for c in self.channel_names if self.guild_of(c) == guild_id]
        threads = [t for t in self.threads if self.guild_of(t) == guild_id]
        return {
            "id": guild_id,
            "name": self.guild_names[guild_id],
            "icon": None,
            "owner_id": self.people[0].id,
            "system_channel_id": SYSTEM_CHANNEL if guild_id == GUILD_ID else None,
            "roles": [everyone, *roles],
            "channels": [self._channel_payload(c) for c in channels],
            "threads": [self._channel_payload(t) for t in threads],
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
        """Send an event to the connections that get it: a guild's to the shard that
        holds the guild, the rest (DMs) to shard 0."""
        guild_id = data.get("guild_id")
        for session in list(self.sessions.values()):
            shard, count = session.shard
            if not session.valid or shard != (shard_of(guild_id, count) if guild_id else 0):
                continue
            frame = session.frame(event, data)  # kept for a RESUME even while disconnected
            if session.socket is not None:
                with contextlib.suppress(ConnectionError, RuntimeError):
                    await session.socket.send_str(frame)

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        await self._gateway_open.wait()
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
            self._socket_shards.pop(id(socket), None)
            self._detach(socket)
        return socket

    def _detach(self, socket: web.WebSocketResponse) -> None:
        """The connection is gone; its session waits for a RESUME, unless the client
        closed it with 1000 or 1001, which ends the session as Discord documents."""
        for session in self.sessions.values():
            if session.socket is socket:
                session.socket = None
                if socket.close_code in (1000, 1001):
                    session.valid = False

    def pause_gateway(self) -> None:
        """New gateway connections wait (the network is down) until ``open_gateway``."""
        self._gateway_open.clear()

    def open_gateway(self) -> None:
        self._gateway_open.set()

    def hold_identify(self, shard: int) -> None:
        """``shard``'s next IDENTIFY waits (its READY with it) until ``release_identify``:
        the order in which shards come back, set by a test."""
        self.identify_held.clear()
        self._identify_gates[shard] = asyncio.Event()

    def release_identify(self, shard: int) -> None:
        gate = self._identify_gates.pop(shard, None)
        if gate is not None:
            gate.set()

    def invalidate_sessions(self, *, shard: int | None = None) -> None:
        """Every session (or ``shard``'s) ends: the next RESUME gets INVALID_SESSION (``d:
        false``) and nothing of the gap is replayed, as when Discord drops a session."""
        for session in self.sessions.values():
            if shard is None or session.shard[0] == shard:
                session.valid = False

    async def _gateway_frame(self, socket: web.WebSocketResponse, frame: dict[str, Any]) -> None:
        op = frame.get("op")
        if op == 1:
            await socket.send_json({"op": 11})
        elif op == 2:
            self.identifies += 1
            self.intents = int(frame["d"].get("intents", 0))
            shard, count = frame["d"].get("shard", [0, 1])
            if not 0 <= shard < count:
                await socket.close(code=4010)  # Invalid shard
                return
            if self.intents & INTENT_MESSAGE_CONTENT and not self.message_content_intent:
                await socket.close(code=4014)  # Disallowed intent(s): the portal's switch is off
                return
            gate = self._identify_gates.get(shard)
            if gate is not None:
                self.identify_held.set()
                await gate.wait()
            self.shards_seen.append((shard, count))
            self._socket_shards[id(socket)] = (shard, count)
            await self._ready(socket, self._acting(frame["d"].get("token", "")), shard, count)
        elif op == 6:
            await self._resume(socket, frame["d"])

    async def _resume(self, socket: web.WebSocketResponse, data: dict[str, Any]) -> None:
        """RESUME: the events the session sent after the client's last sequence number,
        in order, then RESUMED; a session that ended gets INVALID_SESSION (``d: false``)."""
        session = self.sessions.get(str(data.get("session_id")))
        if session is None or not session.valid:
            self.resumes_refused += 1
            await socket.send_json({"op": 9, "d": False})
            return
        self.resumes += 1
        self.resumed.set()
        session.socket = socket
        self._sockets.append(socket)
        self._socket_shards[id(socket)] = session.shard
        last = int(data.get("seq") or 0)
        for seq, frame in list(session.sent):
            if seq > last:
                await socket.send_str(frame)
        await socket.send_str(session.frame("RESUMED", {}))

    def _acting(self, token: str) -> FakeUser:
        """Which bot a token (gateway) or ``Authorization: Bot <token>`` (REST) belongs to."""
        return self.tokens.get(token.removeprefix("Bot ").strip(), self.bot)

    async def _ready(
        self, socket: web.WebSocketResponse, bot: FakeUser, shard: int, count: int
    ) -> None:
        """READY names the shard's guilds as unavailable; a GUILD_CREATE for each follows."""
        flags = APP_FLAGS_MESSAGE_CONTENT if self.message_content_intent else 0
        guilds = [g for g in self.guild_names if shard_of(g, count) == shard]
        session = _Session(f"session-{self.identifies}", (shard, count), socket)
        self.sessions[session.id] = session
        ready = {
            "v": 10,
            "user": bot.payload(),
            "guilds": [{"id": g, "unavailable": True} for g in guilds],
            "session_id": session.id,
            "resume_gateway_url": self.gateway,
            "application": {"id": bot.id, "flags": flags},
            "shard": [shard, count],
            "private_channels": [],
            "relationships": [],
        }
        self._sockets.append(socket)
        await socket.send_str(session.frame("READY", ready))
        for guild_id in guilds:
            await socket.send_str(session.frame("GUILD_CREATE", self._guild(guild_id)))
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
        self.log_times.append(time.monotonic())
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
        except Refusal as refusal:
            return error_response(refusal.status, refusal.code, refusal.errors)
        except (KeyError, StopIteration):
            return json_response({"message": "404: Not Found", "code": 0}, 404)

    def _bucket(self, method: str, path: str) -> tuple[str, str]:
        """(bucket hash, top-level resource) of a route, as X-RateLimit-Bucket names it."""
        parts = path.strip("/").split("/")
        major = "/".join(parts[:2]) if parts[0] in {"channels", "guilds", "webhooks"} else ""
        shape = " ".join([method, *("{id}" if p.isdigit() else p for p in parts)])
        bucket = self._buckets.setdefault(shape, f"{len(self._buckets) + 1:08x}")
        return bucket, major

    def _limit_headers(self, bucket: tuple[str, str]) -> dict[str, str]:
        moment = time.time()
        start, used = self._windows.get(bucket, (moment, 0))
        if moment - start >= self.bucket_window:
            start, used = moment, 0
        used += 1
        self._windows[bucket] = (start, used)
        reset = start + self.bucket_window
        return {
            "X-RateLimit-Limit": str(self.bucket_limit),
            "X-RateLimit-Remaining": str(max(self.bucket_limit - used, 0)),
            "X-RateLimit-Reset": f"{reset:.3f}",
            "X-RateLimit-Reset-After": f"{max(reset - moment, 0):.3f}",
            "X-RateLimit-Bucket": bucket[0],
        }

    def _failure_answer(self, failure: Failure, bucket: tuple[str, str]) -> web.Response:
        if failure.status != 429:
            code = failure.code or DEFAULT_CODE.get(failure.status, 0)
            response = error_response(failure.status, code)
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
        response = json_response(body, 429, headers)
        if not failure.via:
            del response.headers["Via"]
        return response
