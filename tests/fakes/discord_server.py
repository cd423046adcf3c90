"""A loopback fake of Discord's REST API and gateway, enough to drive the real discord.py.

One guild with text channels, a few people and the bot. Tests act as people with
``post`` (the message goes to the store and out over the gateway as MESSAGE_CREATE),
``edit``, ``delete`` and ``react``; they read what the bot did in ``channels`` and count
REST calls in ``calls``. ``fail_next`` scripts errors for a route.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import WSMsgType, web

__all__ = ["DiscordServer", "FakeUser"]

GUILD_ID = "1"
APP_FLAGS_MESSAGE_CONTENT = 1 << 18


@dataclass(frozen=True)
class FakeUser:
    id: str
    name: str
    bot: bool = False

    def payload(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "username": self.name.lower(),
            "global_name": self.name,
            "discriminator": "0",
            "avatar": None,
            "bot": self.bot,
        }


@dataclass
class _Failure:
    method: str
    fragment: str
    status: int
    times: int = 1
    after_effect: bool = False  # do the work, then answer with the error (a lost response)


@dataclass
class DiscordServer:
    bot: FakeUser = field(default_factory=lambda: FakeUser("100", "Salon", bot=True))
    people: list[FakeUser] = field(
        default_factory=lambda: [
            FakeUser("200", "Alice"),
            FakeUser("201", "Bob"),
            FakeUser("300", "Robo", bot=True),
        ]
    )
    message_content_intent: bool = True
    port: int = 0
    tokens: dict[str, FakeUser] = field(default_factory=dict)  # more bots: token -> bot user

    def __post_init__(self) -> None:
        self._ids = itertools.count(1000)
        self.channels: dict[str, list[dict[str, Any]]] = {"10": [], "11": []}
        self.channel_names = {"10": "general", "11": "random"}
        self.dm_channels: dict[str, str] = {}  # user id -> dm channel id
        self.calls: Counter[str] = Counter()
        self.commands: list[dict[str, Any]] = []
        self.interaction_responses: list[dict[str, Any]] = []
        self.webhooks: list[dict[str, Any]] = []
        self.files: dict[str, bytes] = {}
        self.threads: dict[str, str] = {}  # thread id -> parent channel id
        self.webhook_posts: list[dict[str, Any]] = []
        self.roles: dict[str, list[str]] = {}  # user id -> role ids
        self.role_names: dict[str, str] = {"500": "mods"}  # the guild's roles
        self._failures: list[_Failure] = []
        self._nonces: dict[str, dict[str, Any]] = {}
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
        message = self._message(channel_id, author, content, list(mentions), reply_to)
        for filename, content_type, data in files:
            file_id = str(next(self._ids))
            self.files[file_id] = data
            message["attachments"].append(
                {
                    "id": file_id,
                    "filename": filename,
                    "content_type": content_type,
                    "size": len(data),
                    "url": f"http://127.0.0.1:{self.port}/attachments/{file_id}/{filename}",
                    "proxy_url": f"http://127.0.0.1:{self.port}/attachments/{file_id}/{filename}",
                }
            )
        self.channels[channel_id].append(message)
        await self.dispatch("MESSAGE_CREATE", message)
        return message

    async def edit(self, message: dict[str, Any], content: str) -> None:
        message["content"] = content
        message["edited_timestamp"] = datetime.now(UTC).isoformat()
        await self.dispatch("MESSAGE_UPDATE", message)

    async def delete(self, message: dict[str, Any]) -> None:
        self.channels[message["channel_id"]].remove(message)
        payload = {"id": message["id"], "channel_id": message["channel_id"]}
        if message.get("guild_id"):
            payload["guild_id"] = message["guild_id"]
        await self.dispatch("MESSAGE_DELETE", payload)

    async def pin(self, message: dict[str, Any]) -> None:
        """Pin a message, as a moderator would: MESSAGE_UPDATE and CHANNEL_PINS_UPDATE."""
        message["pinned"] = True
        message["pinned_at"] = datetime.now(UTC).isoformat()
        await self.dispatch("MESSAGE_UPDATE", message)
        payload = {"channel_id": message["channel_id"], "last_pin_timestamp": message["pinned_at"]}
        if message.get("guild_id"):
            payload["guild_id"] = GUILD_ID
        await self.dispatch("CHANNEL_PINS_UPDATE", payload)

    def link(self, message: dict[str, Any]) -> str:
        guild = GUILD_ID if message.get("guild_id") else "@me"
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
        if message.get("guild_id"):
            payload["guild_id"] = GUILD_ID
            payload["member"] = self._member(user)
        await self.dispatch("MESSAGE_REACTION_ADD", payload)

    async def click(self, message: dict[str, Any], user: FakeUser, custom_id: str) -> str:
        """Press a button of a bot message: an INTERACTION_CREATE like Discord sends."""
        interaction_id = str(next(self._ids))
        payload = {
            "id": interaction_id,
            "application_id": self.bot.id,
            "type": 3,
            "token": f"token-{interaction_id}",
            "version": 1,
            "channel_id": message["channel_id"],
            "message": message,
            "data": {"custom_id": custom_id, "component_type": 2},
            "attachment_size_limit": 26214400,
            "app_permissions": str((1 << 41) - 1),
            "locale": "en-US",
            "entitlements": [],
            "authorizing_integration_owners": {},
            "context": 0,
        }
        if message.get("guild_id"):
            payload["guild_id"] = GUILD_ID
            payload["member"] = self._member(user)
        else:
            payload["user"] = user.payload()
        await self.dispatch("INTERACTION_CREATE", payload)
        return interaction_id

    async def command(self, channel_id: str, user: FakeUser, name: str, **options: object) -> None:
        """Someone runs a slash command: an INTERACTION_CREATE of type 2."""
        interaction_id = str(next(self._ids))
        kinds = {str: 3, int: 4, bool: 5}
        payload: dict[str, Any] = {
            "id": interaction_id,
            "application_id": self.bot.id,
            "type": 2,
            "token": f"token-{interaction_id}",
            "version": 1,
            "channel_id": channel_id,
            "channel": self._channel_payload(channel_id),
            "data": {
                "id": str(next(self._ids)),
                "name": name,
                "type": 1,
                "options": [
                    {"name": k, "type": kinds[type(v)], "value": v} for k, v in options.items()
                ],
            },
            "attachment_size_limit": 26214400,
            "app_permissions": str((1 << 41) - 1),
            "locale": "en-US",
            "entitlements": [],
            "authorizing_integration_owners": {},
            "context": 0,
        }
        if channel_id in self.channel_names:
            payload["guild_id"] = GUILD_ID
            payload["member"] = self._member(user)
        else:
            payload["user"] = user.payload()
        await self.dispatch("INTERACTION_CREATE", payload)

    async def start_thread(self, starter: dict[str, Any], name: str) -> str:
        """Open a public thread on a message; the thread's id is the message's, as on Discord."""
        thread_id = starter["id"]
        parent = starter["channel_id"]
        self.channels[thread_id] = []
        self.threads[thread_id] = parent
        await self.dispatch(
            "THREAD_CREATE", self._channel_payload(thread_id) | {"newly_created": True}
        )
        return thread_id

    def fail_next(
        self,
        method: str,
        fragment: str,
        status: int = 500,
        times: int = 1,
        *,
        after_effect: bool = False,
    ) -> None:
        self._failures.append(_Failure(method, fragment, status, times, after_effect))

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

    async def drop_connections(self) -> None:
        """Close every gateway socket, as a network blip would."""
        for socket in list(self._sockets):
            await socket.close(code=4000)

    # -- payloads --------------------------------------------------------------------

    def _member(self, user: FakeUser) -> dict[str, Any]:
        return {
            "user": user.payload(),
            "roles": self.roles.get(user.id, []),
            "joined_at": "2026-01-01T00:00:00+00:00",
            "deaf": False,
            "mute": False,
            "flags": 0,
        }

    def _message(
        self,
        channel_id: str,
        author: FakeUser,
        content: str,
        mentions: list[FakeUser],
        reply_to: dict[str, Any] | None,
    ) -> dict[str, Any]:
        message: dict[str, Any] = {
            "id": str(next(self._ids)),
            "channel_id": channel_id,
            "author": author.payload(),
            "content": content if self.message_content_intent or author.id == self.bot.id else "",
            "timestamp": datetime.now(UTC).isoformat(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [u.payload() for u in mentions],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": False,
            "type": 19 if reply_to else 0,
            "flags": 0,
            "components": [],
        }
        if channel_id in self.channel_names or channel_id in self.threads:
            message["guild_id"] = GUILD_ID
            message["member"] = {k: v for k, v in self._member(author).items() if k != "user"}
        if reply_to is not None:
            message["message_reference"] = {
                "message_id": reply_to["id"],
                "channel_id": channel_id,
                "guild_id": message.get("guild_id"),
            }
            message["referenced_message"] = reply_to
        return message

    def _channel_payload(self, channel_id: str) -> dict[str, Any]:
        if channel_id in self.threads:
            return {
                "id": channel_id,
                "type": 11,
                "guild_id": GUILD_ID,
                "parent_id": self.threads[channel_id],
                "name": f"thread {channel_id}",
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
                "position": 0,
                "permission_overwrites": [],
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
        channels = [
            {
                "id": cid,
                "type": 0,
                "guild_id": GUILD_ID,
                "name": name,
                "position": i,
                "permission_overwrites": [],
                "nsfw": False,
                "parent_id": None,
            }
            for i, (cid, name) in enumerate(self.channel_names.items())
        ]
        members = [self._member(u) for u in [self.bot, *self.people]]
        return {
            "id": GUILD_ID,
            "name": "Salon test",
            "icon": None,
            "owner_id": self.people[0].id,
            "roles": [everyone, *roles],
            "channels": channels,
            "threads": [],
            "members": members,
            "member_count": len(members),
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

    async def _file(self, request: web.Request) -> web.Response:
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

    # -- REST ------------------------------------------------------------------------

    async def _rest(self, request: web.Request) -> web.Response:
        try:
            return await self._answer(request)
        finally:
            async with self.sent:  # whoever waits on REST traffic looks again
                self.sent.notify_all()

    async def _answer(self, request: web.Request) -> web.Response:
        path = "/" + request.match_info["tail"]
        key = f"{request.method} {path}"
        self.calls[key] += 1
        for failure in self._failures:
            if failure.times > 0 and failure.method == request.method and failure.fragment in path:
                failure.times -= 1
                if failure.after_effect:
                    await self._route(request, path)
                return _json({"message": "scripted failure", "code": 0}, failure.status)
        try:
            return await self._route(request, path)
        except (KeyError, StopIteration):
            return _json({"message": "Unknown", "code": 10003}, 404)

    async def _route(self, request: web.Request, path: str) -> web.Response:
        method = request.method
        parts = path.strip("/").split("/")
        acting = self._acting(request.headers.get("Authorization", ""))
        if path == "/users/@me":
            return _json(acting.payload())
        if path == "/oauth2/applications/@me":
            flags = APP_FLAGS_MESSAGE_CONTENT if self.message_content_intent else 0
            return _json(
                {
                    "id": acting.id,
                    "name": acting.name,
                    "icon": None,
                    "description": "",
                    "bot_public": True,
                    "bot_require_code_grant": False,
                    "owner": self.people[0].payload(),
                    "verify_key": "x",
                    "flags": flags,
                    "team": None,
                }
            )
        if path in {"/gateway/bot", "/gateway"}:
            limit = {"total": 1000, "remaining": 1000, "reset_after": 0, "max_concurrency": 1}
            return _json({"url": self.gateway, "shards": 1, "session_start_limit": limit})
        if parts[0] == "users" and parts[-1] == "channels" and method == "POST":
            body = await request.json()
            user = next(u for u in self.people if u.id == body["recipient_id"])
            channel_id = self.dm_channel(user)
            return _json({"id": channel_id, "type": 1, "recipients": [user.payload()]})
        if parts[0] == "applications" and "commands" in parts:
            if method == "PUT":
                self.commands = await request.json()
            return _json(
                [
                    {**c, "id": str(i + 1), "application_id": self.bot.id, "version": "1"}
                    for i, c in enumerate(self.commands)
                ]
            )
        if parts[0] == "webhooks" and method == "POST":
            hook = next(h for h in self.webhooks if h["id"] == parts[1])
            body = await request.json()
            self.webhook_posts.append(body)
            author = FakeUser(hook["id"], body.get("username") or hook["name"], bot=True)
            message = self._message(hook["channel_id"], author, body.get("content", ""), [], None)
            message["webhook_id"] = hook["id"]
            self.channels[hook["channel_id"]].append(message)
            await self.dispatch("MESSAGE_CREATE", message)
            return _json(message)
        if parts[0] == "interactions":
            body = await request.json()
            self.interaction_responses.append(body)
            async with self.sent:
                self.sent.notify_all()
            answer: dict[str, Any] = {"interaction": {"id": parts[1], "type": 3}}
            return _json(answer)
        if parts[0] == "channels":
            return await self._channel_route(request, parts[1], parts[2:], acting)
        return _json({"message": f"no fake for {method} {path}", "code": 0}, 404)

    async def _channel_route(
        self, request: web.Request, channel_id: str, rest: list[str], acting: FakeUser
    ) -> web.Response:
        method = request.method
        messages = self.channels[channel_id]
        if not rest and method == "GET":
            return _json(self._channel_payload(channel_id))
        if rest == ["typing"]:
            return web.Response(status=204)
        if rest == ["webhooks"]:
            if method == "POST":
                body = await request.json()
                hook = {
                    "id": str(next(self._ids)),
                    "type": 1,
                    "name": body["name"],
                    "channel_id": channel_id,
                    "guild_id": GUILD_ID,
                    "token": "hook-token",
                    "application_id": None,
                    "avatar": None,
                }
                self.webhooks.append(hook)
                return _json(hook)
            return _json([h for h in self.webhooks if h["channel_id"] == channel_id])
        if rest == ["messages", "pins"]:
            pinned = [m for m in reversed(messages) if m["pinned"]]
            items = [{"pinned_at": m["pinned_at"], "message": m} for m in pinned]
            return _json({"items": items, "has_more": False})
        if rest == ["messages"] and method == "GET":
            return _json(self._history(messages, request.query))
        if rest == ["messages"] and method == "POST":
            return await self._create(request, channel_id, acting)
        if len(rest) == 2 and rest[0] == "messages":
            message = next(m for m in messages if m["id"] == rest[1])
            if method == "DELETE":
                await self.delete(message)
                return web.Response(status=204)
            if method == "PATCH":
                body = await request.json()
                message.update({k: v for k, v in body.items() if k in ("content", "components")})
                await self.dispatch("MESSAGE_UPDATE", message)
            return _json(message)
        if len(rest) >= 4 and rest[0] == "messages" and rest[2] == "reactions" and method == "PUT":
            message = next(m for m in messages if m["id"] == rest[1])
            await self.react(message, acting, request.match_info["tail"].split("/")[5])
            return web.Response(status=204)
        raise KeyError(rest)

    def _history(self, messages: list[dict[str, Any]], query: Any) -> list[dict[str, Any]]:
        limit = int(query.get("limit", 50))
        ordered = list(reversed(messages))  # newest first, as Discord answers
        if "before" in query:
            ordered = [m for m in ordered if int(m["id"]) < int(query["before"])]
        if "after" in query:
            ordered = [m for m in ordered if int(m["id"]) > int(query["after"])][::-1][:limit][::-1]
        return ordered[:limit]

    async def _create(
        self, request: web.Request, channel_id: str, acting: FakeUser
    ) -> web.Response:
        if request.content_type.startswith("multipart/"):
            body: dict[str, Any] = {}
            files = []
            async for part in await request.multipart():
                if part.name == "payload_json":
                    body = json.loads(await part.text())
                elif part.filename:
                    files.append({"filename": part.filename, "size": len(await part.read())})
        else:
            body, files = await request.json(), []
        nonce = body.get("nonce")
        if nonce and body.get("enforce_nonce") and nonce in self._nonces:
            return _json(self._nonces[nonce])  # Discord's answer to a retried send
        message = self._message(channel_id, acting, body.get("content") or "", [], None)
        message["mentions"] = [
            u.payload() for u in [self.bot, *self.people] if f"<@{u.id}>" in message["content"]
        ]
        if nonce:
            self._nonces[nonce] = message
        message["components"] = body.get("components") or []
        message["attachments"] = [
            {
                "id": str(next(self._ids)),
                "filename": f["filename"],
                "size": f["size"],
                "url": "",
                "proxy_url": "",
            }
            for f in files
        ]
        if body.get("message_reference"):
            ref_id = body["message_reference"]["message_id"]
            message["message_reference"] = {"message_id": ref_id, "channel_id": channel_id}
            message["type"] = 19
        self.channels[channel_id].append(message)
        await self.dispatch("MESSAGE_CREATE", message)
        async with self.sent:
            self.sent.notify_all()
        return _json(message)


def _json(data: Any, status: int = 200) -> web.Response:
    # discord.py checks for this exact content type before parsing a body as JSON.
    body = json.dumps(data).encode()
    return web.Response(body=body, status=status, headers={"Content-Type": "application/json"})
