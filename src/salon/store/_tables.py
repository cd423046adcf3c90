"""Tables and append-only migrations of the SQL store.

Each migration is the SQL it ran when it was written, for both databases; what differs
between them is a word per column type (``{serial}`` and the like, filled in by
``salon.store._ddl``). Migrations 21 on are in ``_shared_tables``. A database is at the
version of the newest migration recorded in ``schema_migrations``.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from salon.errors import StoreError
from salon.store._db import Connection
from salon.store._ddl import run as _run
from salon.store._shared_tables import m21_delivery, m22_web_sessions, m23_room_turns

__all__ = ["CONVERSATION_KINDS", "MIGRATIONS", "migrate"]

CONVERSATION_KINDS = ("message", "action")
"""Chat-log kinds that are conversation; joins, parts, notices and the like are not."""

_SCHEMA_MIGRATIONS = """CREATE TABLE IF NOT EXISTS schema_migrations (
    version {serial} NOT NULL,
    applied_at FLOAT NOT NULL,
    PRIMARY KEY (version)
)"""


async def _m1_chat_log_and_usage(conn: Connection) -> None:
    await _run(
        conn,
        """CREATE TABLE chat_log (
            id {bigserial} NOT NULL,
            bot VARCHAR NOT NULL,
            channel VARCHAR NOT NULL,
            message_id VARCHAR NOT NULL,
            author_id VARCHAR NOT NULL,
            author_name VARCHAR NOT NULL,
            author_is_bot BOOLEAN NOT NULL,
            kind VARCHAR NOT NULL,
            text TEXT NOT NULL,
            created_at FLOAT NOT NULL,
            PRIMARY KEY (id)
        )""",
        "CREATE INDEX ix_chat_log_channel_time ON chat_log (channel, created_at)",
        "CREATE INDEX ix_chat_log_bot_channel_id ON chat_log (bot, channel, id)",
        """CREATE TABLE usage_log (
            id {bigserial} NOT NULL,
            bot VARCHAR NOT NULL,
            channel VARCHAR NOT NULL,
            provider VARCHAR NOT NULL,
            model VARCHAR NOT NULL,
            input_tokens INTEGER NOT NULL,
            output_tokens INTEGER NOT NULL,
            cache_read_tokens INTEGER NOT NULL,
            cache_write_tokens INTEGER NOT NULL,
            created_at FLOAT NOT NULL,
            PRIMARY KEY (id)
        )""",
    )


async def _m2_chat_log_search(conn: Connection) -> None:
    """Full-text index over the chat log (SQLite FTS5), kept in step by triggers."""
    if conn.dialect != "sqlite":
        return
    await _run(
        conn,
        "CREATE VIRTUAL TABLE chat_log_fts USING fts5("
        "text, content='chat_log', content_rowid='id', tokenize='unicode61')",
        "CREATE TRIGGER chat_log_ai AFTER INSERT ON chat_log BEGIN "
        "INSERT INTO chat_log_fts(rowid, text) VALUES (new.id, new.text); END",
        "CREATE TRIGGER chat_log_ad AFTER DELETE ON chat_log BEGIN "
        "INSERT INTO chat_log_fts(chat_log_fts, rowid, text) "
        "VALUES ('delete', old.id, old.text); END",
        "INSERT INTO chat_log_fts(rowid, text) SELECT id, text FROM chat_log",
    )


async def _m3_approvals(conn: Connection) -> None:
    # Version 11 adds the owner.
    await _run(
        conn,
        """CREATE TABLE approvals (
            id {serial} NOT NULL,
            bot VARCHAR NOT NULL,
            channel VARCHAR NOT NULL,
            tool VARCHAR NOT NULL,
            arguments TEXT NOT NULL,
            requester VARCHAR NOT NULL,
            status VARCHAR NOT NULL,
            created_at FLOAT NOT NULL,
            decided_at FLOAT,
            PRIMARY KEY (id)
        )""",
        "CREATE INDEX ix_approvals_bot_status ON approvals (bot, status)",
    )


async def _m4_schedules(conn: Connection) -> None:
    # Version 8 adds the claim's status and the creator's identity. ``at`` is a one-shot's
    # UTC timestamp; ``next_due`` is NULL once the schedule will never fire again; ``due``
    # is an occurrence, UTC epoch seconds.
    await _run(
        conn,
        """CREATE TABLE schedules (
            id {serial} NOT NULL,
            bot VARCHAR NOT NULL,
            channel VARCHAR NOT NULL,
            cron VARCHAR,
            at FLOAT,
            timezone VARCHAR NOT NULL,
            prompt TEXT NOT NULL,
            created_by_id VARCHAR NOT NULL,
            created_by_name VARCHAR NOT NULL,
            created_at FLOAT NOT NULL,
            next_due FLOAT,
            active BOOLEAN NOT NULL,
            PRIMARY KEY (id)
        )""",
        "CREATE INDEX ix_schedules_bot_active ON schedules (bot, active)",
        """CREATE TABLE schedule_fires (
            schedule_id INTEGER NOT NULL,
            due {bigint} NOT NULL,
            fired_at FLOAT NOT NULL,
            owner VARCHAR NOT NULL,
            PRIMARY KEY (schedule_id, due)
        )""",
    )


async def _m5_monitored_channels(conn: Connection) -> None:
    await _run(
        conn,
        """CREATE TABLE monitored_channels (
            bot VARCHAR NOT NULL,
            channel VARCHAR NOT NULL,
            added_by VARCHAR NOT NULL,
            added_at FLOAT NOT NULL,
            PRIMARY KEY (bot, channel)
        )""",
    )


async def _m6_rolling_state(conn: Connection) -> None:
    # Version 7 adds tail_id.
    await _run(
        conn,
        """CREATE TABLE rolling_state (
            bot VARCHAR NOT NULL,
            channel VARCHAR NOT NULL,
            anchor_id VARCHAR NOT NULL,
            breakpoint_id VARCHAR,
            head_id VARCHAR NOT NULL,
            breakpoint_time FLOAT,
            PRIMARY KEY (bot, channel)
        )""",
    )


async def _m7_rolling_tail(conn: Connection) -> None:
    await _run(conn, "ALTER TABLE rolling_state ADD COLUMN tail_id VARCHAR")


async def _m8_schedule_claims(conn: Connection) -> None:
    """Occurrences are claimed (until their activation ends: then done, answered or told,
    or dropped); existing ones were answered already."""
    await _run(
        conn,
        "ALTER TABLE schedule_fires ADD COLUMN status VARCHAR NOT NULL DEFAULT 'done'",
        "ALTER TABLE schedule_fires ADD COLUMN completed_at FLOAT",
        "ALTER TABLE schedules ADD COLUMN created_by_identity VARCHAR NOT NULL DEFAULT ''",
    )


async def _m9_traces_health_inbox(conn: Connection) -> None:
    # ``size``: bytes of ``body`` (zlib-compressed JSON), for the size bound. ``base_id``
    # (version 13, so a new database has it at once): the channel's keyframe whose
    # messages this body's requests refer to. bot_health's platforms and tasks are JSON.
    await _run(
        conn,
        """CREATE TABLE traces (
            id {serial} NOT NULL,
            bot VARCHAR NOT NULL,
            platform VARCHAR NOT NULL,
            channel VARCHAR NOT NULL,
            started_at FLOAT NOT NULL,
            ended_at FLOAT NOT NULL,
            outcome VARCHAR NOT NULL,
            error TEXT,
            error_kind VARCHAR,
            requester_id VARCHAR NOT NULL,
            requester VARCHAR NOT NULL,
            trigger_id VARCHAR,
            model VARCHAR NOT NULL,
            input_tokens INTEGER NOT NULL,
            output_tokens INTEGER NOT NULL,
            cache_read_tokens INTEGER NOT NULL,
            cache_write_tokens INTEGER NOT NULL,
            cost FLOAT NOT NULL,
            read_share FLOAT,
            expected_read_share FLOAT,
            cache_break VARCHAR,
            first_token_ms FLOAT,
            total_ms FLOAT NOT NULL,
            size INTEGER NOT NULL,
            body {blob} NOT NULL,
            base_id INTEGER,
            PRIMARY KEY (id)
        )""",
        "CREATE INDEX ix_traces_channel_started ON traces (channel, started_at)",
        "CREATE INDEX ix_traces_outcome_started ON traces (outcome, started_at)",
        "CREATE INDEX ix_traces_base ON traces (base_id)",
        "CREATE INDEX ix_traces_bot_started ON traces (bot, started_at)",
        "CREATE INDEX ix_traces_started ON traces (started_at)",
        """CREATE TABLE trace_messages (
            message_id VARCHAR NOT NULL,
            trace_id INTEGER NOT NULL
        )""",
        "CREATE INDEX ix_trace_messages_trace ON trace_messages (trace_id)",
        "CREATE INDEX ix_trace_messages_message ON trace_messages (message_id)",
        """CREATE TABLE trace_tools (
            trace_id INTEGER NOT NULL,
            bot VARCHAR NOT NULL,
            tool VARCHAR NOT NULL,
            outcome VARCHAR NOT NULL,
            duration_ms FLOAT NOT NULL,
            started_at FLOAT NOT NULL
        )""",
        "CREATE INDEX ix_trace_tools_trace ON trace_tools (trace_id)",
        """CREATE TABLE bot_health (
            bot VARCHAR NOT NULL,
            pid INTEGER NOT NULL,
            host VARCHAR NOT NULL,
            started_at FLOAT NOT NULL,
            updated_at FLOAT NOT NULL,
            platforms TEXT NOT NULL,
            last_event_at FLOAT,
            last_answer_at FLOAT,
            queue_depth INTEGER NOT NULL,
            tasks TEXT NOT NULL,
            reload_error TEXT,
            PRIMARY KEY (bot)
        )""",
        """CREATE TABLE inbox (
            id {serial} NOT NULL,
            bot VARCHAR NOT NULL,
            channel VARCHAR NOT NULL,
            text TEXT NOT NULL,
            author VARCHAR NOT NULL,
            created_at FLOAT NOT NULL,
            taken_at FLOAT,
            taken_by VARCHAR,
            PRIMARY KEY (id)
        )""",
        "CREATE INDEX ix_inbox_bot_taken ON inbox (bot, taken_at)",
    )


async def _m10_postgres_search(conn: Connection) -> None:
    """Full-text search over the chat log on PostgreSQL (SQLite has FTS5 since version 2):
    a stored tsvector of each line, GIN-indexed. The ``simple`` configuration lowercases
    and neither stems nor drops stop words, as FTS5's unicode61 tokenizer does."""
    if conn.dialect != "postgresql":
        return
    await _run(
        conn,
        "ALTER TABLE chat_log ADD COLUMN search tsvector "
        "GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED",
        "CREATE INDEX ix_chat_log_search ON chat_log USING gin (search)",
    )


