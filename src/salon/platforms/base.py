"""What every chat adapter offers the agent: the ``Platform`` protocol, and ``PlatformBase``,
which gives an adapter what a platform without some ability does.

Abilities differ: Discord deletes messages, pins, reacts and shows buttons; IRC and the
terminal do none of that. An adapter says what it can in ``capabilities``; the agent asks
``platform.can(...)`` before an optional step, and an operation the platform cannot do
raises ``Unsupported`` (a ``PlatformError``), as any other refusal would.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar, Protocol

from salon.errors import PlatformError
from salon.model import (
    ApprovalDecision,
    ApprovalRequest,
    Attachment,
    ChannelRef,
    Elicitation,
    ElicitationAnswer,
    Event,
    Message,
    Participant,
)
from salon.tasks import TaskState

__all__ = [
    "NO_ANSWERS",
    "YES_ANSWERS",
    "Capability",
    "ChatLog",
    "EventSink",
    "GapListener",
    "MonitorStore",
    "Place",
    "Platform",
    "PlatformBase",
    "Unsupported",
    "file_lines",
    "readable_through",
]

YES_ANSWERS = frozenset({"y", "yes", "ok", "approve"})
NO_ANSWERS = frozenset({"n", "no", "cancel", "deny"})
"""How people answer an approval asked in text (terminal, IRC)."""

EventSink = Callable[[Event], Awaitable[None]]
"""Where an adapter hands events; awaiting it applies the agent queue's back-pressure."""

GapListener = Callable[["Platform", "float | None"], Awaitable[None]]
"""Told when a platform is back after a gap in which events may have been missed (a new
gateway session, a reconnect): the platform, and the epoch time the gap began (None: not
known). The agent then reads back what it missed (``salon.agent.delivery``)."""


class Capability(StrEnum):
    DELETE = "delete"  # take a message out of the channel
    PINS = "pins"  # pinned messages (and so pinned .config)
    REACTIONS = "reactions"
    BUTTONS = "buttons"  # approvals as buttons rather than a question in text
    TYPING = "typing"  # a "bot is writing" indicator
    REPLIES = "replies"  # messages that answer a message (reply chains)
    LINKS = "links"  # message links (.history)
    SPOILERS = "spoilers"  # text a reader opens (Discord's ||…||) and small subtext (-#)
    DIRECT_MESSAGES = "direct_messages"  # a message to one person only (send_direct)


_PROGRESS_JOBS = 256  # jobs remembered by the default progress: a bound, not a limit


def file_lines(files: Sequence[Attachment], *, local: bool) -> list[str]:
    """Files as a platform without uploads shows them, a line each: what it is, then where
    (``local``: the saved path first, for a terminal on the bot's own machine; otherwise the
    link first). A file with neither is named as not kept."""
    lines = []
    for file in files:
        places = [file.path, file.url] if local else [file.url, file.path]
        where = next((p for p in places if p), "(not kept)")
        lines.append(f"[{file.label or file.filename}: {where}]")
    return lines


@dataclass(frozen=True, slots=True)
class Place:
    """Where a channel is: its server's name and its topic ("" when none or unknown)."""

    server: str = ""
    topic: str = ""


class Unsupported(PlatformError):
    """The platform has no such operation (see ``Platform.capabilities``)."""


