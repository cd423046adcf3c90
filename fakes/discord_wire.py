"""What Discord's API looks like on the wire, for the fake Discord: constants from
Discord's reference (message types and flags, permissions, JSON error codes), user
objects, error bodies and JSON answers."""

from __future__ import annotations

import json
import mimetypes
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

GUILD_ID = "1"
SYSTEM_CHANNEL = "10"
# Application flags: GATEWAY_MESSAGE_CONTENT_LIMITED is the portal's switch of an app in
# fewer than 100 servers (GATEWAY_MESSAGE_CONTENT, 1 << 18, is a verified app's grant).
APP_FLAGS_MESSAGE_CONTENT = 1 << 19
INTENT_MESSAGE_CONTENT = 1 << 15  # privileged: IDENTIFY asking it without the flag: 4014
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
    "MENTION_EVERYONE": 1 << 17,
    "MANAGE_CHANNELS": 1 << 4,
    "ADMINISTRATOR": 1 << 3,
}
ALL_PERMISSIONS = (1 << 41) - 1
# What an ordinary member may do (the bits of Discord's permission table): create invites,
# add reactions, view channels, send messages, embed links, attach files, read history,
# external emojis, connect, speak, change nickname, use application commands, public
# threads, send in threads; not Administrator, Manage Channels or Mention Everyone.
MEMBER_PERMISSIONS = sum(1 << bit for bit in (0, 6, 10, 11, 14, 15, 16, 18, 20, 21, 26, 31, 35, 38))