async def _m11_process_leases(conn: Connection) -> None:
    """Processes hold leases (``lease_until`` on the database's clock, epoch seconds);
    approvals name their process, so another takes over only what a process whose lease
    ran out left."""
    await _run(
        conn,
        """CREATE TABLE processes (
            owner VARCHAR NOT NULL,
            bot VARCHAR NOT NULL,
            host VARCHAR NOT NULL,
            pid INTEGER NOT NULL,
            started_at FLOAT NOT NULL,
            lease_until FLOAT NOT NULL,
            PRIMARY KEY (owner)
        )""",
        "ALTER TABLE approvals ADD COLUMN owner VARCHAR NOT NULL DEFAULT ''",
        "CREATE INDEX ix_schedule_fires_status ON schedule_fires (status)",
    )


async def _m12_limits(conn: Connection) -> None:
    # ``key``: rate:…, cooldown:…, user:…:tokens, …; ``amount``: 1 for a request, tokens
    # or dollars spent.
    await _run(
        conn,
        """CREATE TABLE limit_events (
            id {serial} NOT NULL,
            bot VARCHAR NOT NULL,
            "key" VARCHAR NOT NULL,
            at FLOAT NOT NULL,
            amount FLOAT NOT NULL,
            PRIMARY KEY (id)
        )""",
        'CREATE INDEX ix_limit_events_bot_key_at ON limit_events (bot, "key", at)',
        """CREATE TABLE limit_marks (
            bot VARCHAR NOT NULL,
            "key" VARCHAR NOT NULL,
            until FLOAT NOT NULL,
            PRIMARY KEY (bot, "key")
        )""",
    )