class Platform(Protocol):
    """A place the bot talks. Adapters parse raw payloads and emit ``salon.model`` types."""

    name: str
    max_message_chars: int
    capabilities: ClassVar[frozenset[Capability]]

    def can(self, capability: Capability) -> bool: ...

    @property
    def self_participant(self) -> Participant:
        """The bot itself as this platform knows it (valid after ``start``)."""

    async def start(self, sink: EventSink) -> None:
        """Connect; from now on deliver events to ``sink``. Returns once connected."""

    async def stop(self) -> None: ...

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
        """Post one message (already within ``max_message_chars``) and return it. A ``note``
        is Salon's own word (a failure, a cancelled tool): the platform marks it so that it
        comes back from ``history`` tagged ``Tag.NOTE``, or not at all. ``files`` are
        uploaded where the platform takes files (images in embeds on Discord, with their
        ``label`` and ``url``); elsewhere each is a line with its link or saved path.
        ``key`` (the first message of a schedule's answer, ``salon.agent.answerkey``): the
        message goes out under it where ``sent_before`` can find it again. ``reply_to``:
        a message of the channel this one answers, shown as a reply where the platform
        has replies (Discord; a plain message when that one is gone), else ignored."""

    async def sent_before(self, channel: ChannelRef, key: str, *, note: str) -> bool | None:
        """Whether a message went out under ``key`` in ``channel`` (a process that stopped
        sent it). A platform that can only tell by sending posts ``note`` under the key
        (Discord). None: the platform cannot tell."""

    async def progress(
        self, channel: ChannelRef, key: str, text: str, *, done: bool = False
    ) -> None:
        """Show how the job ``key`` (a tool call) is going: the first report posts a note,
        later ones edit it (rate-limited), ``done`` edits it one last time. Where messages
        cannot be edited, only the first report is posted, as one line."""

    async def send_tool_log(self, channel: ChannelRef, text: str) -> None:
        """Post a dot message showing tool use (a webhook named after the bot, where
        the platform has them)."""

    async def request_approval(
        self, channel: ChannelRef, request: ApprovalRequest
    ) -> ApprovalDecision:
        """Ask whether a tool may run (buttons, or a yes/no question in text)."""

    async def elicit(self, channel: ChannelRef, request: Elicitation) -> ElicitationAnswer:
        """Ask the requester a tool server's question (buttons or a form, or a question in
        text answered by a reply); only they may answer; no answer in time declines."""

    async def send_direct(self, person: Participant, text: str) -> None:
        """Say ``text`` to ``person`` alone, in a direct message (what only they may see:
        the link that connects their account); never logged. ``Unsupported`` without
        ``Capability.DIRECT_MESSAGES``; a ``PlatformError`` when the platform refuses."""

    async def current_users(self, channel: ChannelRef) -> Sequence[str]:
        """Names of who is in the channel now, as far as the platform knows."""

    async def place(self, channel: ChannelRef) -> Place:
        """The server (Discord guild, IRC network) the channel is on, and its topic."""

    async def delete_message(self, channel: ChannelRef, message_id: str) -> None:
        """Remove a message (an ``m`` command the bot acted on); PlatformError if refused."""

    async def react(self, channel: ChannelRef, message_id: str, emoji: str) -> None:
        """Put a reaction on a message; PlatformError if refused."""

    async def reply_chain(self, message: Message) -> Sequence[Message]:
        """The messages ``message`` replies to, transitively, oldest first (bounded)."""

    async def history(self, channel: ChannelRef, *, limit: int) -> Sequence[Message]:
        """The newest ``limit`` messages of the channel as it is now, oldest first."""

    async def history_until(self, link: str, *, limit: int) -> Sequence[Message] | None:
        """The linked message and up to ``limit - 1`` before it in its channel, oldest
        first; None when ``link`` is not a message link of this platform."""

    async def messages_after(
        self, channel: ChannelRef, after: str, *, limit: int
    ) -> Sequence[Message] | None:
        """The messages of ``channel`` newer than the message ``after`` (an id this platform
        gave), oldest first: at most the newest ``limit`` of them. None when the platform
        cannot read back (no catch-up after a gap there)."""

    async def mentions_after(self, since: float, *, limit: int) -> Sequence[Message] | None:
        """Messages that mention the bot anywhere it can read, newer than ``since`` (epoch
        seconds), oldest first: a platform's search, for channels the bot has no mark in.
        None when the platform cannot search."""

    def on_gap(self, listener: GapListener) -> None:
        """Tell ``listener`` whenever the platform is back after a gap (``GapListener``)."""

    async def serves(self, channel: ChannelRef) -> bool:
        """Whether this process acts in ``channel`` (fires its schedules): a sharded
        platform's process serves the channels of its own shards."""

    async def pinned(self, channel: ChannelRef) -> Sequence[Message]:
        """Pinned messages, oldest first; a thread's start with its parent's."""

    async def find_channel(self, channel_id: str) -> ChannelRef | None:
        """The channel with this id (its name, guild, parent), or None when the platform
        does not know it (a linked channel, ``salon.agent.links``)."""

    async def can_read(self, person: Participant, channel: ChannelRef) -> bool:
        """Whether ``person`` may read ``channel``'s messages on the platform now (their
        own rights, not the bot's). False when the platform cannot tell: what is shown
        from another channel must never reach someone who could not read it there."""

    def typing(self, channel: ChannelRef) -> AbstractAsyncContextManager[None]:
        """Show that the bot is writing while the context is open."""

    def link(self, message: Message) -> str | None:
        """A link people can open to see ``message``, where the platform has them."""

    @property
    def connected(self) -> bool:
        """Whether the platform's connection is up now (for health)."""

    @property
    def connection(self) -> TaskState | None:
        """The supervised task that keeps the platform's connection (for health: its
        restarts and last failure), or None where the platform keeps no task of its own."""


