"""The databases the store's tests run on: a SQLite file, or a fresh database on the
PostgreSQL server that ``scripts/with-postgres`` (and so ``scripts/test``) started.

Without that server the PostgreSQL half is skipped, unless ``SALON_REQUIRE_POSTGRES`` is
set (CI sets it): then it fails, naming what is missing.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from salon.store._dialects import parse_url
from salon.store.sql import SQLStore, sqlite_url

URL_ENV = "SALON_TEST_DATABASE_URL"
PASSWORD_ENV = "SALON_TEST_DATABASE_PASSWORD"
REQUIRE_ENV = "SALON_REQUIRE_POSTGRES"


@dataclass(frozen=True)
class Database:
    kind: str  # "sqlite" or "postgresql"
    url: str  # without the password
    password: str | None = None

    def store(self, **kwargs: Any) -> SQLStore:
        """A store of its own, as another process would have."""
        return SQLStore(self.url, password=self.password, **kwargs)

    async def open_store(self, **kwargs: Any) -> SQLStore:
        store = self.store(**kwargs)
        await store.open()
        return store


def sqlite_database(path: Path) -> Database:
    return Database("sqlite", sqlite_url(path))


def postgres_server() -> tuple[str, str | None]:
    """(URL, password) of the test server; skips, or fails where it is required."""
    url = os.environ.get(URL_ENV)
    if url:
        return url, os.environ.get(PASSWORD_ENV)
    reason = f"no PostgreSQL server: {URL_ENV} is not set (run through scripts/with-postgres)"
    if os.environ.get(REQUIRE_ENV):
        pytest.fail(f"{reason}; {REQUIRE_ENV} says the PostgreSQL tests must run")
    pytest.skip(reason)


async def _admin(url: str, password: str | None) -> Any:
    parts = parse_url(url)
    return await asyncpg.connect(
        host=parts.host,
        port=parts.port,
        user=parts.username,
        password=password,
        database="postgres",
        timeout=10,
    )


@asynccontextmanager
async def throwaway_database(url: str, password: str | None, prefix: str) -> AsyncIterator[str]:
    """The URL of a new database on the server at ``url``, dropped afterwards (tests and
    the benchmarks share it)."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = await _admin(url, password)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    try:
        yield parse_url(url).with_database(name).render()
    finally:
        admin = await _admin(url, password)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


@asynccontextmanager
async def postgres_database() -> AsyncIterator[Database]:
    """A new, empty database on the test server, dropped afterwards."""
    url, password = postgres_server()
    async with throwaway_database(url, password, "salon_test") as database_url:
        yield Database("postgresql", database_url, password)
