"""Generated leak probes on the store itself, on SQLite and PostgreSQL: notes in every
scope of two guilds, a thread and DMs, by trusted and untrusted authors; for every person
in every place, the notes a memory block reads and every crafted search return only notes
``salon.notes.note_in_view`` allows, and a forgotten person's notes nowhere."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

from fakes.databases import Database
from salon.notes import Note, NoteScope, Provenance, Scope, Viewpoint, note_in_view
from salon.store.sql import SQLStore

GUILDS = {"general": "g1", "random": "g1", "thread": "g1", "lobby": "g2"}
PEOPLE = ("alice", "bob", "carol", "mallory")
CRAFTED = ("birthday", "NOTE", '" OR 1=1 --', "*", "scope person carol", "NEAR(a b)", "x" * 300)


def place(name: str, person: str) -> Viewpoint:
    if name == "dm":
        return Viewpoint(f"discord:dm-{person}", is_direct=True, person_id=person)
    allows = person == "bob"  # Bob lets his notes be shown where he is answered
    return Viewpoint(
        f"discord:{name}", guild_id=GUILDS[name], person_id=person, person_allows=allows
    )


async def seed(store: SQLStore) -> None:
    scopes = [NoteScope(Scope.BOT), NoteScope(Scope.GUILD, "g1"), NoteScope(Scope.GUILD, "g2")]
    scopes += [NoteScope(Scope.CHANNEL, f"discord:{c}") for c in (*GUILDS, "dm-carol")]
    scopes += [NoteScope(Scope.PERSON, p) for p in PEOPLE]
    for n, (scope, author) in enumerate(itertools.product(scopes, PEOPLE)):
        trusted = author == "carol" or scope.kind is not Scope.CHANNEL
        said = Provenance(author, author.title(), "discord:x", "#x", f"m{n}", datetime.now(UTC))
        text = f"NOTE-{n} birthday of {author} in {scope.kind.value}"
        await store.notes.add_note("bot", scope, text, said, trusted=trusted)


async def leaks(store: SQLStore, everyone: list[Note]) -> list[str]:
    found = []
    for name, person in itertools.product((*GUILDS, "dm"), PEOPLE):
        view = place(name, person)
        allowed = {n.id for n in everyone if note_in_view(n, view)}
        reads = [await store.notes.notes_in_view("bot", view, limit=1000)]
        reads += [await store.notes.search_notes("bot", view, q, limit=1000) for q in CRAFTED]
        ids = {n.id for read in reads for n in read}
        found += [f"note {i} reached {person} in {name}" for i in ids - allowed]
        if not allowed <= {n.id for n in reads[0]}:
            found.append(f"notes in view missing for {person} in {name}")
    return found


async def test_no_note_reaches_a_place_or_person_outside_its_scope(database: Database) -> None:
    store = await database.open_store()
    try:
        await seed(store)
        everyone = await store.notes.list_notes("bot", limit=1000)
        assert len(everyone) == 48
        assert await leaks(store, everyone) == []
        assert await store.notes.forget_person("carol", bot="bot") > 0
        rest = await store.notes.list_notes("bot", limit=1000)
        assert not [n for n in rest if "carol" in (n.provenance.author_id, n.scope.key)]
        assert await leaks(store, rest) == []
        for name in (*GUILDS, "dm"):
            hits = await store.notes.search_notes("bot", place(name, "carol"), "carol", limit=1000)
            assert hits == []
    finally:
        await store.close()
