"""``/memory`` and ``/forget`` on the fake Discord: a person sees only their own notes, with
where each came from, privately; ``/forget all`` asks first, then leaves nothing of theirs
in the store (the table, its search index, their choice), another person's notes untouched."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fakes.discord_server import DiscordServer, FakeUser
from fakes.discord_wire import EPHEMERAL
from salon.app import BotApp
from salon.llm import FakeProvider
from salon.notes import NoteScope, Provenance, Scope
from tests.platforms.conftest import GENERAL, Start
from tests.store.test_notes import _index_holds

SAID = datetime(2026, 11, 20, 18, 30, tzinfo=UTC)


async def _note(app: BotApp, scope: NoteScope, text: str, by: FakeUser, where: str) -> int:
    said = Provenance(by.id, by.name, f"discord:{GENERAL}", where, f"m-{text[:4]}", SAID)
    return (await app.store.notes.add_note("salon", scope, text, said)).id


async def _answer(server: DiscordServer, count: int) -> dict[str, Any]:
    answers = await server.wait_interaction_responses(count)
    answer = answers[-1]
    assert answer["data"]["flags"] & EPHEMERAL  # only who asked sees it
    return answer


async def _alice_and_bob(server: DiscordServer, app: BotApp) -> tuple[FakeUser, FakeUser]:
    alice, bob = server.user("Alice"), server.user("Bob")
    await _note(app, NoteScope(Scope.PERSON, alice.id), "alice likes quokkas", alice, "a DM")
    await _note(app, NoteScope(Scope.CHANNEL, f"discord:{GENERAL}"), "standup at nine", alice, "#g")
    await _note(app, NoteScope(Scope.PERSON, bob.id), "bob likes zebrafish", bob, "a DM")
    await _note(app, NoteScope(Scope.CHANNEL, f"discord:{GENERAL}"), "bob's deploy", bob, "#g")
    return alice, bob


async def test_memory_shows_only_the_callers_notes_with_their_origin_privately(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    app, _ = await start_bot(FakeProvider(), memory={"enabled": True})
    registered = {c["name"] for c in fake_discord.commands}
    assert {"memory", "forget"} <= registered
    alice, _bob = await _alice_and_bob(fake_discord, app)
    await fake_discord.command(GENERAL, alice, "memory")
    shown = (await _answer(fake_discord, 1))["data"]["content"]
    assert "alice likes quokkas" in shown
    assert "standup at nine" in shown
    assert "said by Alice in a DM, 2026-11-20 18:30 UTC, message m-alic" in shown
    assert "zebrafish" not in shown
    assert "bob" not in shown.lower()
    assert "outside DMs (where you are the one answered): no" in shown
    await fake_discord.command(GENERAL, alice, "memory", share="on")
    said = (await _answer(fake_discord, 2))["data"]["content"]
    assert said.startswith("Notes about you are now used outside DMs too")
    assert await app.store.notes.consent("salon", alice.id) is True


async def test_forget_all_asks_then_leaves_nothing_of_theirs(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    app, _ = await start_bot(FakeProvider(), memory={"enabled": True})
    alice, bob = await _alice_and_bob(fake_discord, app)
    await app.store.notes.set_consent("salon", alice.id, True)
    await fake_discord.command(GENERAL, alice, "forget", all=True)
    asked = (await _answer(fake_discord, 1))["data"]["content"]
    assert asked.startswith("This deletes all 2 notes about you or from you")
    assert "/forget all:True confirm:True" in asked
    assert len(await app.store.notes.notes_of_person(alice.id)) == 2  # nothing gone yet
    await fake_discord.command(GENERAL, alice, "forget", all=True, confirm=True)
    done = (await _answer(fake_discord, 2))["data"]["content"]
    assert done == "Forgot 2 notes about you or from you."
    async with app.store.db.connect() as conn:
        rows = await conn.fetch("SELECT text, author_id, scope_key FROM notes ORDER BY id")
        choices = await conn.fetch("SELECT person_id FROM memory_consent")
    assert [r[0] for r in rows] == ["bob likes zebrafish", "bob's deploy"]
    assert all(alice.id not in (r[1], r[2]) for r in rows)
    assert choices == []
    assert not await _index_holds(app.store, "quokkas")
    assert not await _index_holds(app.store, "standup")
    assert await _index_holds(app.store, "zebrafish")
    assert len(await app.store.notes.notes_of_person(bob.id)) == 2


async def test_forget_one_note_only_of_ones_own(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    app, _ = await start_bot(FakeProvider(), memory={"enabled": True}, authorized_roles=["mods"])
    alice, bob = fake_discord.user("Alice"), fake_discord.user("Bob")
    hers = await _note(app, NoteScope(Scope.PERSON, alice.id), "alice likes tea", alice, "a DM")
    his = await _note(app, NoteScope(Scope.PERSON, bob.id), "bob likes coffee", bob, "a DM")
    await fake_discord.command(GENERAL, alice, "forget", note=his)
    refused = (await _answer(fake_discord, 1))["data"]["content"]
    assert refused == f"You have no note {his}: see yours with /memory."
    await fake_discord.command(GENERAL, alice, "forget", note=hers)
    assert (await _answer(fake_discord, 2))["data"]["content"] == f"Forgot note {hers}."
    assert [n.id for n in await app.store.notes.notes_of_person(bob.id)] == [his]
    fake_discord.roles[alice.id] = ["500"]  # the "mods" role: may forget any note
    await fake_discord.command(GENERAL, alice, "forget", note=his)
    assert (await _answer(fake_discord, 3))["data"]["content"] == f"Forgot note {his}."
    assert await app.store.notes.notes_of_person(bob.id) == []
    await fake_discord.command(GENERAL, alice, "forget")
    said = (await _answer(fake_discord, 4))["data"]["content"]
    assert said == "Say which: /forget note:N, or /forget all:True."


async def test_no_memory_commands_without_memory(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    await start_bot(FakeProvider())
    registered = {c["name"] for c in fake_discord.commands}
    assert not {"memory", "forget"} & registered