async def _columns(conn: Connection, table: str) -> set[str]:
    if conn.dialect == "sqlite":
        return {row[1] for row in await conn.fetch(f"PRAGMA table_info({table})")}
    rows = await conn.fetch(
        "SELECT column_name FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND table_name = :table",
        {"table": table},
    )
    return {row[0] for row in rows}


async def _m13_trace_keyframes(conn: Connection) -> None:
    """Trace bodies may refer to an earlier trace of their channel (salon.store._trace_delta).
    Version 9 creates ``traces`` with the column, so a new database has it already."""
    if "base_id" not in await _columns(conn, "traces"):
        await _run(conn, "ALTER TABLE traces ADD COLUMN base_id INTEGER")
    await _run(conn, "CREATE INDEX IF NOT EXISTS ix_traces_base ON traces (base_id)")


async def _m14_answer_keys(conn: Connection) -> None:
    """The key the first message of an occurrence's answer went out under (set just before
    it is sent), so a process taking the claim over can ask the platform whether it was."""
    await _run(conn, "ALTER TABLE schedule_fires ADD COLUMN answer_key VARCHAR")


async def _m15_reasoning_tokens(conn: Connection) -> None:
    """The tokens a model spent thinking, per usage row and per trace: a part of its
    output tokens (billed as output), counted on their own."""
    await _run(
        conn,
        "ALTER TABLE usage_log ADD COLUMN reasoning_tokens INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE traces ADD COLUMN reasoning_tokens INTEGER NOT NULL DEFAULT 0",
    )


