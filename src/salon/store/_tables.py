"""Tables and append-only migrations of the SQL store."""

from __future__ import annotations

import time
from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from salon.errors import StoreError

metadata = sa.MetaData()

# 64-bit on PostgreSQL; SQLite's INTEGER is 64-bit already, and an id column must stay
# exactly INTEGER there to be the rowid (the full-text index hangs on it).
BigInt = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

CONVERSATION_KINDS = ("message", "action")
"""Chat-log kinds that are conversation; joins, parts, notices and the like are not."""

schema_migrations = sa.Table(
    "schema_migrations",
    metadata,
    sa.Column("version", sa.Integer, primary_key=True),
    sa.Column("applied_at", sa.Float, nullable=False),
)

chat_log = sa.Table(
    "chat_log",
    metadata,
    sa.Column("id", BigInt, primary_key=True, autoincrement=True),
    sa.Column("bot", sa.String, nullable=False),
    sa.Column("channel", sa.String, nullable=False),
    sa.Column("message_id", sa.String, nullable=False),
    sa.Column("author_id", sa.String, nullable=False),
    sa.Column("author_name", sa.String, nullable=False),
    sa.Column("author_is_bot", sa.Boolean, nullable=False),
    sa.Column("kind", sa.String, nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Index("ix_chat_log_bot_channel_id", "bot", "channel", "id"),
    sa.Index("ix_chat_log_channel_time", "channel", "created_at"),
)

usage_log = sa.Table(
    "usage_log",
    metadata,
    sa.Column("id", BigInt, primary_key=True, autoincrement=True),
    sa.Column("bot", sa.String, nullable=False),
    sa.Column("channel", sa.String, nullable=False),
    sa.Column("provider", sa.String, nullable=False),
    sa.Column("model", sa.String, nullable=False),
    sa.Column("input_tokens", sa.Integer, nullable=False),
    sa.Column("output_tokens", sa.Integer, nullable=False),
    sa.Column("cache_read_tokens", sa.Integer, nullable=False),
    sa.Column("cache_write_tokens", sa.Integer, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
)


approvals = sa.Table(
    "approvals",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("bot", sa.String, nullable=False),
    sa.Column("channel", sa.String, nullable=False),
    sa.Column("tool", sa.String, nullable=False),
    sa.Column("arguments", sa.Text, nullable=False),
    sa.Column("requester", sa.String, nullable=False),
    sa.Column("status", sa.String, nullable=False),  # pending, approved, cancelled, timeout, closed
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("decided_at", sa.Float, nullable=True),
    sa.Column("owner", sa.String, nullable=False, server_default=""),  # the asking process
    sa.Index("ix_approvals_bot_status", "bot", "status"),
)


def _m1_chat_log_and_usage(conn: Connection) -> None:
    chat_log.create(conn)
    usage_log.create(conn)


def _m2_chat_log_search(conn: Connection) -> None:
    """Full-text index over the chat log (SQLite FTS5), kept in step by triggers."""
    if conn.dialect.name != "sqlite":
        return
    statements = [
        "CREATE VIRTUAL TABLE chat_log_fts USING fts5("
        "text, content='chat_log', content_rowid='id', tokenize='unicode61')",
        "CREATE TRIGGER chat_log_ai AFTER INSERT ON chat_log BEGIN "
        "INSERT INTO chat_log_fts(rowid, text) VALUES (new.id, new.text); END",
        "CREATE TRIGGER chat_log_ad AFTER DELETE ON chat_log BEGIN "
        "INSERT INTO chat_log_fts(chat_log_fts, rowid, text) "
        "VALUES ('delete', old.id, old.text); END",
        "INSERT INTO chat_log_fts(rowid, text) SELECT id, text FROM chat_log",
    ]
    for statement in statements:
        conn.exec_driver_sql(statement)


def _m3_approvals(conn: Connection) -> None:
    # As it was at version 3; version 11 adds the owner.
    sa.Table(
        "approvals",
        sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("bot", sa.String, nullable=False),
        sa.Column("channel", sa.String, nullable=False),
        sa.Column("tool", sa.String, nullable=False),
        sa.Column("arguments", sa.Text, nullable=False),
        sa.Column("requester", sa.String, nullable=False),
        sa.Column("status", sa.String, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("decided_at", sa.Float, nullable=True),
        sa.Index("ix_approvals_bot_status", "bot", "status"),
    ).create(conn)


schedules = sa.Table(
    "schedules",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("bot", sa.String, nullable=False),
    sa.Column("channel", sa.String, nullable=False),
    sa.Column("cron", sa.String, nullable=True),
    sa.Column("at", sa.Float, nullable=True),  # one-shot: UTC timestamp
    sa.Column("timezone", sa.String, nullable=False),
    sa.Column("prompt", sa.Text, nullable=False),
    sa.Column("created_by_id", sa.String, nullable=False),
    sa.Column("created_by_name", sa.String, nullable=False),
    sa.Column("created_by_identity", sa.String, nullable=False, server_default=""),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("next_due", sa.Float, nullable=True),  # None once it will never fire again
    sa.Column("active", sa.Boolean, nullable=False),
    sa.Index("ix_schedules_bot_active", "bot", "active"),
)

schedule_fires = sa.Table(
    "schedule_fires",
    metadata,
    sa.Column("schedule_id", sa.Integer, primary_key=True),
    sa.Column("due", BigInt, primary_key=True),  # the occurrence, UTC epoch seconds
    sa.Column("fired_at", sa.Float, nullable=False),
    sa.Column("owner", sa.String, nullable=False),
    # claimed until its activation ends: then done (answered or told), or dropped
    sa.Column("status", sa.String, nullable=False, server_default="done"),
    sa.Column("completed_at", sa.Float, nullable=True),
)


def _m4_schedules(conn: Connection) -> None:
    # As they were at version 4; version 8 adds the claim's status and the creator's identity.
    meta = sa.MetaData()
    sa.Table(
        "schedules",
        meta,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("bot", sa.String, nullable=False),
        sa.Column("channel", sa.String, nullable=False),
        sa.Column("cron", sa.String, nullable=True),
        sa.Column("at", sa.Float, nullable=True),
        sa.Column("timezone", sa.String, nullable=False),
        sa.Column("prompt", sa.Text, nullable=False),
        sa.Column("created_by_id", sa.String, nullable=False),
        sa.Column("created_by_name", sa.String, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("next_due", sa.Float, nullable=True),
        sa.Column("active", sa.Boolean, nullable=False),
        sa.Index("ix_schedules_bot_active", "bot", "active"),
    ).create(conn)
    sa.Table(
        "schedule_fires",
        meta,
        sa.Column("schedule_id", sa.Integer, primary_key=True),
        sa.Column("due", BigInt, primary_key=True),
        sa.Column("fired_at", sa.Float, nullable=False),
        sa.Column("owner", sa.String, nullable=False),
    ).create(conn)


monitored_channels = sa.Table(
    "monitored_channels",
    metadata,
    sa.Column("bot", sa.String, primary_key=True),
    sa.Column("channel", sa.String, primary_key=True),  # channel key
    sa.Column("added_by", sa.String, nullable=False),
    sa.Column("added_at", sa.Float, nullable=False),
)


def _m5_monitored_channels(conn: Connection) -> None:
    monitored_channels.create(conn)


rolling_state = sa.Table(
    "rolling_state",
    metadata,
    sa.Column("bot", sa.String, primary_key=True),
    sa.Column("channel", sa.String, primary_key=True),
    sa.Column("anchor_id", sa.String, nullable=False),
    sa.Column("breakpoint_id", sa.String, nullable=True),
    sa.Column("head_id", sa.String, nullable=False),
    sa.Column("breakpoint_time", sa.Float, nullable=True),
    sa.Column("tail_id", sa.String, nullable=True),
)


def _m6_rolling_state(conn: Connection) -> None:
    # As it was at version 6; version 7 adds tail_id.
    sa.Table(
        "rolling_state",
        sa.MetaData(),
        sa.Column("bot", sa.String, primary_key=True),
        sa.Column("channel", sa.String, primary_key=True),
        sa.Column("anchor_id", sa.String, nullable=False),
        sa.Column("breakpoint_id", sa.String, nullable=True),
        sa.Column("head_id", sa.String, nullable=False),
        sa.Column("breakpoint_time", sa.Float, nullable=True),
    ).create(conn)


def _m7_rolling_tail(conn: Connection) -> None:
    conn.execute(sa.text("ALTER TABLE rolling_state ADD COLUMN tail_id VARCHAR"))


def _m8_schedule_claims(conn: Connection) -> None:
    """Occurrences are claimed, then completed; existing ones were answered already."""
    for statement in (
        "ALTER TABLE schedule_fires ADD COLUMN status VARCHAR NOT NULL DEFAULT 'done'",
        "ALTER TABLE schedule_fires ADD COLUMN completed_at FLOAT",
        "ALTER TABLE schedules ADD COLUMN created_by_identity VARCHAR NOT NULL DEFAULT ''",
    ):
        conn.execute(sa.text(statement))


traces = sa.Table(
    "traces",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("bot", sa.String, nullable=False),
    sa.Column("platform", sa.String, nullable=False),
    sa.Column("channel", sa.String, nullable=False),
    sa.Column("started_at", sa.Float, nullable=False),
    sa.Column("ended_at", sa.Float, nullable=False),
    sa.Column("outcome", sa.String, nullable=False),
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("error_kind", sa.String, nullable=True),
    sa.Column("requester_id", sa.String, nullable=False),
    sa.Column("requester", sa.String, nullable=False),
    sa.Column("trigger_id", sa.String, nullable=True),
    sa.Column("model", sa.String, nullable=False),
    sa.Column("input_tokens", sa.Integer, nullable=False),
    sa.Column("output_tokens", sa.Integer, nullable=False),
    sa.Column("cache_read_tokens", sa.Integer, nullable=False),
    sa.Column("cache_write_tokens", sa.Integer, nullable=False),
    sa.Column("cost", sa.Float, nullable=False),
    sa.Column("read_share", sa.Float, nullable=True),
    sa.Column("expected_read_share", sa.Float, nullable=True),
    sa.Column("cache_break", sa.String, nullable=True),
    sa.Column("first_token_ms", sa.Float, nullable=True),
    sa.Column("total_ms", sa.Float, nullable=False),
    sa.Column("size", sa.Integer, nullable=False),  # bytes of body, for the size bound
    sa.Column("body", sa.LargeBinary, nullable=False),  # zlib-compressed JSON
    # The channel's keyframe whose messages this body's requests refer to (version 13).
    sa.Column("base_id", sa.Integer, nullable=True),
    sa.Index("ix_traces_started", "started_at"),
    sa.Index("ix_traces_base", "base_id"),
    sa.Index("ix_traces_bot_started", "bot", "started_at"),
    sa.Index("ix_traces_channel_started", "channel", "started_at"),
    sa.Index("ix_traces_outcome_started", "outcome", "started_at"),
)

trace_messages = sa.Table(
    "trace_messages",
    metadata,
    sa.Column("message_id", sa.String, nullable=False),
    sa.Column("trace_id", sa.Integer, nullable=False),
    sa.Index("ix_trace_messages_message", "message_id"),
    sa.Index("ix_trace_messages_trace", "trace_id"),
)

trace_tools = sa.Table(
    "trace_tools",
    metadata,
    sa.Column("trace_id", sa.Integer, nullable=False),
    sa.Column("bot", sa.String, nullable=False),
    sa.Column("tool", sa.String, nullable=False),
    sa.Column("outcome", sa.String, nullable=False),  # ok, error, denied, cancelled
    sa.Column("duration_ms", sa.Float, nullable=False),
    sa.Column("started_at", sa.Float, nullable=False),
    sa.Index("ix_trace_tools_trace", "trace_id"),
)

bot_health = sa.Table(
    "bot_health",
    metadata,
    sa.Column("bot", sa.String, primary_key=True),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("host", sa.String, nullable=False),
    sa.Column("started_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    sa.Column("platforms", sa.Text, nullable=False),  # JSON
    sa.Column("last_event_at", sa.Float, nullable=True),
    sa.Column("last_answer_at", sa.Float, nullable=True),
    sa.Column("queue_depth", sa.Integer, nullable=False),
    sa.Column("tasks", sa.Text, nullable=False),  # JSON
    sa.Column("reload_error", sa.Text, nullable=True),
)

inbox = sa.Table(
    "inbox",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("bot", sa.String, nullable=False),
    sa.Column("channel", sa.String, nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("author", sa.String, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("taken_at", sa.Float, nullable=True),
    sa.Column("taken_by", sa.String, nullable=True),
    sa.Index("ix_inbox_bot_taken", "bot", "taken_at"),
)


def _m9_traces_health_inbox(conn: Connection) -> None:
    for table in (traces, trace_messages, trace_tools, bot_health, inbox):
        table.create(conn)


def _m10_postgres_search(conn: Connection) -> None:
    """Full-text search over the chat log on PostgreSQL (SQLite has FTS5 since version 2):
    a stored tsvector of each line, GIN-indexed. The ``simple`` configuration lowercases
    and neither stems nor drops stop words, as FTS5's unicode61 tokenizer does."""
    if conn.dialect.name != "postgresql":
        return
    conn.exec_driver_sql(
        "ALTER TABLE chat_log ADD COLUMN search tsvector "
        "GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED"
    )
    conn.exec_driver_sql("CREATE INDEX ix_chat_log_search ON chat_log USING gin (search)")


processes = sa.Table(
    "processes",
    metadata,
    sa.Column("owner", sa.String, primary_key=True),  # one running process of a bot
    sa.Column("bot", sa.String, nullable=False),
    sa.Column("host", sa.String, nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("started_at", sa.Float, nullable=False),
    sa.Column("lease_until", sa.Float, nullable=False),  # the database's clock, epoch seconds
)


def _m11_process_leases(conn: Connection) -> None:
    """Processes hold leases; approvals name their process, so another takes over only
    what a process whose lease ran out left."""
    processes.create(conn)
    conn.execute(sa.text("ALTER TABLE approvals ADD COLUMN owner VARCHAR NOT NULL DEFAULT ''"))
    conn.execute(sa.text("CREATE INDEX ix_schedule_fires_status ON schedule_fires (status)"))


limit_events = sa.Table(
    "limit_events",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("bot", sa.String, nullable=False),
    sa.Column("key", sa.String, nullable=False),  # rate:…, cooldown:…, user:…:tokens, …
    sa.Column("at", sa.Float, nullable=False),
    sa.Column("amount", sa.Float, nullable=False),  # 1 for a request; tokens or dollars spent
    sa.Index("ix_limit_events_bot_key_at", "bot", "key", "at"),
)

limit_marks = sa.Table(
    "limit_marks",
    metadata,
    sa.Column("bot", sa.String, primary_key=True),
    sa.Column("key", sa.String, primary_key=True),
    sa.Column("until", sa.Float, nullable=False),
)


def _m12_limits(conn: Connection) -> None:
    for table in (limit_events, limit_marks):
        table.create(conn)


def _m13_trace_keyframes(conn: Connection) -> None:
    """Trace bodies may refer to an earlier trace of their channel (salon.store._trace_delta).
    Version 9 creates ``traces`` from the current table, so a new database has the column."""
    if "base_id" not in {c["name"] for c in sa.inspect(conn).get_columns("traces")}:
        conn.execute(sa.text("ALTER TABLE traces ADD COLUMN base_id INTEGER"))
    next(i for i in traces.indexes if i.name == "ix_traces_base").create(conn, checkfirst=True)


MIGRATIONS: list[tuple[int, Callable[[Connection], None]]] = [
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
]


def migrate(conn: Connection) -> None:
    schema_migrations.create(conn, checkfirst=True)
    done = set(conn.execute(sa.select(schema_migrations.c.version)).scalars())
    newest = max(v for v, _ in MIGRATIONS)
    if done and max(done) > newest:
        raise StoreError(f"database schema v{max(done)} is newer than this Salon (v{newest})")
    for version, apply in MIGRATIONS:
        if version in done:
            continue
        apply(conn)
        conn.execute(sa.insert(schema_migrations).values(version=version, applied_at=time.time()))
