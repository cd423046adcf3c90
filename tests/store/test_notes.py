"""The store's notes on SQLite and PostgreSQL: kept with their provenance, searched ranked,
read only through a viewpoint, shared by every process of a bot, kept across a restart,
and deleted without a trace in the search index."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from fakes.databases import Database
from salon.app import BotApp
from salon.config import Secrets
from salon.errors import StoreError
from salon.notes import MAX_NOTE_CHARS, NoteScope, Provenance, Scope, Viewpoint
from salon.store import _tables
from salon.store._db import Connection
from salon.store.sql import SQLStore
from tests.conftest import bot_config

SAID = datetime(2026, 11, 20, 18, 30, tzinfo=UTC)
GENERAL = "discord:100"
GUILD = "900"
ALICE = "1001"
BOB = "1002"


def said_by(who: str = ALICE, name: str = "Alice", channel: str = GENERAL) -> Provenance:
    return Provenance(who, name, channel, "#general", f"m-{who}", SAID)


def in_general(person: str = ALICE) -> Viewpoint:
    return Viewpoint(GENERAL, guild_id=GUILD, person_id=person)


def dm_with(person: str) -> Viewpoint:
    return Viewpoint(f"discord:dm-{person}", is_direct=True, person_id=person)


async def test_a_note_keeps_its_scope_text_and_provenance(database: Database) -> None:
    store = await database.open_store()
    try:
        note = await store.notes.add_note(
            "bot", NoteScope(Scope.CHANNEL, GENERAL), "  the deploy is on Fridays  ", said_by()
        )
        assert note.id > 0
        (found,) = await store.notes.notes_in_view("bot", in_general())
        assert found == note
        assert found.text == "the deploy is on Fridays"
        assert found.provenance == said_by()
        assert found.scope == NoteScope(Scope.CHANNEL, GENERAL)
        assert abs(found.created_at.timestamp() - time.time()) < 60
    finally:
        await store.close()


@pytest.mark.parametrize("text", ["", "   ", "x" * (MAX_NOTE_CHARS + 1)])
async def test_an_empty_or_too_long_note_is_refused(database: Database, text: str) -> None:
    store = await database.open_store()
    try:
        with pytest.raises(StoreError, match="note"):
            await store.notes.add_note("bot", NoteScope(Scope.BOT), text, said_by())
        assert await store.notes.list_notes("bot") == []
    finally:
        await store.close()


async def test_search_ranks_and_keeps_to_the_notes_in_view(database: Database) -> None:
    store = await database.open_store()
    try:
        notes = store.notes
        general = NoteScope(Scope.CHANNEL, GENERAL)
        one = await notes.add_note("bot", general, "Alice likes green tea", said_by())
        both = await notes.add_note(
            "bot", general, "Alice drinks green tea every morning", said_by()
        )
        best = await notes.add_note("bot", general, "green tea", said_by())
        await notes.add_note("bot", general, "coffee only", said_by())
        elsewhere = NoteScope(Scope.CHANNEL, "discord:200")
        await notes.add_note("bot", elsewhere, "green tea in another channel", said_by())
        await notes.add_note("other", general, "green tea of another bot", said_by())
        found = await notes.search_notes("bot", in_general(), "green tea")
        assert found[0].id == best.id  # the shortest note with every word
        assert {n.id for n in found} == {one.id, both.id, best.id}
        assert [n.id for n in await notes.search_notes("bot", in_general(), "morning")] == [both.id]
        # any word matches; more of the words rank higher
        ranked = await notes.search_notes("bot", in_general(), "coffee morning drinks")
        assert ranked[0].id == both.id
        assert len(ranked) == 2
        assert await notes.search_notes("bot", in_general(), "  ?! ") == []
        # words the query language would read are words here
        assert await notes.search_notes("bot", in_general(), 'tea" OR NOT (x') != []
        assert len(await notes.search_notes("bot", in_general(), "tea", limit=1)) == 1
    finally:
        await store.close()


async def test_person_notes_show_in_their_dm_and_not_to_others(database: Database) -> None:
    store = await database.open_store()
    try:
        notes = store.notes
        fact = await notes.add_note(
            "bot", NoteScope(Scope.PERSON, ALICE), "birthday on March 3", said_by()
        )
        assert [n.id for n in await notes.search_notes("bot", dm_with(ALICE), "birthday")] == [
            fact.id
        ]
        assert await notes.search_notes("bot", dm_with(BOB), "birthday") == []
        assert await notes.search_notes("bot", in_general(ALICE), "birthday") == []
        assert await notes.search_notes("bot", in_general(BOB), "birthday") == []
        allowed = Viewpoint(GENERAL, guild_id=GUILD, person_id=ALICE, person_allows=True)
        assert [n.id for n in await notes.search_notes("bot", allowed, "birthday")] == [fact.id]
        assert await notes.note_in_view("bot", in_general(ALICE), fact.id) is None
        assert await notes.note_in_view("bot", dm_with(ALICE), fact.id) == fact
    finally:
        await store.close()


async def test_two_stores_on_one_database_see_each_others_notes(database: Database) -> None:
    first = await database.open_store()
    second = await database.open_store()
    try:
        note = await first.notes.add_note(
            "bot", NoteScope(Scope.BOT), "the office moved", said_by()
        )
        assert await second.notes.search_notes("bot", in_general(), "office") == [note]
        assert await second.notes.delete_note("bot", note.id)
        assert await first.notes.search_notes("bot", in_general(), "office") == []
    finally:
        await first.close()
        await second.close()


async def test_notes_outlive_a_restart(database: Database) -> None:
    store = await database.open_store()
    note = await store.notes.add_note(
        "bot", NoteScope(Scope.GUILD, GUILD), "rules: be kind", said_by()
    )
    await store.close()
    again = await database.open_store()
    try:
        assert await again.notes.search_notes("bot", in_general(), "kind") == [note]
    finally:
        await again.close()


async def _index_holds(store: SQLStore, word: str) -> bool:
    """Whether the search index still holds ``word`` anywhere: matched, or (SQLite) in the
    raw pages of the FTS5 index."""
    async with store.db.connect() as conn:
        if store.dialect == "sqlite":
            matched = await conn.fetch(
                "SELECT rowid FROM notes_fts WHERE notes_fts MATCH :w", {"w": word}
            )
            blocks = await conn.fetch("SELECT block FROM notes_fts_data")
            return bool(matched) or any(word.encode() in bytes(b[0] or b"") for b in blocks)
        rows = await conn.fetch(
            "SELECT id FROM notes WHERE search @@ plainto_tsquery('simple', :w)", {"w": word}
        )
        return bool(rows)


async def test_forget_leaves_nothing_in_the_table_or_the_index(database: Database) -> None:
    store = await database.open_store()
    try:
        notes = store.notes
        keep = await notes.add_note("bot", NoteScope(Scope.BOT), "ordinary words", said_by())
        gone = await notes.add_note(
            "bot", NoteScope(Scope.PERSON, ALICE), "zanzibarquokka secret", said_by()
        )
        assert await _index_holds(store, "zanzibarquokka")
        assert await notes.delete_note("bot", gone.id)
        assert not await notes.delete_note("bot", gone.id)
        assert not await _index_holds(store, "zanzibarquokka")
        assert await notes.list_notes("bot") == [keep]
        assert await notes.search_notes("bot", in_general(), "ordinary") == [keep]
    finally:
        await store.close()


async def test_a_person_is_exported_and_forgotten_across_bots(database: Database) -> None:
    store = await database.open_store()
    try:
        notes = store.notes
        about = await notes.add_note(
            "bot", NoteScope(Scope.PERSON, ALICE), "plays the cello", said_by(BOB, "Bob")
        )
        by = await notes.add_note(
            "other", NoteScope(Scope.CHANNEL, GENERAL), "meeting at noon", said_by()
        )
        await notes.add_note("bot", NoteScope(Scope.CHANNEL, GENERAL), "quokkaflute", said_by(BOB))
        await notes.set_consent("bot", ALICE, True)
        assert await notes.notes_of_person(ALICE) == [about, by]
        assert await notes.notes_of_person(ALICE, bot="other") == [by]
        assert await notes.forget_person(ALICE) == 2
        assert await notes.notes_of_person(ALICE) == []
        assert await notes.consent("bot", ALICE) is None
        assert not await _index_holds(store, "cello")
        assert [n.text for n in await notes.list_notes("bot")] == ["quokkaflute"]
        assert await notes.forget_person(ALICE) == 0
    finally:
        await store.close()


async def test_old_notes_are_pruned_per_bot(database: Database) -> None:
    store = await database.open_store()
    try:
        notes = store.notes
        old = await notes.add_note("bot", NoteScope(Scope.BOT), "wombatancient", said_by())
        other = await notes.add_note("other", NoteScope(Scope.BOT), "stays", said_by())
        later = time.time() + 10 * 86400
        assert await notes.prune_notes("bot", max_age=30 * 86400, now=later) == 0
        assert await notes.prune_notes("bot", max_age=5 * 86400, now=later) == 1
        assert await notes.list_notes("bot") == []
        assert not await _index_holds(store, "wombatancient")
        assert await notes.list_notes("other") == [other]
        assert old.id != other.id
    finally:
        await store.close()


async def test_an_edit_is_searched_by_its_new_words(database: Database) -> None:
    store = await database.open_store()
    try:
        note = await store.notes.add_note("bot", NoteScope(Scope.BOT), "first wording", said_by())
        assert await store.notes.update_note("bot", note.id, "second phrasing")
        assert await store.notes.search_notes("bot", in_general(), "first") == []
        (found,) = await store.notes.search_notes("bot", in_general(), "phrasing")
        assert found.text == "second phrasing"
        assert found.provenance == note.provenance
        assert not await store.notes.update_note("other", note.id, "not its bot")
    finally:
        await store.close()


async def test_a_persons_choice_is_kept_per_bot(database: Database) -> None:
    store = await database.open_store()
    try:
        assert await store.notes.consent("bot", ALICE) is None
        await store.notes.set_consent("bot", ALICE, True)
        await store.notes.set_consent("bot", ALICE, False)
        assert await store.notes.consent("bot", ALICE) is False
        assert await store.notes.consent("other", ALICE) is None
    finally:
        await store.close()


Apply = Callable[[Connection], Awaitable[None]]


async def test_a_migration_merged_in_below_the_newest_is_applied_later(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Versions need not be contiguous: a database that has the newest version but not
    one below it (merged from a branch later) gets that one on the next open, and nothing
    runs twice."""
    ran: list[str] = []
    newest = max(v for v, _ in _tables.MIGRATIONS)
    between, later = newest + 1, newest + 2

    def migration(name: str) -> Callable[[Connection], Awaitable[None]]:
        async def apply(conn: Connection) -> None:
            ran.append(name)
            await conn.execute(f"CREATE TABLE {name} (x INTEGER)")

        return apply

    first = [*_tables.MIGRATIONS, (later, migration("made_first"))]
    monkeypatch.setattr(_tables, "MIGRATIONS", first)
    store = await database.open_store()
    await store.close()
    merged = sorted([*first, (between, migration("merged_later"))], key=lambda m: m[0])
    monkeypatch.setattr(_tables, "MIGRATIONS", merged)
    for _ in range(2):
        again = await database.open_store()
        async with again.db.connect() as conn:
            versions = [
                int(r[0]) for r in await conn.fetch("SELECT version FROM schema_migrations")
            ]
        await again.close()
    assert ran == ["made_first", "merged_later"]
    assert sorted(versions) == [v for v, _ in merged]


async def test_the_upkeep_deletes_notes_older_than_the_configured_age(tmp_path: Path) -> None:
    config = bot_config(data_dir=str(tmp_path / "data"), memory={"max_age_days": 2})
    app = BotApp(key="bot", config=config, root=tmp_path, secrets=Secrets({}))
    async with app:
        notes = app.store.notes
        old = await notes.add_note("bot", NoteScope(Scope.BOT), "three days old", said_by())
        new = await notes.add_note("bot", NoteScope(Scope.BOT), "one day old", said_by())
        async with app.store.db.begin() as conn:
            for note, days in ((old, 3), (new, 1)):
                await conn.execute(
                    "UPDATE notes SET updated_at = :at WHERE id = :id",
                    {"at": time.time() - days * 86400, "id": note.id},
                )
        assert await app.upkeep.prune_notes_once() == 1
        assert [n.id for n in await notes.list_notes("bot")] == [new.id]
