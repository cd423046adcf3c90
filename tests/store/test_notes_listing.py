"""The operator's listing of notes (the configurator's) on SQLite and PostgreSQL: newest
first, by scope, by person (about them or said by them), a page at a time."""

from __future__ import annotations

from fakes.databases import Database
from salon.notes import NoteScope, Scope
from tests.store.test_notes import ALICE, BOB, GENERAL, said_by


async def test_notes_are_listed_by_scope_by_person_and_by_page(database: Database) -> None:
    store = await database.open_store()
    try:
        notes = store.notes
        hers = await notes.add_note("bot", NoteScope(Scope.PERSON, ALICE), "tea", said_by())
        said = await notes.add_note("bot", NoteScope(Scope.CHANNEL, GENERAL), "nine", said_by())
        his = await notes.add_note(
            "bot", NoteScope(Scope.PERSON, BOB), "coffee", said_by(BOB, "Bob")
        )
        await notes.add_note("other", NoteScope(Scope.PERSON, ALICE), "not this bot", said_by())
        assert [n.id for n in await notes.list_notes("bot")] == [his.id, said.id, hers.id]
        people = await notes.list_notes("bot", scope=Scope.PERSON)
        assert [n.id for n in people] == [his.id, hers.id]
        assert [n.id for n in await notes.list_notes("bot", person=ALICE)] == [said.id, hers.id]
        both = await notes.list_notes("bot", person=ALICE, scope=Scope.PERSON)
        assert [n.id for n in both] == [hers.id]
        page = await notes.list_notes("bot", limit=1, before_id=said.id)
        assert [n.id for n in page] == [hers.id]
    finally:
        await store.close()