ERRORS = {  # JSON error codes and their messages, as Discord words them
    0: "General error",
    10003: "Unknown Channel",
    10007: "Unknown Member",
    10008: "Unknown Message",
    10013: "Unknown User",
    10015: "Unknown Webhook",
    10062: "Unknown interaction",
    40005: "Request entity too large",
    40060: "Interaction has already been acknowledged.",
    50001: "Missing Access",
    50003: "Cannot execute action on a DM channel",
    50005: "Cannot edit a message authored by another user",
    50006: "Cannot send an empty message",
    50007: "Cannot send messages to this user",
    50013: "Missing Permissions",
    50033: "Invalid Recipient(s)",
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


class NotOffered(Exception):
    """Discord does not offer a command to someone: they lack a permission its
    ``default_member_permissions`` names, so they cannot run it."""


class Refusal(Exception):
    """An HTTP error answer, raised from deep in a route."""

    def __init__(self, status: int, code: int, errors: dict[str, Any] | None = None) -> None:
        super().__init__(status, code)
        self.status, self.code = status, code
        self.errors = errors  # an Invalid Form Body's field errors, as Discord lists them


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
    via: bool = True  # a 429 without Via is what discord.py takes for a Cloudflare ban


@dataclass
class PendingInteraction:
    token: str
    kind: int  # 2 application command, 3 message component
    channel_id: str
    message_id: str | None  # the message whose component was used
    responded: bool = False
    original: str | None = None  # id of the message the response created


@dataclass(frozen=True)
class Upload:
    """A file of a multipart request: its ``files[n]`` index, name, type, bytes and the
    description its ``attachments`` entry gave."""

    index: int
    filename: str
    content_type: str
    data: bytes
    description: str | None = None


MAX_UPLOAD = 25 * 1024 * 1024  # all files of one request together, without boosts
_FILE_PART = re.compile(r"files\[(\d+)\]")


async def body_and_files(request: web.Request) -> tuple[dict[str, Any], list[Upload]]:
    """The JSON body and the uploaded files, as Discord's "Uploading Files" reference has
    them: a multipart body whose ``payload_json`` part (or plain form fields) is the JSON
    body, and one ``files[n]`` part per file, each with a ``filename`` and a unique ``n``,
    the snowflake placeholder an ``attachments`` entry of the body may name (its
    ``filename`` and ``description`` then win). A file part named otherwise or a repeated
    ``n`` is an Invalid Form Body (400, 50035); more than 25 MiB in all is 413 (40005)."""
    if not request.content_type.startswith("multipart/"):
        return await request.json(), []
    body: dict[str, Any] = {}
    parts: dict[int, Upload] = {}
    async for part in await request.multipart():
        if part.name == "payload_json":
            body = json.loads(await part.text())  # type: ignore[union-attr]
            continue
        named = _FILE_PART.fullmatch(part.name or "")
        filename = part.filename  # type: ignore[union-attr]
        if named is None and not filename:
            body[part.name or ""] = await part.text()  # type: ignore[union-attr]
            continue
        if named is None or not filename or int(named[1]) in parts:
            raise Refusal(400, 50035)
        data = bytes(await part.read())  # type: ignore[union-attr]
        kind = part.headers.get("Content-Type", "application/octet-stream")
        if kind == "application/octet-stream":  # Discord sniffs what a file is
            kind = mimetypes.guess_type(filename)[0] or kind
        parts[int(named[1])] = Upload(int(named[1]), filename, kind, data)
    if sum(len(u.data) for u in parts.values()) > MAX_UPLOAD:
        raise Refusal(413, 40005)
    return body, _described(body, parts)


def _described(body: dict[str, Any], parts: dict[int, Upload]) -> list[Upload]:
    """The uploads with the filename and description their ``attachments`` entry gives."""
    entries = {str(e.get("id", "")): e for e in body.get("attachments") or []}
    uploads = []
    for index, upload in sorted(parts.items()):
        entry = entries.get(str(index), {})
        name = str(entry.get("filename") or upload.filename)
        kind, data, said = upload.content_type, upload.data, entry.get("description")
        uploads.append(Upload(index, name, kind, data, said))
    return uploads


def kept_attachments(body: dict[str, Any], uploads: Sequence[Upload]) -> list[str]:
    """The ids an ``attachments`` list names besides the new uploads' placeholders: the
    earlier attachments an edit keeps (a create may name none)."""
    new = {str(u.index) for u in uploads}
    return [str(e.get("id")) for e in body.get("attachments") or [] if str(e.get("id")) not in new]


MAX_EMBEDS = 10
MAX_EMBED_TOTAL = 6000
_EMBED_LIMITS = {"title": 256, "description": 4096}
_ATTACHABLE = (".png", ".jpg", ".jpeg", ".gif", ".webp")
_ATTACHMENT_NAME = re.compile(r"[A-Za-z0-9._-]+")  # "ASCII alphanumeric with _, - or ."


def _embed_texts(embed: dict[str, Any]) -> list[tuple[str, int]]:
    """(text, limit) of every counted field of an embed, trimmed as Discord trims them."""
    texts = [(str(embed.get(k) or "").strip(), n) for k, n in _EMBED_LIMITS.items()]
    texts.append((str((embed.get("footer") or {}).get("text") or "").strip(), 2048))
    texts.append((str((embed.get("author") or {}).get("name") or "").strip(), 256))
    for item in embed.get("fields") or []:
        texts += [
            (str(item.get("name", "")).strip(), 256),
            (str(item.get("value", "")).strip(), 1024),
        ]
    return texts


def embeds_refused(embeds: list[dict[str, Any]], files: list[str]) -> bool:
    """Discord's embed limits: at most 10 embeds, the per-field lengths, 25 fields, 6000
    characters across all; links are http(s) URLs, and an image may be
    ``attachment://name`` of a file uploaded with the message (jpg, png, gif, webp; the name
    ASCII letters, digits, ``_``, ``-`` and ``.``). (What
    Discord does with an ``attachment://`` name that was not uploaded, or one with other
    characters, is undocumented; the fake refuses it, so a wrong name fails a test.)"""
    if len(embeds) > MAX_EMBEDS:
        return True
    total = 0
    for embed in embeds:
        texts = _embed_texts(embed)
        if any(len(t) > n for t, n in texts) or len(embed.get("fields") or []) > 25:
            return True
        total += sum(len(t) for t, _ in texts)
        url = embed.get("url")
        if url is not None and not str(url).startswith(("http://", "https://")):
            return True
        image = str((embed.get("image") or {}).get("url") or "https://")
        if image.startswith("attachment://"):
            name = image.removeprefix("attachment://")
            if name not in files or not name.lower().endswith(_ATTACHABLE):
                return True
            if _ATTACHMENT_NAME.fullmatch(name) is None:
                return True
        elif not image.startswith(("http://", "https://")):
            return True
    return total > MAX_EMBED_TOTAL


def shown_embeds(embeds: list[dict[str, Any]], attachments: list[dict[str, Any]]) -> list[Any]:
    """Embeds as Discord returns them: ``type`` rich, an ``attachment://`` image pointing at
    the uploaded file."""
    by_name = {a["filename"]: a for a in attachments}
    shown = []
    for given in embeds:
        embed = {**given, "type": "rich"}
        image = str((embed.get("image") or {}).get("url") or "")
        if image.startswith("attachment://"):
            file = by_name[image.removeprefix("attachment://")]
            embed["image"] = {"url": file["url"], "proxy_url": file["proxy_url"]}
        shown.append(embed)
    return shown


# Allowed mentions (Discord's "Allowed Mentions Object"). Without the field a channel
# message parses every kind of mention; interaction responses, follow-ups and webhooks
# parse only users. (What an edit without the field does is undocumented: the fake applies
# the route's default, so a client that leaves it out of an edit is caught.)
# (Without the field a reply notifies the author replied to; with it, only replied_user.)
PARSE_ALL: dict[str, Any] = {"parse": ["users", "roles", "everyone"], "replied_user": True}
PARSE_USERS: dict[str, Any] = {"parse": ["users"], "replied_user": True}
_MENTION_TYPES = {"users", "roles", "everyone"}
_MAX_MENTION_IDS = 100
_USER_MENTION = re.compile(r"<@!?(\d+)>")
_ROLE_MENTION = re.compile(r"<@&(\d+)>")
_EVERYONE_MENTION = re.compile(r"@(?:everyone|here)")


@dataclass(frozen=True)
class Pinged:
    """Who one message created or edited through a route notifies: ``route`` is
    ``message``, ``edit``, ``webhook``, ``interaction``, ``follow-up`` or ``original``."""

    route: str
    message_id: str
    content: str
    users: frozenset[str]
    roles: frozenset[str]
    everyone: bool  # @everyone or @here


def mention_rules(body: dict[str, Any], default: dict[str, Any]) -> dict[str, Any]:
    """The request's ``allowed_mentions`` (the route's default without one). An object
    Discord refuses is an Invalid Form Body (400, 50035): an unknown type in ``parse``,
    ``parse`` naming ``users`` (``roles``) beside a non-empty ``users`` (``roles``) list
    (documented as mutually exclusive), more than 100 ids, a non-boolean ``replied_user``."""
    given = body.get("allowed_mentions")
    if given is None:
        return default
    if not isinstance(given, dict):
        raise Refusal(400, 50035)
    parse = given.get("parse") or []
    if not isinstance(parse, list) or not set(parse) <= _MENTION_TYPES:
        raise Refusal(400, 50035)
    for kind in ("users", "roles"):
        ids = given.get(kind) or []
        if not isinstance(ids, list) or len(ids) > _MAX_MENTION_IDS:
            raise Refusal(400, 50035)
        if ids and kind in parse:
            raise Refusal(400, 50035)
    if not isinstance(given.get("replied_user", False), bool):
        raise Refusal(400, 50035)
    return dict(given)


def pinged_by(
    content: str,
    rules: dict[str, Any],
    *,
    users: set[str],
    roles: set[str],
    everyone: bool,
    replied: str | None = None,
) -> tuple[frozenset[str], frozenset[str], bool]:
    """(user ids, role ids, @everyone/@here) that ``content`` notifies under ``rules``:
    only mentions present in the content count (no phantom pings); ``users`` are the
    accounts that exist, ``roles`` those the sender may ping (mentionable, or it has
    Mention Everyone), ``everyone`` whether it may ping @everyone; ``replied`` is the
    author of the message replied to (pinged by default, else with ``replied_user``)."""
    parse = set(rules.get("parse") or [])
    named_users = set(_USER_MENTION.findall(content)) & users
    named_roles = set(_ROLE_MENTION.findall(content)) & roles
    listed_users = {str(i) for i in rules.get("users") or []}
    listed_roles = {str(i) for i in rules.get("roles") or []}
    notified = named_users if "users" in parse else named_users & listed_users
    if replied is not None and rules.get("replied_user", False):
        notified |= {replied}
    chosen_roles = named_roles if "roles" in parse else named_roles & listed_roles
    said_everyone = _EVERYONE_MENTION.search(content) is not None
    return (
        frozenset(notified),
        frozenset(chosen_roles),
        everyone and said_everyone and "everyone" in parse,
    )


def now() -> str:
    return datetime.now(UTC).isoformat()


def error_response(status: int, code: int, errors: dict[str, Any] | None = None) -> web.Response:
    body: dict[str, Any] = {"message": ERRORS.get(code, "General error"), "code": code}
    if errors is not None:
        body["errors"] = errors
    return json_response(body, status)


def json_response(
    data: Any, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    # discord.py checks for this exact content type before parsing a body as JSON, and
    # reads a 429 as Discord's (not a Cloudflare ban) only when ``Via`` is present.
    body = json.dumps(data).encode()
    extra = {"Content-Type": "application/json", "Via": "1.1 google", **(headers or {})}
    return web.Response(body=body, status=status, headers=extra)