async def _m16_notes(conn: Connection) -> None:
    """Notes (salon.notes): a scope and its key, the text, and the provenance (who said it,
    in which channel, which message, when); a person's choice to have their notes shown
    outside DMs. Full-text search as for the chat log: FTS5 kept in step by triggers on
    SQLite, a stored tsvector under a GIN index on PostgreSQL."""
    await _run(
        conn,
        """CREATE TABLE notes (
            id {serial} NOT NULL,
            bot VARCHAR NOT NULL,
            scope VARCHAR NOT NULL,
            scope_key VARCHAR NOT NULL,
            text TEXT NOT NULL,
            author_id VARCHAR NOT NULL,
            author_name VARCHAR NOT NULL,
            channel VARCHAR NOT NULL,
            channel_name VARCHAR NOT NULL,
            message_id VARCHAR NOT NULL,
            said_at FLOAT NOT NULL,
            created_at FLOAT NOT NULL,
            updated_at FLOAT NOT NULL,
            PRIMARY KEY (id)
        )""",
        "CREATE INDEX ix_notes_bot_scope ON notes (bot, scope, scope_key)",
        "CREATE INDEX ix_notes_author ON notes (author_id)",
        "CREATE INDEX ix_notes_person ON notes (scope_key)",
        "CREATE INDEX ix_notes_bot_updated ON notes (bot, updated_at)",
        """CREATE TABLE memory_consent (
            bot VARCHAR NOT NULL,
            person_id VARCHAR NOT NULL,
            outside_dm BOOLEAN NOT NULL,
            updated_at FLOAT NOT NULL,
            PRIMARY KEY (bot, person_id)
        )""",
    )
    if conn.dialect == "sqlite":
        await _run(
            conn,
            "CREATE VIRTUAL TABLE notes_fts USING fts5("
            "text, content='notes', content_rowid='id', tokenize='unicode61')",
            "CREATE TRIGGER notes_ai AFTER INSERT ON notes BEGIN "
            "INSERT INTO notes_fts(rowid, text) VALUES (new.id, new.text); END",
            "CREATE TRIGGER notes_ad AFTER DELETE ON notes BEGIN "
            "INSERT INTO notes_fts(notes_fts, rowid, text) "
            "VALUES ('delete', old.id, old.text); END",
            "CREATE TRIGGER notes_au AFTER UPDATE OF text ON notes BEGIN "
            "INSERT INTO notes_fts(notes_fts, rowid, text) VALUES ('delete', old.id, old.text); "
            "INSERT INTO notes_fts(rowid, text) VALUES (new.id, new.text); END",
        )
        return
    await _run(
        conn,
        "ALTER TABLE notes ADD COLUMN search tsvector "
        "GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED",
        "CREATE INDEX ix_notes_search ON notes USING gin (search)",
    )


async def _m17_inbox_trace_context(conn: Connection) -> None:
    """The W3C ``traceparent`` an event was pushed with, so its activation continues it."""
    await _run(conn, "ALTER TABLE inbox ADD COLUMN traceparent VARCHAR")


