"""The Web API half of the fake Slack (``slack_server.py``): one method each of the calls
Salon makes, answered and refused as Slack's method pages say. A post's message metadata
is kept with it and shown by the history only with ``include_all_metadata``."""

from __future__ import annotations

import base64
import json
import re
import uuid
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_TEXT", "SlackError", "Upload", "WebApi"]

MAX_TEXT = 40_000  # chat.postMessage: "truncated" past this; the API refuses msg_too_long
MAX_BLOCKS = 50
MAX_SECTION_TEXT = 3000
_BLOCK_TYPES = {"section", "actions", "context", "divider", "header", "image", "rich_text"}
_PINGS = re.compile(r"<!(channel|here|everyone)(?:\|[^>]*)?>|<!subteam\^(\w+)(?:\|[^>]*)?>")
_LINK_NAMES = re.compile(r"(?<![\w<])@(channel|here|everyone)\b")
_EMOJI = re.compile(r"^[a-z0-9_+'-]{1,100}$")
TEAM, APP = "T0FAKE", "A0FAKE"


class SlackError(Exception):
    def __init__(self, error: str) -> None:
        super().__init__(error)
        self.error = error


@dataclass(frozen=True)
class Upload:
    """A file the bot uploaded and shared (files.completeUploadExternal)."""

    id: str
    name: str
    data: bytes
    channel: str
    thread_ts: str | None


