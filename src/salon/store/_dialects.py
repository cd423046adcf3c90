"""What differs between SQLite and PostgreSQL, in one place: URLs, inserts that ignore or
replace a row with the same key, the database's clock, and the chat-log search."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import lru_cache
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from salon.errors import StoreError
from salon.store._db import Database, DatabaseError, open_postgres, open_sqlite

__all__ = [
    "DatabaseURL",
    "chat_search",
    "connect",
    "db_now",
    "in_list",
    "insert_ignoring",
    "insert_sql",
    "parse_url",
    "refuses_data",
    "upsert",
]

# A driver after "+" (as in SQLAlchemy's URLs, which configs of earlier versions used) is
# ignored: SQLite is always sqlite3 and PostgreSQL asyncpg.
_BACKENDS = {"sqlite": "sqlite", "postgresql": "postgresql", "postgres": "postgresql"}


@dataclass(frozen=True)
class DatabaseURL:
    """A parsed ``database_url``: ``sqlite:///path`` (``sqlite://`` alone: in memory) or
    ``postgresql://user@host:port/database``."""

    backend: str  # "sqlite" or "postgresql"
    path: str = ""  # SQLite: the file, or ":memory:"
    host: str | None = None
    port: int | None = None
    username: str | None = None
    password: str | None = None
    database: str | None = None
    query: Mapping[str, str] = field(default_factory=dict)
    dsn: str = ""  # PostgreSQL: the URL as written, for asyncpg (which reads sslmode and the rest)

    def with_database(self, name: str) -> DatabaseURL:
        parts = urlsplit(self.dsn)
        dsn = parts._replace(path="/" + quote(name, safe="")).geturl() if self.dsn else ""
        return replace(self, database=name, dsn=dsn)

    def render(self, *, hide_password: bool = True) -> str:
        if self.backend == "sqlite":
            return f"sqlite:///{self.path}" if self.path != ":memory:" else "sqlite://"
        user = quote(self.username or "", safe="")
        if self.password is not None:
            user += ":" + ("***" if hide_password else quote(self.password, safe=""))
        where = self.host or ""
        if self.port is not None:
            where += f":{self.port}"
        text = f"postgresql://{user + '@' if user else ''}{where}/{self.database or ''}"
        if self.query:
            text += "?" + "&".join(f"{k}={quote(v, safe='/')}" for k, v in self.query.items())
        return text


