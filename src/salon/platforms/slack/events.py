"""What Slack tells the app over Socket Mode or HTTP (``receiver.py``), registered on the
bolt app.

Bolt acknowledges each event before its listener runs, well within Slack's three seconds;
slash commands and buttons acknowledge first thing. Slack delivers an event again when an
acknowledgement is late (``retry_attempt``, or ``X-Slack-Retry-Num`` over HTTP, with the
same ``event_id``): each ``event_id`` (and each message) is handled once, in a bounded
memory of those seen. New messages go to the agent; edits and deletions keep the history
cache exact.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncRespond

from salon.model import ChannelRef, Event, Message, MessageEvent, Participant, Tag
from salon.platforms.base import MonitorStore
from salon.platforms.monitored import Monitored
from salon.platforms.slack.approvals import Approvals
from salon.platforms.slack.people import People, is_conversation
from salon.platforms.slack.reading import Reader

__all__ = ["Events", "MonitorStore"]  # MonitorStore: salon.platforms.base's, named here too

logger = logging.getLogger(__name__)

_SEEN = 4096  # event ids and messages remembered against redelivery


def context_of(
    channel_id: str, name: str, raw: dict[str, Any], *, direct: bool, workspace: str | None = None
) -> ChannelRef:
    """A thread is its own context (``C…-<root ts>``), continuing its root."""
    thread = raw.get("thread_ts")
    if thread and thread != raw.get("ts"):
        thread_id = f"{channel_id}-{thread}"
        return ChannelRef(
            "slack", thread_id, name, direct, None, channel_id, workspace_id=workspace
        )
    return ChannelRef("slack", channel_id, name, is_direct=direct, workspace_id=workspace)


class Events:
    def __init__(
        self,
        *,
        bot_name: str,
        people: People,
        reader: Reader,
        approvals: Approvals,
        monitored: Monitored,
        authorized_roles: Iterable[str],
        deliver: Callable[[Event], Awaitable[None]],
        find: Callable[[str], Awaitable[ChannelRef | None]],
    ) -> None:
        """``find``: a conversation as the bot sees it (``Access.find``, its workspace)."""
        self._bot_name = bot_name
        self._people = people
        self._reader = reader
        self._approvals = approvals
        self._monitored = monitored
        self._authorized = frozenset(authorized_roles)
        self._deliver = deliver
        self._find = find
        # The bot's workspace (auth.test), set at start: the server of a channel for the
        # pinned-config link rule, except in a channel shared with another organization.
        self.workspace: str | None = None
        self._seen: OrderedDict[str, None] = OrderedDict()
        self.handled = 0  # messages handed to the agent
        self.repeated = 0  # events delivered again, and so not handled
        self.repeat_seen = asyncio.Event()

    def register(self, app: AsyncApp) -> None:
        app.event("message")(self.on_message)
        app.event("app_mention")(self._ignore)  # the message event carries it too
        app.event("pin_added")(self.on_pins)
        app.event("pin_removed")(self.on_pins)
        app.action(re.compile(r"^salon_"))(self.on_button)
        app.command("/ask")(self.on_ask)
        app.command("/monitor")(self.on_monitor)
        app.command("/unmonitor")(self.on_unmonitor)

    async def _ignore(self, body: dict[str, Any]) -> None:
        return None

    async def on_pins(self, event: dict[str, Any]) -> None:
        self._reader.pins_changed(str(event.get("channel_id", "")))

    def _first_time(self, key: str) -> bool:
        if not key or key in self._seen:
            return not key
        self._seen[key] = None
        while len(self._seen) > _SEEN:
            self._seen.popitem(last=False)
        return True

    async def on_message(self, body: dict[str, Any], event: dict[str, Any]) -> None:
        if not self._first_time(str(body.get("event_id", ""))):
            logger.info("Slack: event %s delivered again; handled once", body.get("event_id"))
            self.repeated += 1
            self.repeat_seen.set()
            return
        channel_id = str(event.get("channel", ""))
        direct = event.get("channel_type") == "im"
        subtype = event.get("subtype")
        if subtype in ("message_changed", "message_deleted"):
            self._reader.pins_changed(channel_id)  # a pinned .config may be the one
        if subtype == "message_changed":
            await self._changed(channel_id, dict(event.get("message") or {}), direct)
        elif subtype == "message_deleted":
            self._deleted(channel_id, event, direct)
        elif is_conversation(event) and self._first_time(f"{channel_id}/{event.get('ts')}"):
            await self._new(channel_id, event, direct, self._workspace_of(body, event))

    def _workspace_of(self, body: dict[str, Any], event: dict[str, Any]) -> str | None:
        """None for a direct message or a channel shared with another organization."""
        if body.get("is_ext_shared_channel") or event.get("channel_type") in ("im", "mpim"):
            return None
        return self.workspace

    async def _new(
        self, channel_id: str, raw: dict[str, Any], direct: bool, workspace: str | None
    ) -> None:
        channel = context_of(channel_id, channel_id, raw, direct=direct, workspace=workspace)
        (message,) = await self._people.convert_all(channel, [raw])
        self._reader.added(message)
        if channel.parent_id is not None and raw.get("subtype") == "thread_broadcast":
            self._reader.added(replace(message, channel=ChannelRef("slack", channel_id)))
        handed = self._for_agent(message)
        if handed is not None:
            self.handled += 1
            await self._deliver(MessageEvent(handed))

    def _for_agent(self, message: Message) -> Message | None:
        """What the agent is handed of a new message: none of the bot's own; a direct
        message addresses the bot as a mention would."""
        me = self._people.me
        if message.author.id == me.id:
            return None
        if message.channel.is_direct and not message.mentions_id(me.id):
            return replace(message, mentions=(*message.mentions, me))
        return message

    async def read_back(
        self, channel_id: str, raw: list[dict[str, Any]], *, direct: bool, workspace: str | None
    ) -> list[Message]:
        """Messages read back after a gap, as their events would have handed them on (a
        thread's reply in its thread's context)."""
        found = []
        for item in raw:
            if not is_conversation(item):
                continue
            channel = context_of(channel_id, channel_id, item, direct=direct, workspace=workspace)
            for message in await self._people.convert_all(channel, [item]):
                handed = self._for_agent(message)
                if handed is not None:
                    found.append(handed)
        return found

    async def _changed(self, channel_id: str, raw: dict[str, Any], direct: bool) -> None:
        for channel in self._places(channel_id, raw, direct):
            for message in await self._people.convert_all(channel, [raw]):
                self._reader.edited(message)

    def _deleted(self, channel_id: str, event: dict[str, Any], direct: bool) -> None:
        raw = dict(event.get("previous_message") or {"ts": event.get("deleted_ts")})
        for channel in self._places(channel_id, raw, direct):
            self._reader.deleted(channel, str(event.get("deleted_ts", "")))

    def _places(self, channel_id: str, raw: dict[str, Any], direct: bool) -> list[ChannelRef]:
        """A thread's root is in its channel and in its thread; a reply in its thread."""
        here = context_of(channel_id, channel_id, raw, direct=direct)
        if raw.get("thread_ts") == raw.get("ts") and raw.get("ts"):
            thread = f"{channel_id}-{raw['ts']}"
            return [here, ChannelRef("slack", thread, channel_id, direct, None, channel_id)]
        return [here]

    # -- buttons and commands ----------------------------------------------------------

    async def on_button(self, ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond) -> None:
        await ack()
        user = str((body.get("user") or {}).get("id", ""))
        await self._people.learn({user})
        action = dict((body.get("actions") or [{}])[0])

        async def tell(line: str) -> None:
            await respond(text=line, response_type="ephemeral", replace_original=False)

        await self._approvals.pressed(self._people.person(user), action, tell)

    async def on_ask(self, ack: AsyncAck, command: dict[str, Any]) -> None:
        question = str(command.get("text", "")).strip()
        if not question:
            await ack("Ask a question: /ask what is on today?")
            return
        await ack(f"Asking: {question[:1800]}")
        user = str(command.get("user_id", ""))
        await self._people.learn({user})
        channel_id = str(command.get("channel_id", ""))
        found = await self._find(channel_id)  # a command does not say whether it is shared
        workspace = found.workspace_id if found is not None else None
        name = str(command.get("channel_name", ""))
        message = Message(
            id=f"ask-{command.get('trigger_id', '')}",
            channel=ChannelRef("slack", channel_id, name, workspace_id=workspace),
            author=self._people.person(user),
            text=question,
            created_at=datetime.now(UTC),
            mentions=(self._people.me,),
            tags=frozenset({Tag.ASKED}),
        )
        await self._deliver(MessageEvent(message))

    async def on_monitor(self, ack: AsyncAck, command: dict[str, Any]) -> None:
        await ack(await self._set_monitor(command, on=True))

    async def on_unmonitor(self, ack: AsyncAck, command: dict[str, Any]) -> None:
        await ack(await self._set_monitor(command, on=False))

    async def _set_monitor(self, command: dict[str, Any], *, on: bool) -> str:
        """When the bot has authorized people, only they change what it reads."""
        user = str(command.get("user_id", ""))
        await self._people.learn({user})
        who: Participant = self._people.person(user)
        if self._authorized and not self._authorized & set(who.roles):
            return f"Only authorized people can change what {self._bot_name} reads here."
        key = f"slack:{command.get('channel_id', '')}"
        said = await self._monitored.change(key, on=on, by=user)
        self._reader.forget(key)  # tags in the cache follow the new state
        return said
