"""docs/DEPLOYMENT.md's backup and restore commands, run exactly as written there: a backup
taken while the store is open, then more writes, then a restore brings back what the
backup held and nothing written after."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from fakes.databases import Database, sqlite_database
from salon.model import ChannelRef, Message, Participant
from salon.store._dialects import parse_url
from salon.store.sql import SQLStore

DOC = Path(__file__).resolve().parent.parent / "docs" / "DEPLOYMENT.md"
ROOM = ChannelRef("irc", "#room")
ALICE = Participant("alice", "Alice")


def documented(name: str) -> str:
    """The shell block that follows ``<!-- test: name -->`` in DEPLOYMENT.md."""
    found = re.search(rf"<!-- test: {name} -->\n```sh\n(.*?)```", DOC.read_text(), re.DOTALL)
    assert found, f"DEPLOYMENT.md has no block marked {name}"
    return found[1]


def run(name: str, cwd: Path, env: dict[str, str] | None = None) -> None:
    script = "set -euo pipefail\n" + documented(name)
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"{name}: {done.stderr}"


async def write_lines(store: SQLStore, *texts: str) -> None:
    for i, text in enumerate(texts):
        moment = datetime(2026, 1, 1, 0, 0, i, tzinfo=UTC)
        await store.log_message("bot", Message(f"{text}-{i}", ROOM, ALICE, text, moment))
    await store.chatlog.flush()


async def lines_in(database: Database) -> list[str]:
    store = await database.open_store()
    try:
        return [line.text for line in await store.chatlog.recent_chat("bot", ROOM.key)]
    finally:
        await store.close()


async def test_sqlite_backup_and_restore_as_documented(tmp_path: Path) -> None:
    if shutil.which("sqlite3") is None:
        pytest.skip(
            "no sqlite3 command (Debian: apt-get install sqlite3; scripts/test installs it)"
        )
    (tmp_path / "data").mkdir()
    database = sqlite_database(tmp_path / "data" / "salon.db")
    store = await database.open_store()
    await write_lines(store, "before the backup")
    run("sqlite-backup", tmp_path)  # while the store is open, as a running bot has it
    await write_lines(store, "after the backup")
    await store.close()
    assert await lines_in(database) == ["before the backup", "after the backup"]
    run("sqlite-restore", tmp_path)
    assert await lines_in(database) == ["before the backup"]


async def test_postgres_backup_and_restore_as_documented(
    pg_database: Database, tmp_path: Path
) -> None:
    url = parse_url(pg_database.url)
    libpq = {
        "PGHOST": url.host or "",
        "PGPORT": str(url.port),
        "PGUSER": url.username or "",
        "PGDATABASE": url.database or "",
        "PGPASSWORD": pg_database.password or "",
    }
    store = await pg_database.open_store()
    await write_lines(store, "before the backup")
    run("postgres-backup", tmp_path, libpq)
    await write_lines(store, "after the backup")
    assert (await store.chatlog.search_chat("bot", ROOM.key, "after"))[0].text == "after the backup"
    await store.close()  # the bots are stopped for a restore
    run("postgres-restore", tmp_path, libpq)
    assert await lines_in(pg_database) == ["before the backup"]
    store = await pg_database.open_store()  # migrations see the restored schema as theirs
    try:
        found = await store.chatlog.search_chat("bot", ROOM.key, "before")
        assert [line.text for line in found] == ["before the backup"]  # the GIN index too
    finally:
        await store.close()