class PlatformBase(ABC):
    """What a platform without an ability does: nothing pinned, no replies or links, no
    typing indicator, and ``Unsupported`` for deleting and reacting. Adapters inherit this
    and override what their platform has, listing it in ``capabilities``."""

    name: str
    max_message_chars: int
    capabilities: ClassVar[frozenset[Capability]] = frozenset()
    _progress_posted: OrderedDict[str, None] | None = None  # jobs whose line is out
    connection: TaskState | None = None
    _gap_listener: GapListener | None = None

    def can(self, capability: Capability) -> bool:
        return capability in self.capabilities

    @abstractmethod
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
        """Every adapter sends; ``progress`` here posts through it."""

    async def sent_before(self, channel: ChannelRef, key: str, *, note: str) -> bool | None:
        """No ids kept and no log to read: a platform cannot tell (answered again)."""
        return None

    async def place(self, channel: ChannelRef) -> Place:
        """Nothing known: no server name, no topic."""
        return Place()

    async def progress(
        self, channel: ChannelRef, key: str, text: str, *, done: bool = False
    ) -> None:
        """No edits here: the first report of a job is one note line, the rest (and the
        end, which the result follows anyway) post nothing, so a long job cannot flood."""
        posted = self._progress_posted
        if posted is None:
            posted = self._progress_posted = OrderedDict()
        if done or key in posted:
            if done:
                posted.pop(key, None)
            return
        posted[key] = None
        while len(posted) > _PROGRESS_JOBS:
            posted.popitem(last=False)
        await self.send(channel, text, note=True)

    async def elicit(self, channel: ChannelRef, request: Elicitation) -> ElicitationAnswer:
        """A platform that cannot ask: the server is told no."""
        return ElicitationAnswer("decline")

    async def delete_message(self, channel: ChannelRef, message_id: str) -> None:
        raise Unsupported(f"messages cannot be deleted on {self.name}")

    async def send_direct(self, person: Participant, text: str) -> None:
        raise Unsupported(f"{self.name} sends no direct messages")

    async def react(self, channel: ChannelRef, message_id: str, emoji: str) -> None:
        raise Unsupported(f"{self.name} has no reactions")

    async def pinned(self, channel: ChannelRef) -> Sequence[Message]:
        return ()

    async def reply_chain(self, message: Message) -> Sequence[Message]:
        return ()

    async def history_until(self, link: str, *, limit: int) -> Sequence[Message] | None:
        return None

    async def messages_after(
        self, channel: ChannelRef, after: str, *, limit: int
    ) -> Sequence[Message] | None:
        """No reading back: what happened in a gap is not seen."""
        return None

    async def mentions_after(self, since: float, *, limit: int) -> Sequence[Message] | None:
        """No search."""
        return None

    def on_gap(self, listener: GapListener) -> None:
        self._gap_listener = listener

    async def serves(self, channel: ChannelRef) -> bool:
        """One process for the whole platform: it serves every channel."""
        return True

    async def gap_closed(self, since: float | None) -> None:
        """For the adapter: it is back after a gap that began at ``since``."""
        if self._gap_listener is not None:
            await self._gap_listener(self, since)  # type: ignore[arg-type]

    async def find_channel(self, channel_id: str) -> ChannelRef | None:
        return None

    async def can_read(self, person: Participant, channel: ChannelRef) -> bool:
        """A platform that cannot tell: no one reads another channel through the bot."""
        return False

    async def current_users(self, channel: ChannelRef) -> Sequence[str]:
        return ()

    def link(self, message: Message) -> str | None:
        return None

    @property
    def connected(self) -> bool:
        return True

    @asynccontextmanager
    async def typing(self, channel: ChannelRef) -> AsyncIterator[None]:
        yield


class MonitorStore(Protocol):
    """Where the channels a bot answers without a mention are kept (``/monitor``,
    ``/unmonitor``); a Store fits."""

    async def monitored(self, bot: str) -> set[str]: ...

    async def set_monitored(self, bot: str, channel_key: str, on: bool, by: str = "") -> bool: ...


class ChatLog(Protocol):
    """Persistence for platforms that keep no history (terminal, IRC); a Store fits.

    A line people have already seen must survive a crash: adapters log the bot's own lines
    with ``durable=True`` (committed before the call returns) and before showing them; lines
    of people may be written behind (committed within milliseconds). ``kind`` ``note`` marks
    Salon's own words, which ``chat_history`` leaves out.
    """

    async def log_message(
        self, bot: str, message: Message, kind: str = "message", *, durable: bool = False
    ) -> None: ...

    async def forget_message(self, bot: str, message_id: str) -> None:
        """Take back a line logged before showing it, when showing it failed."""

    async def logged(self, bot: str, channel: ChannelRef, message_id: str) -> bool:
        """Whether the log holds this message (committed lines only)."""

    async def chat_history(
        self, bot: str, channel: ChannelRef, *, limit: int, before_id: str | None = None
    ) -> Sequence[Message]: ...


async def readable_through(
    platforms: Mapping[str, Platform], person: Participant, channel: ChannelRef
) -> bool:
    """Whether ``person`` may read ``channel`` through the bot: a platform the bot is on,
    and their own rights there (``Platform.can_read``; IRC: both are in the channel)."""
    platform = platforms.get(channel.platform)
    return platform is not None and await platform.can_read(person, channel)
