"""Matrix through mautrix's HTTP client: ``MatrixPlatform``, the adapter's ``Platform``,
a facade over its parts: the sync that brings events (``syncing.py``), reading a room from
the homeserver with no local copy (``reading.py``), sending (``sending.py``), approvals by
reaction (``approvals.py``), who may read a room (``access.py``).

New messages go to the agent, reactions to the approvals; a room that turns out to be
encrypted is refused (one notice in the room, once ever, and one line in the log, as Salon
keeps no crypto store: ``kept.py``).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

from salon.config import MatrixConfig, Secrets
from salon.errors import PlatformError
from salon.model import (
    ApprovalDecision,
    ApprovalRequest,
    Attachment,
    ChannelRef,
    Message,
    MessageEvent,
    Participant,
    Tag,
)
from salon.platforms.base import Capability, EventSink, PlatformBase
from salon.platforms.matrix.access import Access
from salon.platforms.matrix.api import Homeserver
from salon.platforms.matrix.api import q as _q
from salon.platforms.matrix.approvals import Approvals
from salon.platforms.matrix.convert import Me, Names, room_and_root
from salon.platforms.matrix.kept import ENCRYPTED_REFUSAL, EncryptedRooms, Kept
from salon.platforms.matrix.login import log_in
from salon.platforms.matrix.reading import Reader
from salon.platforms.matrix.sending import Sender
from salon.platforms.matrix.syncing import Syncing

__all__ = ["ENCRYPTED_REFUSAL", "MatrixPlatform"]

logger = logging.getLogger(__name__)

JSON = dict[str, Any]


class MatrixPlatform(PlatformBase):
    name = "matrix"
    # Under the homeserver's 65,536-byte event limit with any UTF-8 and JSON escaping.
    max_message_chars = 8000
    capabilities: ClassVar[frozenset[Capability]] = frozenset(
        {
            Capability.DELETE,
            Capability.PINS,
            Capability.REACTIONS,
            Capability.TYPING,
            Capability.REPLIES,
            Capability.DIRECT_MESSAGES,
        }
    )

    def __init__(
        self,
        bot_name: str,
        config: MatrixConfig,
        secrets: Secrets,
        data_dir: Path,
        *,
        kept: Kept | None = None,
    ) -> None:
        """``kept``: where the sync position and the rooms told they are encrypted are
        kept between runs (none: every start begins afresh)."""
        self.config = config
        self._bot_name = bot_name
        self._secrets = secrets
        self._data_dir = data_dir
        self._server: Homeserver | None = None
        self._names = Names()
        self._me = Me(config.user_id, bot_name)
        self._reader: Reader | None = None
        self._approvals: Approvals | None = None
        self._access = Access(self._need, lambda: self._me.user_id)
        self._sink: EventSink | None = None
        self._kept = kept
        self._sender = Sender(need=self._need, read=self._read, me=lambda: self._me)
        self._syncing = Syncing(
            config,
            need=self._need,
            names=self._names,
            access=self._access,
            encrypted=EncryptedRooms(self._sender.note, kept, config.user_id),
            kept=kept,
            deliver=self._event,
        )
        self.connection = self._syncing.connection

    # -- connection -------------------------------------------------------------------

    @property
    def self_participant(self) -> Participant:
        return Participant(self._me.user_id, self._me.name, is_bot=True)

    @property
    def connected(self) -> bool:
        return self._syncing.connected

    async def wait_synced(self) -> None:
        """Return once the first sync is done (from then on, new events are answered)."""
        await self._syncing.wait_synced()

    def _need(self) -> Homeserver:
        if self._server is None:
            raise PlatformError("not connected to the Matrix homeserver")
        return self._server

    def _read(self) -> Reader:
        if self._reader is None:
            raise PlatformError("not connected to the Matrix homeserver")
        return self._reader

    async def start(self, sink: EventSink) -> None:
        self._sink = sink
        server = self._server = await log_in(self.config, self._secrets, self._data_dir)
        me = await server.call("GET", "/_matrix/client/v3/account/whoami")
        if me.get("user_id") != self.config.user_id:
            raise PlatformError(f"the token is for {me.get('user_id')}, not {self.config.user_id}")
        self._me = Me(self.config.user_id, self._bot_name, await self._display_name(server))
        self._reader = Reader(
            server,
            self._names,
            self._me,
            reply_depth=self.config.reply_chain_max_depth,
            max_images=self.config.image_budget,
            max_image_bytes=self.config.max_image_bytes,
        )
        self._sender.connect(server)
        self._approvals = Approvals(
            server,
            bot_name=self._bot_name,
            power_level=self.config.approval_power_level,
            operators=frozenset(self.config.operators),
            note=self._sender.note,
        )
        for room in self.config.rooms:
            try:
                await server.call("POST", f"/_matrix/client/v3/join/{_q(room)}", {})
            except PlatformError as exc:
                logger.error("Matrix: could not join %s: %s", room, exc)
        await self._syncing.begin()

    async def _display_name(self, server: Homeserver) -> str:
        """The account's display name: people mention the bot by it too."""
        path = f"/_matrix/client/v3/profile/{_q(self.config.user_id)}/displayname"
        try:
            name = (await server.call("GET", path)).get("displayname")
        except PlatformError:
            return ""
        return name.strip() if isinstance(name, str) else ""

    async def stop(self) -> None:
        await self._syncing.stop()
        if self._server is not None:
            await self._server.close()

    async def _event(self, room: str, event: JSON) -> None:
        """A new event of a joined room: a reaction to the approvals, a message to the
        agent (not the bot's own, nothing of an encrypted room)."""
        if event.get("sender") == self._me.user_id or room in self._syncing.encrypted:
            return
        channel = ChannelRef("matrix", room)
        if event.get("type") == "m.reaction" and self._approvals is not None:
            await self._approvals.reaction(event, channel)
            return
        message = self._read().message(event, room)
        if message is None or self._sink is None:
            return
        if message.reply_to_id:
            author = await self._read().author_of(message)
            message = replace(message, reply_to_author_id=author)
        if room in self.config.monitored_rooms:
            message = replace(message, tags=message.tags | {Tag.MONITORED})
        logger.debug("Matrix: %s in %s", message.id, room)
        await self._sink(MessageEvent(message))

    # -- sending ----------------------------------------------------------------------

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
        """``reply_to``: the event the message answers (``reply_to_trigger``), as a Matrix
        reply; in a thread the thread's own relation wins (a reply there is in-thread).
        Images in ``files`` are uploaded and follow the text as ``m.image`` events; other
        files (and images that could not be uploaded) are link lines in the text.
        ``key``: the first event goes out under a transaction id made from it
        (``sent_before``)."""
        return await self._sender.send(
            channel, text, files=files, note=note, key=key, reply_to=reply_to
        )

    async def sent_before(self, channel: ChannelRef, key: str, *, note: str) -> bool | None:
        """Whether the first message of an answer went out under ``key``. It was sent under
        a transaction id made from the key, and a send under a transaction id the device
        used before gives back the event made then (the client-server API's idempotent
        send; Synapse remembers a device's ids for a day): ``note`` is sent under it, and
        what comes back is the note (nothing went out, the note is posted) or the message
        sent before (nothing is posted)."""
        return await self._sender.sent_before(channel, key, note=note)

    async def send_tool_log(self, channel: ChannelRef, text: str) -> None:
        await self.send(channel, text, note=True)

    async def send_direct(self, person: Participant, text: str) -> None:
        """Their direct room with the bot, then the text (they read it once they have
        taken the invite: the room shows them its history)."""
        await self._sender.send_direct(person, text)

    async def request_approval(
        self, channel: ChannelRef, request: ApprovalRequest
    ) -> ApprovalDecision:
        if self._approvals is None:
            raise PlatformError("not connected to the Matrix homeserver")
        return await self._approvals.ask(channel, request)

    async def delete_message(self, channel: ChannelRef, message_id: str) -> None:
        await self._sender.delete(channel, message_id)

    async def react(self, channel: ChannelRef, message_id: str, emoji: str) -> None:
        await self._sender.react(channel, message_id, emoji)

    @asynccontextmanager
    async def typing(self, channel: ChannelRef) -> AsyncIterator[None]:
        async with self._sender.typing(channel):
            yield

    # -- reading ----------------------------------------------------------------------

    async def history(self, channel: ChannelRef, *, limit: int) -> Sequence[Message]:
        return await self._read().history(channel, limit=limit)

    async def messages_after(
        self, channel: ChannelRef, after: str, *, limit: int
    ) -> Sequence[Message] | None:
        """Nothing to read back where the sync position is kept: the first sync after a
        start goes on from it and brings what was missed itself."""
        return () if self._kept is not None else None

    async def reply_chain(self, message: Message) -> Sequence[Message]:
        return await self._read().reply_chain(message)

    async def pinned(self, channel: ChannelRef) -> Sequence[Message]:
        return await self._read().pinned(channel)

    async def find_channel(self, channel_id: str) -> ChannelRef | None:
        """A room the bot is joined to, or a thread there (``access.py``); no guild."""
        return await self._access.find(channel_id)

    async def can_read(self, person: Participant, channel: ChannelRef) -> bool:
        """Whether ``person`` is joined to the room now (``access.py``)."""
        return await self._access.can_read(person, channel)

    async def current_users(self, channel: ChannelRef) -> Sequence[str]:
        room, _ = room_and_root(channel)
        answer = await self._need().call(
            "GET", f"/_matrix/client/v3/rooms/{_q(room)}/joined_members"
        )
        joined = answer.get("joined") or {}
        return sorted(self._names.name(room, user) for user in joined)
