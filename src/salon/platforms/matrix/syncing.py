"""The long-polled ``/sync`` that brings a Matrix bot its events: invites (joined only from
allowed users or servers), leaves and kicks (the room is forgotten), encryption (told once,
``kept.py``), and each joined room's new timeline events, handed on once each.

Where the sync stopped (``next_batch``) is kept in the store after each sync's events were
handed on: a start goes on from there, so what was said while the bot was away comes in its
first sync and is answered like anything new, except what is older than
``catch_up.max_age`` (context only; likewise after a sync that failed). A bot's very first
start, with no position kept, only sets where to start: the rooms' past is history.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from salon.config import MatrixConfig
from salon.errors import PlatformError
from salon.platforms.matrix.access import Access
from salon.platforms.matrix.api import Homeserver
from salon.platforms.matrix.api import q as _q
from salon.platforms.matrix.convert import Names
from salon.platforms.matrix.kept import EncryptedRooms, Kept
from salon.tasks import TaskState, supervise

__all__ = ["Syncing"]

logger = logging.getLogger(__name__)

JSON = dict[str, Any]
Deliver = Callable[[str, JSON], Awaitable[None]]  # a new timeline event of a joined room
_SYNC_FILTER = json.dumps(
    {
        "room": {"timeline": {"limit": 50}, "state": {"lazy_load_members": True}},
        "presence": {"types": []},
        "account_data": {"types": []},
    }
)
_SEEN = 1024  # event ids remembered so a repeated sync delivers nothing twice


class Syncing:
    def __init__(
        self,
        config: MatrixConfig,
        *,
        need: Callable[[], Homeserver],
        names: Names,
        access: Access,
        encrypted: EncryptedRooms,
        kept: Kept | None,
        deliver: Deliver,
    ) -> None:
        """``deliver``: where each new event goes (not the bot's own, not in a room told
        it is encrypted: the caller decides)."""
        self.config = config
        self._need = need
        self._names = names
        self._access = access
        self.encrypted = encrypted
        self._kept = kept
        self._deliver = deliver
        self._since: str | None = None
        self._behind = False  # this sync follows a gap: what is older than the window waits
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._runner: asyncio.Task[None] | None = None
        self._telling: asyncio.Task[None] | None = None
        self._halt = asyncio.Event()
        self._synced = asyncio.Event()
        self.connection = TaskState("Matrix sync")

    @property
    def connected(self) -> bool:
        return self._synced.is_set() and not self._halt.is_set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    async def begin(self) -> None:
        """The first sync (from the position kept, if any), then the sync loop; and the
        task that tells encrypted rooms, apart from it."""
        await self.encrypted.load()
        telling = supervise("Matrix encrypted rooms", self.encrypted.run)
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

    async def stop(self) -> None:
        self._halt.set()
        for task in (self._runner, self._telling):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        self._runner = self._telling = None

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
        user_id = self.config.user_id
        inviter = next(
            (
                str(e.get("sender", ""))
                for e in events
                if e.get("type") == "m.room.member" and e.get("state_key") == user_id
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
            self.encrypted.found(room)
        for event in timeline:
            new = self._remember(str(event.get("event_id", "")))
            sent_at = event.get("origin_server_ts")
            late = isinstance(sent_at, int) and sent_at < oldest
            if new and not history and not late:
                await self._deliver(room, event)

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
