"""A loopback fake of Slack's Web API and Socket Mode, for the real slack_sdk / slack_bolt.

It follows Slack's documentation (api.slack.com): every Web API call is a POST or GET to
``/api/<method>`` with a bearer token, answered ``{"ok": true, ...}`` or HTTP 200 with
``{"ok": false, "error": "..."}``; a rate-limited call is HTTP 429 with ``Retry-After``.
``apps.connections.open`` (app-level ``xapp-`` token only) hands out a one-time WebSocket
URL; there the fake says ``hello`` and then sends envelopes (``events_api``,
``slash_commands``, ``interactive``), each to be acknowledged with its ``envelope_id``.
An ``events_api`` envelope not acknowledged within ``ack_timeout`` is sent again with
``retry_attempt`` counted up (``retry_reason`` ``timeout``), up to three retries, as Slack
does. With a Request URL set (``set_request_url``, verified by a challenge) the same
events, commands and button presses are POSTed there instead, signed, as the Events API
over HTTP delivers them (``slack_http.py``). A connection is closed as Slack closes one
(``drop``: a ``disconnect`` envelope with its reason, then the close); while
``pause_connections`` holds, ``apps.connections.open`` answers only once
``open_connections`` is called, so what happens in between is missed, as on Slack; ``cut``
carries a call out and drops its connection before the answer. Message timestamps (``ts``)
are the wall clock (``clock_offset`` moves it), unique and growing. What Slack refuses,
the fake refuses: a bot token at ``apps.connections.open``, text past 40,000 characters
(``msg_too_long``), malformed blocks or a section's text past 3,000 characters
(``invalid_blocks``), malformed message metadata (``invalid_metadata_format``), a channel
the bot is not in (``not_in_channel``), editing or deleting someone else's message.

Tests play the people: ``post``, ``edit``, ``delete``, ``pin``, ``command`` and ``click``;
``pings`` lists every notification a bot message would have sent (``<!channel>``,
``<!here>``, ``<!everyone>``, ``<!subteam^…>``, or ``@channel`` with ``link_names``).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from fakes.slack_http import RETRY_DELAYS, SIGNING_SECRET, Answer, HttpDelivery
from fakes.slack_web import APP, TEAM, SlackError, Upload, WebApi

__all__ = [
    "APP_TOKEN",
    "BOT_TOKEN",
    "SIGNING_SECRET",
    "Answer",
    "SlackServer",
    "SlackUser",
    "Upload",
]

BOT_TOKEN, APP_TOKEN = "xoxb-fake-bot", "xapp-1-fake-app"
BOT_SCOPES = (
    "channels:history",
    "groups:history",
    "im:history",
    "mpim:history",
    "chat:write",
    "commands",
    "pins:read",
    "reactions:write",
    "users:read",
    "channels:read",
    "groups:read",
    "files:read",
    "files:write",
    "im:write",
)
EVENT_RETRIES = 3  # Slack retries an unacknowledged event up to three times


@dataclass(frozen=True)
class SlackUser:
    id: str
    name: str
    is_bot: bool = False


@dataclass
class _Channel:
    id: str
    name: str
    members: set[str]
    is_im: bool = False
    is_private: bool = False
    messages: list[dict[str, Any]] = field(default_factory=list)
    pins: list[str] = field(default_factory=list)
    host: str = TEAM  # the workspace that hosts it; another: a Slack Connect channel

    @property
    def ext_shared(self) -> bool:
        return self.host != TEAM


class SlackServer(WebApi):
    def __init__(
        self, *, ack_timeout: float = 3.0, retry_delays: tuple[float, ...] = RETRY_DELAYS
    ) -> None:
        self.ack_timeout = ack_timeout
        self.http = HttpDelivery(
            ack_timeout=ack_timeout, retry_delays=retry_delays, acknowledged=self._ack
        )
        self.bot = SlackUser("U0BOT", "salon", is_bot=True)
        self.users: dict[str, SlackUser] = {self.bot.id: self.bot}
        self.channels: dict[str, _Channel] = {}
        self.calls: list[tuple[str, float, dict[str, Any]]] = []  # method, time, params
        self.pings: list[tuple[str, str]] = []  # (message ts, what it notified)
        self.acks: dict[str, dict[str, Any] | None] = {}  # envelope id -> response payload
        self.responses: list[dict[str, Any]] = []  # posted to a response_url
        self.deliveries: list[dict[str, Any]] = []  # every envelope sent, retries too
        self.scopes = set(BOT_SCOPES)  # the bot token's, sent as X-OAuth-Scopes
        self._limits: dict[str, list[int]] = {}  # method -> [times, retry_after]
        self._failures: dict[str, list[int]] = {}  # method -> [times, HTTP status]
        self._cuts: dict[str, int] = {}  # method -> times its answer is lost
        self._connections_open = asyncio.Event()  # apps.connections.open answers
        self._connections_open.set()
        self.clock_offset = 0.0  # seconds added to the wall clock of new messages
        self._last_micros = 0
        self._tickets: set[str] = set()
        self.files: dict[str, tuple[str, bytes]] = {}  # file id -> (mimetype, data)
        self.downloads: list[str] = []  # file ids served to the bot token
        self.pending: dict[str, dict[str, Any]] = {}  # upload URLs handed out, not completed
        self.uploads: list[Upload] = []  # files the bot uploaded and shared
        self.opened = 0  # Socket Mode connections opened in all
        self.redelivered = 0  # events sent again because no acknowledgement came in time
        self.missed: list[dict[str, Any]] = []  # sent while the app had no connection
        self._sockets: list[web.WebSocketResponse] = []
        self._changed = asyncio.Condition()
        self._ids = itertools.count(1)
        self._tasks: set[asyncio.Task[None]] = set()
        self._runner: web.AppRunner | None = None
        self.port = 0
        self.channel("C0GENERAL", "general")

    # -- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_get("/link/", self._link)
        app.router.add_get("/files-pri/{id}/{name}", self._file)
        app.router.add_post("/respond/{id}", self._respond)
        app.router.add_post("/upload/v1/{id}", self._upload)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for ws in list(self._sockets):
            await ws.close()
        await self.http.close()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/"

    # -- the world -------------------------------------------------------------------

    def user(self, name: str, *, is_bot: bool = False) -> SlackUser:
        for user in self.users.values():
            if user.name == name:
                return user
        user = SlackUser(f"U{next(self._ids):04d}{name.upper()[:4]}", name, is_bot)
        self.users[user.id] = user
        for channel in self.channels.values():
            if not channel.is_im and not channel.is_private:
                channel.members.add(user.id)
        return user

    def channel(
        self,
        channel_id: str,
        name: str,
        *,
        bot: bool = True,
        members: list[SlackUser] | None = None,
        host: str = TEAM,
    ) -> str:
        """A public channel everyone joins; with ``members``, a private one of just them
        (and the bot, unless ``bot`` is false), which later users do not join. ``host``:
        another organization's workspace that shares it with this one (Slack Connect)."""
        if members is None:
            people = {u for u in self.users if bot or u != self.bot.id}
        else:
            people = {u.id for u in members} | ({self.bot.id} if bot else set())
        self.channels[channel_id] = _Channel(
            channel_id, name, people, is_private=members is not None, host=host
        )
        return channel_id

    async def join(self, channel: str, user: SlackUser) -> None:
        """``user`` joins: ``member_joined_channel`` tells the app if the bot is there."""
        self.channels[channel].members.add(user.id)
        await self._membership("member_joined_channel", channel, user)

    async def leave(self, channel: str, user: SlackUser) -> None:
        self.channels[channel].members.discard(user.id)
        await self._membership("member_left_channel", channel, user)

    async def _membership(self, kind: str, channel: str, user: SlackUser) -> None:
        known = self.channels[channel]
        if self.bot.id not in known.members:
            return  # Slack tells an app of channels its bot is in only
        event = {"type": kind, "user": user.id, "channel": channel, "team": TEAM}
        event["channel_type"] = "G" if known.is_private else "C"
        await self._event(channel, {**event, "event_ts": self._next_ts()})

    def im(self, user: SlackUser) -> str:
        """The direct-message conversation of ``user`` and the bot (``D…``), made the
        first time (one per pair, as on Slack)."""
        channel_id = f"D{user.id[1:]}"
        if channel_id not in self.channels:
            members = {user.id, self.bot.id}
            self.channels[channel_id] = _Channel(channel_id, user.id, members, is_im=True)
        return channel_id

    def messages(self, channel: str, *, by_bot: bool = True) -> list[dict[str, Any]]:
        found = self.channels[channel].messages
        return [m for m in found if (m.get("user") == self.bot.id) == by_bot]

    def rate_limit(self, method: str, *, retry_after: int = 1, times: int = 1) -> None:
        """The next ``times`` calls of ``method`` get HTTP 429 with ``Retry-After``."""
        self._limits[method] = [times, retry_after]

    def fail(self, method: str, *, status: int = 503, times: int = 1) -> None:
        """The next ``times`` calls of ``method`` get HTTP ``status`` and do nothing (Slack
        unavailable: ``service_unavailable``)."""
        self._failures[method] = [times, status]

    def cut(self, method: str, *, times: int = 1) -> None:
        """The next ``times`` calls of ``method`` are carried out, then the connection is
        closed before the answer (a connection lost after Slack took the request)."""
        self._cuts[method] = times

    def pause_connections(self) -> None:
        """``apps.connections.open`` waits (Slack unreachable) until ``open_connections``."""
        self._connections_open.clear()

    def open_connections(self) -> None:
        self._connections_open.set()

    async def wait_bot_messages(
        self, channel: str, count: int, within: float = 15
    ) -> list[dict[str, Any]]:
        async with self._changed:
            await asyncio.wait_for(
                self._changed.wait_for(lambda: len(self.messages(channel)) >= count), within
            )
        return self.messages(channel)

    async def wait_for(self, check: Any, within: float = 15) -> None:
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(check), within)

    async def connected(self, within: float = 15, *, times: int = 1) -> None:
        """Until a connection is open, and ``times`` have been opened in all."""
        await self.wait_for(lambda: bool(self._sockets) and self.opened >= times, within)

    async def disconnected(self, within: float = 15) -> None:
        """Until no connection is open (the app stopped, or lost its socket)."""
        await self.wait_for(lambda: not self._sockets, within)

    async def post(
        self,
        channel: str,
        user: SlackUser,
        text: str,
        *,
        thread_ts: str | None = None,
        files: Sequence[tuple[str, str, bytes]] = (),
    ) -> dict[str, Any]:
        """``user`` says ``text`` (mrkdwn, ``<@U…>`` for a mention); the app is told.
        ``files`` (name, mimetype, data) are shared with it, as a ``file_share``."""
        message = self._store(channel, user, text, thread_ts=thread_ts)
        if files:
            message["subtype"] = "file_share"
            message["files"] = [self._shared(*file) for file in files]
        await self._event(channel, {**message, "channel_type": self._type(channel)})
        return message

    async def edit(self, channel: str, ts: str, text: str) -> None:
        message = self._find(channel, ts)
        before = dict(message)
        message["text"] = text
        message["edited"] = {"user": message["user"], "ts": self._next_ts()}
        await self._notify()
        await self._event(channel, self._changed_event(channel, message, before))

    async def delete(self, channel: str, ts: str) -> None:
        message = self._find(channel, ts)
        self.channels[channel].messages.remove(message)
        await self._notify()
        event = {"subtype": "message_deleted", "hidden": True, "deleted_ts": ts}
        await self._event(channel, {**event, "ts": self._next_ts(), "previous_message": message})

    async def pin(self, channel: str, ts: str, by: SlackUser | None = None) -> None:
        """Someone pins message ``ts``: ``pin_added`` tells the app."""
        message = self._find(channel, ts)
        self.channels[channel].pins.append(ts)
        item = {"type": "message", "channel": channel, "message": message}
        user = (by or self.bot).id
        event = {"type": "pin_added", "user": user, "channel_id": channel, "item": item}
        await self._event(channel, {**event, "event_ts": self._next_ts()})

    async def command(self, user: SlackUser, channel: str, command: str, text: str = "") -> str:
        """``user`` types ``/command text`` in ``channel``; returns the envelope id."""
        rid = uuid.uuid4().hex
        payload = {
            "token": "verification-token",
            "team_id": TEAM,
            "team_domain": "fake",
            "channel_id": channel,
            "channel_name": self.channels[channel].name,
            "user_id": user.id,
            "user_name": user.name,
            "command": command,
            "text": text,
            "api_app_id": APP,
            "is_enterprise_install": "false",
            "response_url": f"http://127.0.0.1:{self.port}/respond/{rid}",
            "trigger_id": f"trigger.{rid}",
        }
        return await self._envelope("slash_commands", payload, accepts_response=True)

    async def click(
        self, user: SlackUser, channel: str, ts: str, action_id: str, value: str = ""
    ) -> str:
        """``user`` presses the button ``action_id`` on message ``ts``: block_actions."""
        message = self._find(channel, ts)
        rid = uuid.uuid4().hex
        block = next((b for b in message.get("blocks", []) if b.get("type") == "actions"), {})
        payload = {
            "type": "block_actions",
            "user": {"id": user.id, "username": user.name, "name": user.name, "team_id": TEAM},
            "api_app_id": APP,
            "token": "verification-token",
            "container": {
                "type": "message",
                "message_ts": ts,
                "channel_id": channel,
                "is_ephemeral": False,
            },
            "trigger_id": f"trigger.{rid}",
            "team": {"id": TEAM, "domain": "fake"},
            "enterprise": None,
            "is_enterprise_install": False,
            "channel": {"id": channel, "name": self.channels[channel].name},
            "message": message,
            "state": {"values": {}},
            "response_url": f"http://127.0.0.1:{self.port}/respond/{rid}",
            "actions": [
                {
                    "action_id": action_id,
                    "block_id": block.get("block_id", "b"),
                    "text": {"type": "plain_text", "text": action_id},
                    "value": value,
                    "type": "button",
                    "action_ts": self._next_ts(),
                }
            ],
        }
        return await self._envelope("interactive", payload, accepts_response=False)

    async def resend(self, envelope: dict[str, Any]) -> Answer | None:
        """Send an envelope as Slack redelivers one (a test sets its ``retry_attempt``);
        over HTTP, with the retry headers, and the app's answer returned."""
        if self.http.request_url is not None:
            self.deliveries.append(envelope)
            return await self.http.deliver(envelope)
        await self._send(envelope)
        return None

    async def set_request_url(self, url: str) -> None:
        """The app's Request URL (Event Subscriptions, Interactivity, each slash command),
        saved once it answers the ``url_verification`` challenge; from then on everything
        is POSTed there rather than sent over Socket Mode."""
        await self.http.verify(url)

    async def forge(
        self, payload: dict[str, Any], *, secret: str | None = None, timestamp: int | None = None
    ) -> Answer:
        """Someone other than Slack POSTs an event to the Request URL: signed with the
        wrong ``secret``, or an old ``timestamp``."""
        assert self.http.request_url is not None
        body = json.dumps(payload).encode()
        url = self.http.request_url
        return await self.http.post(
            url, body, "application/json", secret=secret, timestamp=timestamp
        )

    async def drop(self, reason: str | None = None) -> None:
        """Close the app's connections, as Slack does now and then (the SDK reconnects):
        with a ``reason`` (``refresh_requested``, ``link_disabled``…) Slack's way, a
        ``disconnect`` envelope first; without one, the close alone (a network cut)."""
        for ws in list(self._sockets):
            if reason is not None:
                debug = {"host": "fake-slack", "approximate_connection_time": 18060}
                await ws.send_json({"type": "disconnect", "reason": reason, "debug_info": debug})
            await ws.close()

    async def wait_ack(self, envelope_id: str, within: float = 15) -> dict[str, Any] | None:
        await self.wait_for(lambda: envelope_id in self.acks, within)
        return self.acks[envelope_id]

    def _shared(self, name: str, mimetype: str, data: bytes) -> dict[str, Any]:
        """A file object as a message carries it: ``url_private`` needs the bot token."""
        file_id = f"F{next(self._ids):08d}"
        self.files[file_id] = (mimetype, data)
        url = f"http://127.0.0.1:{self.port}/files-pri/{TEAM}-{file_id}/{name}"
        return {
            "id": file_id,
            "name": name,
            "title": name,
            "mimetype": mimetype,
            "filetype": name.rpartition(".")[2],
            "size": len(data),
            "url_private": url,
            "url_private_download": url + "?download=1",
            "mode": "hosted",
            "is_external": False,
        }

    async def _file(self, request: web.Request) -> web.StreamResponse:
        """A file's ``url_private``: its bytes to a token with ``files:read``; without
        one, Slack answers with its sign-in page (HTML, status 200), not the file."""
        file_id = request.match_info["id"].removeprefix(f"{TEAM}-")
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        if token != BOT_TOKEN or "files:read" not in self.scopes:
            page = "<!DOCTYPE html><html><body>Sign in to Fake Slack</body></html>"
            return web.Response(text=page, content_type="text/html")
        if file_id not in self.files:
            return web.Response(status=404, text="file not found")
        self.downloads.append(file_id)
        mimetype, data = self.files[file_id]
        return web.Response(body=data, content_type=mimetype)

    async def _upload(self, request: web.Request) -> web.StreamResponse:
        """Step two of an upload: the bytes, raw, exactly the ``length`` promised (HTTP 200
        when taken; anything else is a failure)."""
        pending = self.pending.get(request.match_info["id"])
        if pending is None:
            return web.Response(status=404, text="unknown upload")
        data = await request.read()
        if len(data) != pending["length"]:
            return web.Response(status=400, text="length mismatch")
        pending["data"] = data
        return web.Response(text=f"OK - {len(data)}")

    # -- Socket Mode -----------------------------------------------------------------

    async def _link(self, request: web.Request) -> web.StreamResponse:
        ticket = request.query.get("ticket", "")
        if ticket not in self._tickets:
            return web.Response(status=401, text="invalid ticket")
        self._tickets.discard(ticket)  # a URL opens one connection
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        await ws.send_json(
            {
                "type": "hello",
                "num_connections": len(self._sockets) + 1,
                "debug_info": {"host": "fake-slack", "approximate_connection_time": 18060},
                "connection_info": {"app_id": APP},
            }
        )
        self._sockets.append(ws)
        self.opened += 1
        await self._notify()
        try:
            async for frame in ws:
                if frame.type == WSMsgType.TEXT:
                    await self._acknowledged(json.loads(frame.data))
        finally:
            self._sockets.remove(ws)
        await self._notify()
        return ws

    async def _acknowledged(self, data: dict[str, Any]) -> None:
        envelope_id = data.get("envelope_id")
        if isinstance(envelope_id, str):
            await self._ack(envelope_id, data.get("payload"))

    async def _ack(self, envelope_id: str, payload: dict[str, Any] | None) -> None:
        if envelope_id not in self.acks:
            self.acks[envelope_id] = payload
            await self._notify()

    def _count_redelivery(self, envelope: dict[str, Any]) -> None:
        self.redelivered += 1
        self.deliveries.append(envelope)

    async def _event(self, channel: str, event: dict[str, Any]) -> str:
        if event.get("type", "message") == "message":
            event = {"type": "message", "channel": channel, "event_ts": event.get("ts"), **event}
        payload = {
            "token": "verification-token",
            "team_id": TEAM,
            "api_app_id": APP,
            "event": event,
            "type": "event_callback",
            "event_id": f"Ev{next(self._ids):08d}",
            "event_time": int(time.time()),
            "authorizations": [
                {"team_id": TEAM, "user_id": self.bot.id, "is_bot": True, "enterprise_id": None}
            ],
            "is_ext_shared_channel": self._ext_shared(channel),
        }
        return await self._envelope("events_api", payload, accepts_response=False)

    def _ext_shared(self, channel: str) -> bool:
        known = self.channels.get(channel)
        return known is not None and known.ext_shared

    async def _envelope(self, kind: str, payload: dict[str, Any], *, accepts_response: bool) -> str:
        envelope = {
            "envelope_id": str(uuid.uuid4()),
            "type": kind,
            "payload": payload,
            "accepts_response_payload": accepts_response,
        }
        if kind == "events_api":
            envelope |= {"retry_attempt": 0, "retry_reason": ""}
        if self.http.request_url is not None:
            await self._post(envelope)
            return str(envelope["envelope_id"])
        await self._send(envelope)
        if kind == "events_api" and self._sockets:
            task = asyncio.create_task(self._redeliver(envelope))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return str(envelope["envelope_id"])

    async def _post(self, envelope: dict[str, Any]) -> None:
        """Over HTTP: the first delivery waited for (so what a test does arrives in its
        order); an event's retries, if it needs them, in the background."""
        self.deliveries.append(envelope)
        answer = await self.http.deliver(envelope)
        if envelope["type"] == "events_api" and answer.reason:
            again = self.http.retry(envelope, answer, self._count_redelivery)
            task = asyncio.create_task(again)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _send(self, envelope: dict[str, Any]) -> None:
        """To the newest connection. With none open the envelope is missed (Slack tries
        an event again minutes later; the fake does not)."""
        if not self._sockets:
            self.missed.append(envelope)
            return
        self.deliveries.append(envelope)
        await self._sockets[-1].send_json(envelope)

    async def _redeliver(self, envelope: dict[str, Any]) -> None:
        """Unacknowledged within the timeout: sent again, ``retry_attempt`` counted up.
        (Slack's own timer: the fake waits as Slack does, then looks.)"""
        envelope_id = envelope["envelope_id"]
        for attempt in range(1, EVENT_RETRIES + 1):
            await asyncio.sleep(self.ack_timeout)
            if envelope_id in self.acks:
                return
            self.redelivered += 1
            again = {**envelope, "retry_attempt": attempt, "retry_reason": "timeout"}
            await self._send(again)

    # -- the Web API -----------------------------------------------------------------

    async def _api(self, request: web.Request) -> web.StreamResponse:
        method = request.match_info["method"]
        params: dict[str, Any] = dict(request.query)
        if request.content_type == "application/json":
            params |= await request.json()
        elif request.can_read_body:
            params |= dict(await request.post())
        self.calls.append((method, time.monotonic(), params))
        failure = self._failures.get(method)
        if failure and failure[0] > 0:
            failure[0] -= 1
            body = {"ok": False, "error": "service_unavailable"}
            return web.json_response(body, status=failure[1])
        limit = self._limits.get(method)
        if limit and limit[0] > 0:
            limit[0] -= 1
            body = {"ok": False, "error": "ratelimited"}
            return web.json_response(body, status=429, headers={"Retry-After": str(limit[1])})
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        try:
            self._authorize(method, token)
            handler = getattr(self, "_m_" + method.replace(".", "_"), None)
            if handler is None:
                raise SlackError("unknown_method")
            result: dict[str, Any] = await handler(params)
        except SlackError as exc:
            return web.json_response({"ok": False, "error": exc.error})
        await self._notify()
        if self._cuts.get(method, 0) > 0 and request.transport is not None:
            self._cuts[method] -= 1
            request.transport.abort()  # done, but the caller never hears so
        scopes = {"X-OAuth-Scopes": ",".join(sorted(self.scopes))} if token == BOT_TOKEN else {}
        return web.json_response({"ok": True, **result}, headers=scopes)

    def _authorize(self, method: str, token: str) -> None:
        if token not in (BOT_TOKEN, APP_TOKEN):
            raise SlackError("not_authed" if not token else "invalid_auth")
        wants_app = method == "apps.connections.open"
        if (token == APP_TOKEN) != wants_app:
            raise SlackError("not_allowed_token_type")

    async def _respond(self, request: web.Request) -> web.StreamResponse:
        self.responses.append(await request.json())
        await self._notify()
        return web.Response(text="ok")

    def _readable(self, params: dict[str, Any]) -> _Channel:
        channel = self.channels.get(str(params.get("channel", "")))
        if channel is None:
            raise SlackError("channel_not_found")
        if self.bot.id not in channel.members:
            raise SlackError("not_in_channel")
        return channel

    def _store(
        self,
        channel: str,
        user: SlackUser,
        text: str,
        *,
        thread_ts: str | None = None,
        blocks: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        ts = self._next_ts()
        message: dict[str, Any] = {"type": "message", "user": user.id, "text": text, "ts": ts}
        message["team"] = TEAM
        if blocks:
            message["blocks"] = blocks
        if thread_ts is not None:
            message["thread_ts"] = thread_ts
            parent = self._find(channel, thread_ts)
            parent["thread_ts"] = thread_ts
            parent["reply_count"] = parent.get("reply_count", 0) + 1
        self.channels[channel].messages.append(message)
        return message

    def _changed_event(
        self, channel: str, message: dict[str, Any], before: dict[str, Any]
    ) -> dict[str, Any]:
        return {
            "subtype": "message_changed",
            "hidden": True,
            "message": dict(message),
            "previous_message": before,
            "channel": channel,
            "ts": self._next_ts(),
        }

    def _find(self, channel: str, ts: str) -> dict[str, Any]:
        if channel not in self.channels:
            raise SlackError("channel_not_found")
        for message in self.channels[channel].messages:
            if message["ts"] == ts:
                return message
        raise SlackError("message_not_found")

    def _type(self, channel: str) -> str:
        return "im" if self.channels[channel].is_im else "channel"

    def _next_ts(self) -> str:
        """Now (plus ``clock_offset``) in Slack's form, a microsecond past the last at least."""
        micros = int((time.time() + self.clock_offset) * 1_000_000)
        self._last_micros = max(micros, self._last_micros + 1)
        return f"{self._last_micros // 1_000_000}.{self._last_micros % 1_000_000:06d}"

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()
