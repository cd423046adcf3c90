"""The store's database connection: SQL text with ``:name`` parameters, on SQLite or
PostgreSQL.

SQLite is the standard library's ``sqlite3`` on one connection per process, driven from a
single worker thread; a process's transactions take turns on it (SQLite writes one at a
time anyway, and WAL lets other processes read meanwhile). A transaction starts with
``BEGIN IMMEDIATE``, so a read followed by a write never fails on a lock another process
took in between. Each trip to the worker costs CPU, so a transaction makes few: its
``BEGIN`` travels with its first statement, and statements whose result nobody waits for
(:meth:`Connection.many`) with the next one or the ``COMMIT``.

PostgreSQL is an asyncpg pool. The ``:name`` parameters become ``$1``, ``$2``… once per
statement text (kept in a bounded memo). A connection the server dropped (a restart, a
failover) fails its block's first trip; nothing was sent on it, so that trip is made again
on a new connection.

Driver errors reach the caller as :class:`DatabaseError` (a ``StoreError``), with the
driver's first line and never the password.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol, TypeVar

from salon.errors import StoreError
from salon.store._later import Held

__all__ = [
    "Connection",
    "Database",
    "DatabaseError",
    "Params",
    "Row",
    "open_postgres",
    "open_sqlite",
]

logger = logging.getLogger(__name__)

Params = Mapping[str, Any]
Row = Any  # sqlite3.Row or asyncpg.Record: row[0], row["name"], len(row), iteration
T = TypeVar("T")

_CONNECT_TIMEOUT = 10.0  # seconds to reach PostgreSQL
_COMMAND_TIMEOUT = 60.0  # seconds any one statement may take there
_BUSY_TIMEOUT_MS = 5000  # SQLite: how long to wait for another process's write lock
_POOL_SIZE = 8


class DatabaseError(StoreError):
    """A statement or connection failed; the message is the driver's first line."""


Statements = Sequence[tuple[str, Params | Sequence[Params]]]


class Connection(Protocol):
    """One connection, inside a transaction (``Database.begin``) or not (``connect``)."""

    dialect: str

    async def execute(self, sql: str, params: Params | None = None) -> int:
        """Run one statement; returns the rows it changed."""
        ...

    async def executemany(self, sql: str, rows: Sequence[Params]) -> None:
        """``many`` for one statement."""
        ...

    async def fetch(self, sql: str, params: Params | None = None) -> list[Row]: ...

    async def fetchrow(self, sql: str, params: Params | None = None) -> Row | None: ...

    async def fetchval(self, sql: str, params: Params | None = None) -> Any: ...

    async def many(self, statements: Sequence[tuple[str, Params | Sequence[Params]]]) -> None:
        """Run statements whose result nobody needs, in order (a sequence of rows: once
        per row). In a transaction they may go with the next statement or the COMMIT, and
        their errors show there."""
        ...


class Database(Protocol):
    dialect: str

    def begin(self) -> AbstractAsyncContextManager[Connection]:
        """A transaction: committed when the block ends, rolled back if it raises."""
        ...

    def connect(self) -> AbstractAsyncContextManager[Connection]:
        """A connection for reads; each statement sees what is committed when it runs."""
        ...

    def listening(self) -> AbstractAsyncContextManager[Any]:
        """PostgreSQL: a driver connection of its own, for LISTEN."""
        ...

    def write_later(self, statements: Statements) -> None:
        """Statements nobody waits for, committed soon (``salon.store._later``): this
        process reads them from its next statement on; a crash may lose them."""
        ...

    async def close(self) -> None: ...


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# --- SQLite -------------------------------------------------------------------------------


def _run_all(raw: sqlite3.Connection, statements: Statements) -> None:
    for sql, params in statements:
        if isinstance(params, Mapping):
            raw.execute(sql, params)
        elif params:
            raw.executemany(sql, params)


