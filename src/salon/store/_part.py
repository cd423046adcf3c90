"""What every part of the store shares: the store's database, reached once it is open.

A part is made with the store (so it can be handed out before ``open``) and reads the
database through the store each time: a part used before ``open`` or after ``close``
fails with the store's own error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from salon.errors import StoreError
from salon.store._db import Database, DatabaseError

__all__ = ["Part", "execute"]


class Part:
    def __init__(self, database: Callable[[], Database]) -> None:
        self._database = database

    @property
    def db(self) -> Database:
        return self._database()


async def execute(db: Database, statement: str, params: dict[str, Any]) -> None:
    """One write in its own transaction; a database error as a ``StoreError``."""
    try:
        async with db.begin() as conn:
            await conn.many([(statement, params)])
    except DatabaseError as exc:
        raise StoreError(f"store write failed: {exc}") from exc
