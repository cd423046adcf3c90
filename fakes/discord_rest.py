"""The REST routes of the fake Discord, mixed into ``DiscordServer`` (whose state they
read and change): channels and messages, pins, reactions, webhooks, interaction callbacks
and follow-ups, member lookups."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aiohttp import web

from fakes.discord_wire import (
    APP_FLAGS_MESSAGE_CONTENT,
    COMMAND,
    DEFAULT,
    EDITABLE_FLAGS,
    EPHEMERAL,
    INTERACTION_FLAGS,
    LOADING,
    MAX_CONTENT,
    PARSE_ALL,
    PARSE_USERS,
    PERMISSIONS,
    REPLY,
    SETTABLE_FLAGS,
    FakeUser,
    PendingInteraction,
    Refusal,
    Upload,
    body_and_files,
    embeds_refused,
    error_response,
    json_response,
    kept_attachments,
    mention_rules,
    now,
    shown_embeds,
)

MAX_NONCE = 25  # characters of a message nonce (Create Message)

__all__ = ["RestRoutes"]


def _as_stored(command: dict[str, Any]) -> dict[str, Any]:
    """A registered command as Discord keeps it: ``default_member_permissions`` is a
    string of permission bits (or null: everyone)."""
    needed = command.get("default_member_permissions")
    return command | {"default_member_permissions": None if needed is None else str(needed)}


class RestRoutes:
    """Discord's REST API as far as Salon uses it. (A mixin: ``DiscordServer`` has the
    state.)"""

    async def _route(self, request: web.Request, path: str) -> web.StreamResponse:
        method = request.method
        parts = path.strip("/").split("/")
        acting = self._acting(request.headers.get("Authorization", ""))
        if path == "/users/@me":
            return json_response(acting.payload())
        if path == "/oauth2/applications/@me":
            return json_response(self._application(acting))
        if path in {"/gateway/bot", "/gateway"}:
            limit = {"total": 1000, "remaining": 1000, "reset_after": 0, "max_concurrency": 1}
            if path == "/gateway":  # the unauthenticated route names only the URL
                return json_response({"url": self.gateway})
            answer = {"url": self.gateway, "shards": self.recommended_shards}
            return json_response(answer | {"session_start_limit": limit})
        if parts[0] == "users" and parts[-1] == "channels" and method == "POST":
            body = await request.json()  # a snowflake comes as a string or a number
            user = next((u for u in self.people if u.id == str(body["recipient_id"])), None)
            if user is None:
                return error_response(400, 50033)  # Invalid Recipient(s)
            channel_id = self.dm_channel(user)
            return json_response({"id": channel_id, "type": 1, "recipients": [user.payload()]})
        if parts[0] == "applications" and "commands" in parts:
            return await self._commands(request)
        if parts[0] == "guilds" and parts[2:] == ["messages", "search"] and method == "GET":
            return self._search(parts[1], request.query, acting)
        guild_member = len(parts) == 4 and parts[0] == "guilds" and parts[2] == "members"
        if guild_member and parts[1] in self.guild_names:
            return self._guild_member(parts[3])
        if parts[0] == "interactions" and parts[-1] == "callback":
            return await self._callback(request, parts[1], parts[2], acting)
        if parts[0] == "webhooks":
            return await self._webhook_route(request, parts[1:], acting)
        if parts[0] == "channels":
            return await self._channel_route(request, parts[1], parts[2:], acting)
        return json_response({"message": f"no fake for {method} {path}", "code": 0}, 404)

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
            self.commands = [_as_stored(c) for c in await request.json()]
        return json_response(
            [
                {**c, "id": str(i + 1), "application_id": self.bot.id, "version": "1"}
                for i, c in enumerate(self.commands)
            ]
        )

    def _guild_member(self, user_id: str) -> web.Response:
        user = self._fake_user(user_id)
        if user is None:
            return error_response(404, 10013)
        if not self._is_member(user_id):
            return error_response(404, 10007)
        return json_response(self._member(user))

    async def _channel_route(
        self, request: web.Request, channel_id: str, rest: list[str], acting: FakeUser
    ) -> web.StreamResponse:
        method = request.method
        if channel_id not in self.channels:
            return error_response(404, 10003)
        self._check(channel_id, "VIEW_CHANNEL", code=50001)
        if not rest and method == "GET":
            return json_response(self._channel_payload(channel_id))
        if rest == ["typing"]:
            self._check(channel_id, "SEND_MESSAGES")
            return web.Response(status=204)
        if rest == ["webhooks"]:
            return await self._channel_webhooks(request, channel_id, acting)
        if rest[:2] == ["messages", "pins"]:
            return await self._pins(request, channel_id, rest[2:])
        if rest == ["messages"] and method == "GET":
            return json_response(self._history(channel_id, request.query))
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
            raise Refusal(403, code)

    def _find(self, channel_id: str, message_id: str) -> dict[str, Any]:
        found = next((m for m in self.channels[channel_id] if m["id"] == message_id), None)
        if found is None:
            raise Refusal(404, 10008)
        return found

    async def _one_message(
        self, request: web.Request, channel_id: str, message_id: str, acting: FakeUser
    ) -> web.StreamResponse:
        message = self._find(channel_id, message_id)
        if request.method == "GET":
            self._check(channel_id, "READ_MESSAGE_HISTORY", code=50001)
            return json_response(self._readable(message))
        if request.method == "DELETE":
            if message["author"]["id"] != acting.id:
                if not self._in_guild(channel_id):
                    raise Refusal(403, 50003)
                self._check(channel_id, "MANAGE_MESSAGES")
            await self.delete(message)
            return web.Response(status=204)
        if request.method == "PATCH":
            if message["author"]["id"] != acting.id:
                raise Refusal(403, 50005)
            self._apply_edit(message, *await body_and_files(request), route="edit")
            await self.dispatch("MESSAGE_UPDATE", self._event_message(message))
            return json_response(message)
        raise KeyError(request.method)

    def _apply_edit(
        self,
        message: dict[str, Any],
        body: dict[str, Any],
        files: Sequence[Upload] = (),
        *,
        route: str,
    ) -> None:
        """An edit changes what it names; flags only in their editable bits. With
        ``attachments`` the message keeps exactly the earlier files listed there, plus the
        new uploads (Discord's "Editing Message Attachments"). New content is parsed for
        mentions under the edit's ``allowed_mentions`` (see ``mention_rules``)."""
        rules = mention_rules(body, PARSE_ALL if route == "edit" else PARSE_USERS)
        for key in ("content", "components"):
            if body.get(key) is not None:
                message[key] = body[key]
        if body.get("attachments") is not None or files:
            kept = set(kept_attachments(body, files))
            earlier = [a for a in message["attachments"] if a["id"] in kept]
            if len(earlier) != len(kept):
                raise Refusal(400, 50035)
            message["attachments"] = earlier + [self._uploaded(u) for u in files]
        if body.get("embeds") is not None:
            names = [a["filename"] for a in message["attachments"]]
            if embeds_refused(body["embeds"], names):
                raise Refusal(400, 50035)
            message["embeds"] = shown_embeds(body["embeds"], message["attachments"])
        if body.get("flags") is not None:
            kept = message["flags"] & ~EDITABLE_FLAGS
            message["flags"] = kept | (int(body["flags"]) & EDITABLE_FLAGS)
        if body.get("content") is not None or body.get("allowed_mentions") is not None:
            self._mention(message, route, rules)
        message["edited_timestamp"] = now()

    async def _pins(self, request: web.Request, channel_id: str, rest: list[str]) -> web.Response:
        if rest:  # PUT / DELETE /channels/{c}/messages/pins/{m}
            message = self._find(channel_id, rest[0])
            if request.method == "PUT":
                await self.pin(message, by=self._acting(request.headers["Authorization"]))
            else:
                message["pinned"] = False
            return web.Response(status=204)
        if self.denied.get(channel_id, 0) & PERMISSIONS["READ_MESSAGE_HISTORY"]:
            return json_response({"items": [], "has_more": False})  # no pins, and no error
        pinned = sorted(
            (m for m in self.channels[channel_id] if m["pinned"]),
            key=lambda m: m["pinned_at"],
            reverse=True,
        )
        if "before" in request.query:
            pinned = [m for m in pinned if m["pinned_at"] < request.query["before"]]
        limit = int(request.query.get("limit", 50))
        items = [{"pinned_at": m["pinned_at"], "message": self._readable(m)} for m in pinned]
        return json_response({"items": items[:limit], "has_more": len(items) > limit})

    def _search(self, guild_id: str, query: Any, acting: FakeUser) -> web.Response:
        """Search Guild Messages, as Discord documents it (2026-03): filters ``mentions``,
        ``author_id``, ``channel_id`` (each repeatable), ``min_id``/``max_id``; ``limit`` up
        to 25, ``offset``; newest first unless ``sort_order=asc``. Only channels where the
        app has View Channel and Read Message History; only with the Message Content
        intent (403 without it). A guild not indexed yet answers 202 with code 110000."""
        if guild_id not in self.guild_names:
            return error_response(404, 10004)  # Unknown Guild
        if not self.message_content_intent:
            return error_response(403, 50001)
        if not self.search_indexed:
            body = {
                "message": "Index not yet available. Try again later",
                "code": 110000,
                "documents_indexed": 0,
                "retry_after": 2,
            }
            return json_response(body, 202)
        self.searches.append(dict(query))
        found = [m for m in self._searchable(guild_id) if _matches(m, query)]
        found.sort(key=lambda m: int(m["id"]), reverse=query.get("sort_order") != "asc")
        limit = min(int(query.get("limit", 25)), 25)
        offset = int(query.get("offset", 0))
        page = found[offset : offset + limit]
        return json_response(
            {
                "doing_deep_historical_index": False,
                "total_results": len(found),
                "messages": [[self._readable(m) | {"guild_id": guild_id}] for m in page],
                "threads": [],
                "members": [],
            }
        )

    def _searchable(self, guild_id: str) -> list[dict[str, Any]]:
        readable = PERMISSIONS["VIEW_CHANNEL"] | PERMISSIONS["READ_MESSAGE_HISTORY"]
        return [
            message
            for channel_id, messages in self.channels.items()
            if self._in_guild(channel_id)
            and self.guild_of(channel_id) == guild_id
            and not self.denied.get(channel_id, 0) & readable
            for message in messages
        ]

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
        if any(self.dm_channels.get(u) == channel_id for u in self.dms_closed):
            return error_response(403, 50007)
        body, files = await body_and_files(request)
        nonce = body.get("nonce")
        if nonce is not None and len(str(nonce)) > MAX_NONCE:
            return error_response(400, 50035)
        # enforce_nonce: a message this author made with the same nonce comes back instead
        # (Discord keeps them a few minutes; the fake for its whole life).
        seen = f"{acting.id}:{nonce}"
        if nonce and body.get("enforce_nonce") and seen in self._nonces:
            return json_response(self._nonces[seen])  # Discord's answer to a retried send
        content = body.get("content") or ""
        rules = mention_rules(body, PARSE_ALL)
        embeds = body.get("embeds") or []
        names = [u.filename for u in files]
        if len(content) > MAX_CONTENT or embeds_refused(embeds, names):
            return error_response(400, 50035)
        if kept_attachments(body, files):  # a placeholder naming no uploaded file
            return error_response(400, 50035)
        if not (content or embeds or files or body.get("components")):
            return error_response(400, 50006)
        reference = body.get("message_reference")
        replied = self._replied(channel_id, reference) if reference else None
        flags = int(body.get("flags") or 0) & SETTABLE_FLAGS
        message = self._new_message(channel_id, acting, content, reply_to=replied, flags=flags)
        self._mention(message, "message", rules, replied)
        if nonce is not None:
            message["nonce"] = nonce
            self._nonces[seen] = message
        message["components"] = body.get("components") or []
        self._attach(message, body, files)
        return json_response(await self._publish(message))

    def _attach(
        self, message: dict[str, Any], body: dict[str, Any], files: Sequence[Upload]
    ) -> None:
        """A new message's uploads and embeds, as Discord stores them."""
        message["attachments"] = [self._uploaded(u) for u in files]
        message["embeds"] = shown_embeds(body.get("embeds") or [], message["attachments"])

    def _uploaded(self, upload: Upload) -> dict[str, Any]:
        attachment = self._attachment(upload.filename, upload.content_type, upload.data)
        if upload.description is not None:
            attachment["description"] = upload.description
        return attachment

    def _replied(self, channel_id: str, reference: dict[str, Any]) -> dict[str, Any] | None:
        self._check(channel_id, "READ_MESSAGE_HISTORY", code=160002)
        found = next(
            (m for m in self.channels[channel_id] if m["id"] == str(reference["message_id"])),
            None,
        )
        if found is None or found["type"] not in (DEFAULT, REPLY, COMMAND):
            if reference.get("fail_if_not_exists", True):  # the reply must exist, or no post
                unknown = {
                    "code": "MESSAGE_REFERENCE_UNKNOWN_MESSAGE",
                    "message": "Unknown message",
                }
                raise Refusal(400, 50035, {"message_reference": {"_errors": [unknown]}})
            return None  # posted as a plain message, with no reference
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
                "guild_id": self.guild_of(channel_id),
                "user": acting.payload(),
                "token": f"hook-token-{hook_id}",
                "application_id": acting.id,
                "avatar": None,
            }
            self.webhooks.append(hook)
            return json_response(hook)
        return json_response([h for h in self.webhooks if h["channel_id"] == channel_id])

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
            return error_response(404, 10015)
        if request.method != "POST" or len(rest) != 2:
            raise KeyError(rest)
        body, files = await body_and_files(request)
        rules = mention_rules(body, PARSE_USERS)
        self.webhook_posts.append(body)
        channel_id = request.query.get("thread_id") or hook["channel_id"]
        author = FakeUser(hook["id"], body.get("username") or hook["name"], bot=True)
        flags = int(body.get("flags") or 0) & SETTABLE_FLAGS
        message = self._new_message(channel_id, author, body.get("content", ""), flags=flags)
        self._mention(message, "webhook", rules)
        message["webhook_id"] = hook["id"]
        message["application_id"] = hook["application_id"]
        self._attach(message, body, files)
        await self._publish(message)
        if request.query.get("wait") in {"1", "true", "True"}:
            return json_response(message)
        return web.Response(status=204)

    async def _callback(
        self, request: web.Request, interaction_id: str, token: str, acting: FakeUser
    ) -> web.StreamResponse:
        pending = self._interactions.get(interaction_id)
        if pending is None or pending.token != token:
            return error_response(404, 10062)
        if pending.responded:
            return error_response(400, 40060)
        body, files = await body_and_files(request)
        kind, data = int(body["type"]), body.get("data") or {}
        if kind == 9 and not _modal_ok(pending, data):
            return error_response(400, 50035)
        pending.responded = True
        self.interaction_responses.append(body)
        if kind == 9:  # the person sees the form; ``submit_modal`` sends it back
            self.modals.append((pending, data))
        message: dict[str, Any] | None = None
        if kind in (4, 5):
            flags = int(data.get("flags") or 0) & INTERACTION_FLAGS
            flags |= LOADING if kind == 5 else 0
            message = await self._respond(pending, acting, data, files, flags, route="interaction")
        elif kind == 7 and pending.message_id is not None:
            message = self._find(pending.channel_id, pending.message_id)
            self._apply_edit(message, data, files, route="interaction")
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
        return json_response(answer)

    async def _respond(
        self,
        pending: PendingInteraction,
        acting: FakeUser,
        data: dict[str, Any],
        files: Sequence[Upload],
        flags: int,
        *,
        route: str,
    ) -> dict[str, Any]:
        """A message made by an interaction response or follow-up (its files as a
        create's); an ephemeral one is seen only by who used the interaction, so it is in
        no channel and no event."""
        content = data.get("content") or ""
        rules = mention_rules(data, PARSE_USERS)
        if len(content) > MAX_CONTENT or kept_attachments(data, files):
            raise Refusal(400, 50035)
        if embeds_refused(data.get("embeds") or [], [u.filename for u in files]):
            raise Refusal(400, 50035)
        kind = COMMAND if pending.kind == 2 else DEFAULT
        message = self._new_message(pending.channel_id, acting, content, kind=kind, flags=flags)
        self._attach(message, data, files)
        self._mention(message, route, rules)
        message["application_id"] = acting.id
        message["webhook_id"] = acting.id
        pending.original = pending.original or message["id"]
        if flags & EPHEMERAL:
            self._ephemeral[message["id"]] = message
            return message
        return await self._publish(message)

    async def _interaction_webhook(
        self, request: web.Request, pending: PendingInteraction, rest: list[str], acting: FakeUser
    ) -> web.StreamResponse:
        """Follow-ups (POST) and the original response (GET / PATCH …/messages/@original)."""
        if request.method == "POST" and not rest:
            body, files = await body_and_files(request)
            flags = int(body.get("flags") or 0) & INTERACTION_FLAGS
            made = await self._respond(pending, acting, body, files, flags, route="follow-up")
            return json_response(made)
        if rest[:1] != ["messages"] or len(rest) != 2:
            raise KeyError(rest)
        message_id = pending.original if rest[1] == "@original" else rest[1]
        message = self._ephemeral.get(message_id or "") or self._find(
            pending.channel_id, message_id or ""
        )
        if request.method == "PATCH":
            self._apply_edit(message, *await body_and_files(request), route="original")
            message["flags"] &= ~LOADING
            if message["id"] not in self._ephemeral:
                await self.dispatch("MESSAGE_UPDATE", self._event_message(message))
        return json_response(message)


def _modal_ok(pending: PendingInteraction, data: dict[str, Any]) -> bool:
    """A modal as Discord takes one: not in answer to a modal's submission, a title of at
    most 45 characters, 1 to 5 components, each text input labelled in at most 45."""
    rows = data.get("components") or []
    inputs = [c for row in rows for c in row.get("components") or [row.get("component") or {}]]
    return (
        pending.kind != 5
        and 0 < len(str(data.get("title") or "")) <= 45
        and 1 <= len(rows) <= 5
        and all(0 < len(str(c.get("label") or "")) <= 45 for c in inputs if c.get("type") == 4)
    )


def _matches(message: dict[str, Any], query: Any) -> bool:
    """Whether a message passes a search's filters (each list filter: any of its values)."""
    mentions = query.getall("mentions", [])
    if mentions and not {u["id"] for u in message["mentions"]} & set(mentions):
        return False
    authors = query.getall("author_id", [])
    if authors and message["author"]["id"] not in authors:
        return False
    channels = query.getall("channel_id", [])
    if channels and message["channel_id"] not in channels:
        return False
    if "min_id" in query and int(message["id"]) <= int(query["min_id"]):
        return False
    return not ("max_id" in query and int(message["id"]) >= int(query["max_id"]))