class _SQLiteConnection:
    """Every trip to the worker thread costs about 100 µs of CPU on a small machine, so
    a transaction sends as few as it can: its BEGIN goes with its first statement, and
    statements whose result nobody waits for (``many``) go with the next one or with the
    COMMIT. A write-only transaction is one trip."""

    dialect = "sqlite"

    def __init__(self, db: _SQLite, *, transaction: bool) -> None:
        self._db = db
        self._transaction = transaction
        self._begun = False
        self._queued: list[tuple[str, Params | Sequence[Params]]] = []

    def _before(self) -> tuple[bool, Statements]:
        """(whether BEGIN goes now, the statements waiting): sent with the next trip."""
        opening = self._transaction and not self._begun
        self._begun = self._begun or opening
        queued, self._queued = self._queued, []
        return opening, queued

    async def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        opening, queued = self._before()
        # Held writes go first in a trip where no transaction is open (its first, or any
        # outside one): the connection is the process's one, taken in turns.
        between = opening or not self._transaction
        held = self._db.held.take() if between and self._db.held else None

        def run(raw: sqlite3.Connection) -> T:
            if held:
                _commit_alone(raw, held)
            if opening:
                raw.execute("BEGIN IMMEDIATE")
            _run_all(raw, queued)
            return fn(raw)

        return await self._db.call(run)

    async def execute(self, sql: str, params: Params | None = None) -> int:
        return await self._call(lambda raw: raw.execute(sql, params or {}).rowcount)

    async def executemany(self, sql: str, rows: Sequence[Params]) -> None:
        await self.many([(sql, rows)])

    async def many(self, statements: Statements) -> None:
        if self._transaction:
            self._queued.extend(statements)
            return
        await self._call(lambda raw: _run_all(raw, statements))

    async def fetch(self, sql: str, params: Params | None = None) -> list[Row]:
        return await self._call(lambda raw: raw.execute(sql, params or {}).fetchall())

    async def fetchrow(self, sql: str, params: Params | None = None) -> Row | None:
        rows = await self.fetch(sql, params)
        return rows[0] if rows else None

    async def fetchval(self, sql: str, params: Params | None = None) -> Any:
        row = await self.fetchrow(sql, params)
        return row[0] if row is not None else None

    async def finish(self, commit: bool) -> None:
        if not commit:
            self._queued.clear()
            if self._begun:
                await self._db.call(_roll_back)
            return
        if self._begun or self._queued:
            await self._call(_commit)


def _commit(raw: sqlite3.Connection) -> None:
    if raw.in_transaction:
        raw.execute("COMMIT")


def _roll_back(raw: sqlite3.Connection) -> None:
    if raw.in_transaction:
        raw.execute("ROLLBACK")


def _commit_alone(raw: sqlite3.Connection, statements: Statements) -> None:
    """Held statements in a transaction of their own; their failure is logged, not raised
    (the trip they go with is someone else's)."""
    try:
        raw.execute("BEGIN IMMEDIATE")
        _run_all(raw, statements)
        raw.execute("COMMIT")
    except sqlite3.Error:
        logger.exception("could not write the store's held statements; they are lost")
        _roll_back(raw)


class _SQLite:
    """One sqlite3 connection, used only from its worker thread."""

    dialect = "sqlite"

    def __init__(self, path: str) -> None:
        self._path = path
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="salon-sqlite")
        self._raw: sqlite3.Connection | None = None
        self._turn = asyncio.Lock()
        self.held = Held(self._write_held)

    async def open(self) -> None:
        def connect() -> sqlite3.Connection:
            raw = sqlite3.connect(
                self._path,
                timeout=_BUSY_TIMEOUT_MS / 1000,
                isolation_level=None,  # autocommit; transactions are BEGIN/COMMIT by hand
                check_same_thread=False,  # the worker thread only, but not the opener's
            )
            raw.row_factory = sqlite3.Row
            raw.execute("PRAGMA journal_mode=WAL")
            raw.execute("PRAGMA synchronous=NORMAL")
            raw.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
            return raw

        self._raw = await self._in_worker(connect)

    async def _in_worker(self, fn: Callable[[], T]) -> T:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._worker, fn)
        except (sqlite3.Error, OSError) as exc:
            raise DatabaseError(_first_line(exc)) from exc

    async def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        raw = self._raw
        if raw is None:
            raise StoreError("store is not open")
        return await self._in_worker(lambda: fn(raw))

    @asynccontextmanager
    async def begin(self) -> AsyncIterator[Connection]:
        async with self._turn:
            conn = _SQLiteConnection(self, transaction=True)
            try:
                yield conn
                await conn.finish(commit=True)
            except BaseException:  # a failed COMMIT too: nothing stays open for the next
                await asyncio.shield(conn.finish(commit=False))
                raise

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[Connection]:
        async with self._turn:
            yield _SQLiteConnection(self, transaction=False)

    def listening(self) -> AbstractAsyncContextManager[Any]:
        raise StoreError("SQLite has no LISTEN")

    def write_later(self, statements: Statements) -> None:
        self.held.add(statements)

    async def _write_held(self, statements: Statements) -> None:
        async with self._turn:
            await self.call(lambda raw: _commit_alone(raw, statements))

    async def close(self) -> None:
        if self._raw is not None:
            await self.held.close()
        raw, self._raw = self._raw, None
        if raw is not None:
            async with self._turn:
                await self._in_worker(raw.close)
        self._worker.shutdown(wait=False)


async def open_sqlite(path: str) -> Database:
    """``path``: a file, or ``:memory:``."""
    db = _SQLite(path)
    try:
        await db.open()
    except BaseException:
        await db.close()
        raise
    return db


