"""Running a migration's DDL on either database: a word per column type differs
(``{serial}`` and the like)."""

from __future__ import annotations

from salon.store._db import Connection

__all__ = ["run"]

# SQLite's INTEGER is 64-bit, and an id column must be exactly INTEGER there to be the
# rowid (the full-text index hangs on it); PostgreSQL numbers rows with sequences.
_TYPES = {
    "sqlite": {"serial": "INTEGER", "bigserial": "INTEGER", "bigint": "INTEGER", "blob": "BLOB"},
    "postgresql": {
        "serial": "SERIAL",
        "bigserial": "BIGSERIAL",
        "bigint": "BIGINT",
        "blob": "BYTEA",
    },
}


def _ddl(conn: Connection, *statements: str) -> list[str]:
    return [s.format(**_TYPES[conn.dialect]) for s in statements]


async def run(conn: Connection, *statements: str) -> None:
    for statement in _ddl(conn, *statements):
        await conn.execute(statement)
