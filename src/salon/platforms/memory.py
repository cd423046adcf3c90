"""A complete in-memory platform: what tests, benchmarks and embedders drive the agent with."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from salon.errors import PlatformError
from salon.model import (
    Approval,
    ApprovalDecision,
    ApprovalRequest,
    Attachment,
    ChannelRef,
    Elicitation,
    ElicitationAnswer,
    Message,
    MessageEvent,
    Participant,
    Tag,
)
from salon.platforms.base import Capability, EventSink, Place, PlatformBase
from salon.platforms.prompts import OpenPrompt

__all__ = ["MemoryPlatform", "PendingApproval", "PendingQuestion"]


class PendingApproval(OpenPrompt):
    """An approval prompt the bot posted; a test answers it with ``MemoryPlatform.click``."""

    __slots__ = ()


@dataclass
class PendingQuestion:
    """A server's question the bot put to a person; a test answers it with
    ``MemoryPlatform.answer_question``."""

    channel: ChannelRef
    request: Elicitation
    answer: asyncio.Future[ElicitationAnswer] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class MemoryPlatform(PlatformBase):
    """Channels are lists; people ``post``, the bot ``send``s; everything is observable."""

    capabilities = frozenset(Capability)

    def __init__(
        self,
        *,
        name: str = "memory",
        bot_name: str = "Bot",
        max_message_chars: int = 2000,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.name = name
        self.clock = clock or (lambda: datetime.now(UTC))  # when messages are written
        self.max_message_chars = max_message_chars
        self._me = Participant("bot", bot_name, is_bot=True)
        self._channels: dict[str, list[Message]] = {}
        self._ids = itertools.count(1)
        self._sink: EventSink | None = None
        self.started = asyncio.Event()
        self._sent_changed = asyncio.Condition()
        self.sent: list[Message] = []
        self.keys: dict[tuple[str, str], Message] = {}  # (channel, key): sent under a key
        self.topics: dict[str, str] = {}  # channel key -> its topic
        self.typing_log: list[tuple[str, str]] = []
        self.fail_sends: list[PlatformError] = []
        self.history_requests = 0
        self.tool_logs: list[str] = []
        self.files: list[Attachment] = []
        self.roles: dict[str, set[str]] = {}
        self.operators: set[str] = set()  # ids of who runs the bot (may answer any approval)
        self.deleted: list[str] = []
        self.fail_deletes: list[PlatformError] = []
        self.reactions: list[tuple[str, str]] = []
        self.approvals: list[PendingApproval] = []
        self.pins: dict[str, list[str]] = {}  # channel key -> pinned message ids
        self.pin_requests = 0
        self.fail_pins: list[PlatformError] = []
        self._approvals_changed = asyncio.Condition()
        self.questions: list[PendingQuestion] = []
        self.direct: list[tuple[Participant, str]] = []  # what send_direct said, to whom
        self.progress_log: list[tuple[str, str, bool]] = []  # (job, text, done)
        self._progress: dict[str, Message] = {}
        self._refs: dict[str, ChannelRef] = {}  # channel id -> the channel, once made
        # (person id, channel key) pairs that may not read a channel; everyone else may.
        self.unreadable: set[tuple[str, str]] = set()

    @property
    def self_participant(self) -> Participant:
        return self._me

    def channel(
        self, channel_id: str = "general", *, is_direct: bool = False, guild_id: str | None = None
    ) -> ChannelRef:
        ref = ChannelRef(
            self.name, channel_id, name=channel_id, is_direct=is_direct, guild_id=guild_id
        )
        self._refs.setdefault(channel_id, ref)
        return ref

    async def find_channel(self, channel_id: str) -> ChannelRef | None:
        return self._refs.get(channel_id)

    async def can_read(self, person: Participant, channel: ChannelRef) -> bool:
        return (person.id, channel.key) not in self.unreadable

    async def start(self, sink: EventSink) -> None:
        self._sink = sink
        self.started.set()

    async def stop(self) -> None:
        self._sink = None

    def add(
        self,
        channel: ChannelRef,
        author: Participant,
        text: str,
        *,
        mentions: Sequence[Participant] = (),
        reply_to: Message | None = None,
        tags: frozenset[Tag] | None = None,
        files: Sequence[Attachment] = (),
    ) -> Message:
        """Put a message in the channel without telling the bot (history setup)."""
        message = Message(
            id=str(next(self._ids)),
            channel=channel,
            author=author,
            text=text,
            created_at=self.clock(),
            mentions=tuple(mentions),
            reply_to_id=reply_to.id if reply_to else None,
            reply_to_author_id=reply_to.author.id if reply_to else None,
            tags=tags or frozenset(),
            attachments=tuple(files),
        )
        self._channels.setdefault(channel.key, []).append(message)
        return message

    def edit(self, message: Message, text: str) -> Message:
        """Someone edits a message in place (same id, new text); the bot is not told."""
        messages = self._channels.get(message.channel.key, [])
        edited = replace(message, text=text)
        for index, found in enumerate(messages):
            if found.id == message.id:
                messages[index] = edited
        return edited

    async def post(
        self,
        channel: ChannelRef,
        author: Participant,
        text: str,
        *,
        mentions: Sequence[Participant] = (),
        reply_to: Message | None = None,
    ) -> Message:
        """A participant writes in the channel; the bot is told."""
        message = self.add(channel, author, text, mentions=mentions, reply_to=reply_to)
        if self._sink is not None:
            await self._sink(MessageEvent(message))
        return message

    async def send(
        self,
        channel: ChannelRef,
        text: str,
        *,
        files: Sequence[Attachment] = (),
        note: bool = False,
        key: str | None = None,
        reply_to: str | None = None,
    ) -> Message:
        if self.fail_sends:
            raise self.fail_sends.pop(0)
        if len(text) > self.max_message_chars:
            raise PlatformError(f"message of {len(text)} chars over {self.max_message_chars}")
        tags = frozenset({Tag.NOTE}) if note else None
        replied = None
        if reply_to is not None:  # looked up only for a reply: a channel holds thousands
            replied = next((m for m in self._channels[channel.key] if m.id == reply_to), None)
        message = self.add(channel, self._me, text, tags=tags, files=files, reply_to=replied)
        if key is not None:
            self.keys[channel.key, key] = message
        self.files.extend(files)
        async with self._sent_changed:
            self.sent.append(message)
            self._sent_changed.notify_all()
        return message

    async def sent_before(self, channel: ChannelRef, key: str, *, note: str) -> bool | None:
        return (channel.key, key) in self.keys

    async def progress(
        self, channel: ChannelRef, key: str, text: str, *, done: bool = False
    ) -> None:
        """As Discord does it: one note per job, edited in place; every report is logged."""
        self.progress_log.append((key, text, done))
        shown = self._progress.get(key)
        if shown is None:
            if not done:
                self._progress[key] = await self.send(channel, text, note=True)
            return
        self._progress[key] = self.edit(shown, text)
        if done:
            del self._progress[key]

    async def send_tool_log(self, channel: ChannelRef, text: str) -> None:
        self.add(channel, self._me, text)
        self.tool_logs.append(text)

    async def place(self, channel: ChannelRef) -> Place:
        return Place("memory", self.topics.get(channel.key, ""))

    async def current_users(self, channel: ChannelRef) -> Sequence[str]:
        names = {m.author.name: None for m in self._channels.get(channel.key, [])}
        return list(names)

    async def request_approval(
        self, channel: ChannelRef, request: ApprovalRequest
    ) -> ApprovalDecision:
        pending = PendingApproval(channel, request)
        async with self._approvals_changed:
            self.approvals.append(pending)
            self._approvals_changed.notify_all()
        try:
            return await asyncio.wait_for(asyncio.shield(pending.answer), request.timeout)
        except TimeoutError:
            return ApprovalDecision(Approval.TIMEOUT)

    async def send_direct(self, person: Participant, text: str) -> None:
        self.direct.append((person, text))

    async def elicit(self, channel: ChannelRef, request: Elicitation) -> ElicitationAnswer:
        pending = PendingQuestion(channel, request)
        async with self._approvals_changed:
            self.questions.append(pending)
            self._approvals_changed.notify_all()
        try:
            return await asyncio.wait_for(asyncio.shield(pending.answer), request.timeout)
        except TimeoutError:
            return ElicitationAnswer("decline")

    def answer_question(
        self,
        index: int,
        who: Participant,
        content: dict[str, str | int | float | bool] | None = None,
    ) -> bool:
        """Someone submits the form (``content``; None: declines); False when they may not
        answer (only the requester may)."""
        pending = self.questions[index]
        if who.id != pending.request.requester.id or pending.answer.done():
            return False
        answer = (
            ElicitationAnswer("decline", by=who.name)
            if content is None
            else ElicitationAnswer("accept", content, by=who.name)
        )
        pending.answer.set_result(answer)
        return True

    async def wait_questions(self, count: int, within: float = 5.0) -> list[PendingQuestion]:
        async with asyncio.timeout(within), self._approvals_changed:
            await self._approvals_changed.wait_for(lambda: len(self.questions) >= count)
        return list(self.questions)

    def click(self, index: int, who: Participant, *, approve: bool) -> bool:
        """Someone presses Approve or Cancel; returns False when they may not answer."""
        pending = self.approvals[index]
        request = pending.request
        allowed = request.may_answer(
            requester=who.id == request.requester.id,
            in_role=bool(self.roles.get(who.id, set()) & set(request.authorized_roles)),
            operator=who.id in self.operators,
            approve=approve,
        )
        if not allowed or pending.answer.done():
            return False
        answer = Approval.APPROVED if approve else Approval.CANCELLED
        pending.answer.set_result(ApprovalDecision(answer, by=who.name))
        return True

    async def wait_approvals(self, count: int, within: float = 5.0) -> list[PendingApproval]:
        async with asyncio.timeout(within), self._approvals_changed:
            await self._approvals_changed.wait_for(lambda: len(self.approvals) >= count)
        return list(self.approvals)

    async def history(self, channel: ChannelRef, *, limit: int) -> Sequence[Message]:
        self.history_requests += 1
        return self._channels.get(channel.key, [])[-limit:]

    async def messages_after(
        self, channel: ChannelRef, after: str, *, limit: int
    ) -> Sequence[Message] | None:
        """Ids here are counted up, as a platform's that grow with time."""
        newer = [m for m in self._channels.get(channel.key, []) if int(m.id) > int(after)]
        return newer[-limit:]

    def link(self, message: Message) -> str:
        """A link to ``message`` that ``history_until`` follows (for ``.history``)."""
        return f"memory://{message.channel.id}/{message.id}"

    async def history_until(self, link: str, *, limit: int) -> Sequence[Message] | None:
        prefix = "memory://"
        if not link.startswith(prefix):
            return None
        channel_id, _, message_id = link[len(prefix) :].partition("/")
        messages = self._channels.get(f"{self.name}:{channel_id}", [])
        for index, message in enumerate(messages):
            if message.id == message_id:
                return messages[max(0, index + 1 - limit) : index + 1]
        raise PlatformError(f"no message {message_id} in {channel_id}")

    def pin(self, message: Message) -> None:
        self.pins.setdefault(message.channel.key, []).append(message.id)

    async def pinned(self, channel: ChannelRef) -> Sequence[Message]:
        self.pin_requests += 1
        if self.fail_pins:
            raise self.fail_pins.pop(0)
        ids = set(self.pins.get(channel.key, []))
        if not ids:  # most channels: no walk of their history
            return []
        return [m for m in self._channels.get(channel.key, []) if m.id in ids]

    async def delete_message(self, channel: ChannelRef, message_id: str) -> None:
        if self.fail_deletes:
            raise self.fail_deletes.pop(0)
        messages = self._channels.get(channel.key, [])
        self._channels[channel.key] = [m for m in messages if m.id != message_id]
        self.deleted.append(message_id)

    async def react(self, channel: ChannelRef, message_id: str, emoji: str) -> None:
        messages = self._channels.get(channel.key, [])
        for index, message in enumerate(messages):
            if message.id == message_id:
                messages[index] = replace(message, reactions=(*message.reactions, emoji))
        self.reactions.append((message_id, emoji))

    async def reply_chain(self, message: Message) -> Sequence[Message]:
        by_id = {m.id: m for m in self._channels.get(message.channel.key, [])}
        chain: list[Message] = []
        seen = {message.id}
        current = message
        while current.reply_to_id and current.reply_to_id not in seen and len(chain) < 30:
            found = by_id.get(current.reply_to_id)
            if found is None:
                break
            seen.add(found.id)
            chain.append(found)
            current = found
        return chain[::-1]

    @asynccontextmanager
    async def typing(self, channel: ChannelRef) -> AsyncIterator[None]:
        self.typing_log.append(("start", channel.key))
        try:
            yield
        finally:
            self.typing_log.append(("stop", channel.key))

    async def wait_sent(self, count: int, within: float = 5.0) -> list[Message]:
        """Wait until the bot has sent at least ``count`` messages in all; return them."""
        async with asyncio.timeout(within), self._sent_changed:
            await self._sent_changed.wait_for(lambda: len(self.sent) >= count)
        return list(self.sent)

    def messages(self, channel: ChannelRef) -> list[Message]:
        return list(self._channels.get(channel.key, []))
