"""The Platform protocol every chat adapter implements."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from salon.model import (
    ApprovalAnswer,
    ApprovalRequest,
    Attachment,
    ChannelRef,
    Event,
    Message,
    Participant,
)

__all__ = ["NO_ANSWERS", "YES_ANSWERS", "ChatLog", "EventSink", "Platform"]

YES_ANSWERS = frozenset({"y", "yes", "ok", "approve"})
NO_ANSWERS = frozenset({"n", "no", "cancel", "deny"})
"""How people answer an approval asked in text (terminal, IRC)."""

EventSink = Callable[[Event], Awaitable[None]]
"""Where an adapter hands events; awaiting it applies the agent queue's back-pressure."""


class Platform(Protocol):
    """A place the bot talks. Adapters parse raw payloads and emit ``salon.model`` types."""

    name: str
    max_message_chars: int

    @property
    def self_participant(self) -> Participant:
        """The bot itself as this platform knows it (valid after ``start``)."""

    async def start(self, sink: EventSink) -> None:
        """Connect; from now on deliver events to ``sink``. Returns once connected."""

    async def stop(self) -> None: ...

    async def send(
        self, channel: ChannelRef, text: str, *, files: Sequence[Attachment] = ()
    ) -> Message:
        """Post one message (already within ``max_message_chars``) and return it."""

    async def send_tool_log(self, channel: ChannelRef, text: str) -> None:
        """Post a dot message showing tool use (a webhook named after the bot, where
        the platform has them)."""

    async def request_approval(
        self, channel: ChannelRef, request: ApprovalRequest
    ) -> ApprovalAnswer:
        """Ask whether a tool may run (buttons, or a yes/no question in text)."""

    async def current_users(self, channel: ChannelRef) -> Sequence[str]:
        """Names of who is in the channel now, as far as the platform knows."""

    async def delete_message(self, channel: ChannelRef, message_id: str) -> None:
        """Remove a message (an ``m`` command the bot acted on); PlatformError if refused."""

    async def react(self, channel: ChannelRef, message_id: str, emoji: str) -> None:
        """Put a reaction on a message, where the platform has reactions."""

    async def reply_chain(self, message: Message) -> Sequence[Message]:
        """The messages ``message`` replies to, transitively, oldest first (bounded)."""

    async def history(self, channel: ChannelRef, *, limit: int) -> Sequence[Message]:
        """The newest ``limit`` messages of the channel as it is now, oldest first."""

    async def history_until(self, link: str, *, limit: int) -> Sequence[Message] | None:
        """The linked message and up to ``limit - 1`` before it in its channel, oldest
        first; None when ``link`` is not a message link of this platform."""

    async def pinned(self, channel: ChannelRef) -> Sequence[Message]:
        """Pinned messages, oldest first; a thread's start with its parent's."""

    def typing(self, channel: ChannelRef) -> AbstractAsyncContextManager[None]:
        """Show that the bot is writing while the context is open."""


class ChatLog(Protocol):
    """Persistence for platforms that keep no history (terminal, IRC); a Store fits."""

    async def log_message(self, bot: str, message: Message, kind: str = "message") -> None: ...

    async def chat_history(
        self, bot: str, channel: ChannelRef, *, limit: int, before_id: str | None = None
    ) -> Sequence[Message]: ...