class WebApi:
    """The Web API's methods, mixed into ``SlackServer`` (whose state they use)."""

    channels: dict[str, Any]
    users: dict[str, Any]
    pings: list[tuple[str, str]]
    scopes: set[str]
    port: int
    pending: dict[str, dict[str, Any]]  # file id -> name, length, data once POSTed
    uploads: list[Upload]

    async def _m_apps_connections_open(self, params: dict[str, Any]) -> dict[str, Any]:
        await self._connections_open.wait()  # type: ignore[attr-defined]
        ticket = uuid.uuid4().hex
        self._tickets.add(ticket)
        return {"url": f"ws://127.0.0.1:{self.port}/link/?ticket={ticket}&app_id={APP}"}

    async def _m_auth_test(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": "https://fake.slack.com/",
            "team": "Fake",
            "user": self.bot.name,
            "team_id": TEAM,
            "user_id": self.bot.id,
            "bot_id": "B0BOT",
            "is_enterprise_install": False,
        }

    async def _m_users_info(self, params: dict[str, Any]) -> dict[str, Any]:
        user = self.users.get(str(params.get("user", "")))
        if user is None:
            raise SlackError("user_not_found")
        profile = {"display_name": user.name, "real_name": user.name}
        return {
            "user": {
                "id": user.id,
                "name": user.name.lower(),
                "real_name": user.name,
                "is_bot": user.is_bot,
                "profile": profile,
            }
        }

    async def _m_conversations_info(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._visible(params)
        return {
            "channel": {
                "id": channel.id,
                "name": channel.name,
                "is_channel": not channel.is_im and not channel.is_private,
                "is_group": channel.is_private,
                "is_im": channel.is_im,
                "is_private": channel.is_private or channel.is_im,
                "is_member": self.bot.id in channel.members,
                "context_team_id": TEAM,
                # Slack Connect: shared with (here: hosted by) another organization.
                "is_shared": channel.ext_shared,
                "is_ext_shared": channel.ext_shared,
                "conversation_host_id": channel.host,
                "shared_team_ids": sorted({TEAM, channel.host}),
            }
        }

    async def _m_conversations_members(self, params: dict[str, Any]) -> dict[str, Any]:
        """The member ids, a page (``limit``, up to 999; ``cursor``) at a time."""
        channel = self._visible(params)
        needed = "im:read" if channel.is_im else "groups:read" if channel.is_private else None
        needed = needed or "channels:read"
        if needed not in self.scopes:
            raise SlackError("missing_scope")
        limit = int(params.get("limit") or 100)
        if not 1 <= limit <= 999:
            raise SlackError("invalid_limit")
        cursor = str(params.get("cursor") or "")
        start = int(base64.b64decode(cursor).decode().removeprefix("member:")) if cursor else 0
        members = sorted(channel.members)
        more = start + limit < len(members)
        after = base64.b64encode(f"member:{start + limit}".encode()).decode() if more else ""
        page = members[start : start + limit]
        return {"members": page, "response_metadata": {"next_cursor": after}}

    def _visible(self, params: dict[str, Any]) -> Any:
        """A public channel is seen from outside; a private one or a DM only by members
        (to anyone else it does not exist: ``channel_not_found``)."""
        channel = self.channels.get(str(params.get("channel", "")))
        if channel is None:
            raise SlackError("channel_not_found")
        if (channel.is_im or channel.is_private) and self.bot.id not in channel.members:
            raise SlackError("channel_not_found")
        return channel

    async def _m_conversations_open(self, params: dict[str, Any]) -> dict[str, Any]:
        """The DM of the bot and one person (``users``), the same one each time; a bot
        token needs im:write. (Group DMs, several ``users``, are not faked.)"""
        if "im:write" not in self.scopes:
            raise SlackError("missing_scope")
        users = [u for u in str(params.get("users") or "").split(",") if u]
        if not users:
            raise SlackError("users_list_not_supplied")
        if len(users) > 1:
            raise SlackError("not_faked")
        user = self.users.get(users[0])
        if user is None:
            raise SlackError("user_not_found")
        return {"channel": {"id": self.im(user)}}  # type: ignore[attr-defined]

    async def _m_chat_postMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._readable(params)
        text, blocks = self._content(params)
        thread = params.get("thread_ts") or None
        if thread is not None:
            self._find(channel.id, str(thread))
        metadata = _metadata(params)
        message = self._store(channel.id, self.bot, text, thread_ts=thread, blocks=blocks)
        if metadata is not None:
            message["metadata"] = metadata
        self._record_pings(message["ts"], text, blocks, params)
        await self._event(channel.id, {**message, "bot_id": "B0BOT"})
        return {"channel": channel.id, "ts": message["ts"], "message": message}

    async def _m_chat_update(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._readable(params)
        message = self._find(channel.id, str(params.get("ts", "")))
        if message.get("user") != self.bot.id:
            raise SlackError("cant_update_message")
        text, blocks = self._content(params)
        before = dict(message)
        message["text"] = text
        message["blocks"] = blocks
        message["edited"] = {"user": self.bot.id, "ts": self._next_ts()}
        self._record_pings(message["ts"], text, blocks, params)
        await self._event(channel.id, self._changed_event(channel.id, message, before))
        return {"channel": channel.id, "ts": message["ts"], "text": text}

    async def _m_chat_delete(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._readable(params)
        ts = str(params.get("ts", ""))
        message = self._find(channel.id, ts)
        if message.get("user") != self.bot.id:
            raise SlackError("cant_delete_message")
        channel.messages.remove(message)
        return {"channel": channel.id, "ts": ts}

    async def _m_reactions_add(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._readable(params)
        message = self._find(channel.id, str(params.get("timestamp", "")))
        name = str(params.get("name", ""))
        if not _EMOJI.match(name):
            raise SlackError("invalid_name")
        reactions = message.setdefault("reactions", [])
        mine = next((r for r in reactions if r["name"] == name), None)
        if mine is not None and self.bot.id in mine["users"]:
            raise SlackError("already_reacted")
        if mine is None:
            reactions.append({"name": name, "users": [self.bot.id], "count": 1})
        else:
            mine["users"].append(self.bot.id)
            mine["count"] += 1
        return {}

    async def _m_conversations_history(self, params: dict[str, Any]) -> dict[str, Any]:
        """A channel's messages (thread replies only when broadcast) between ``oldest``
        and ``latest``, both excluded unless ``inclusive``; the most recent first, so a
        ``limit`` keeps the newest of the range (``has_more`` says there were more)."""
        channel = self._readable(params)
        tops = [
            m
            for m in channel.messages
            if m.get("thread_ts") in (None, m["ts"]) or m.get("subtype") == "thread_broadcast"
        ]
        newest_first = [self._shown(m, params) for m in reversed(_between(tops, params))]
        return self._page(newest_first, params, pin_count=len(channel.pins))

    async def _m_conversations_replies(self, params: dict[str, Any]) -> dict[str, Any]:
        """A thread, its root first, then its replies, the earliest first, within
        ``oldest`` and ``latest`` as for the history."""
        channel = self._readable(params)
        ts = str(params.get("ts", ""))
        parent = next((m for m in channel.messages if m["ts"] == ts), None)
        if parent is None:
            raise SlackError("thread_not_found")
        replies = [m for m in channel.messages if m.get("thread_ts") == ts and m["ts"] != ts]
        found = _between([parent, *replies], params)
        return self._page([self._shown(m, params) for m in found], params)

    async def _m_pins_list(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._readable(params)
        items = []
        for ts in reversed(channel.pins):
            message = next((m for m in channel.messages if m["ts"] == ts), None)
            if message is not None:
                pinned = {**message, "pinned_to": [channel.id]}
                items.append({"type": "message", "channel": channel.id, "message": pinned})
        return {"items": items}

    async def _m_files_getUploadURLExternal(self, params: dict[str, Any]) -> dict[str, Any]:
        """Step one of an upload: a file id and a URL to POST exactly ``length`` bytes to."""
        if "files:write" not in self.scopes:
            raise SlackError("missing_scope")
        name = str(params.get("filename") or "")
        length = str(params.get("length") or "")
        if not name or not length.isdigit() or int(length) < 1:
            raise SlackError("invalid_arguments")
        file_id = f"F{uuid.uuid4().hex[:10].upper()}"
        self.pending[file_id] = {"name": name, "length": int(length), "data": None}
        url = f"http://127.0.0.1:{self.port}/upload/v1/{file_id}"
        return {"upload_url": url, "file_id": file_id}

    async def _m_files_completeUploadExternal(self, params: dict[str, Any]) -> dict[str, Any]:
        """Step three: files whose bytes arrived are shared in ``channel_id`` (in the
        thread ``thread_ts`` names); an id never uploaded is ``file_not_found``."""
        if "files:write" not in self.scopes:
            raise SlackError("missing_scope")
        try:
            wanted = json.loads(str(params.get("files") or ""))
        except ValueError:
            raise SlackError("invalid_arguments") from None
        if not isinstance(wanted, list) or not wanted:
            raise SlackError("invalid_arguments")
        ids = [str(f.get("id", "")) if isinstance(f, dict) else "" for f in wanted]
        if any(self.pending.get(i, {}).get("data") is None for i in ids):
            raise SlackError("file_not_found")
        channel_id = str(params.get("channel_id") or "")
        thread = str(params.get("thread_ts") or "") or None
        if not channel_id:  # the files stay private to the bot: nothing is posted
            return {"files": [{"id": i, "name": self.pending.pop(i)["name"]} for i in ids]}
        channel = self._readable({"channel": channel_id})
        if thread is not None:
            self._find(channel.id, thread)
        text = str(params.get("initial_comment") or "")
        message = self._store(channel.id, self.bot, text, thread_ts=thread)
        message["subtype"] = "file_share"
        message["files"] = []
        for file_id in ids:
            done = self.pending.pop(file_id)
            shared = self._shared(done["name"], "application/octet-stream", done["data"])
            shared["id"] = file_id
            message["files"].append(shared)
            self.uploads.append(Upload(file_id, done["name"], done["data"], channel.id, thread))
        await self._event(channel.id, {**message, "bot_id": "B0BOT"})
        return {"files": message["files"]}

    # -- helpers -----------------------------------------------------------------------

    def _page(
        self, found: list[dict[str, Any]], params: dict[str, Any], **extra: Any
    ) -> dict[str, Any]:
        limit = max(1, min(int(params.get("limit") or 100), 999))
        cursor = str(params.get("cursor") or "")
        start = int(base64.b64decode(cursor).decode().removeprefix("next:")) if cursor else 0
        page = found[start : start + limit]
        more = start + limit < len(found)
        after = base64.b64encode(f"next:{start + limit}".encode()).decode() if more else ""
        return {
            "messages": page,
            "has_more": more,
            "response_metadata": {"next_cursor": after},
            **extra,
        }

    @staticmethod
    def _shown(message: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
        """Message metadata comes back only when asked for (``include_all_metadata``)."""
        if str(params.get("include_all_metadata", "")).lower() in ("1", "true"):
            return message
        return {k: v for k, v in message.items() if k != "metadata"}

    def _content(self, params: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
        text = str(params.get("text") or "")
        blocks = params.get("blocks") or []
        if isinstance(blocks, str):
            blocks = json.loads(blocks)
        if not text and not blocks:
            raise SlackError("no_text")
        if len(text) > MAX_TEXT:
            raise SlackError("msg_too_long")
        if not isinstance(blocks, list) or len(blocks) > MAX_BLOCKS:
            raise SlackError("invalid_blocks")
        for block in blocks:
            if not isinstance(block, dict) or block.get("type") not in _BLOCK_TYPES:
                raise SlackError("invalid_blocks")
            shown = block.get("text")
            if isinstance(shown, dict) and len(str(shown.get("text", ""))) > MAX_SECTION_TEXT:
                raise SlackError("invalid_blocks")
        return text, blocks

    def _record_pings(
        self, ts: str, text: str, blocks: list[dict[str, Any]], params: dict[str, Any]
    ) -> None:
        shown = text + json.dumps(blocks)
        for match in _PINGS.finditer(shown):
            self.pings.append((ts, match.group(1) or f"subteam^{match.group(2)}"))
        if str(params.get("link_names", "")).lower() in ("1", "true"):
            self.pings += [(ts, m.group(1)) for m in _LINK_NAMES.finditer(text)]


def _metadata(params: dict[str, Any]) -> dict[str, Any] | None:
    """A post's message metadata (an object, or its JSON in a form): an ``event_type``
    and an ``event_payload`` object, else ``invalid_metadata_format``."""
    metadata = params.get("metadata")
    if metadata is None or metadata == "":
        return None
    if isinstance(metadata, str):
        try:
            metadata = json.loads(metadata)
        except ValueError:
            raise SlackError("invalid_metadata_format") from None
    if (
        not isinstance(metadata, dict)
        or not isinstance(metadata.get("event_type"), str)
        or not metadata["event_type"]
        or not isinstance(metadata.get("event_payload"), dict)
    ):
        raise SlackError("invalid_metadata_format")
    return {"event_type": metadata["event_type"], "event_payload": metadata["event_payload"]}


def _between(messages: list[dict[str, Any]], params: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages within ``oldest`` and ``latest`` (timestamps; ``latest`` defaults to
    now, ``oldest`` to 0), the bounds themselves only when ``inclusive``; a bound that is
    no timestamp is ``invalid_ts_oldest`` or ``invalid_ts_latest``."""
    bounds = []
    for name in ("oldest", "latest"):
        value = str(params.get(name) or "")
        try:
            bounds.append(float(value) if value else None)
        except ValueError:
            raise SlackError(f"invalid_ts_{name}") from None
    oldest, latest = bounds
    inclusive = str(params.get("inclusive", "")).lower() in ("1", "true")

    def within(message: dict[str, Any]) -> bool:
        ts = float(message["ts"])
        above = oldest is None or ts > oldest or (inclusive and ts == oldest)
        below = latest is None or ts < latest or (inclusive and ts == latest)
        return above and below

    return [m for m in messages if within(m)]
