"""Direct rooms: where a message for one person alone goes (``send_direct``). The room the
bot's ``m.direct`` account data names for them, else one made with ``is_direct`` and an
invite to them, then named there (as clients do); remembered, made once per person."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable

from salon.platforms.matrix.api import Homeserver

__all__ = ["DirectRooms"]

_DIRECTS = 1024  # people whose direct room is remembered (else read from m.direct)


class DirectRooms:
    def __init__(self, server: Callable[[], Homeserver], me: Callable[[], str]) -> None:
        self._server = server
        self._me = me
        self._rooms: OrderedDict[str, str] = OrderedDict()  # person -> their direct room
        self._making = asyncio.Lock()  # one direct room made per person, not two

    async def of(self, user: str) -> str:
        """``user``'s direct room with the bot, made where there is none."""
        async with self._making:
            if user in self._rooms:
                return self._rooms[user]
            server, me = self._server(), self._me()
            directs = await server.account_data(me, "m.direct") or {}
            rooms = [str(r) for r in directs.get(user) or []]
            if not rooms:
                made = await server.call(
                    "POST",
                    "/_matrix/client/v3/createRoom",
                    {"is_direct": True, "invite": [user], "preset": "trusted_private_chat"},
                )
                rooms = [str(made["room_id"])]
                await server.put_account_data(me, "m.direct", {**directs, user: rooms})
            self._rooms[user] = rooms[-1]
            while len(self._rooms) > _DIRECTS:
                self._rooms.popitem(last=False)
            return rooms[-1]
