"""IRC through pydle: ``IrcPlatform``, the adapter's ``Platform``. IRC keeps no history, so
every line seen is logged to the store.

The platform keeps the connection (``Connection``: one supervised pydle client at a time,
``client.py``, and the owner of what it tells) and hands the rest to parts it owns:
``Incoming`` (lines people and servers write), ``Sender`` (pacing, line splitting, echo and
refusal), ``Joins`` (channels, kicks and bans with their backoff), ``Nicks`` (our nick and
services login), ``Ctcp``, ``Approvals`` (in text) and ``Recorder`` (the chat log). Users
of each channel are tracked by pydle from NAMES, JOIN, PART, QUIT, NICK and KICK.

Who wrote a line is the strongest identity the server vouches for: the services account
where the server tells it (IRCv3 ``account-tag`` on the line, else the account pydle tracks
from ``extended-join``, ``account-notify``, WHOX or WHOIS for someone in one of our
channels), else ``nick!user@host`` from the line's source. Approvals compare it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

from salon.config import IrcConfig, Secrets
from salon.model import (
    ApprovalDecision,
    ApprovalRequest,
    Attachment,
    ChannelRef,
    Elicitation,
    ElicitationAnswer,
    Message,
    MessageEvent,
    Participant,
)
from salon.platforms.base import Capability, ChatLog, EventSink, Place, PlatformBase
from salon.platforms.forms import ask_in_text
from salon.platforms.irc.approvals import Approvals
from salon.platforms.irc.client import Client
from salon.platforms.irc.connection import Connection
from salon.platforms.irc.ctcp import Ctcp
from salon.platforms.irc.dotcommands import DotCommands
from salon.platforms.irc.incoming import Incoming
from salon.platforms.irc.joins import Joins
from salon.platforms.irc.memorycmds import MemoryCommands
from salon.platforms.irc.nicks import Nicks
from salon.platforms.irc.recording import Recorder
from salon.platforms.irc.sending import Sender
from salon.platforms.notes import NotesBook, PeoplesMemory
from salon.tasks import TaskState, supervise

__all__ = ["IrcPlatform"]

logger = logging.getLogger(__name__)


class IrcPlatform(PlatformBase):
    name = "irc"
    max_message_chars = 2000
    capabilities = frozenset({Capability.DIRECT_MESSAGES})  # PRIVMSG to a nick
    quit_timeout = 3.0

    def __init__(
        self,
        *,
        bot: str,
        bot_name: str,
        config: IrcConfig,
        secrets: Secrets,
        chat_log: ChatLog,
        memory: NotesBook | None = None,
    ) -> None:
        """``memory``: the notes' rules, for ``!memory`` and ``!forget`` (offered with it)."""
        self.config = config
        self._bot_name = bot_name
        self._sink: EventSink | None = None
        self._stopping = False
        self._runner: asyncio.Task[None] | None = None
        self.connection = TaskState("IRC connection")
        self._halt = asyncio.Event()  # stop() was called: Python 3.11 can swallow a cancel
        # The parts, each owning its own state; they reach the client of the connection
        # now through ``current``.

        def current() -> Client | None:
            return self._connection.client

        self._recorder = Recorder(bot, chat_log)
        self._sender = Sender(config, current, self._recorder)
        self._joins = Joins(config, current, self._sender, self._halt)
        self._nicks = Nicks(config, current, self._sender)
        self._approvals = Approvals(
            lambda channel, text: self.send(channel, text, note=True), self._recorder
        )
        self._incoming = Incoming(
            config=config,
            current=current,
            recorder=self._recorder,
            approvals=self._approvals,
            deliver=self._deliver,
            stopping=lambda: self._stopping,
            commands=None
            if memory is None
            else MemoryCommands(PeoplesMemory(memory, bot=bot), current, self._sender),
            dot_commands=DotCommands(config.commands, self._note) if config.dot_commands else None,
        )
        self._connection = Connection(
            config=config,
            secrets=secrets,
            halt=self._halt,
            sender=self._sender,
            joins=self._joins,
            nicks=self._nicks,
            ctcp=Ctcp(config, current, self._sender),
            incoming=self._incoming,
        )

    @property
    def connected(self) -> bool:
        return self._connection.connected.is_set()

    @property
    def connections(self) -> int:
        """Successful connections so far."""
        return self._connection.connections

    @property
    def self_participant(self) -> Participant:
        return self._incoming.myself()

    async def start(self, sink: EventSink) -> None:
        self._sink = sink
        work = supervise(
            "IRC connection",
            self._connection.stay_connected,
            state=self.connection,
            finished=self._halt.is_set,
        )
        self._runner = asyncio.create_task(work, name="irc")
        try:
            async with asyncio.timeout(30):
                await self._connection.connected.wait()
        except TimeoutError:
            logger.error(
                "IRC: not connected to %s:%d yet; still trying",
                self.config.server,
                self.config.port,
            )

    async def stop(self) -> None:
        self._stopping = True  # lines still arriving must not reach a closing store
        self._halt.set()
        self._joins.cancel()
        # QUIT before the runner goes: cancelling it closes the connection, and people
        # would see "Connection closed" instead of our goodbye.
        with contextlib.suppress(Exception):
            async with asyncio.timeout(self.quit_timeout):
                await self._connection.quit("bye")
        if self._runner is not None:
            self._runner.cancel()
            await asyncio.gather(self._runner, return_exceptions=True)
            self._runner = None
        await self._connection.close()
        await self._recorder.settled()

    async def wait_connected(self) -> None:
        await self._connection.connected.wait()

    async def wait_disconnected(self) -> None:
        """Return once the connection is down (at once if it is down already)."""
        await self._connection.wait_lost()

    async def wait_reconnected(self) -> None:
        """Wait for the next successful connection (``connections`` counts them)."""
        await self._connection.wait_next()

    async def wait_seen(self, kind: str, nick: str) -> None:
        """Wait until a line of ``kind`` from ``nick`` has been handled (join, part, ...)."""
        await self._incoming.wait_seen(kind, nick)

    async def _deliver(self, event: MessageEvent) -> None:
        """To the agent, once started."""
        if self._sink is not None:
            await self._sink(event)

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
        client = self._connection.require()
        return await self._sender.send(
            client, channel, text, files=files, note=note, key=key, me=self._incoming.myself
        )

    async def sent_before(self, channel: ChannelRef, key: str, *, note: str) -> bool | None:
        """A line is committed to the chat log (under its key) before it is sent, and taken
        back when sending it failed: found there, it went out."""
        return await self._recorder.logged(channel, key)

    async def send_tool_log(self, channel: ChannelRef, text: str) -> None:
        await self._sender.tool_log(self._connection.require(), channel, text)

    async def send_direct(self, person: Participant, text: str) -> None:
        """PRIVMSGs to the person's nick (the one they wrote under), never logged."""
        await self._sender.private(self._connection.require(), person.name, text)

    async def history(self, channel: ChannelRef, *, limit: int) -> Sequence[Message]:
        return await self._recorder.history(channel, limit=limit)

    async def current_users(self, channel: ChannelRef) -> Sequence[str]:
        client = self._connection.client
        if client is None or not client.in_channel(channel.name):
            return []
        return sorted(client.channels[channel.name]["users"], key=str.lower)

    async def _note(self, channel: ChannelRef, text: str) -> None:
        await self.send(channel, text, note=True)

    async def place(self, channel: ChannelRef) -> Place:
        """The network's name (else the server's address) and the channel's topic."""
        client = self._connection.client
        if client is None:
            return Place(self.config.server)
        network = client.network  # pydle's: ISUPPORT NETWORK, or None
        return Place(str(network or self.config.server), client.topic(channel.name))

    async def find_channel(self, channel_id: str) -> ChannelRef | None:
        """A channel by its name (``#salon``); a nick's direct messages are never linked."""
        if not channel_id or channel_id[0] not in "#&+!":
            return None
        return ChannelRef("irc", channel_id.lower(), name=channel_id)

    async def can_read(self, person: Participant, channel: ChannelRef) -> bool:
        """IRC shows no one a channel's past: only who is in the channel now reads it."""
        client = self._connection.client
        if channel.is_direct or client is None or not client.in_channel(channel.name):
            return False
        users = client.channels[channel.name]["users"]
        return any(client.is_same_nick(person.name, nick) for nick in users)

    async def request_approval(
        self, channel: ChannelRef, request: ApprovalRequest
    ) -> ApprovalDecision:
        return await self._approvals.ask(channel, request)

    async def elicit(self, channel: ChannelRef, request: Elicitation) -> ElicitationAnswer:
        """Asked in the channel, a field at a time, each answered by the requester's reply."""
        return await ask_in_text(
            lambda text: self.send(channel, text, note=True),
            lambda text, within: self._approvals.reply(channel, request.requester, text, within),
            request,
        )
