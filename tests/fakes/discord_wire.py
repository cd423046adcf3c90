"""What Discord's API looks like on the wire, for the fake Discord: constants from
Discord's reference (message types and flags, permissions, JSON error codes), user
objects, error bodies and JSON answers."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

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
DEFAULT_CODE = {400: 50035, 403: 50013, 404: 10008}


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


class Refusal(Exception):
    """An HTTP error answer, raised from deep in a route."""

    def __init__(self, status: int, code: int) -> None:
        super().__init__(status, code)
        self.status, self.code = status, code


@dataclass
class Failure:
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
class PendingInteraction:
    token: str
    kind: int  # 2 application command, 3 message component
    channel_id: str
    message_id: str | None  # the message whose component was used
    responded: bool = False
    original: str | None = None  # id of the message the response created


async def body_and_files(request: web.Request) -> tuple[dict[str, Any], list[Any]]:
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


def mentions_user(content: str, user_id: str) -> bool:
    return f"<@{user_id}>" in content or f"<@!{user_id}>" in content


def now() -> str:
    return datetime.now(UTC).isoformat()


def error_response(status: int, code: int) -> web.Response:
    return json_response({"message": ERRORS.get(code, "General error"), "code": code}, status)


def json_response(
    data: Any, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    # discord.py checks for this exact content type before parsing a body as JSON, and
    # reads a 429 as Discord's (not a Cloudflare ban) only when ``Via`` is present.
    body = json.dumps(data).encode()
    extra = {"Content-Type": "application/json", "Via": "1.1 google", **(headers or {})}
    return web.Response(body=body, status=status, headers=extra)
