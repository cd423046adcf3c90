"""What differs between SQLite and PostgreSQL, in one place: URLs, inserts that ignore or
replace a row with the same key, the database's clock, and the chat-log search."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from salon.errors import StoreError

__all__ = ["chat_search", "db_now", "insert_ignoring", "store_url", "upsert"]

_DRIVERS = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+asyncpg"}
_ALIASES = {"postgres": "postgresql"}


def store_url(url: str, password: str | None = None) -> URL:
    """The URL to connect with: the async driver of each database (``postgresql://`` means
    asyncpg, ``sqlite://`` aiosqlite) and the password, which never comes from YAML."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise StoreError("database_url is not a database URL") from None
    backend = _ALIASES.get(parsed.get_backend_name(), parsed.get_backend_name())
    if backend not in _DRIVERS:
        raise StoreError(f"database_url: {backend} is not supported (use sqlite or postgresql)")
    parsed = parsed.set(drivername=_DRIVERS[backend])
    if password is not None:
        parsed = parsed.set(password=password)
    return parsed


def _dialect(dialect: str) -> Any:
    """SQLAlchemy's module of ``dialect``: only the one in use is imported."""
    name = "postgresql" if dialect == "postgresql" else "sqlite"
    return importlib.import_module(f"sqlalchemy.dialects.{name}")


def insert_ignoring(dialect: str, table: sa.Table) -> Any:
    """INSERT that does nothing when a row with the same key exists (rowcount 0): no
    error, so no aborted transaction and no line in PostgreSQL's log."""
    module = _dialect(dialect)
    return module.insert(table).on_conflict_do_nothing()


def upsert(
    dialect: str,
    table: sa.Table,
    values: Mapping[str, Any],
    keys: list[str],
    *,
    update: list[str] | None = None,
) -> Any:
    """INSERT, or UPDATE the row with the same ``keys`` (its ``update`` columns; default:
    all the others): one statement, safe between processes that write the row at once."""
    module = _dialect(dialect)
    statement = module.insert(table).values(dict(values))
    columns = update if update is not None else [k for k in values if k not in keys]
    changed = {k: statement.excluded[k] for k in columns}
    return statement.on_conflict_do_update(index_elements=keys, set_=changed)


def db_now(dialect: str) -> sa.ColumnElement[Any]:
    """The database's clock in epoch seconds: processes on several machines compare
    leases on one clock, whatever their own say."""
    if dialect == "postgresql":
        return sa.cast(sa.func.extract("epoch", sa.func.clock_timestamp()), sa.Float)
    return (sa.func.julianday("now") - 2440587.5) * 86400.0


def chat_search(
    dialect: str,
    *,
    bot: str,
    channel: str,
    terms: list[str],
    user: str | None,
    since: datetime | None,
    limit: int,
) -> sa.TextClause:
    """Lines matching every term (each a phrase, case-insensitive), newest first.

    SQLite walks FTS5's matches newest first (CROSS JOIN keeps that order) and stops at
    ``limit``. PostgreSQL matches the stored tsvector: its planner weighs each word by the
    lexeme statistics of that column, taking the GIN index for rare words and walking the
    channel's newest lines for common ones."""
    filters = ["c.bot = :bot", "c.channel = :channel", "c.kind IN ('message', 'action')"]
    params: dict[str, object] = {"bot": bot, "channel": channel, "limit": limit}
    if user:
        filters.append("lower(c.author_name) = :user")
        params["user"] = user.lower()
    if since is not None:
        filters.append("c.created_at >= :since")
        params["since"] = since.timestamp()
    where = " AND ".join(filters)
    if dialect == "sqlite":
        params["match"] = " ".join('"' + t.replace('"', '""') + '"' for t in terms)
        sql = (
            "SELECT c.created_at, c.author_name, c.text, c.kind FROM chat_log_fts "
            "CROSS JOIN chat_log AS c ON c.id = chat_log_fts.rowid "
            f"WHERE chat_log_fts MATCH :match AND {where} "
            "ORDER BY chat_log_fts.rowid DESC LIMIT :limit"
        )
        return sa.text(sql).bindparams(**params)
    phrases = []
    for n, term in enumerate(terms):
        params[f"t{n}"] = term
        phrases.append(f"phraseto_tsquery('simple', :t{n})")
    sql = (
        "SELECT c.created_at, c.author_name, c.text, c.kind FROM chat_log AS c "
        f"WHERE c.search @@ ({' && '.join(phrases)}) AND {where} "
        "ORDER BY c.id DESC LIMIT :limit"
    )
    return sa.text(sql).bindparams(**params)