async def _m18_note_trust(conn: Connection) -> None:
    """Whether a note may shape answers to people other than its author (salon.notes):
    written by the operator, an authorized role or the bot itself, or approved by one.
    Server, bot and person notes made before were trusted by how they could be written;
    a channel note of unknown standing stays its author's. And each note's scope as one
    word (``tag``), searched with its text on SQLite: FTS5 then ranks only the notes in
    view, not every match of a common word among all the bot's notes."""
    await _run(
        conn,
        "ALTER TABLE notes ADD COLUMN trusted BOOLEAN NOT NULL DEFAULT FALSE",
        "UPDATE notes SET trusted = TRUE WHERE scope <> 'channel'",
        "ALTER TABLE notes ADD COLUMN tag VARCHAR NOT NULL DEFAULT ''",
    )
    if conn.dialect != "sqlite":
        return
    await _run(
        conn,
        "UPDATE notes SET tag = 'k' || lower(hex(scope || ':' || scope_key))",
        "DROP TRIGGER notes_ai",
        "DROP TRIGGER notes_ad",
        "DROP TRIGGER notes_au",
        "DROP TABLE notes_fts",
        "CREATE VIRTUAL TABLE notes_fts USING fts5("
        "text, tag, content='notes', content_rowid='id', tokenize='unicode61')",
        "CREATE TRIGGER notes_ai AFTER INSERT ON notes BEGIN "
        "INSERT INTO notes_fts(rowid, text, tag) VALUES (new.id, new.text, new.tag); END",
        "CREATE TRIGGER notes_ad AFTER DELETE ON notes BEGIN "
        "INSERT INTO notes_fts(notes_fts, rowid, text, tag) "
        "VALUES ('delete', old.id, old.text, old.tag); END",
        "CREATE TRIGGER notes_au AFTER UPDATE OF text, tag ON notes BEGIN "
        "INSERT INTO notes_fts(notes_fts, rowid, text, tag) "
        "VALUES ('delete', old.id, old.text, old.tag); "
        "INSERT INTO notes_fts(rowid, text, tag) VALUES (new.id, new.text, new.tag); END",
        "INSERT INTO notes_fts(notes_fts) VALUES ('rebuild')",
    )


async def _m19_mcp_tokens(conn: Connection) -> None:
    """OAuth tokens and client registrations for MCP servers, sealed (salon.tools.mcp_auth)."""
    await _run(
        conn,
        """CREATE TABLE mcp_tokens (
            bot VARCHAR NOT NULL,
            server VARCHAR NOT NULL,
            kind VARCHAR NOT NULL,
            sealed {blob} NOT NULL,
            updated_at FLOAT NOT NULL,
            PRIMARY KEY (bot, server, kind)
        )""",
    )


async def _m20_cache_write_waste(conn: Connection) -> None:
    """Cache writes a channel's next call showed unread (salon.llm.cache_plan.WriteWatch)."""
    await _run(
        conn, "ALTER TABLE traces ADD COLUMN cache_write_wasted_tokens INTEGER NOT NULL DEFAULT 0"
    )


MIGRATIONS: list[tuple[int, Callable[[Connection], Awaitable[None]]]] = [
    (1, _m1_chat_log_and_usage),
    (2, _m2_chat_log_search),
    (3, _m3_approvals),
    (4, _m4_schedules),
    (5, _m5_monitored_channels),
    (6, _m6_rolling_state),
    (7, _m7_rolling_tail),
    (8, _m8_schedule_claims),
    (9, _m9_traces_health_inbox),
    (10, _m10_postgres_search),
    (11, _m11_process_leases),
    (12, _m12_limits),
    (13, _m13_trace_keyframes),
    (14, _m14_answer_keys),
    (15, _m15_reasoning_tokens),
    (16, _m16_notes),
    (17, _m17_inbox_trace_context),
    (18, _m18_note_trust),
    (19, _m19_mcp_tokens),
    (20, _m20_cache_write_waste),
    (21, m21_delivery),
    (22, m22_web_sessions),
    (23, m23_room_turns),
]


async def migrate(conn: Connection) -> None:
    """Apply the migrations the database has not seen, in one transaction (``conn``)."""
    await _run(conn, _SCHEMA_MIGRATIONS)
    done = {int(r[0]) for r in await conn.fetch("SELECT version FROM schema_migrations")}
    newest = max(v for v, _ in MIGRATIONS)
    if done and max(done) > newest:
        raise StoreError(f"database schema v{max(done)} is newer than this Salon (v{newest})")
    for version, apply in MIGRATIONS:
        if version in done:
            continue
        await apply(conn)
        await conn.execute(
            "INSERT INTO schema_migrations (version, applied_at) VALUES (:version, :at)",
            {"version": version, "at": time.time()},
        )
