"""Matrix through mautrix's HTTP client: ``MatrixPlatform``, the adapter's ``Platform``.

The room is read as Discord's is: from the homeserver (``reading.py``), with no local copy.
A long-polled ``/sync`` brings new events: messages (to the agent), reactions (approvals,
``approvals.py``), invites (joined only from allowed users or servers), kicks (the room is
forgotten) and encryption (refused: one notice in the room, once ever, and one line in
the log, as Salon keeps no crypto store: ``kept.py``).

Where the sync stopped (``next_batch``) is kept in the store after each sync's events were
handed on (``kept.py``): a start goes on from there, so what was said while the bot was
away comes in its first sync and is answered like anything new, except what is older
than ``catch_up.max_age`` (context only; likewise after a sync that failed). A bot's very
first start, with no position kept, only sets where to start: the rooms' past is history.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import time
from collections import OrderedDict
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
from salon.platforms.base import Capability, EventSink, PlatformBase, file_lines
from salon.platforms.matrix.access import Access
from salon.platforms.matrix.api import Homeserver, new_txn_id
from salon.platforms.matrix.api import q as _q
from salon.platforms.matrix.approvals import Approvals
from salon.platforms.matrix.convert import MXID, NOTE_KEY, SALON_KEY, Me, Names, room_and_root
from salon.platforms.matrix.directs import DirectRooms
from salon.platforms.matrix.kept import ENCRYPTED_REFUSAL, EncryptedRooms, Kept
from salon.platforms.matrix.login import log_in
from salon.platforms.matrix.media import Uploader
from salon.platforms.matrix.reading import Reader
from salon.tasks import TaskState, supervise

__all__ = ["ENCRYPTED_REFUSAL", "MatrixPlatform"]

logger = logging.getLogger(__name__)

JSON = dict[str, Any]
_SYNC_FILTER = json.dumps(
    {
        "room": {"timeline": {"limit": 50}, "state": {"lazy_load_members": True}},
        "presence": {"types": []},
        "account_data": {"types": []},
    }
)
_SEEN = 1024  # event ids remembered so a repeated sync delivers nothing twice
_TYPING_REFRESH = 20.0  # the typing notice lasts 30 s: renewed before it lapses
_UNSENT = 256  # transaction ids of sends that failed, kept for their next try: a bound


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
        self._uploads: Uploader | None = None
        self._access = Access(self._need, lambda: self._me.user_id)
        self._sink: EventSink | None = None
        self._kept = kept
        self._since: str | None = None
        self._behind = False  # this sync follows a gap: what is older than the window waits
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._encrypted = EncryptedRooms(self._note, kept, config.user_id)
        self._unsent: OrderedDict[str, str] = OrderedDict()  # content -> its transaction id
        self._directs = DirectRooms(self._need, lambda: self._me.user_id)
        self._runner: asyncio.Task[None] | None = None
        self._telling: asyncio.Task[None] | None = None
        self._halt = asyncio.Event()
        self._synced = asyncio.Event()
        self.connection = TaskState("Matrix sync")

    # -- connection -------------------------------------------------------------------

    @property
    def self_participant(self) -> Participant:
        return Participant(self._me.user_id, self._me.name, is_bot=True)

    @property
    def connected(self) -> bool:
        return self._synced.is_set() and not self._halt.is_set()

    async def wait_synced(self) -> None:
        """Return once the first sync is done (from then on, new events are answered)."""
        await self._synced.wait()

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
        self._uploads = Uploader(server)
        self._approvals = Approvals(
            server,
            bot_name=self._bot_name,
            power_level=self.config.approval_power_level,
            operators=frozenset(self.config.operators),
            note=self._note,
        )
        for room in self.config.rooms:
            try:
                await server.call("POST", f"/_matrix/client/v3/join/{_q(room)}", {})
            except PlatformError as exc:
                logger.error("Matrix: could not join %s: %s", room, exc)
        await self._begin_syncing()

    async def _begin_syncing(self) -> None:
        """The first sync (from the position kept, if any), then the sync loop; and the
        task that tells encrypted rooms, apart from it."""
        await self._encrypted.load()
        telling = supervise("Matrix encrypted rooms", self._encrypted.run)
        self._telling = asyncio.create_task(telling, name="matrix-encrypted")
        if self._kept is not None:
            self._since = await self._kept.sync_position(self.config.user_id)
        self._behind = self._since is not None
        try:
            await self._sync_once(first=True)
        except PlatformError as exc:
            if self._since is None or exc.transient:
                raise
            logger.warning("Matrix: the position kept was refused (%s); starting afresh", exc)
            self._since, self._behind = None, False
            await self._sync_once(first=True)
        self._synced.set()
        work = supervise(
            "Matrix sync", self._sync_forever, state=self.connection, finished=self._halt.is_set
        )
        self._runner = asyncio.create_task(work, name="matrix")

    async def _display_name(self, server: Homeserver) -> str:
        """The account's display name: people mention the bot by it too."""
        path = f"/_matrix/client/v3/profile/{_q(self.config.user_id)}/displayname"
        try:
            name = (await server.call("GET", path)).get("displayname")
        except PlatformError:
            return ""
        return name.strip() if isinstance(name, str) else ""

    async def stop(self) -> None:
        self._halt.set()
        for task in (self._runner, self._telling):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        self._runner = self._telling = None
        if self._server is not None:
            await self._server.close()

    async def _sync_forever(self) -> None:
        try:
            while not self._halt.is_set():
                await self._sync_once(first=False)
        except Exception:
            self._behind = True  # the next sync brings what waited: the window applies
            raise

    async def _sync_once(self, *, first: bool) -> None:
        """One sync (``first``: at the start, without waiting); its position is kept once
        its events were handed on."""
        server = self._need()
        timeout = 0 if first else int(self.config.sync_timeout * 1000)
        history = first and self._since is None  # a first start: the past is history
        oldest = self._kept.oldest() if self._behind and self._kept is not None else 0.0
        answer = await server.sync(self._since, timeout_ms=timeout, filter_json=_SYNC_FILTER)
        rooms = answer.get("rooms") or {}
        for room, invite in (rooms.get("invite") or {}).items():
            await self._invited(room, invite)
        for room in rooms.get("leave") or {}:
            logger.warning("Matrix: left %s (kicked, banned or left); forgetting it", room)
            self._access.forget_room(room)
            with contextlib.suppress(PlatformError):
                await server.call("POST", f"/_matrix/client/v3/rooms/{_q(room)}/forget", {})
        for room, joined in (rooms.get("join") or {}).items():
            await self._joined(room, joined, history=history, oldest=oldest)
        since, self._since = self._since, answer.get("next_batch") or self._since
        self._behind = False
        if self._kept is not None and self._since and self._since != since:
            await self._kept.keep_sync_position(self.config.user_id, self._since)

    async def _invited(self, room: str, invite: JSON) -> None:
        events = (invite.get("invite_state") or {}).get("events") or []
        inviter = next(
            (
                str(e.get("sender", ""))
                for e in events
                if e.get("type") == "m.room.member" and e.get("state_key") == self._me.user_id
            ),
            "",
        )
        server_name = inviter.split(":", 1)[-1]
        path = f"/_matrix/client/v3/rooms/{_q(room)}/"
        if (
            inviter in self.config.invite_from_users
            or server_name in self.config.invite_from_servers
        ):
            logger.info("Matrix: joining %s, invited by %s", room, inviter)
            await self._need().call("POST", path + "join", {})
        else:
            logger.warning("Matrix: declined the invite of %s to %s (not allowed)", inviter, room)
            await self._need().call("POST", path + "leave", {})

    async def _joined(self, room: str, joined: JSON, *, history: bool, oldest: float) -> None:
        """A joined room's part of a sync: ``history``: its events are only remembered;
        events older than ``oldest`` (epoch ms) are context, not handed on."""
        state = (joined.get("state") or {}).get("events") or []
        timeline = (joined.get("timeline") or {}).get("events") or []
        self._names.learn(room, [*state, *timeline])
        self._memberships_changed(room, joined, [*state, *timeline])
        if any(e.get("type") == "m.room.encryption" for e in [*state, *timeline]):
            self._encrypted.found(room)
        for event in timeline:
            new = self._remember(str(event.get("event_id", "")))
            sent_at = event.get("origin_server_ts")
            late = isinstance(sent_at, int) and sent_at < oldest
            if new and not history and not late:
                await self._event(room, event)

    def _memberships_changed(self, room: str, joined: JSON, events: list[JSON]) -> None:
        """Kept memberships the sync changed, before its messages are answered (a gap in
        the timeline may hide a change: the room's are all asked again)."""
        if (joined.get("timeline") or {}).get("limited"):
            self._access.forget_room(room)
        for event in events:
            if event.get("type") == "m.room.member":
                self._access.changed(room, str(event.get("state_key", "")))

    def _remember(self, event_id: str) -> bool:
        """Whether ``event_id`` is new (a repeated sync can repeat events)."""
        if event_id in self._seen:
            return False
        self._seen[event_id] = None
        while len(self._seen) > _SEEN:
            self._seen.popitem(last=False)
        return True

    async def _event(self, room: str, event: JSON) -> None:
        if event.get("sender") == self._me.user_id or room in self._encrypted:
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
        images: list[JSON] = []
        links: list[Attachment] = []
        for file in files:
            uploaded = await self._uploader().upload(file)
            if uploaded is None:
                links.append(file)
            else:
                images.append(uploaded.content)
        body = "\n".join([text, *file_lines(links, local=False)]) if links else text
        contents: list[JSON] = []
        if body or not images:
            content = self._content(channel, body, note=note)
            if reply_to and "m.relates_to" not in content:
                content["m.relates_to"] = {"m.in_reply_to": {"event_id": reply_to}}
            contents.append(content)
        for image in images:
            contents.append({**self._content(channel, "", note=note), **image, "m.mentions": {}})
        if key:
            contents[0][SALON_KEY] = key
        sent = [
            await self._send_content(channel, content, key if index == 0 else None)
            for index, content in enumerate(contents)
        ]
        return sent[0]

    def _uploader(self) -> Uploader:
        if self._uploads is None:
            raise PlatformError("not connected to the Matrix homeserver")
        return self._uploads

    async def _send_content(
        self, channel: ChannelRef, content: JSON, key: str | None = None
    ) -> Message:
        """One event. Its transaction id is made from ``key``, else it is the one a failed
        try of the same content used (the homeserver may have taken that one: the answer's
        next try must not post it twice), else a new one."""
        room, _ = room_and_root(channel)
        same = hashlib.sha256(json.dumps([room, content], sort_keys=True).encode()).hexdigest()
        txn = _key_txn(key) if key else self._unsent.pop(same, "") or new_txn_id()
        try:
            event_id = await self._need().send_event(room, "m.room.message", content, txn)
        except PlatformError as exc:
            if exc.transient:
                self._unsent[same] = txn
                while len(self._unsent) > _UNSENT:
                    self._unsent.popitem(last=False)
            raise
        message = self._read().message(
            {**_shell(event_id, self._me.user_id), "content": content}, room
        )
        assert message is not None
        return message

    def _content(self, channel: ChannelRef, body: str, *, note: bool) -> JSON:
        """A message's content: a note is an ``m.notice`` that notifies nobody; an answer
        notifies only the people it names by MXID (never the whole room)."""
        content: JSON = {"msgtype": "m.notice" if note else "m.text", "body": body}
        if note:
            content[NOTE_KEY] = True
            content["m.mentions"] = {}
        else:
            users = sorted(set(MXID.findall(body)) - {self._me.user_id})
            content["m.mentions"] = {"user_ids": users}
        _, root = room_and_root(channel)
        if root is not None:
            content["m.relates_to"] = {
                "rel_type": "m.thread",
                "event_id": root,
                "is_falling_back": True,
                "m.in_reply_to": {"event_id": root},
            }
        return content

    async def _note(self, channel: ChannelRef, text: str) -> str:
        return (await self.send(channel, text, note=True)).id

    async def sent_before(self, channel: ChannelRef, key: str, *, note: str) -> bool | None:
        """Whether the first message of an answer went out under ``key``. It was sent under
        a transaction id made from the key, and a send under a transaction id the device
        used before gives back the event made then (the client-server API's idempotent
        send; Synapse remembers a device's ids for a day): ``note`` is sent under it, and
        what comes back is the note (nothing went out, the note is posted) or the message
        sent before (nothing is posted)."""
        room, _ = room_and_root(channel)
        server = self._need()
        content = self._content(channel, note, note=True)
        event_id = await server.send_event(room, "m.room.message", content, _key_txn(key))
        came_back = (await server.event(room, event_id)).get("content") or {}
        return not (came_back.get(NOTE_KEY) and came_back.get("body") == note)

    async def send_tool_log(self, channel: ChannelRef, text: str) -> None:
        await self.send(channel, text, note=True)

    async def send_direct(self, person: Participant, text: str) -> None:
        """Their direct room with the bot, then the text (they read it once they have
        taken the invite: the room shows them its history)."""
        room = await self._directs.of(person.id)
        content = {"msgtype": "m.text", "body": text, "m.mentions": {}}
        await self._need().send_event(room, "m.room.message", content)

    async def request_approval(
        self, channel: ChannelRef, request: ApprovalRequest
    ) -> ApprovalDecision:
        if self._approvals is None:
            raise PlatformError("not connected to the Matrix homeserver")
        return await self._approvals.ask(channel, request)

    async def delete_message(self, channel: ChannelRef, message_id: str) -> None:
        room, _ = room_and_root(channel)
        await self._need().redact(room, message_id)

    async def react(self, channel: ChannelRef, message_id: str, emoji: str) -> None:
        room, _ = room_and_root(channel)
        content = {
            "m.relates_to": {"rel_type": "m.annotation", "event_id": message_id, "key": emoji}
        }
        await self._need().send_event(room, "m.reaction", content)

    @asynccontextmanager
    async def typing(self, channel: ChannelRef) -> AsyncIterator[None]:
        room, _ = room_and_root(channel)
        server = self._need()

        async def keep_typing() -> None:
            while True:
                with contextlib.suppress(PlatformError):
                    await server.typing(room, self._me.user_id, True)
                await asyncio.sleep(_TYPING_REFRESH)  # renewing a notice, not waiting on one

        task = asyncio.create_task(keep_typing())
        try:
            yield
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            with contextlib.suppress(PlatformError):
                await server.typing(room, self._me.user_id, False)

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


def _key_txn(key: str) -> str:
    """The transaction id of the message sent under ``key`` (``sent_before``)."""
    return f"salon-key-{key}"


def _shell(event_id: str, sender: str) -> JSON:
    """The parts of a sent event the homeserver would give back, for the Message of it."""
    return {
        "type": "m.room.message",
        "event_id": event_id,
        "sender": sender,
        "origin_server_ts": int(time.time() * 1000),
    }