# --- PostgreSQL ---------------------------------------------------------------------------

# A string literal (left as it is), or a :name that is not part of a ::cast.
_PARAM = re.compile(r"'(?:[^']|'')*'|(?<![:\w]):([A-Za-z_]\w*)")


@lru_cache(maxsize=512)
def _numbered(sql: str) -> tuple[str, tuple[str, ...]]:
    """``sql`` with ``:name`` as ``$n`` (a name used twice is one number), and the names
    in number order."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return match.group(0)
        if name not in names:
            names.append(name)
        return f"${names.index(name) + 1}"

    return _PARAM.sub(number, sql), tuple(names)


def _args(names: tuple[str, ...], params: Params | None) -> list[Any]:
    if not names:
        return []
    if params is None:
        raise DatabaseError(f"missing parameter: {names[0]}")
    return [params[n] for n in names]


def _pg_errors() -> tuple[type[BaseException], ...]:
    import asyncpg

    # ValueError: a malformed connection option
    return (
        asyncpg.PostgresError,
        asyncpg.InterfaceError,
        asyncpg.InternalClientError,
        OSError,
        TimeoutError,
        ValueError,
    )


class _PostgresConnection:
    """As on SQLite, a transaction holds back what nobody waits for: a transaction of one
    such statement is that statement alone (atomic by itself, one round trip instead of
    BEGIN, the statement and COMMIT); otherwise BEGIN goes before the first statement that
    must run and the held ones go before it or before COMMIT."""

    dialect = "postgresql"

    def __init__(self, db: _Postgres, held: _Held, *, transaction: bool) -> None:
        self._db = db
        self._held = held
        self._errors = db.errors
        self._transaction = transaction
        self._open: Any = None  # the asyncpg transaction, once begun
        self._queued: list[tuple[str, Params | Sequence[Params]]] = []
        self._sent = False  # whether anything reached the server on this connection

    async def _guarded(self, work: Callable[[Any], Awaitable[T]]) -> T:
        """``work(connection)``. A connection the server dropped (a restart, a failover)
        fails its first trip; when nothing was sent on it yet, the trip is made again on a
        new connection (what SQLAlchemy's pre-ping gave, without a ping per use)."""
        try:
            try:
                return await work(self._held.raw)
            except self._db.lost as exc:
                if self._sent or not self._db.was_lost(exc, self._held.raw):
                    raise
                logger.info("database connection lost (%s); taking a new one", _first_line(exc))
                await self._db.renew(self._held)
                return await work(self._held.raw)
            finally:
                self._sent = True
        except self._errors as exc:
            raise DatabaseError(_first_line(exc)) from exc

    async def _ready(self) -> None:
        """BEGIN if it is still due, then what was held back."""
        if self._transaction and self._open is None:

            async def start(raw: Any) -> None:
                self._open = raw.transaction()
                await self._open.start()

            await self._guarded(start)
        queued, self._queued = self._queued, []
        for sql, params in queued:
            await self._now(sql, params)

    async def _now(self, sql: str, params: Params | Sequence[Params]) -> None:
        text, names = _numbered(sql)
        if isinstance(params, Mapping):
            args = _args(names, params)
            await self._guarded(lambda raw: raw.execute(text, *args))
        elif params:
            rows = [_args(names, row) for row in params]
            await self._guarded(lambda raw: raw.executemany(text, rows))

    async def _run(self, method: str, sql: str, params: Params | None) -> Any:
        await self._ready()
        text, names = _numbered(sql)
        args = _args(names, params)
        return await self._guarded(lambda raw: getattr(raw, method)(text, *args))

    async def execute(self, sql: str, params: Params | None = None) -> int:
        status = await self._run("execute", sql, params)
        last = str(status).rsplit(" ", 1)[-1]
        return int(last) if last.isdigit() else 0

    async def executemany(self, sql: str, rows: Sequence[Params]) -> None:
        await self.many([(sql, rows)])

    async def many(self, statements: Sequence[tuple[str, Params | Sequence[Params]]]) -> None:
        self._queued.extend(statements)
        if not self._transaction:
            await self._ready()

    async def fetch(self, sql: str, params: Params | None = None) -> list[Row]:
        return list(await self._run("fetch", sql, params))

    async def fetchrow(self, sql: str, params: Params | None = None) -> Row | None:
        return await self._run("fetchrow", sql, params)

    async def fetchval(self, sql: str, params: Params | None = None) -> Any:
        return await self._run("fetchval", sql, params)

    async def finish(self, commit: bool) -> None:
        if not commit:
            self._queued.clear()
            if self._open is not None:
                with contextlib.suppress(*self._errors):  # a dead connection: the pool drops it
                    await self._open.rollback()
            return
        if self._open is None:
            queued = self._queued
            if not queued:
                return
            if len(queued) == 1 and isinstance(queued[0][1], Mapping):
                self._queued = []
                await self._now(*queued[0])
                return
        await self._ready()
        await self._guarded(lambda _raw: self._open.commit())


@dataclass
class _Held:
    raw: Any  # the pooled asyncpg connection a block uses


class _Postgres:
    dialect = "postgresql"

    def __init__(self, pool: Any) -> None:
        import asyncpg

        self._pool = pool
        self.held = Held(self._write_held, delay=0.0)  # no trip to share: written at once
        self.errors = _pg_errors()
        # What a connection the server dropped raises on its next use.
        self._dropped: tuple[type[BaseException], ...] = (
            asyncpg.PostgresConnectionError,  # SQLSTATE class 08
            asyncpg.AdminShutdownError,
            asyncpg.CrashShutdownError,
            asyncpg.CannotConnectNowError,
            # what asyncpg says when the server's notice of the drop arrived while idle:
            # the statement was not sent
            asyncpg.InternalClientError,
            ConnectionError,
        )
        self.lost = (*self._dropped, asyncpg.InterfaceError)

    def was_lost(self, exc: BaseException, raw: Any) -> bool:
        """Whether ``exc`` says the connection is gone (InterfaceError also reports
        mistakes of the caller's, so it counts only when the connection is closed)."""
        return isinstance(exc, self._dropped) or bool(raw.is_closed())

    async def _get(self) -> Any:
        try:
            return await self._pool.acquire(timeout=_CONNECT_TIMEOUT)
        except self.errors as exc:
            raise DatabaseError(_first_line(exc)) from exc

    async def _give_back(self, raw: Any) -> None:
        # A connection that cannot be reset is closed by the pool, which makes a new one.
        with contextlib.suppress(*self.errors):
            await self._pool.release(raw)

    async def renew(self, held: _Held) -> None:
        """Give a dropped connection back (the pool closes it) and hold a new one."""
        dead, held.raw = held.raw, None
        await self._give_back(dead)
        held.raw = await self._get()

    @asynccontextmanager
    async def _acquired(self, *, drain: bool = True) -> AsyncIterator[_Held]:
        """A pooled connection; only getting it is translated here (the statements are
        by ``_PostgresConnection``), so what the block raises passes through as it is.
        Held writes are written first: this process reads what it wrote."""
        if drain and self.held.pending:
            await self.held.close()
        held = _Held(await self._get())
        try:
            yield held
        finally:
            if held.raw is not None:
                await self._give_back(held.raw)

    def begin(self) -> AbstractAsyncContextManager[Connection]:
        return self._begin(drain=True)

    @asynccontextmanager
    async def _begin(self, *, drain: bool) -> AsyncIterator[Connection]:
        async with self._acquired(drain=drain) as held:
            conn = _PostgresConnection(self, held, transaction=True)
            try:
                yield conn
                await conn.finish(commit=True)
            except BaseException:
                await asyncio.shield(conn.finish(commit=False))
                raise

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[Connection]:
        async with self._acquired() as held:
            yield _PostgresConnection(self, held, transaction=False)

    @asynccontextmanager
    async def listening(self) -> AsyncIterator[Any]:
        async with self._acquired() as held:
            try:
                yield held.raw
            finally:  # the pool's light reset leaves LISTEN to whoever used it
                with contextlib.suppress(*self.errors):
                    await held.raw.execute("UNLISTEN *")

    def write_later(self, statements: Statements) -> None:
        self.held.add(statements)

    async def _write_held(self, statements: Statements) -> None:
        async with self._begin(drain=False) as conn:
            await conn.many(statements)

    async def close(self) -> None:
        await self.held.close()
        try:
            await asyncio.wait_for(self._pool.close(), _CONNECT_TIMEOUT)
        except self.errors:  # TimeoutError is among them
            self._pool.terminate()


async def _light_reset(_raw: Any) -> None:
    """What the pool does to a connection given back, beyond rolling back a transaction left
    open (which it always does): nothing. The store sets nothing for a session (only SET
    LOCAL, which ends with its transaction), and ``listening`` ends its own LISTEN; the
    default reset was one more round trip after every statement."""


async def open_postgres(dsn: str, *, password: str | None) -> Database:
    """``dsn``: a ``postgresql://`` URL as libpq reads it (``sslmode``, a socket directory
    as ``host``…); ``password`` completes it."""
    import asyncpg

    try:
        pool = await asyncpg.create_pool(
            dsn,
            password=password,
            min_size=1,
            max_size=_POOL_SIZE,
            timeout=_CONNECT_TIMEOUT,
            command_timeout=_COMMAND_TIMEOUT,
            reset=_light_reset,
        )
    except _pg_errors() as exc:
        raise DatabaseError(_first_line(exc)) from exc
    return _Postgres(pool)
