"""Who is who on Slack: names looked up once (``users.info``, kept in a bounded cache), and
Slack's message payloads converted into Salon's ``Message``."""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from salon.errors import PlatformError
from salon.model import ChannelRef, Message, Participant, Tag
from salon.platforms.slack.client import call
from salon.platforms.slack.files import attachments_of
from salon.platforms.slack.text import readable, user_mentions

__all__ = ["ANSWER_EVENT", "NOTE_EVENT", "People", "thread_of"]

logger = logging.getLogger(__name__)

NOTE_EVENT = "salon_note"  # message metadata marking Salon's own words (Tag.NOTE)
ANSWER_EVENT = "salon_answer"  # message metadata of an answer's first message, with its key
_NAMES = 5000


def thread_of(channel: ChannelRef) -> tuple[str, str | None]:
    """The Slack channel id and thread ts of a channel reference (a thread's id is
    ``C…-<thread ts>``)."""
    channel_id, _, thread = channel.id.partition("-")
    return channel_id, thread or None


class People:
    def __init__(
        self, *, client: Callable[[], AsyncWebClient], bot_name: str, monitored: set[str]
    ) -> None:
        self._client = client
        self._bot_name = bot_name
        self._monitored = monitored
        self._names: OrderedDict[str, tuple[str, bool]] = OrderedDict()
        self._asking = asyncio.Lock()
        self.me = Participant("", bot_name, is_bot=True)
        self.bot_id = ""

    def introduce(self, user_id: str, bot_id: str) -> None:
        self.me = Participant(user_id, self._bot_name, is_bot=True, roles=(user_id,))
        self.bot_id = bot_id

    def person(self, user_id: str) -> Participant:
        """Slack has no roles for a bot to read: a person's ``roles`` are their id and
        name, so ``authorized_roles`` lists Slack user ids (or names)."""
        if user_id == self.me.id:
            return self.me
        name, is_bot = self._names.get(user_id, (user_id, False))
        return Participant(user_id, name, is_bot=is_bot, roles=(user_id, name))

    async def learn(self, user_ids: set[str]) -> None:
        """Look up the names not known yet (a failure leaves the id as the name), one
        lookup at a time, so events arriving together ask for a person once."""
        if not user_ids - set(self._names) - {self.me.id, ""}:
            return
        async with self._asking:
            await self._look_up(user_ids - set(self._names) - {self.me.id, ""})

    async def _look_up(self, user_ids: set[str]) -> None:
        for user_id in user_ids:
            try:
                found = await call("look a user up", self._client().users_info(user=user_id))
            except PlatformError as exc:
                logger.warning("Slack: %s", exc)
                continue
            user = found.get("user", {})
            profile = user.get("profile", {})
            name = profile.get("display_name") or user.get("real_name") or user.get("name")
            self._names[user_id] = (str(name or user_id), bool(user.get("is_bot")))
            while len(self._names) > _NAMES:
                self._names.popitem(last=False)

    async def convert_all(self, channel: ChannelRef, raw: list[dict[str, Any]]) -> list[Message]:
        wanted = {str(m.get("user", "")) for m in raw}
        for m in raw:
            wanted |= set(user_mentions(str(m.get("text", ""))))
        await self.learn(wanted)
        return [self.convert(channel, m) for m in raw if is_conversation(m)]

    def convert(self, channel: ChannelRef, raw: dict[str, Any]) -> Message:
        text = str(raw.get("text", ""))
        author = self.person(str(raw.get("user", "")))
        if raw.get("bot_id") and raw.get("user") != self.me.id:
            author = Participant(author.id, author.name, is_bot=True, roles=author.roles)
        tags: set[Tag] = set()
        if channel.key in self._monitored or channel.key.split("-")[0] in self._monitored:
            tags.add(Tag.MONITORED)
        metadata = raw.get("metadata") or {}
        if metadata.get("event_type") == NOTE_EVENT:
            tags.add(Tag.NOTE)
        mentioned = tuple(self.person(u) for u in user_mentions(text))
        return Message(
            id=str(raw["ts"]),
            channel=channel,
            author=author,
            text=readable(text, lambda u: self.person(u).name) if author != self.me else _own(text),
            created_at=datetime.fromtimestamp(float(raw["ts"]), UTC),
            mentions=mentioned,
            reactions=tuple(str(r.get("name")) for r in raw.get("reactions", ())),
            attachments=attachments_of(raw),
            tags=frozenset(tags),
        )


def _own(text: str) -> str:
    """The bot's own words come back as it wrote them (they were only escaped)."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def is_conversation(raw: dict[str, Any]) -> bool:
    """Something someone said: no join notices, topic changes or other subtypes."""
    return raw.get("subtype") in (None, "bot_message", "thread_broadcast", "file_share")