def parse_url(url: str, password: str | None = None) -> DatabaseURL:
    """``password`` completes the URL (it never comes from YAML)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise StoreError("database_url is not a database URL")
    name = scheme.lower().split("+", 1)[0]
    backend = _BACKENDS.get(name)
    if backend is None:
        raise StoreError(f"database_url: {name} is not supported (use sqlite or postgresql)")
    if backend == "sqlite":
        path = rest[1:] if rest.startswith("/") else rest
        return DatabaseURL("sqlite", path=unquote(path) or ":memory:")
    try:
        parts = urlsplit(f"postgresql://{rest}")
        port = parts.port
    except ValueError:
        raise StoreError("database_url is not a database URL") from None
    return DatabaseURL(
        "postgresql",
        dsn=f"postgresql://{rest}",
        host=parts.hostname,
        port=port,
        username=unquote(parts.username) if parts.username else None,
        password=password if password is not None else _unquoted(parts.password),
        database=unquote(parts.path.lstrip("/")) or None,
        query=dict(parse_qsl(parts.query)),
    )


def _unquoted(text: str | None) -> str | None:
    return unquote(text) if text is not None else None


async def connect(url: DatabaseURL) -> Database:
    if url.backend == "sqlite":
        return await open_sqlite(url.path)
    return await open_postgres(url.dsn, password=url.password)


def _quoted(column: str) -> str:
    return f'"{column}"'


@lru_cache(maxsize=256)
def insert_sql(table: str, columns: tuple[str, ...], suffix: str = "") -> str:
    names = ", ".join(_quoted(c) for c in columns)
    values = ", ".join(f":{c}" for c in columns)
    return f"INSERT INTO {table} ({names}) VALUES ({values}){suffix}"


def insert_ignoring(table: str, columns: Sequence[str]) -> str:
    """INSERT that does nothing when a row with the same key exists (0 rows changed): no
    error, so no aborted transaction and no line in PostgreSQL's log. The same words on
    both databases."""
    return insert_sql(table, tuple(columns), " ON CONFLICT DO NOTHING")


def upsert(
    table: str,
    columns: Sequence[str],
    keys: Sequence[str],
    *,
    update: Sequence[str] | None = None,
    values: Mapping[str, str] | None = None,
) -> str:
    """INSERT, or UPDATE the row with the same ``keys`` (its ``update`` columns; default:
    all the others): one statement, safe between processes that write the row at once.
    ``values``: SQL for a column instead of its parameter."""
    names = ", ".join(_quoted(c) for c in columns)
    given = values or {}
    placed = ", ".join(given.get(c, f":{c}") for c in columns)
    changed = update if update is not None else [c for c in columns if c not in keys]
    sets = ", ".join(f"{_quoted(c)} = excluded.{_quoted(c)}" for c in changed)
    conflict = ", ".join(_quoted(k) for k in keys)
    return (
        f"INSERT INTO {table} ({names}) VALUES ({placed}) "
        f"ON CONFLICT ({conflict}) DO UPDATE SET {sets}"
    )


def db_now(dialect: str) -> str:
    """The database's clock in epoch seconds: processes on several machines compare
    leases on one clock, whatever their own say."""
    if dialect == "postgresql":
        return "CAST(extract(epoch FROM clock_timestamp()) AS FLOAT)"
    return "((julianday('now') - 2440587.5) * 86400.0)"


def utc_day(dialect: str, column: str) -> str:
    """The UTC day of an epoch-seconds ``column`` as YYYY-MM-DD."""
    if dialect == "sqlite":
        return f"strftime('%Y-%m-%d', {column}, 'unixepoch')"
    return f"to_char(timezone('UTC', to_timestamp({column})), 'YYYY-MM-DD')"


def chat_search(
    dialect: str,
    *,
    bot: str,
    channel: str,
    terms: list[str],
    user: str | None,
    since: datetime | None,
    limit: int,
) -> tuple[str, dict[str, Any]]:
    """Lines matching every term (each a phrase, case-insensitive), newest first: the SQL
    and its parameters.

    SQLite walks FTS5's matches newest first (CROSS JOIN keeps that order) and stops at
    ``limit``. PostgreSQL matches the stored tsvector: its planner weighs each word by the
    lexeme statistics of that column, taking the GIN index for rare words and walking the
    channel's newest lines for common ones."""
    filters = ["c.bot = :bot", "c.channel = :channel", "c.kind IN ('message', 'action')"]
    params: dict[str, Any] = {"bot": bot, "channel": channel, "limit": limit}
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
        return sql, params
    phrases = []
    for n, term in enumerate(terms):
        params[f"t{n}"] = term
        phrases.append(f"phraseto_tsquery('simple', :t{n})")
    sql = (
        "SELECT c.created_at, c.author_name, c.text, c.kind FROM chat_log AS c "
        f"WHERE c.search @@ ({' && '.join(phrases)}) AND {where} "
        "ORDER BY c.id DESC LIMIT :limit"
    )
    return sql, params


def in_list(name: str, values: Sequence[Any], params: dict[str, Any]) -> str:
    """``(:name_0, :name_1, …)`` for ``IN``, its values added to ``params``; ``(NULL)``
    (which matches nothing) for no values."""
    if not values:
        return "(NULL)"
    names = []
    for i, value in enumerate(values):
        params[f"{name}_{i}"] = value
        names.append(f":{name}_{i}")
    return f"({', '.join(names)})"


def refuses_data(exc: DatabaseError) -> bool:
    """Whether the database refused the statement's data (a constraint, a value it cannot
    store): the same statement fails again, whatever the database's state."""
    cause = exc.__cause__
    if isinstance(cause, sqlite3.IntegrityError | sqlite3.DataError | sqlite3.InterfaceError):
        return True
    if type(cause).__module__.startswith("asyncpg"):
        import asyncpg

        return isinstance(cause, asyncpg.DataError | asyncpg.IntegrityConstraintViolationError)
    return False
