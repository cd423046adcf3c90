"""Migrations of the SQL store for delivery, web sessions and shared rooms (21 on), kept
apart from ``_tables`` for its length (the migrations that bots and web servers of one
deployment share across processes); the same rules hold (see there)."""

from __future__ import annotations

from salon.store._db import Connection
from salon.store._ddl import run as _run

__all__ = ["m21_delivery", "m22_web_sessions", "m23_room_turns"]


async def m21_delivery(conn: Connection) -> None:
    """What the bot last saw per channel, the answers it owes, and platforms' read
    positions (salon.store._delivery)."""
    await _run(
        conn,
        """CREATE TABLE channel_marks (
            bot VARCHAR NOT NULL,
            channel VARCHAR NOT NULL,
            direct BOOLEAN NOT NULL,
            monitored BOOLEAN NOT NULL,
            last_id VARCHAR NOT NULL,
            last_at FLOAT NOT NULL,
            answered_at FLOAT NOT NULL,
            PRIMARY KEY (bot, channel)
        )""",
        """CREATE TABLE owed_answers (
            bot VARCHAR NOT NULL,
            platform VARCHAR NOT NULL,
            message_id VARCHAR NOT NULL,
            channel VARCHAR NOT NULL,
            body TEXT NOT NULL,
            owner VARCHAR NOT NULL,
            answer_key VARCHAR,
            started_at FLOAT NOT NULL,
            PRIMARY KEY (bot, platform, message_id)
        )""",
        """CREATE TABLE delivery_cursors (
            bot VARCHAR NOT NULL,
            name VARCHAR NOT NULL,
            value TEXT NOT NULL,
            updated_at FLOAT NOT NULL,
            PRIMARY KEY (bot, name)
        )""",
    )


async def m22_web_sessions(conn: Connection) -> None:
    """The web server's sessions, so that signing out ends them (salon.web.sessions)."""
    await _run(
        conn,
        """CREATE TABLE web_sessions (
            id VARCHAR NOT NULL,
            created_at FLOAT NOT NULL,
            expires_at FLOAT NOT NULL,
            PRIMARY KEY (id)
        )""",
    )


async def m23_room_turns(conn: Connection) -> None:
    """Who answers a message nobody addressed, among the bots in a room (salon.store._rooms)."""
    await _run(
        conn,
        """CREATE TABLE room_turns (
            channel VARCHAR NOT NULL,
            message_id VARCHAR NOT NULL,
            slot INTEGER NOT NULL,
            bot VARCHAR NOT NULL,
            status VARCHAR NOT NULL,
            claimed_at FLOAT NOT NULL,
            expires_at FLOAT NOT NULL,
            PRIMARY KEY (channel, message_id, slot)
        )""",
        "CREATE INDEX ix_room_turns_channel ON room_turns (channel, claimed_at)",
        "CREATE INDEX ix_channel_marks_channel ON channel_marks (channel, last_at)",
    )
